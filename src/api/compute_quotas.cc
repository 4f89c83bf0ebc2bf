// The compute quota operations (Create/Describe/Update/Delete/ListComputeQuota(s)), the
// rules of a ComputeQuotaConfig, QuotaAmountOf and the Warn event for quotas beyond the
// cluster's capacity; the machinery they share with the cluster policy is in
// governance_operations.cc.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "governance_common.h"
#include "hyperfleet/api/governance_operations.h"
#include "hyperfleet/api/tag_operations.h"
#include "hyperfleet/model/instance_catalog.h"

namespace hf::api {

using namespace governance_ops;  // NOLINT: this file's helpers
namespace kind = model::governance_kind;
namespace st = model::scheduler_status;

namespace {

/// One ComputeQuotaResourceConfig list (ComputeQuotaResources or AbsoluteBorrowLimits) at
/// model path `path`: each instance type once, an amount given, Count not mixed with the
/// ratio amounts, accelerators only on types that have them.
Status CheckResourceList(const Json& list, const std::string& path) {
  const auto& catalog = model::InstanceCatalog::Embedded();
  std::set<std::string> types;
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& r = list[i];
    const std::string at = absl::StrCat(path, ".", i + 1, ".member");
    const std::string type = Str(r, "InstanceType");
    if (!types.insert(type).second) {
      return Invalid(at + ".instanceType", type,
                     "Each instance type may appear only once in the list.");
    }
    const bool count = r.contains("Count");
    const bool ratio = r.contains("Accelerators") || r.contains("VCpu") ||
                       r.contains("MemoryInGiB");
    if (!count && !ratio && !r.contains("AcceleratorPartition")) {
      return Invalid(at, type,
                     "Specify Count, or Accelerators, VCpu and/or MemoryInGiB (or "
                     "AcceleratorPartition) for the instance type.");
    }
    if (count && ratio) {
      const char* other = r.contains("Accelerators") ? "accelerators"
                          : r.contains("VCpu")       ? "vCpu"
                                                     : "memoryInGiB";
      return Invalid(absl::StrCat(at, ".", other), Shown(r[r.contains("Accelerators") ? "Accelerators"
                                                          : r.contains("VCpu") ? "VCpu"
                                                                               : "MemoryInGiB"]),
                     "Count cannot be combined with Accelerators, VCpu or MemoryInGiB: give "
                     "whole instances, or amounts of their resources.");
    }
    const auto* spec = catalog.find(type);
    const bool has_accelerators = spec && spec->accelerator_count > 0;
    if (r.value("Accelerators", 0) > 0 && !has_accelerators) {
      return Invalid(at + ".accelerators", Shown(r["Accelerators"]),
                     absl::StrCat("Instance type ", type, " has no accelerators."));
    }
    if (r.contains("AcceleratorPartition") &&
        !(spec && spec->accelerator_kind == model::AcceleratorKind::kNvidiaGpu)) {
      return Invalid(at + ".acceleratorPartition.type",
                     Str(r["AcceleratorPartition"], "Type"),
                     absl::StrCat("Instance type ", type,
                                  " has no NVIDIA GPUs to partition with MIG."));
    }
  }
  return absl::OkStatus();
}

/// ComputeQuotaConfig: the resource lists, and borrowing settings only with LendAndBorrow.
Status CheckQuotaConfig(const Json& config) {
  HF_RETURN_IF_ERROR(CheckResourceList(config.value("ComputeQuotaResources", Json::array()),
                                       "computeQuotaConfig.computeQuotaResources"));
  if (!config.contains("ResourceSharingConfig")) return absl::OkStatus();
  const Json& sharing = config["ResourceSharingConfig"];
  const std::string strategy = Str(sharing, "Strategy");
  const std::string base = "computeQuotaConfig.resourceSharingConfig";
  if (strategy != "LendAndBorrow") {
    const std::string rule = absl::StrCat(
        "A team borrows only with Strategy LendAndBorrow; Strategy is ", strategy, ".");
    if (sharing.contains("BorrowLimit")) {
      return Invalid(base + ".borrowLimit", Shown(sharing["BorrowLimit"]), rule);
    }
    if (sharing.contains("AbsoluteBorrowLimits")) {
      return Invalid(base + ".absoluteBorrowLimits", "[...]", rule);
    }
  }
  return CheckResourceList(sharing.value("AbsoluteBorrowLimits", Json::array()),
                           base + ".absoluteBorrowLimits");
}

// What Describe shows when the request left a member out.
Json WithQuotaDefaults(Json config) {
  if (!config.is_object()) config = Json::object();
  if (!config.contains("ComputeQuotaResources")) config["ComputeQuotaResources"] = Json::array();
  if (!config.contains("ResourceSharingConfig")) {
    config["ResourceSharingConfig"] = {{"Strategy", "LendAndBorrow"}};
  }
  Json& sharing = config["ResourceSharingConfig"];
  if (Str(sharing, "Strategy") == "LendAndBorrow" && !sharing.contains("BorrowLimit")) {
    sharing["BorrowLimit"] = 50;
  }
  if (!config.contains("PreemptTeamTasks")) config["PreemptTeamTasks"] = "LowerPriority";
  return config;
}

Json WithTargetDefaults(Json target) {
  if (!target.contains("FairShareWeight")) target["FairShareWeight"] = 0;
  return target;
}

}  // namespace

