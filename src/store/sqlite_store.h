#pragma once
// The SQLite implementation of hf::store::Store (private to src/store), one class whose
// methods live by concern:
//   sqlite_store.cc         opening (WAL, synchronous=FULL, migrations), the read-only
//                           connection pool, commit and the order of a batch's writes
//   clusters.cc             clusters: row codec, reads, write and erase
//   nodes.cc                nodes: row codec, reads, group counts, writes
//   events_tags.cc          events and tags: reads and writes
//   scheduler_resources.cc  task-governance objects and their versions
//   machines.cc             registered machines and hot-spare targets
//   eks.cc                  EKS clusters and their access entries
//   keyset.{h,cc}           NextTokens and keyset pagination
//   statements.{h,cc}       reading rows, running writes, the compare-and-swap check
//   migrations.cc           the schema
// Every statement goes through the one SQLite wrapper, hyperfleet/common/sqlite.h.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hyperfleet/common/sqlite.h"
#include "hyperfleet/store/store.h"

namespace hf::store {

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(std::string path) : path_(std::move(path)) {}

  /// Opens the write connection: WAL (files only), synchronous=FULL so that an acknowledged
  /// commit survives a kill -9 or power loss, then migrates the schema.
  Status open();

  // hf::store::Store
  StatusOr<int64_t> commit(const WriteBatch& batch) override;
  StatusOr<model::Cluster> cluster(const std::string& name_or_arn) override;
  StatusOr<model::Cluster> clusterById(const std::string& id) override;
  StatusOr<std::vector<model::Cluster>> allClusters() override;
  StatusOr<Page<model::Cluster>> listClusters(const ClusterQuery& q) override;
  StatusOr<std::vector<model::Node>> nodes(const std::string& cluster_id) override;
  StatusOr<NodeChanges> nodesChangedSince(const std::string& cluster_id,
                                          int64_t since) override;
  StatusOr<Page<model::Node>> listNodes(const std::string& cluster_id,
                                        const NodeQuery& q) override;
  StatusOr<std::map<std::string, GroupCounts>> groupCounts(
      const std::string& cluster_id) override;
  StatusOr<model::Node> node(const std::string& cluster_id, const std::string& id) override;
  StatusOr<Page<model::Event>> listEvents(const std::string& cluster_id,
                                          const EventQuery& q) override;
  StatusOr<model::Event> event(const std::string& cluster_id, const std::string& id) override;
  StatusOr<std::vector<model::Tag>> tags(const std::string& resource_arn) override;
  StatusOr<model::SchedulerResource> schedulerResource(const std::string& kind,
                                                       const std::string& id) override;
  StatusOr<model::SchedulerResource> schedulerResourceVersion(const std::string& kind,
                                                              const std::string& id,
                                                              int version) override;
  StatusOr<std::vector<model::SchedulerResource>> schedulerResources(
      const std::string& kind, const std::string& cluster_id) override;
  StatusOr<std::vector<MachineRecord>> machines() override;
  StatusOr<MachineRecord> machine(const std::string& id) override;
  StatusOr<std::map<std::string, int, std::less<>>> spareTargets() override;
  StatusOr<EksCluster> eksCluster(const std::string& name_or_arn) override;
  StatusOr<std::vector<EksCluster>> eksClusters() override;
  StatusOr<EksAccessEntry> eksAccessEntry(const std::string& cluster,
                                          const std::string& principal_arn) override;
  StatusOr<EksAccessEntry> eksAccessEntryByArn(const std::string& arn) override;
  StatusOr<std::vector<EksAccessEntry>> eksAccessEntries(const std::string& cluster) override;

