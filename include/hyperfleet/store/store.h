#pragma once
// The durable store of the control plane: typed repositories over one transactional
// backend. Every write is a WriteBatch committed atomically; each row write carries the
// revision it expects (compare-and-swap), so concurrent writers never lose updates.
// The store never reads the clock and never makes ids: callers pass them in.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/store/eks_record.h"
#include "hyperfleet/store/machine_record.h"

namespace hf::store {

/// Expected revision of a row: kMustNotExist for a create, else the revision read.
inline constexpr int64_t kMustNotExist = 0;

/// One cluster write. `erase` deletes the cluster with its nodes, events and tags.
struct ClusterWrite {
  model::Cluster cluster;
  int64_t expected_revision = kMustNotExist;
  bool erase = false;
};

/// One node write (insert when expected_revision == kMustNotExist).
struct NodeWrite {
  model::Node node;
  int64_t expected_revision = kMustNotExist;
  bool erase = false;
};

/// Tag changes on one resource ARN. Tags are put only on an existing cluster or governance
/// object (it may be created in the same batch): FailedPrecondition otherwise.
struct TagWrite {
  std::string resource_arn;
  std::vector<model::Tag> put;           ///< added or overwritten
  std::vector<std::string> erase_keys;   ///< removed when present
};

/// One task-governance object write (insert when expected_revision == kMustNotExist). A
/// write also records the object's configuration under its version (DescribeX with a
/// version); `erase` deletes the object, its versions and its tags.
struct SchedulerResourceWrite {
  model::SchedulerResource resource;
  int64_t expected_revision = kMustNotExist;
  bool erase = false;
};

/// One registered machine's write (insert when expected_revision == kMustNotExist); `erase`
/// deletes it. Two machines never share (address, port).
struct MachineWrite {
  MachineRecord machine;
  int64_t expected_revision = kMustNotExist;
  bool erase = false;
};

/// The hot spares to keep for one instance type; count 0 removes the target.
struct SpareTargetWrite {
  std::string instance_type;
  int count = 0;
};

/// One EKS cluster's write (insert when expected_revision == kMustNotExist); `erase` deletes
/// it with its access entries. Names and ARNs are unique.
struct EksClusterWrite {
  EksCluster cluster;
  int64_t expected_revision = kMustNotExist;
  bool erase = false;
};

/// One EKS access entry's write, keyed by (cluster, principal ARN); its cluster must exist.
struct EksAccessEntryWrite {
  EksAccessEntry entry;
  int64_t expected_revision = kMustNotExist;
  bool erase = false;
};

/// An atomic unit of writes. Events are appended (they have no revision).
struct WriteBatch {
  std::vector<ClusterWrite> clusters;
  std::vector<NodeWrite> nodes;
  std::vector<model::Event> events;
  std::vector<TagWrite> tags;
  std::vector<SchedulerResourceWrite> scheduler_resources;
  std::vector<MachineWrite> machines;
  std::vector<SpareTargetWrite> spare_targets;
  std::vector<EksClusterWrite> eks_clusters;
  std::vector<EksAccessEntryWrite> eks_access_entries;
  bool empty() const {
    return clusters.empty() && nodes.empty() && events.empty() && tags.empty() &&
           scheduler_resources.empty() && machines.empty() && spare_targets.empty() &&
           eks_clusters.empty() && eks_access_entries.empty();
  }
};

/// Sort orders of list queries (ClusterSortBy / SortOrder in the service model).
enum class SortBy { kCreationTime, kName };

/// Filters and page of ListClusters.
struct ClusterQuery {
  std::optional<SystemTime> created_after, created_before;
  std::string name_contains;
  SortBy sort_by = SortBy::kCreationTime;
  bool descending = false;
  int limit = 100;          ///< 1..100
  std::string page_token;   ///< opaque NextToken from a previous page
};

/// Filters and page of ListClusterNodes.
struct NodeQuery {
  std::optional<SystemTime> created_after, created_before;
  std::string group_contains;
  SortBy sort_by = SortBy::kCreationTime;
  bool descending = false;
  int limit = 100;
  std::string page_token;
};

/// Filters and page of ListClusterEvents.
struct EventQuery {
  std::optional<SystemTime> after, before;
  std::string group;
  std::string instance_id;
  std::string resource_type;
  bool descending = false;
  int limit = 100;
  std::string page_token;
};

/// One page of results; next_token is empty on the last page.
template <class T>
struct Page {
  std::vector<T> items;
  std::string next_token;
};

/// Instance counts of one instance group, by ClusterInstanceStatus.
struct GroupCounts {
  int running = 0;
  int pending = 0;
  int failed = 0;
  int shutting_down = 0;
  int other = 0;
};

/// A cluster's nodes relative to a copy read earlier (Store::nodesChangedSince).
struct NodeChanges {
  std::vector<std::string> ids;      ///< every node's instance id, in nodes()'s order
  std::vector<model::Node> changed;  ///< the full records written after the given revision
};

/// `kept` (a cluster's nodes as read at some revision) brought up to date with `changes`
/// (Store::nodesChangedSince that revision), in nodes()' order; nullopt when a node is
/// neither kept nor changed (the kept copy missed a write: read every node again).
std::optional<std::vector<model::Node>> ApplyNodeChanges(std::vector<model::Node> kept,
                                                         NodeChanges changes);

/// The store. Thread-safe: any thread may read and commit.
class Store {
 public:
  virtual ~Store() = default;