QuotaAmount QuotaAmountOf(const Json& r) {
  QuotaAmount a;
  const auto* spec = model::InstanceCatalog::Embedded().find(Str(r, "InstanceType"));
  if (!spec || spec->vcpus <= 0 || spec->memory_gib <= 0) return a;
  const double acc = spec->accelerator_count, cpu = spec->vcpus, mem = spec->memory_gib;
  if (r.contains("Count")) {
    const double n = r["Count"].get<double>();
    return {n * acc, n * cpu, n * mem, n};
  }
  // The share of one instance that the first given amount stands for fills the others.
  std::optional<double> share;
  if (r.contains("Accelerators") && acc > 0) {
    share = r["Accelerators"].get<double>() / acc;
  } else if (r.contains("VCpu")) {
    share = r["VCpu"].get<double>() / cpu;
  } else if (r.contains("MemoryInGiB")) {
    share = r["MemoryInGiB"].get<double>() / mem;
  }
  if (!share) return a;
  a.accelerators = r.contains("Accelerators") ? r["Accelerators"].get<double>() : 0;
  a.vcpus = r.contains("VCpu") ? r["VCpu"].get<double>() : *share * cpu;
  a.memory_gib = r.contains("MemoryInGiB") ? r["MemoryInGiB"].get<double>() : *share * mem;
  a.instances = std::max({acc > 0 ? a.accelerators / acc : 0.0, a.vcpus / cpu,
                          a.memory_gib / mem});
  return a;
}

StatusOr<Json> GovernanceOperations::createComputeQuota(const Json& in) {
  const Json config = in.value("ComputeQuotaConfig", Json::object());
  HF_RETURN_IF_ERROR(CheckQuotaConfig(config));
  HF_RETURN_IF_ERROR(CheckTagList(in.value("Tags", Json::array())));
  HF_RETURN_IF_ERROR(CheckNameLength(
      "computeQuotaTarget.teamName",
      Str(in.value("ComputeQuotaTarget", Json::object()), "TeamName")));
  HF_ASSIGN_OR_RETURN(auto c, liveCluster(Str(in, "ClusterArn")));
  model::SchedulerResource r;
  r.kind = kind::kComputeQuota;
  r.name = Str(in, "Name");
  const Json target = in.value("ComputeQuotaTarget", Json::object());
  r.team = Str(target, "TeamName");
  r.body["ComputeQuotaConfig"] = WithQuotaDefaults(config);
  r.body["ComputeQuotaTarget"] = WithTargetDefaults(target);
  r.body["ActivationState"] = in.value("ActivationState", "Enabled");
  if (in.contains("Description")) r.body["Description"] = in["Description"];
  return create(std::move(r), c, in.value("Tags", Json::array()));
}

// ---- quota excess ---------------------------------------------------------------------------

