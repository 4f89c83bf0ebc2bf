#pragma once
// The control plane's side of the node agent protocol (docs/nodes.md, "Agent protocol"):
// a thin HTTP adapter over the store, the lifecycle bundles and the NodeStatusCache. It
// authenticates each node, hands it its files (node_contract.h) and its lifecycle plan
// (lifecycle_gate.h; an EKS-orchestrated cluster's nodes also their kubelet's files and
// units, kubernetes_node_files.h), records lifecycle results and the controller's applied
// slurm.conf in the store, passes output to the log sink, and keeps what heartbeats say in
// the cache.
// Served by the local provider on every cluster bridge's host address; nodes cannot reach
// the API port on the host's loopback.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/agentapi/node_contract.h"
#include "hyperfleet/agentapi/node_files_cache.h"
#include "hyperfleet/agentapi/node_status_cache.h"
#include "hyperfleet/agentapi/node_tokens.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/bundle/bundle_source.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/eks/control_plane.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/store/store.h"

namespace hf::agentapi {

/// One line of a node's output, as CloudWatch Logs stores it.
struct LogLine {
  int64_t timestamp_ms = 0;  ///< milliseconds since the Unix epoch
  std::string message;
};

/// Where node output goes: (log group, log stream, lines). Must be thread-safe.
using LogSink = std::function<void(const std::string& group, const std::string& stream,
                                   const std::vector<LogLine>& lines)>;

/// CloudWatch log group of a cluster, as HyperPod names it:
/// "/aws/sagemaker/Clusters/<cluster-name>/<cluster-id>".
std::string ClusterLogGroup(const model::Cluster& cluster);
/// Log stream of a node's lifecycle scripts: "LifecycleConfig/<group>/<instance-id>".
std::string LifecycleLogStream(const model::Node& node);

/// Serves /agent/v1/*. Thread-safe; handlers block only on the store and bundle source.
class AgentService {
 public:
  struct Options {
    int heartbeat_seconds = kDefaultHeartbeatSeconds;  ///< how often agents heartbeat
    /// Per lifecycle script, then it is killed.
    int64_t lifecycle_timeout_seconds = kDefaultLifecycleTimeoutSeconds;
    /// How soon (milliseconds) an agent held back (controller first) registers again.
    int64_t lifecycle_wait_retry_ms = kDefaultLifecycleRetryMs;
    /// The EKS clusters' control planes, which nodes of EKS-orchestrated clusters join
    /// (nodeJoin once per node, kept here; retried at most every lifecycle_wait_retry_ms
    /// while it fails). Outlives the service. nullptr: no EKS, such nodes get neither
    /// Kubernetes files nor units.
    eks::ControlPlanes* control_planes = nullptr;
    /// The local registry's port on the host (0: none): EKS nodes get registry.env, from
    /// which containerd maps localhost:PORT to it (KubernetesNodeFiles).
    uint16_t registry_port = 0;
  };
  /// See setSlurmJobsHandler.
  using SlurmJobsHandler = std::function<std::optional<GovernanceAnswer>(
      const std::string& cluster_id, const SlurmJobsReport* slurm_jobs)>;

  /// `cache` receives what agents say (and gives the marks for Slurm controllers).
  /// `on_change(cluster_id)` is called after a lifecycle result was stored, so the cluster
  /// controller acts on it at once. `logs` receives lifecycle output and markers.
  AgentService(store::Store& store, bundle::BundleSource& bundles, const NodeTokens& tokens,
               NodeStatusCache& cache, LogSink logs,
               std::function<void(const std::string&)> on_change, const Clock& clock,
               IdSource& ids, Options options);

  /// Handles one agent request. Never throws. Errors are JSON {"error": "..."} with 400 (bad
  /// body, naming the member), 403 (missing or wrong token, unknown instance), 404 (unknown
  /// path or bundle key), 409 (the bundle cannot be used: empty prefix, unsafe key), 503
  /// (store or bundle source unavailable).
  http::HttpResponse handle(http::HttpRequest&& request);