 private:
  /// Runs `fn(db)` with a read connection from the pool (the writer for in-memory stores).
  /// Each read is its own implicit transaction: a consistent snapshot per call.
  template <class Fn>
  auto withReader(Fn&& fn) -> decltype(fn(std::declval<sqlite::Database&>())) {
    if (in_memory_) {
      std::lock_guard lock(write_mu_);
      return fn(*writer_);
    }
    auto db = takeReader();
    if (!db.ok()) return db.status();
    auto result = fn(*db);
    returnReader(*std::move(db));
    return result;
  }
  /// A pooled read-only connection, or a new one.
  StatusOr<sqlite::Database> takeReader();
  /// Back to the pool (at most 64 are kept).
  void returnReader(sqlite::Database db);

  StatusOr<model::Cluster> readCluster(const char* condition, const std::string& key);
  StatusOr<std::map<std::string, GroupCounts>> countsAtCurrentRevision(
      sqlite::Database& db, const std::string& cluster_id);
  /// Bumps the revision counter and makes the writes of `batch` at the new revision, inside
  /// commit()'s transaction; returns that revision.
  StatusOr<int64_t> apply(sqlite::Database& db, const WriteBatch& batch);

  std::string path_;
  bool in_memory_ = false;
  std::mutex write_mu_;  // serialises commits (and all access for in-memory stores)
  std::optional<sqlite::Database> writer_;
  std::mutex pool_mu_;
  std::vector<sqlite::Database> readers_;
  std::mutex counts_mu_;
  // cluster id -> (cluster revision, counts at that revision)
  std::unordered_map<std::string, std::pair<int64_t, std::map<std::string, GroupCounts>>>
      counts_cache_;
};

// ---- the writes of a batch, by concern (each inside commit()'s transaction) ---------------

/// Inserts or updates cluster `w` at revision `rev` (clusters.cc). Errors: FailedPrecondition
/// (compare-and-swap), AlreadyExists for a taken name.
Status WriteCluster(sqlite::Database& db, const ClusterWrite& w, int64_t rev);
/// Deletes cluster `w` with its nodes, events, governance objects and tags (clusters.cc).
Status EraseCluster(sqlite::Database& db, const ClusterWrite& w);
/// Inserts, updates or deletes node `w` (nodes.cc). Errors: FailedPrecondition.
Status WriteNode(sqlite::Database& db, const NodeWrite& w, int64_t rev);
/// Moves the revision of each cluster of `nodes` to `rev` (nodes.cc): a cluster's revision
/// moves with its nodes, which keeps the group counts' cache right.
Status TouchClustersOf(sqlite::Database& db, const std::vector<NodeWrite>& nodes, int64_t rev);
/// Appends event `e` (events_tags.cc).
Status AppendEvent(sqlite::Database& db, const model::Event& e);
/// Puts and erases the tags of `t` (events_tags.cc). Errors: FailedPrecondition when tags
/// are put on a resource that does not exist.
Status WriteTags(sqlite::Database& db, const TagWrite& t);
/// Inserts, updates or deletes governance object `w` and records its version
/// (scheduler_resources.cc). Errors: FailedPrecondition (compare-and-swap, a cluster gone).
Status WriteSchedulerResource(sqlite::Database& db, const SchedulerResourceWrite& w,
                              int64_t rev);
/// Inserts, updates or deletes machine `w` (machines.cc). Errors: FailedPrecondition
/// (compare-and-swap, or another machine at the same address and port).
Status WriteMachine(sqlite::Database& db, const MachineWrite& w, int64_t rev);
/// Sets or removes (count 0) one hot-spare target (machines.cc).
Status WriteSpareTarget(sqlite::Database& db, const SpareTargetWrite& w);
/// Inserts, updates or deletes (with its access entries) EKS cluster `w` (eks.cc). Errors:
/// FailedPrecondition (compare-and-swap), AlreadyExists for a taken ARN.
Status WriteEksCluster(sqlite::Database& db, const EksClusterWrite& w, int64_t rev);
/// Inserts, updates or deletes access entry `w` (eks.cc). Errors: FailedPrecondition
/// (compare-and-swap, its cluster gone).
Status WriteEksAccessEntry(sqlite::Database& db, const EksAccessEntryWrite& w, int64_t rev);

}  // namespace hf::store