std::optional<model::Event> GovernanceOperations::excessEvent(
    const model::Cluster& c, const std::vector<model::SchedulerResource>& quotas,
    SystemTime now) {
  // Instances of each type the cluster is meant to have (target counts, not what runs now).
  std::map<std::string, int> capacity;
  for (const auto& g : c.groups) capacity[g.instance_type] += g.target_count;
  std::map<std::string, double> allocated;
  std::map<std::string, std::vector<std::string>> teams;
  for (const auto& q : quotas) {
    if (q.body.value("ActivationState", "Enabled") != "Enabled") continue;
    const Json resources =
        q.body.value("ComputeQuotaConfig", Json::object()).value("ComputeQuotaResources", Json::array());
    for (const auto& r : resources) {
      const std::string type = Str(r, "InstanceType");
      const double amount = QuotaAmountOf(r).instances;
      allocated[type] += amount;
      if (amount > 0) teams[type].push_back(q.team);
    }
  }
  std::vector<std::string> lines;
  for (const auto& [type, total] : allocated) {
    const int have = capacity[type];
    // Ratio quotas are fractions of instances: compare with a little slack for rounding.
    if (total <= have + 1e-9) continue;
    // At most 10 teams named: the event stays small with hundreds of quotas.
    std::vector<std::string>& named = teams[type];
    std::sort(named.begin(), named.end());
    std::string who = absl::StrJoin(named.begin(), named.begin() + std::min<size_t>(named.size(), 10), ", ");
    if (named.size() > 10) absl::StrAppend(&who, " and ", named.size() - 10, " more");
    lines.push_back(absl::StrFormat(
        "%s: %.10g instances allocated (teams %s), the cluster has %d (%.10g over)", type, total,
        who, have, total - have));
  }
  if (lines.empty()) return std::nullopt;
  return event(c.id, "Warn",
               absl::StrCat("Compute quotas exceed the capacity of cluster ", c.name,
                            " (accepted; not all of the quota can be in use at once): ",
                            absl::StrJoin(lines, "; ")),
               now);
}

StatusOr<Json> GovernanceOperations::describeComputeQuota(const Json& in) {
  return describe(kind::kComputeQuota, in, "ComputeQuotaId", "ComputeQuotaVersion");
}

StatusOr<Json> GovernanceOperations::updateComputeQuota(const Json& in) {
  if (in.contains("ComputeQuotaConfig")) {
    HF_RETURN_IF_ERROR(CheckQuotaConfig(in["ComputeQuotaConfig"]));
  }
  return mutate(
      kind::kComputeQuota, Str(in, "ComputeQuotaId"),
      [&](model::SchedulerResource& r, const model::Cluster& c,
          store::WriteBatch& batch) -> Status {
        if (in.contains("ComputeQuotaTarget")) {
          const std::string team = Str(in["ComputeQuotaTarget"], "TeamName");
          if (team != r.team) {
            return Invalid("computeQuotaTarget.teamName", team,
                           absl::StrCat("The team of ", Named(r), " is ", r.team,
                                        " and cannot change; create a quota for team ", team,
                                        " instead."));
          }
        }
        HF_RETURN_IF_ERROR(CheckUpdatable(r, c, in));
        if (in.contains("ComputeQuotaConfig")) {
          r.body["ComputeQuotaConfig"] = WithQuotaDefaults(in["ComputeQuotaConfig"]);
        }
        if (in.contains("ComputeQuotaTarget")) {
          r.body["ComputeQuotaTarget"] = WithTargetDefaults(in["ComputeQuotaTarget"]);
        }
        if (in.contains("ActivationState")) r.body["ActivationState"] = in["ActivationState"];
        if (in.contains("Description")) r.body["Description"] = in["Description"];
        startUpdate(r, batch);
        HF_ASSIGN_OR_RETURN(auto quotas, store_.schedulerResources(kind::kComputeQuota, c.id));
        for (auto& q : quotas) {
          if (q.id == r.id) q = r;
        }
        if (auto excess = excessEvent(c, quotas, r.last_modified_time)) {
          batch.events.push_back(std::move(*excess));
        }
        return absl::OkStatus();
      },
      UpdateResult);
}

StatusOr<Json> GovernanceOperations::deleteComputeQuota(const Json& in) {
  return remove(kind::kComputeQuota, Str(in, "ComputeQuotaId"));
}

StatusOr<Json> GovernanceOperations::listComputeQuotas(const Json& in) {
  return list(kind::kComputeQuota, in);
}

}  // namespace hf::api
