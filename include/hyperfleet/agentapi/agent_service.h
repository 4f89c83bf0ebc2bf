#pragma once
// The control plane's side of the node agent protocol (docs/nodes.md, "Agent protocol"):
// registration, heartbeats, the node-contract files, the lifecycle bundle, lifecycle output
// and results. Served by the local provider on every cluster bridge's host address; nodes
// cannot reach the API port on the host's loopback.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/agentapi/node_tokens.h"
#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/bundle/bundle_source.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/http/http.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/model/node_health.h"
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

/// /opt/ml/config/resource_config.json for `cluster` with `nodes` (HyperPod's schema,
/// docs/hyperpod-contract.md "Node files"): ClusterConfig {ClusterArn, ClusterName},
/// ClusterType "Slurm", and every declared instance group with its InstanceType and
/// Instances (InstanceName "<group>-<n>" numbered from 1 by launch order, InstanceId,
/// AgentIpAddress and CustomerIpAddress = the node's address, InstanceLabel null); a group
/// without live instances has "Instances": null. Nodes shutting down or without an address
/// are left out.
nlohmann::json ResourceConfig(const model::Cluster& cluster,
                              const std::vector<model::Node>& nodes);

/// Serves /agent/v1/*. Thread-safe; handlers block only on the store and bundle source.
class AgentService {
 public:
  struct Options {
    int heartbeat_seconds = kDefaultHeartbeatSeconds;  ///< how often agents heartbeat
    /// Per lifecycle script, then it is killed.
    int64_t lifecycle_timeout_seconds = kDefaultLifecycleTimeoutSeconds;
    /// How soon (milliseconds) an agent held back (controller first) registers again.
    int64_t lifecycle_wait_retry_ms = kDefaultLifecycleRetryMs;
  };
  /// See setSlurmJobsHandler.
  using SlurmJobsHandler = std::function<std::optional<GovernanceAnswer>(
      const std::string& cluster_id, const SlurmJobsReport* slurm_jobs)>;

  /// `on_change(cluster_id)` is called after a lifecycle result was stored, so the cluster
  /// controller acts on it at once. `logs` receives lifecycle output and markers.
  AgentService(store::Store& store, bundle::BundleSource& bundles, const NodeTokens& tokens,
               LogSink logs, std::function<void(const std::string&)> on_change,
               const Clock& clock, IdSource& ids, Options options);

  /// Handles one agent request. Never throws. Errors are JSON {"error": "..."} with 400 (bad
  /// body), 403 (missing or wrong token, unknown instance), 404 (unknown path or bundle key),
  /// 409 (the bundle cannot be used: empty prefix, unsafe key), 503 (store or bundle source
  /// unavailable).
  http::HttpResponse handle(http::HttpRequest&& request);