  /// Commits `batch` atomically and durably (fsync'd before return). Errors:
  ///   FailedPrecondition (wire: ConflictException) when a row's revision differs from
  ///     the expected one, or a row expected to exist is missing;
  ///   AlreadyExists (wire: ResourceInUse) when a created cluster's name is taken;
  ///   Internal on I/O failure. Nothing is written on error.
  /// Returns the new revision, which every written row now carries; a cluster whose nodes
  /// were written carries it too (a cluster's revision moves with its nodes).
  virtual StatusOr<int64_t> commit(const WriteBatch& batch) = 0;

  /// The cluster whose name or ARN is `name_or_arn` (as the API names clusters; a bare id
  /// is not a name); NotFound when none.
  virtual StatusOr<model::Cluster> cluster(const std::string& name_or_arn) = 0;
  /// The cluster with id `id`; NotFound when none.
  virtual StatusOr<model::Cluster> clusterById(const std::string& id) = 0;
  /// Every cluster (for the controllers' resync).
  virtual StatusOr<std::vector<model::Cluster>> allClusters() = 0;
  /// A page of clusters. InvalidArgument for a token that is not ours.
  virtual StatusOr<Page<model::Cluster>> listClusters(const ClusterQuery& query) = 0;

  /// Every node of a cluster.
  virtual StatusOr<std::vector<model::Node>> nodes(const std::string& cluster_id) = 0;
  /// What a caller holding the cluster's nodes as of revision `since` must read to have
  /// them as now, in one consistent read: the ids of every node and the records written
  /// after `since` (all of them when `since` is 0). A node's write moves its cluster's
  /// revision, so a copy read at the cluster's current revision needs nothing.
  virtual StatusOr<NodeChanges> nodesChangedSince(const std::string& cluster_id,
                                                  int64_t since) = 0;
  /// A page of a cluster's nodes. InvalidArgument for a bad token.
  virtual StatusOr<Page<model::Node>> listNodes(const std::string& cluster_id,
                                                const NodeQuery& query) = 0;
  /// Instance counts per instance group name (groups without instances are absent).
  virtual StatusOr<std::map<std::string, GroupCounts>> groupCounts(
      const std::string& cluster_id) = 0;
  /// One node by instance id or logical id; NotFound when none.
  virtual StatusOr<model::Node> node(const std::string& cluster_id, const std::string& id) = 0;

  /// A page of a cluster's events, oldest first unless descending.
  virtual StatusOr<Page<model::Event>> listEvents(const std::string& cluster_id,
                                                  const EventQuery& query) = 0;
  /// One event; NotFound when none.
  virtual StatusOr<model::Event> event(const std::string& cluster_id, const std::string& id) = 0;

  /// Tags of a resource, sorted by key.
  virtual StatusOr<std::vector<model::Tag>> tags(const std::string& resource_arn) = 0;

  /// The governance object with id `id` of kind `kind`; NotFound when none.
  virtual StatusOr<model::SchedulerResource> schedulerResource(const std::string& kind,
                                                               const std::string& id) = 0;
  /// The object as it was at `version` (status and times as last written at that version);
  /// NotFound when the object or that version does not exist.
  virtual StatusOr<model::SchedulerResource> schedulerResourceVersion(const std::string& kind,
                                                                      const std::string& id,
                                                                      int version) = 0;
  /// Every governance object of `kind`, of cluster `cluster_id` (empty: of every cluster),
  /// ordered by id.
  virtual StatusOr<std::vector<model::SchedulerResource>> schedulerResources(
      const std::string& kind, const std::string& cluster_id) = 0;

  /// Every registered machine, ordered by id. (A store without machines, e.g. a wrapper
  /// in a test, answers Unimplemented.)
  virtual StatusOr<std::vector<MachineRecord>> machines() {
    return absl::UnimplementedError("this store keeps no machines");
  }
  /// The machine with id `id`; NotFound when none.
  virtual StatusOr<MachineRecord> machine(const std::string& /*id*/) {
    return absl::UnimplementedError("this store keeps no machines");
  }
  /// Hot spares to keep per instance type (only types with a target).
  virtual StatusOr<std::map<std::string, int, std::less<>>> spareTargets() {
    return absl::UnimplementedError("this store keeps no machines");
  }

  /// The EKS cluster named `name_or_arn`, or with that ARN; NotFound when none. (A store
  /// without EKS clusters, e.g. a wrapper in a test, answers Unimplemented.)
  virtual StatusOr<EksCluster> eksCluster(const std::string& /*name_or_arn*/) {
    return absl::UnimplementedError("this store keeps no EKS clusters");
  }
  /// Every EKS cluster, ordered by name.
  virtual StatusOr<std::vector<EksCluster>> eksClusters() {
    return absl::UnimplementedError("this store keeps no EKS clusters");
  }
  /// The access entry of `principal_arn` on EKS cluster `cluster`; NotFound when none.
  virtual StatusOr<EksAccessEntry> eksAccessEntry(const std::string& /*cluster*/,
                                                  const std::string& /*principal_arn*/) {
    return absl::UnimplementedError("this store keeps no EKS clusters");
  }
  /// The access entry whose ARN is `arn`; NotFound when none.
  virtual StatusOr<EksAccessEntry> eksAccessEntryByArn(const std::string& /*arn*/) {
    return absl::UnimplementedError("this store keeps no EKS clusters");
  }
  /// Every access entry of EKS cluster `cluster`, ordered by principal ARN.
  virtual StatusOr<std::vector<EksAccessEntry>> eksAccessEntries(const std::string& /*cluster*/) {
    return absl::UnimplementedError("this store keeps no EKS clusters");
  }
};

/// Opens (creating if needed) the SQLite store at `path` in WAL mode and migrates its
/// schema to the current version. ":memory:" gives a private in-memory store (tests).
/// Errors: Internal when the file cannot be opened or migrated; FailedPrecondition when
/// the file's schema is newer than this binary.
StatusOr<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path);

}  // namespace hf::store
