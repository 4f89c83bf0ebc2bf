#pragma once
// The cluster reconciler's decision step: a pure function of a snapshot (the cluster as
// declared, its node records, what the provider reports) and the time. It returns the store
// writes and provider calls that move the cluster toward its declaration; the controller
// applies them (writes first, then provider calls, so a crash in between only repeats
// idempotent work). State machines: docs/state-machines.md.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/model/cluster.h"
#include "hyperfleet/model/node_health.h"
#include "hyperfleet/provider/provider.h"
#include "hyperfleet/store/store.h"

namespace hf::control {

using model::NodeLiveness;
using model::SlurmMark;
using model::SlurmNodeState;

/// Thresholds of node health monitoring (issue "Resiliency"; docs/resiliency.md).
struct LivenessPolicy {
  /// A running instance whose agent has been silent this long is unresponsive (hung).
  Duration unresponsive_after = std::chrono::seconds(10);
  /// Silence before this time is not counted (the control plane was not listening: a
  /// restart). Zero: count from the instance's launch.
  SystemTime listening_since{};
  /// How long after a failed replacement (its lifecycle scripts failed) it is retried;
  /// doubles with each attempt, up to max_retry_delay.
  Duration retry_delay = std::chrono::seconds(10);
  Duration max_retry_delay = std::chrono::minutes(5);
};

namespace node_health = model::node_health;

/// One Node of an EKS-orchestrated cluster as the planner sees it.
struct KubernetesNodeView {
  bool ready = false;  ///< its Ready condition is True
  std::string health;  ///< its node_health::kLabel value ("" when none)
  /// The value Hyperfleet last gave that label (kept on the Node, beside it, so that a
  /// user's `kubectl label` differs from it); "" when Hyperfleet never set it.
  std::string health_set;
  /// The NoSchedule taint of key node_health::kLabel and its value ("" when none).
  std::string health_taint;
  /// Its spec.podCIDR inside the cluster's pod range, e.g. "10.200.1.0/24" ("" when none:
  /// not given yet, or outside the range; eks::KubeNode::pod_cidr).
  std::string pod_cidr;
  /// Its fault labels and annotation (keys: model::FaultLabelKeys, the controller's); ""
  /// when absent.
  std::string fault_type = "", fault_reason = "", fault_details = "";
};

/// What the health label and taint of one Node should be (ClusterPlan::kubernetes_health).
struct KubernetesNodeHealth {
  std::string instance_id;
  std::string health;  ///< a node_health value: the label's, and the marker of who set it
  /// With the NoSchedule taint of key node_health::kLabel and value `health`; false: none.
  bool tainted = false;
  /// The fault labels of a faulty instance (one whose fault, detected by the control plane,
  /// is being recovered from or only reported): its category (a NodeFault kind, e.g.
  /// "HardwareFault"), a detailed reason (a valid label value, model::LabelValueOf of the
  /// message) and the message as it is (the annotation). All "" when it has no fault: the
  /// labels and the annotation are then removed. A recovery someone asked for (API, a
  /// user's label) is no fault.
  std::string fault_type = "", fault_reason = "", fault_details = "";
  bool operator==(const KubernetesNodeHealth&) const = default;
};

/// Everything the planner looks at.
struct ClusterSnapshot {
  model::Cluster cluster;
  std::vector<model::Node> nodes;                             ///< the store's node records
  std::vector<provider::InstanceObservation> instances;       ///< the provider's view
  /// True when the provider's nodes run an agent that runs the lifecycle scripts
  /// (Provider::runsLifecycleScripts()): a booted instance is then Running only once its
  /// lifecycle scripts succeeded (Node::lifecycle_state), and Failure when they failed.
  bool lifecycle_by_agent = false;
  /// With lifecycle_by_agent: how long a booted instance may go without its agent starting
  /// the lifecycle scripts before it is declared failed.
  Duration agent_start_timeout = std::chrono::minutes(5);
  /// How long a rebooted instance may take to boot again before it is declared failed.
  Duration reboot_timeout = std::chrono::minutes(10);
  /// With lifecycle_by_agent: what each instance's agent last said, by instance id.
  std::map<std::string, NodeLiveness> liveness;
  /// The Slurm controller's view of its nodes, when its agent reported recently; nullopt
  /// for clusters without Slurm or while no fresh report exists.
  std::optional<std::vector<SlurmNodeState>> slurm_nodes;
  /// With Orchestrator.Eks: the Kubernetes Nodes ("hyperpod-<id>") of the cluster's
  /// instances as the EKS control plane shows them now, by instance id (an instance without
  /// a Node is absent). A booted node whose lifecycle scripts succeeded is Running only once
  /// its Node is Ready (HyperPod counts an EKS node in service once it joined). nullopt: the
  /// control plane was not asked this pass (nothing changes on its account).
  std::optional<std::map<std::string, KubernetesNodeView>> kubernetes_nodes;
  /// The instance group that runs slurmctld (controller nodes are rebooted, not replaced).
  std::string controller_group;
  LivenessPolicy liveness_policy;
};

/// What the planner decided.
struct ClusterPlan {
  store::WriteBatch writes;                     ///< CAS writes and events, committed first
  std::vector<provider::InstanceSpec> launches; ///< then these launches
  std::vector<std::string> terminations;        ///< and these terminations
  std::vector<std::string> reboots;             ///< and these reboots
  /// Instances to stop at once, without a clean shutdown (faulty ones being replaced).
  std::vector<std::string> kills;
  /// Instances to power-cycle (a reboot that does not rely on the node: dead or hung).
  std::vector<std::string> hard_reboots;
  /// The Slurm node states the control plane wants now (complete each pass; the controller
  /// node's agent applies what its current view still needs).
  std::vector<SlurmMark> slurm_marks;
  /// True when the cluster has running nodes whose agents must be watched: the controller
  /// then looks again every second even when settled, to notice silence.
  bool watch_liveness = false;
  /// EKS-orchestrated clusters: the Nodes whose health label, its marker, taint or fault
  /// labels differ from what their instance's state asks (HyperPod's transitions: a node
  /// being replaced or faulty with replacement due is UnschedulablePendingReplacement, one
  /// being rebooted UnschedulablePendingReboot, both tainted NoSchedule and, when a fault
  /// caused it, with the fault labels; a running one Schedulable again, without them).
  std::vector<KubernetesNodeHealth> kubernetes_health;
  /// EKS-orchestrated clusters whose Nodes were read this pass: every pod route the
  /// cluster's network should have (DesiredPodRoutes of the plan's node records), for
  /// Provider::setPodRoutes. nullopt: no change (the Nodes were not read).
  std::optional<std::vector<provider::PodRoute>> pod_routes;
  /// Something the operator should know that is not a node event (e.g. many nodes silent
  /// at once, so silence is not acted on); the controller logs it. Empty when none.
  std::string notice;
  /// True when nothing is in flight: no instance is pending or shutting down and the
  /// cluster status is final for now (InService, Failed). The controller then only
  /// resyncs slowly.
  bool settled = false;
};

/// Decides the next step for one cluster. Pure: reads only its arguments; new instance ids
/// and event ids come from `ids`. Rules (HyperPod semantics):
///  - each instance group converges to InstanceCount live instances; surplus is removed
///    failed first, then pending, then the newest running;
///  - groups in `groups_deleting` lose all instances, then leave the cluster;
///  - Creating becomes InService when every group has all its instances Running, or Failed
///    when an instance fails (the FailureMessage names it), unless NodeProvisioningMode is
///    Continuous, where failed instances are replaced and the cluster stays usable;
///  - a failure during Updating rolls the group back to the instances that run
///    (RollingBack, then InService with the failure in the events);
///  - Deleting terminates everything and erases the cluster once the provider reports no
///    instance left;
///  - node recovery (Node::recovery, set by BatchRebootClusterNodes/BatchReplaceClusterNodes):
///    Reboot asks the provider once and makes the node Running again when it reports a boot
///    after the request (lifecycle scripts do not run again); Replace terminates the
///    instance and, once the provider no longer reports it, launches a new instance id with
///    the same NodeLogicalId and address, whose lifecycle scripts run as on a new node;
///  - node health (lifecycle_by_agent; docs/resiliency.md): a Running node that stopped is
///    Dead, one whose agent is silent for unresponsive_after while it runs is Unresponsive,
///    one whose agent reports hard_fault has a HardwareFault, soft_fault a SoftwareFault;
///    a Slurm mark `Action:Replace` / `Action:Reboot` (state fail or down, set after the
///    node's launch or last recovery) asks for that action. With NodeRecovery Automatic
///    (the default) faults are recovered: Dead/Unresponsive/HardwareFault → Replace,
///    SoftwareFault → Reboot; controller nodes are rebooted instead of replaced. With None
///    the fault is only reported (event, InstanceStatus.Message, Slurm node DOWN). A failed
///    replacement is replaced again after retry_delay (doubling);
///  - Slurm: a node being recovered or faulty is marked DOWN with a "Hyperfleet: ..."
///    reason, and returned to service (resume) once its instance is up again.
ClusterPlan PlanCluster(const ClusterSnapshot& snapshot, SystemTime now, IdSource& ids);

/// The pod routes of an EKS-orchestrated cluster (like kube-controller-manager's route
/// controller, with Hyperfleet as the cloud): one per node record of `nodes` that is not
/// shutting down, has an IPv4 private address and whose Node (in `kubernetes_nodes`, by
/// instance id) has a pod range: pod range -> that address. A range claimed by two nodes
/// goes to the lower instance id. Sorted by pod range. Pure.
std::vector<provider::PodRoute> DesiredPodRoutes(
    const std::vector<model::Node>& nodes,
    const std::map<std::string, KubernetesNodeView>& kubernetes_nodes);

/// When the agent_start_timeout of a booted node (record `node`, instance `observed`) starts:
/// its boot, or its launch when the provider gives no boot time. Not the launch alone: a
/// launch may wait long for capacity (a machine pool) before the instance boots.
SystemTime AgentStartCountedFrom(const model::Node& node,
                                 const provider::InstanceObservation& observed);

/// When to look at the cluster again after carrying out `plan` (controller-runtime's
/// Result.RequeueAfter): after `active` while something is in flight, after `liveness`
/// while settled nodes' agents must be watched for silence; nullopt: at the next resync.
std::optional<Duration> RequeueAfter(const ClusterPlan& plan, Duration active, Duration liveness);

}  // namespace hf::control