  /// Task governance (docs/governance.md "On Slurm"): called on every heartbeat of a Slurm
  /// controller's agent with the cluster id and the heartbeat's "slurm_jobs" (null when
  /// absent); what it answers is added to the heartbeat response (nothing for nullopt).
  /// Called outside the service's lock; must be thread-safe. Empty (the default): nothing
  /// is added.
  void setSlurmJobsHandler(SlurmJobsHandler handler);

 private:
  struct Caller {
    model::Cluster cluster;
    model::Node node;
  };
  StatusOr<Caller> authenticate(const http::HttpRequest& request);
  http::HttpResponse registerNode(const Caller& caller, const RegisterRequest& body);
  http::HttpResponse heartbeat(const Caller& caller, const HeartbeatRequest& body);
  http::HttpResponse listBundle(const Caller& caller);
  http::HttpResponse readBundle(const Caller& caller, std::string_view query);
  http::HttpResponse appendLogs(const Caller& caller, const LogBatch& body);
  http::HttpResponse lifecycle(const Caller& caller, const LifecycleReport& body);
  /// The caller's node files (NodeFilesCache): the files themselves only when
  /// `agent_revision` (what its agent holds; nullopt: nothing) is not their revision. On an
  /// EKS-orchestrated cluster (with control planes) `join` (when given) is set to the
  /// outcome of the node's join, whose files are included when ok.
  StatusOr<NodeFilesCache::Result> nodeFiles(const Caller& caller,
                                             std::optional<int64_t> agent_revision,
                                             std::optional<Status>* join = nullptr);
  /// The caller's eks::NodeJoin (its cluster is EKS-orchestrated and control_planes is set):
  /// asked once and kept; after a failure not asked again for lifecycle_wait_retry_ms (the
  /// failure is answered meanwhile). Errors: nodeJoin's.
  StatusOr<eks::NodeJoin> nodeJoin(const Caller& caller, const std::string& eks_name);
  /// Drops the kept joins of cluster `cluster_id` (of its node `instance_id` only, if given).
  void forgetJoins(const std::string& cluster_id, const std::string& instance_id = "");
  /// Task governance's answer to the controller's heartbeat, added to `out`.
  void governance(const Caller& caller, const HeartbeatRequest& body, HeartbeatResponse& out);
  /// Keeps the heartbeat's health report and records the events it makes (health_events.h).
  void recordHealth(const Caller& caller, const model::HealthReport& health);
  /// Applies `change` to the caller's stored record by compare-and-swap, retried when the
  /// controller wrote it in between; `change` returns false when there is nothing to write
  /// and may add events to commit with the record. Returns whether it wrote. Errors: the
  /// store's; Unavailable when the record kept changing.
  StatusOr<bool> updateNode(
      const Caller& caller,
      const std::function<bool(model::Node&, std::vector<model::EventText>&)>& change);
  /// Records that the node's agent registered and waits (lifecycle_state::kWaiting), and
  /// says why in the node's lifecycle log stream the first time.
  Status markWaiting(const Caller& caller, const std::string& reason);
  /// Stores `names`, the NodeName= names of the slurm.conf the controller's agent applied
  /// (Node::slurm_conf_nodes, what the controller-first gate reads), when they changed.
  Status recordApplied(const Caller& caller, const std::vector<std::string>& names);
  void log(const Caller& caller, std::vector<LogLine> lines);
  void touch(const std::string& instance_id);

  store::Store& store_;
  bundle::BundleSource& bundles_;
  const NodeTokens& tokens_;
  NodeStatusCache& cache_;
  LogSink logs_;
  std::function<void(const std::string&)> on_change_;
  const Clock& clock_;
  IdSource& ids_;
  const Options options_;
  ProvisioningParameters params_;
  NodeFilesCache files_;  ///< every cluster's node files, kept between heartbeats

  mutable std::mutex mu_;  ///< guards slurm_jobs_handler_ and joins_
  SlurmJobsHandler slurm_jobs_handler_;
  /// A node's join, or its last failure and when it was asked.
  struct Join {
    std::optional<eks::NodeJoin> join;
    Status error;
    SteadyTime asked{};
  };
  std::map<std::pair<std::string, std::string>, Join> joins_;  ///< by (cluster id, instance id)
};

}  // namespace hf::agentapi
