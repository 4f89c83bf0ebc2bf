#pragma once
// The task-governance operations of the SageMaker API: the cluster policy
// (Create/Describe/Update/Delete/ListClusterSchedulerConfig(s)) and the per-team compute
// allocations (Create/Describe/Update/Delete/ListComputeQuota(s)), on the store. Requests
// arrive validated against the service model; the rules the model cannot express are checked
// here, before anything is written. docs/governance-api.md describes the behaviour.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/api/api_handler.h"
#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/store/store.h"

namespace hf::api {

/// Limits and behaviour of the governance operations.
struct GovernanceOptions {
  /// ResourceLimitExceeded beyond this many compute quotas (teams) on one cluster. HyperPod
  /// documents no limit; this one keeps a cluster's admission state bounded.
  int max_compute_quotas_per_cluster = 500;
  /// Settle every change right after committing it (Creating→Created, Updating→Updated,
  /// Deleting→gone). Until the admission engine takes the settling over, nothing else
  /// applies a policy or quota, so the stored change is the applied one. Tests turn it off
  /// to see the transitional statuses.
  bool auto_settle = true;
};

/// The ten governance operations. Thread-safe (state lives in the store).
class GovernanceOperations final : public OperationSet {
 public:
  GovernanceOperations(store::Store& store, const Clock& clock, IdSource& ids,
                       ApiConfig config, GovernanceOptions options = {});

  bool implements(std::string_view operation) const override;
  /// Runs `operation` on a validated, pruned request body. Errors (AWS types):
  /// ValidationException naming the field for rules beyond the model; ResourceNotFound for
  /// an unknown cluster, id or version; ConflictException for a stale TargetVersion, a
  /// second policy on a cluster, a second quota for a team on a cluster, a change to an
  /// object still Creating/Updating/Deleting, or a cluster being deleted;
  /// ResourceLimitExceeded beyond max_compute_quotas_per_cluster.
  StatusOr<nlohmann::json> call(std::string_view operation,
                                const nlohmann::json& request) override;

  /// Moves the governance objects of cluster `cluster_id` (empty: of every cluster) out of
  /// their transitional status: Creating→Created, Updating→Updated, Deleting→erased, each in
  /// its own commit with an event. An object changed meanwhile is left to the change's own
  /// settle. The server calls it at start for changes a crash left unsettled.
  Status settle(const std::string& cluster_id);

  using Json = nlohmann::json;
  StatusOr<Json> createClusterSchedulerConfig(const Json& in);
  StatusOr<Json> describeClusterSchedulerConfig(const Json& in);
  StatusOr<Json> updateClusterSchedulerConfig(const Json& in);
  StatusOr<Json> deleteClusterSchedulerConfig(const Json& in);
  StatusOr<Json> listClusterSchedulerConfigs(const Json& in);
  StatusOr<Json> createComputeQuota(const Json& in);
  StatusOr<Json> describeComputeQuota(const Json& in);
  StatusOr<Json> updateComputeQuota(const Json& in);
  StatusOr<Json> deleteComputeQuota(const Json& in);
  StatusOr<Json> listComputeQuotas(const Json& in);

 private:
  /// The cluster named by ClusterArn `arn` that may take governance changes: ResourceNotFound
  /// when none, ConflictException while it is being deleted.
  StatusOr<model::Cluster> liveCluster(const std::string& arn);
  /// Creates `r` (kind, name, team and body set) on cluster `c`: one per (cluster, kind,
  /// team), named in the ConflictException otherwise.
  StatusOr<Json> create(model::SchedulerResource r, const model::Cluster& c, const Json& tags);
  /// Read-modify-write of object `id` under compare-and-swap; `fn` edits the object and adds
  /// events, or returns an error, and the result is `out(object)`.
  StatusOr<Json> mutate(const std::string& kind, const std::string& id,
                        const std::function<Status(model::SchedulerResource&,
                                                   const model::Cluster&,
                                                   store::WriteBatch&)>& fn,
                        const std::function<Json(const model::SchedulerResource&)>& out);
  /// Starts the update of `r` (its body already edited): the next version, Updating, the
  /// write and its Info event, into `batch`.
  void startUpdate(model::SchedulerResource& r, store::WriteBatch& batch);
  StatusOr<Json> remove(const std::string& kind, const std::string& id);
  StatusOr<Json> list(const std::string& kind, const Json& in);
  StatusOr<model::SchedulerResource> find(const std::string& kind, const std::string& id);
  /// Describe of either kind: the version named by `version_member` when given, else the
  /// current one. Errors: ResourceNotFound.
  StatusOr<Json> describe(const std::string& kind, const Json& in, const char* id_member,
                          const char* version_member);
  /// The Warn event reporting quota that exceeds what cluster `c` has, per instance type,
  /// counting the Enabled quotas of `quotas`; null when nothing exceeds.
  std::optional<model::Event> excessEvent(const model::Cluster& c,
                                          const std::vector<model::SchedulerResource>& quotas,
                                          SystemTime now);
  model::Event event(const std::string& cluster_id, std::string level, std::string text,
                     SystemTime now);
  std::string arnOf(const std::string& kind, const std::string& id) const;

  store::Store& store_;
  const Clock& clock_;
  IdSource& ids_;
  const ApiConfig config_;
  const GovernanceOptions options_;
};

/// What a ComputeQuotaResourceConfig amounts to on one instance type, with HyperPod's ratio
/// fill: Count × the instance's accelerators, vCPUs and memory; otherwise the amounts given,
/// the missing ones in proportion to the first given of Accelerators, VCpu, MemoryInGiB
/// (accelerators stay 0 unless given). `instances` is the largest share of one instance's
/// resources, i.e. how many instances the entry occupies. Unknown instance type: all zero.
struct QuotaAmount {
  double accelerators = 0, vcpus = 0, memory_gib = 0, instances = 0;
};
QuotaAmount QuotaAmountOf(const nlohmann::json& resource_config);

}  // namespace hf::api
