#pragma once
// Internal to PlanCluster (cluster_plan.cc, the driver): the working state of one planning
// pass, the named node predicates every phase uses, and the phases, one file each:
//   observe.cc        the provider's view into the node records (passive transitions)
//   cluster_status.cc deletion, failure and rollback, the records' end of pass, the status
//   health.cc         fault detection (dead, hung, health reports, Slurm Action: marks)
//   recovery.cc       reboots and replacements (Node::recovery)
//   scale.cc          group deletions and each group's count
//   slurm_marks.cc    the Slurm DOWN/resume marks
//   kubernetes.cc     EKS clusters' Nodes: users' health labels, the labels and taints
// Each phase reads the snapshot through Work and changes only Work.
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hyperfleet/control/cluster_plan.h"

namespace hf::control::plan {

namespace cs = model::cluster_status;
namespace is = model::instance_status;
using nlohmann::json;
using provider::InstanceState;
using Request = model::NodeRecoveryRequest;
using Action = Request::Action;
using Source = Request::Source;
using FaultKind = model::NodeFault::Kind;

/// Working state of one planning pass: node records as they will be after the plan.
struct Work {
  const ClusterSnapshot& snap;
  SystemTime now;
  IdSource& ids;
  ClusterPlan plan;
  model::Cluster cluster;
  std::vector<model::Node> nodes;  ///< records after this plan (new ones appended)
  std::vector<bool> dirty;         ///< per node: needs a write
  std::vector<int64_t> expected;   ///< per node: revision read (kMustNotExist for new)
  /// The recoveries that replaced instances in this pass, by instance id (ended with the
  /// replacement: the fault labels of its Node still show why).
  std::map<std::string, Request> replaced_now;

  Work(const ClusterSnapshot& s, SystemTime n, IdSource& i);

  /// What the provider reports about instance `id`; nullptr when it does not report it.
  const provider::InstanceObservation* observed(const std::string& id) const;
  /// The Slurm node named `name` in the snapshot's Slurm view (the first of that name);
  /// nullptr when none.
  const SlurmNodeState* slurmNode(const std::string& name) const;

  /// Appends a cluster event at `now`.
  void event(std::string resource_type, std::string level, std::string description,
             std::string group = "", std::string instance_id = "", json metadata = json());
  void setStatus(size_t i, model::InstanceStatus status, std::string message = "");
  /// Terminates node `i`; `now_and_hard` skips the clean shutdown (a faulty node).
  void shutDown(size_t i, const std::string& why, bool now_and_hard = false);
  /// What the provider is asked to launch for record `n`.
  provider::InstanceSpec specFor(const model::Node& n) const;
  /// Adds a node to group `g` and launches it; `retry_of` names the failed instance it
  /// replaces (Continuous provisioning), which the cluster's status does not wait for.
  void addNode(const model::InstanceGroup& g, const std::string& retry_of = "");
  /// Appends a record that is written but not launched yet (a replacement).
  void addRecord(model::Node n);

 private:
  // Indexes into the snapshot, built once per pass: each phase looks up every node, so a
  // scan per lookup would make a pass quadratic in the cluster's size.
  std::unordered_map<std::string_view, const provider::InstanceObservation*> observed_;
  std::unordered_map<std::string_view, const SlurmNodeState*> slurm_by_name_;
};

// ---- named node predicates (one definition each) ----

/// Not shutting down: counts toward its group.
inline bool IsLive(const model::Node& n) { return n.status != is::kShuttingDown; }
/// A Continuous-mode retry of a failed instance.
inline bool IsRetry(const model::Node& n) { return !n.marks.retry_of.empty(); }
/// A node-recovery replacement of another instance.
inline bool IsReplacement(const model::Node& n) { return !n.marks.replacement_of.empty(); }
/// A node of the group that runs slurmctld (rebooted, never replaced).
inline bool IsController(const Work& w, const model::Node& n) {
  return !w.snap.controller_group.empty() && n.group == w.snap.controller_group;
}

/// Marks node `i` failed with `message` (its InstanceStatus.Message) and says so in an event.
void FailNode(Work& w, size_t i, const std::string& message);
/// Ends node `n`'s recovery (done, failed or handed over to a replacement).
void EndRecovery(model::Node& n);
/// Whole seconds of `d`, for messages.
int64_t Seconds(Duration d);

// ---- phases, in the order PlanCluster runs them ----

void Observe(Work& w);               ///< observe.cc
void PlanDeletion(Work& w);          ///< cluster_status.cc: a Deleting cluster's whole pass
void FinishGroupDeletions(Work& w);  ///< scale.cc
void FailOrRollBack(Work& w);        ///< cluster_status.cc
void Detect(Work& w);                ///< health.cc
void Recover(Work& w);               ///< recovery.cc
void Scale(Work& w);                 ///< scale.cc
void MarkSlurmNodes(Work& w);        ///< slurm_marks.cc
/// kubernetes.cc: a user's health label on a Node asks for its recovery (before Recover).
void DetectKubernetesRequests(Work& w);
/// kubernetes.cc: each Node's health label and taint as its instance's state asks.
void LabelKubernetesNodes(Work& w);
/// pod_routes.cc: the pod routes of the cluster's network (ClusterPlan::pod_routes).
void PlanPodRoutes(Work& w);
void Finish(Work& w);                ///< cluster_status.cc: erasures and node writes
void SetStatus(Work& w);             ///< cluster_status.cc: status, cluster write, settled

// ---- Slurm's view (slurm_marks.cc), shared with health.cc ----

/// A user's request through Slurm (exact, case-sensitive reasons, as on HyperPod).
inline constexpr const char* kActionReplace = "Action:Replace";
inline constexpr const char* kActionReboot = "Action:Reboot";
/// sinfo's long state without its flags: "down*" → "down", "idle+drain" → "idle".
std::string BaseState(std::string_view state);
/// The Slurm node named `hostname` in the snapshot's Slurm view; nullptr when none.
const SlurmNodeState* SlurmNode(const Work& w, const std::string& hostname);

}  // namespace hf::control::plan
