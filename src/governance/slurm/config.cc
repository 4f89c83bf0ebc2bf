#include "hyperfleet/governance/slurm/config.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hf::governance::slurm {
namespace {

using nlohmann::json;

std::optional<double> Num(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_number()) return std::nullopt;
  return o[key].get<double>();
}

QuotaResource QuotaResourceOf(const json& r) {
  QuotaResource q;
  q.instance_type = r.value("InstanceType", "");
  if (auto c = Num(r, "Count")) q.count = static_cast<int64_t>(*c);
  q.accelerators = Num(r, "Accelerators");
  q.vcpu = Num(r, "VCpu");
  q.memory_gib = Num(r, "MemoryInGiB");
  return q;
}

TeamQuota TeamQuotaOf(const model::SchedulerResource& r) {
  TeamQuota q;
  q.team = r.team;
  const json& config = r.body.value("ComputeQuotaConfig", json::object());
  for (const auto& res : config.value("ComputeQuotaResources", json::array())) {
    q.resources.push_back(QuotaResourceOf(res));
  }
  const json& sharing = config.value("ResourceSharingConfig", json::object());
  const std::string strategy = sharing.value("Strategy", "LendAndBorrow");
  q.strategy = strategy == "Lend"       ? SharingStrategy::kLend
               : strategy == "DontLend" ? SharingStrategy::kDontLend
                                        : SharingStrategy::kLendAndBorrow;
  q.borrow_limit_percent = static_cast<int>(Num(sharing, "BorrowLimit").value_or(
      q.strategy == SharingStrategy::kLendAndBorrow ? 50 : 0));
  for (const auto& res : sharing.value("AbsoluteBorrowLimits", json::array())) {
    q.absolute_borrow_limits.push_back(QuotaResourceOf(res));
  }
  q.preempt_team_tasks = config.value("PreemptTeamTasks", "LowerPriority") == "Never"
                             ? PreemptTeamTasks::kNever
                             : PreemptTeamTasks::kLowerPriority;
  q.fair_share_weight = static_cast<int>(
      Num(r.body.value("ComputeQuotaTarget", json::object()), "FairShareWeight").value_or(0));
  q.active = r.body.value("ActivationState", "Enabled") == "Enabled";
  return q;
}

bool Live(const model::SchedulerResource& r) {
  return r.status != model::scheduler_status::kCreateFailed &&
         r.status != model::scheduler_status::kDeleting;
}

}  // namespace

Config ConfigOf(const std::vector<model::SchedulerResource>& policies,
                const std::vector<model::SchedulerResource>& quotas,
                const model::InstanceCatalog& catalog,
                const std::map<std::string, int64_t>& instances) {
  Config c;
  json key = json::object();
  for (const auto& p : policies) {
    if (!Live(p)) continue;
    const json& sc = p.body.value("SchedulerConfig", json::object());
    for (const auto& pc : sc.value("PriorityClasses", json::array())) {
      PriorityClass cls{pc.value("Name", ""), pc.value("Weight", 0)};
      c.class_weight[cls.name] = cls.weight;
      c.policy.priority_classes.push_back(std::move(cls));
    }
    c.policy.fair_share = sc.value("FairShare", "Enabled") != "Disabled";
    c.policy.idle_resource_sharing = sc.value("IdleResourceSharing", "Disabled") == "Enabled";
    key["policy"] = sc;
    break;  // one per cluster
  }
  std::set<std::string> types;
  for (const auto& [t, n] : instances) types.insert(t);
  for (const auto& q : quotas) {
    if (!Live(q) || q.team.empty()) continue;
    c.quotas.push_back(TeamQuotaOf(q));
    c.teams.insert(q.team);
    for (const auto& r : c.quotas.back().resources) types.insert(r.instance_type);
    for (const auto& r : c.quotas.back().absolute_borrow_limits) types.insert(r.instance_type);
    key["quotas"][q.team] = {q.body.value("ComputeQuotaConfig", json::object()),
                             q.body.value("ComputeQuotaTarget", json::object()),
                             q.body.value("ActivationState", "Enabled")};
  }
  for (const auto& t : types) {
    const auto* spec = catalog.find(t);
    if (spec == nullptr) continue;
    auto it = instances.find(t);
    c.capacity.push_back({spec->name, spec->vcpus, spec->memory_gib, spec->accelerator_count,
                          it == instances.end() ? 0 : it->second});
    key["capacity"][t] = c.capacity.back().instances;
  }
  c.key = key.dump();
  return c;
}

std::map<std::string, std::string> SlurmNodeTypes(const std::vector<model::Node>& nodes) {
  std::map<std::string, std::string> type_of;
  for (const auto& n : nodes) {
    if (n.hostname.empty()) continue;
    type_of[n.hostname.substr(0, n.hostname.find('.'))] = n.instance_type;
  }
  return type_of;
}

PartitionMap PartitionsOf(const std::vector<ReportedPartition>& partitions,
                          const std::map<std::string, std::string>& node_types) {
  PartitionMap m;
  std::map<std::string, std::set<std::string>> hosts_of_type;
  for (const auto& p : partitions) {
    const std::string name(p.name);
    std::set<std::string> types;
    for (std::string_view h : p.hosts) {
      auto t = node_types.find(std::string(h));
      if (t == node_types.end()) continue;
      types.insert(t->second);
      hosts_of_type[t->second].insert(t->first);
    }
    if (types.size() == 1) {
      m.type[name] = *types.begin();
    } else {
      m.problem[name] =
          types.empty() ? absl::StrCat("partition ", name, " has no node of the cluster")
                        : absl::StrCat("partition ", name, " mixes instance types (",
                                       absl::StrJoin(types, ", "),
                                       "); quotas count one type: submit to the partition "
                                       "of one instance group");
    }
  }
  for (const auto& [t, hosts] : hosts_of_type) {
    m.instances[t] = static_cast<int64_t>(hosts.size());
  }
  return m;
}

}  // namespace hf::governance::slurm
