#pragma once
// Runs the cluster reconciler: a work queue of cluster ids served by one worker thread.
// Keys come from the API (after each accepted write), from a periodic resync, and from the
// worker itself while a cluster has work in flight. Each pass loads a snapshot, calls
// PlanCluster(), commits the writes (compare-and-swap) and then makes the provider calls.
// Every timer reads the injected Clock's monotonic time, so a simulator can drive the loop
// (runOnce()) under a fake clock.
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/control/cluster_plan.h"
#include "hyperfleet/eks/control_plane.h"
#include "hyperfleet/model/kubernetes_labels.h"
#include "hyperfleet/provider/provider.h"
#include "hyperfleet/store/store.h"

namespace hf::control {

/// Where a ClusterController's health comes from and its Slurm marks go (the agent service),
/// and its EKS clusters' control planes. Any may be empty (providers without agents, tests).
/// At namespace scope: a nested struct with default member initializers cannot be a
/// default argument of its enclosing class's constructor.
struct ClusterControllerHooks {
  std::function<model::ClusterHealthView(const std::string& cluster_id)> liveness;
  std::function<void(const std::string& cluster_id, std::vector<SlurmMark> marks)>
      publish_slurm_marks;
  /// Called after a commit that erased node records (`instance_ids`, terminated) or, with
  /// `cluster_gone`, the cluster itself: what agents said about them can go.
  std::function<void(const std::string& cluster_id, const std::vector<std::string>& instance_ids,
                     bool cluster_gone)>
      forget;
  /// The EKS clusters' control planes, for clusters with Orchestrator.Eks
  /// (docs/kubernetes.md): their Nodes are read into ClusterSnapshot::kubernetes_nodes
  /// (at most once a second per cluster), labelled and tainted as the plan says, and
  /// removed with their pods when the plan terminates their instance. Null: none.
  eks::ControlPlanes* kubernetes = nullptr;
};

/// The cluster controller. Thread-safe: enqueue() may be called from any thread; the
/// reconcile itself runs only on the controller's worker thread (or the caller of
/// reconcileOnce() in tests, which must not run the worker at the same time).
class ClusterController {
 public:
  struct Options {
    /// How often a cluster with work in flight is looked at again.
    Duration active_interval = std::chrono::milliseconds(100);
    /// How often every cluster is resynced with its provider. Node health does not wait
    /// for this: it comes from heartbeats (agents) as it happens.
    Duration resync_interval = std::chrono::seconds(10);
    /// How long a booted node's agent may take to start the lifecycle scripts (providers
    /// whose nodes run agents only; see ClusterSnapshot::agent_start_timeout).
    Duration agent_start_timeout = std::chrono::minutes(5);
    /// How often a cluster with running nodes under agents is looked at for silence and
    /// health reports, even when settled.
    Duration liveness_interval = std::chrono::seconds(1);
    /// Thresholds of node health monitoring; listening_since is set by start().
    LivenessPolicy liveness;
    /// The keys of the fault labels and annotation on EKS-orchestrated clusters' Nodes
    /// (docs/kubernetes.md "Health on Nodes"; server flag --kubernetes-fault-labels).
    model::FaultLabelKeys fault_labels;
  };

  /// What node agents said about one cluster (from the agent service).
  using ClusterLiveness = model::ClusterHealthView;
  /// Where health comes from and Slurm marks go (ClusterControllerHooks).
  using AgentHooks = ClusterControllerHooks;

  ClusterController(store::Store& store, provider::Provider& provider, const Clock& clock,
                    IdSource& ids, Options options, AgentHooks hooks = {});
  ~ClusterController();

  /// Starts the worker thread (which first enqueues every stored cluster).
  void start();
  /// Stops and joins the worker. Idempotent.
  void stop();
  /// Asks for a reconcile of `cluster_id` soon. Coalesces: a key already queued runs once.
  void enqueue(const std::string& cluster_id);

  /// Reconciles one cluster synchronously. Returns whether the cluster has settled.
  /// Errors: those of the store and provider (Conflict when the plan lost a CAS race).
  StatusOr<bool> reconcileOnce(const std::string& cluster_id);

  /// One turn of the worker loop at the clock's monotonic time: queues every stored cluster
  /// when a resync is due (the first turn always), and each cluster whose requeue time has
  /// come; then reconciles the first queued cluster. Returns nullopt when it reconciled one
  /// (call again), else when work is next due (the worker waits until then, or until
  /// enqueue()). For the worker and for simulators; not while the worker runs.
  std::optional<SteadyTime> runOnce();

 private:
  void run();
  /// reconcileOnce(), returning the plan it carried out.
  StatusOr<ClusterPlan> reconcile(const std::string& cluster_id);
  /// runOnce() with mu_ held (released while reconciling).
  std::optional<SteadyTime> turn(std::unique_lock<std::mutex>& lock);
  /// The node records of `cluster` for a pass: the copy kept from the last pass brought up
  /// to date with what changed since (Store::nodesChangedSince), or all of them.
  StatusOr<std::vector<model::Node>> loadNodes(const model::Cluster& cluster);

  store::Store& store_;
  provider::Provider& provider_;
  const Clock& clock_;
  IdSource& ids_;
  Options options_;
  const AgentHooks hooks_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> queued_;
  bool stopping_ = false;
  /// When each cluster with work in flight (or agents to watch) is looked at again.
  std::map<std::string, SteadyTime> due_;
  /// When every cluster is next resynced; none before the first turn (due at once).
  std::optional<SteadyTime> next_resync_;
  /// When each cluster's ClusterPlan::notice was last logged (worker thread only).
  std::map<std::string, SteadyTime> last_notice_;
  /// A cluster's node records as of `revision` (the cluster's revision read before them).
  struct KeptNodes {
    int64_t revision = 0;
    std::vector<model::Node> nodes;
  };
  /// The node records of each cluster looked at again soon (work in flight, or agents
  /// watched), kept between passes so that a pass reads only what changed: at 10,000
  /// nodes, reading and decoding every record took longer than planning. Settled clusters
  /// keep nothing (worker thread only).
  std::map<std::string, KeptNodes> kept_nodes_;
  // ---- EKS-orchestrated clusters (cluster_controller_kubernetes.cc) ----
  /// Fills snap.kubernetes_nodes (hooks_.kubernetes's nodes(), an answer under a second
  /// old reused).
  void observeKubernetesNodes(ClusterSnapshot& snap);
  /// Applies plan.kubernetes_health, then removes the Nodes of the instances the plan
  /// terminates (once per instance).
  void applyKubernetesPlan(const model::Cluster& cluster, const ClusterPlan& plan);
  /// The last nodes() answer per EKS cluster, and when it came (worker thread only).
  std::map<std::string, std::pair<SteadyTime, std::vector<eks::KubeNode>>> kubernetes_seen_;
  /// Instances whose Node was removed (worker thread only).
  std::set<std::string> kubernetes_removed_;
  /// Carries out plan.pod_routes (Provider::setPodRoutes) when they differ from the last
  /// ones set for the cluster, or a resync interval after those; forgets a deleting
  /// cluster's. A provider without pod routes (Unimplemented) is not asked again until
  /// they change.
  void applyPodRoutes(const model::Cluster& cluster, const ClusterPlan& plan);
  /// The pod routes last set per cluster id, and when (worker thread only).
  std::map<std::string, std::pair<SteadyTime, std::vector<provider::PodRoute>>> pod_routes_set_;
  std::thread worker_;
};

}  // namespace hf::control