  /// When each instance's agent was last heard from (registration or heartbeat).
  std::map<std::string, SystemTime> lastSeen() const;
  /// The last health report each instance's agent sent (docs/nodes.md "Health checks");
  /// instances that sent none are absent.
  std::map<std::string, HealthReport> lastHealth() const;
  /// What the agents of `cluster_id` said (docs/resiliency.md): when each was last heard,
  /// its last health report, the controller agent's view of the Slurm nodes (when reported
  /// within max(3 heartbeats, 5 s)) and the group running slurmctld.
  model::ClusterHealthView clusterHealth(const std::string& cluster_id) const;
  /// The Slurm node changes the controller node's agent of `cluster_id` gets in its next
  /// heartbeat responses ("slurm_marks"); replaces the previous list.
  void setSlurmMarks(const std::string& cluster_id, std::vector<model::SlurmMark> marks);
  /// Task governance (docs/governance.md "On Slurm"): called on every heartbeat of a Slurm
  /// controller's agent with the cluster id and the heartbeat's "slurm_jobs" (null when
  /// absent); what it answers is added to the heartbeat response (nothing for nullopt).
  /// Called outside the service's lock; must be thread-safe. Empty (the default): nothing
  /// is added.
  void setSlurmJobsHandler(SlurmJobsHandler handler);
  /// Drops what agents said about instances that no longer exist (`instance_ids`, their
  /// records erased) or, with `cluster_gone`, about every instance of `cluster_id` and the
  /// cluster itself (its Slurm view, marks and controller group). A late request from a
  /// forgotten instance adds nothing back (it no longer authenticates).
  void forget(const std::string& cluster_id, const std::vector<std::string>& instance_ids,
              bool cluster_gone);
  /// How many instances and clusters the liveness maps hold (tests; leak checks).
  std::pair<size_t, size_t> trackedForTest() const;

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
  /// A node's files: the node-contract files, their content hash ("files_revision"), and
  /// what the control plane knows of the cluster's Slurm setup while building them.
  struct NodeFiles {
    std::vector<NodeFile> files;
    uint64_t revision = 0;
    std::vector<model::Node> nodes;    ///< the cluster's nodes
    std::optional<std::string> slurm_conf;  ///< set on the controller of a Slurm cluster
    std::string controller_group;      ///< empty: not a Slurm cluster (no roles)
    /// Why provisioning_parameters.json gives no Slurm roles (it exists but is wrong).
    std::string roles_error;
  };
  StatusOr<NodeFiles> nodeFiles(const Caller& caller);
  /// Why `caller`'s lifecycle scripts must wait, or nullopt when they may run. Controller
  /// first (docs/hyperpod-contract.md "Bring-up"): on a Slurm cluster every other
  /// node waits until a controller node's scripts have succeeded and that controller has
  /// applied a slurm.conf naming this node (else its configless slurmd finds no NodeName).
  std::optional<std::string> lifecycleWait(const Caller& caller, const NodeFiles& files);
  /// Keeps the heartbeat's health report and, when its verdict enters or leaves a fault
  /// (soft_fault, hard_fault), records an event naming the failing checks.
  void recordHealth(const Caller& caller, const HealthReport& health);
  /// Records that the node's agent registered and waits (lifecycle_state::kWaiting), and
  /// says why in the node's lifecycle log stream the first time.
  Status markWaiting(const Caller& caller, const std::string& reason);
  /// The bundle's provisioning_parameters.json (at most 1 MiB), cached for a while.
  std::optional<nlohmann::json> provisioningParameters(const std::string& source_uri);
  void log(const Caller& caller, std::vector<LogLine> lines);
  void touch(const std::string& instance_id);

  store::Store& store_;
  bundle::BundleSource& bundles_;
  const NodeTokens& tokens_;
  LogSink logs_;
  std::function<void(const std::string&)> on_change_;
  const Clock& clock_;
  IdSource& ids_;
  const Options options_;

  mutable std::mutex mu_;
  std::map<std::string, SystemTime> last_seen_;
  std::map<std::string, std::string> cluster_of_;  ///< instance id -> cluster id (cache)
  std::map<std::string, HealthReport> health_;  ///< instance id -> last health report
  /// Controller instance id -> the slurm.conf its agent has applied (written and reloaded).
  std::map<std::string, std::string> applied_slurm_conf_;
  /// Cluster id -> (when reported, the controller agent's `sinfo` view).
  std::map<std::string, std::pair<SystemTime, std::vector<model::SlurmNodeState>>> slurm_view_;
  std::map<std::string, std::vector<model::SlurmMark>> slurm_marks_;  ///< by cluster id
  SlurmJobsHandler slurm_jobs_handler_;
  std::map<std::string, std::string> controller_group_;  ///< by cluster id (last seen)
  /// Short: a user who fixes the file and creates the cluster again must see the fix.
  static constexpr Duration kParamsCacheTtl = std::chrono::seconds(5);
  static constexpr size_t kMaxParamsBytes = 1u << 20;
  /// SourceS3Uri -> (when read, provisioning parameters or none).
  std::map<std::string, std::pair<SystemTime, std::optional<nlohmann::json>>> params_cache_;
};

}  // namespace hf::agentapi
