#include "control/plan/work.h"

#include <utility>

namespace hf::control::plan {

Work::Work(const ClusterSnapshot& s, SystemTime n, IdSource& i)
    : snap(s), now(n), ids(i), cluster(s.cluster), nodes(s.nodes), dirty(s.nodes.size(), false) {
  for (const auto& node : s.nodes) expected.push_back(node.revision);
  observed_.reserve(s.instances.size());
  for (const auto& o : s.instances) observed_[o.instance_id] = &o;
  if (s.slurm_nodes) {
    slurm_by_name_.reserve(s.slurm_nodes->size());
    for (const auto& node : *s.slurm_nodes) slurm_by_name_.try_emplace(node.name, &node);
  }
}

const provider::InstanceObservation* Work::observed(const std::string& id) const {
  auto it = observed_.find(id);
  return it == observed_.end() ? nullptr : it->second;
}

const SlurmNodeState* Work::slurmNode(const std::string& name) const {
  auto it = slurm_by_name_.find(name);
  return it == slurm_by_name_.end() ? nullptr : it->second;
}

void Work::event(std::string resource_type, std::string level, std::string description,
                 std::string group, std::string instance_id, json metadata) {
  plan.writes.events.push_back(model::MakeEvent(
      ids.eventId(), cluster.id, now,
      {std::move(resource_type), std::move(level), std::move(description), std::move(group),
       std::move(instance_id), std::move(metadata)}));
}

void Work::setStatus(size_t i, model::InstanceStatus status, std::string message) {
  if (nodes[i].status == status && nodes[i].message == message) return;
  nodes[i].status = status;
  nodes[i].message = std::move(message);
  dirty[i] = true;
}

void Work::shutDown(size_t i, const std::string& why, bool now_and_hard) {
  if (nodes[i].status == is::kShuttingDown) return;
  setStatus(i, is::kShuttingDown);
  (now_and_hard ? plan.kills : plan.terminations).push_back(nodes[i].instance_id);
  event("Instance", "Info", absl::StrCat("Terminating instance ", nodes[i].instance_id, ": ", why),
        nodes[i].group, nodes[i].instance_id);
}

provider::InstanceSpec Work::specFor(const model::Node& n) const {
  provider::InstanceSpec spec{n.instance_id, cluster.id, cluster.name, n.group,
                              n.instance_type, n.lifecycle, n.marks.requested_ip};
  spec.secondary_ebs_volume =
      provider::HasSecondaryEbsVolume(n.spec_extras.value("InstanceStorageConfigs", json()));
  if (!n.marks.replacement_of.empty()) spec.hostname = n.hostname;
  // As HyperPod has an AMI of each kind: containerd and the kubelet for EKS-orchestrated nodes.
  if (!cluster.eksClusterName().empty()) spec.image_variant = provider::NodeImageVariant::kEks;
  return spec;
}

void Work::addNode(const model::InstanceGroup& g, const std::string& retry_of) {
  model::Node n;
  n.cluster_id = cluster.id;
  n.instance_id = ids.instanceId();
  n.logical_id = absl::StrCat(g.name, "-", ids.logicalIdSuffix());
  n.group = g.name;
  n.instance_type = g.instance_type;
  n.status = is::kPending;
  n.launch_time = now;
  n.lifecycle = g.spec.value("LifeCycleConfig", json());
  n.spec_extras = model::NodeSpecMembers(g);
  n.marks.retry_of = retry_of;
  plan.launches.push_back(specFor(n));
  addRecord(std::move(n));
}

void Work::addRecord(model::Node n) {
  nodes.push_back(std::move(n));
  dirty.push_back(true);
  expected.push_back(store::kMustNotExist);
}

void FailNode(Work& w, size_t i, const std::string& message) {
  const auto& n = w.nodes[i];
  w.event("Instance", "Error",
          absl::StrCat("Instance ", n.instance_id, " in group ", n.group, " failed: ", message),
          n.group, n.instance_id,
          json{{"Instance", {{"NodeLogicalId", n.logical_id}, {"FailureMessage", message}}}});
  w.setStatus(i, is::kFailure, message);
}

void EndRecovery(model::Node& n) {
  n.recovery.reset();
  n.recovery_progress = {};
}

int64_t Seconds(Duration d) { return std::chrono::duration_cast<std::chrono::seconds>(d).count(); }

}  // namespace hf::control::plan
