#include "hyperfleet/api/governance_operations.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "hyperfleet/api/errors.h"
#include "hyperfleet/api/tag_operations.h"
#include "hyperfleet/model/instance_catalog.h"
#include "request_time.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;
namespace kind = model::governance_kind;
namespace st = model::scheduler_status;

/// A ValidationException for a rule the model cannot express; `path` is the member path in
/// the model's validation wording (lowerCamelCase, lists 1-based).
Status Invalid(const std::string& path, const std::string& value, const std::string& rule) {
  return absl::InvalidArgumentError(absl::StrCat(
      "1 validation error detected: Value '", value, "' at '", path,
      "' failed to satisfy constraint: ", rule));
}

std::string Str(const Json& in, const char* key) {
  auto it = in.find(key);
  return it != in.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// The JSON text of a value as a validation message shows it (strings without quotes).
std::string Shown(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }


/// The display word of a kind in messages and events.
std::string Noun(const std::string& k) {
  return k == kind::kSchedulerConfig ? "cluster policy" : "compute quota";
}

/// "<noun> <name> (<Kind> <id>)": how messages and events name an object.
std::string Named(const model::SchedulerResource& r) {
  return absl::StrCat(Noun(r.kind), " ", r.name, " (", r.kind, " ", r.id, ")");
}

// ---- rules beyond the model ---------------------------------------------------------------

/// Longest TeamName and priority class Name: HyperPod documents "a DNS-label-like string of
/// about 40 characters" (AWS API reference, ComputeQuotaTarget); the model's pattern does
/// not bound it. Slurm account and QOS names ("<class>-priority") stay within 64 then.
constexpr size_t kMaxGovernanceNameLength = 40;

Status CheckNameLength(const std::string& path, const std::string& name) {
  if (name.size() <= kMaxGovernanceNameLength) return absl::OkStatus();
  return Invalid(path, name.substr(0, 64) + (name.size() > 64 ? "..." : ""),
                 absl::StrCat("Member must have length less than or equal to ",
                              kMaxGovernanceNameLength));
}

/// SchedulerConfig: priority class names are unique, also as jobs name them: a job names
/// class X as "X" or "X-priority" (docs/governance.md), so "training" and
/// "training-priority" cannot both be classes.
Status CheckSchedulerConfig(const Json& config) {
  const Json classes = config.value("PriorityClasses", Json::array());
  std::set<std::string> names;
  for (size_t i = 0; i < classes.size(); ++i) {
    const std::string name = Str(classes[i], "Name");
    const std::string path =
        absl::StrCat("schedulerConfig.priorityClasses.", i + 1, ".member.name");
    HF_RETURN_IF_ERROR(CheckNameLength(path, name));
    if (!names.insert(name).second) {
      return Invalid(path, name, "Priority class names must be unique within PriorityClasses.");
    }
  }
  const std::string kSuffix = "-priority";
  for (size_t i = 0; i < classes.size(); ++i) {
    const std::string name = Str(classes[i], "Name");
    if (names.count(name + kSuffix)) {
      return Invalid(absl::StrCat("schedulerConfig.priorityClasses.", i + 1, ".member.name"),
                     name,
                     absl::StrCat("Jobs name a priority class as <name> or <name>-priority, so ",
                                  name, " and ", name, kSuffix,
                                  " cannot both be priority classes."));
    }
  }
  return absl::OkStatus();
}

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

// ---- defaults (what Describe shows when the request left a member out) -------------------

Json WithSchedulerDefaults(Json config) {
  if (!config.is_object()) config = Json::object();
  if (!config.contains("FairShare")) config["FairShare"] = "Enabled";
  return config;
}

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

// ---- list pages ---------------------------------------------------------------------------
// A NextToken is the hex of {"k": <sort key>, "i": <id>}: the page starts strictly after that
// object in the requested order (keyset pagination, stable under inserts).

std::string Hex(const std::string& raw) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

std::optional<Json> Unhex(const std::string& token) {
  if (token.size() % 2 != 0) return std::nullopt;
  std::string raw;
  for (size_t i = 0; i < token.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = nib(token[i]), lo = nib(token[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw.push_back(static_cast<char>(hi * 16 + lo));
  }
  Json j = Json::parse(raw, nullptr, false);
  if (!j.is_object() || !j.contains("k") || !j["i"].is_string()) return std::nullopt;
  return j;
}

}  // namespace

// ---- QuotaAmountOf ---------------------------------------------------------------------------

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

// ---- dispatch -----------------------------------------------------------------------------

namespace {
using Handler = StatusOr<Json> (GovernanceOperations::*)(const Json&);
const std::map<std::string, Handler, std::less<>>& Handlers() {
  static const std::map<std::string, Handler, std::less<>> kHandlers = {
      {"CreateClusterSchedulerConfig", &GovernanceOperations::createClusterSchedulerConfig},
      {"DescribeClusterSchedulerConfig", &GovernanceOperations::describeClusterSchedulerConfig},
      {"UpdateClusterSchedulerConfig", &GovernanceOperations::updateClusterSchedulerConfig},
      {"DeleteClusterSchedulerConfig", &GovernanceOperations::deleteClusterSchedulerConfig},
      {"ListClusterSchedulerConfigs", &GovernanceOperations::listClusterSchedulerConfigs},
      {"CreateComputeQuota", &GovernanceOperations::createComputeQuota},
      {"DescribeComputeQuota", &GovernanceOperations::describeComputeQuota},
      {"UpdateComputeQuota", &GovernanceOperations::updateComputeQuota},
      {"DeleteComputeQuota", &GovernanceOperations::deleteComputeQuota},
      {"ListComputeQuotas", &GovernanceOperations::listComputeQuotas},
  };
  return kHandlers;
}
}  // namespace

GovernanceOperations::GovernanceOperations(store::Store& store, const Clock& clock,
                                           IdSource& ids, ApiConfig config,
                                           GovernanceOptions options)
    : store_(store), clock_(clock), ids_(ids), config_(std::move(config)),
      options_(options) {}

bool GovernanceOperations::implements(std::string_view op) const {
  return Handlers().count(op) > 0;
}

StatusOr<Json> GovernanceOperations::call(std::string_view op, const Json& in) {
  auto it = Handlers().find(op);
  if (it == Handlers().end()) {
    return absl::UnimplementedError(absl::StrCat("Unknown operation ", std::string(op)));
  }
  return (this->*(it->second))(in);
}

std::string GovernanceOperations::arnOf(const std::string& k, const std::string& id) const {
  return absl::StrCat("arn:aws:sagemaker:", config_.region, ":", config_.account_id, ":",
                      k == kind::kSchedulerConfig ? "cluster-scheduler-config/" : "compute-quota/",
                      id);
}

model::Event GovernanceOperations::event(const std::string& cluster_id, std::string level,
                                         std::string text, SystemTime now) {
  return model::MakeEvent(ids_.eventId(), cluster_id, now,
                          {"Cluster", std::move(level), std::move(text), "", "", nullptr});
}

StatusOr<model::Cluster> GovernanceOperations::liveCluster(const std::string& arn) {
  auto c = store_.cluster(arn);
  if (!c.ok() || c->arn != arn) {
    if (c.ok() || absl::IsNotFound(c.status())) {
      return absl::NotFoundError(absl::StrCat("Cluster ", arn, " not found."));
    }
    return c.status();
  }
  if (c->status == model::cluster_status::kDeleting) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Cluster ", c->name, " is being deleted; its governance objects cannot change."));
  }
  return c;
}

StatusOr<model::SchedulerResource> GovernanceOperations::find(const std::string& k,
                                                              const std::string& id) {
  auto r = store_.schedulerResource(k, id);
  if (!r.ok() && absl::IsNotFound(r.status())) {
    return absl::NotFoundError(absl::StrCat(k, " ", id, " not found."));
  }
  return r;
}

// ---- create ---------------------------------------------------------------------------------

StatusOr<Json> GovernanceOperations::create(model::SchedulerResource r, const model::Cluster& c,
                                            const Json& tags) {
  const SystemTime now = clock_.now();
  r.id = ids_.clusterId();
  r.arn = arnOf(r.kind, r.id);
  r.cluster_id = c.id;
  r.status = st::kCreating;
  r.version = 1;
  r.creation_time = r.last_modified_time = now;
  r.body["ClusterArn"] = c.arn;
  const std::string id_member = absl::StrCat(r.kind, "Id");

  // OK when no object holds the target (this cluster's policy, or this team's quota).
  auto conflict = [&]() -> Status {
    HF_ASSIGN_OR_RETURN(auto existing, store_.schedulerResources(r.kind, c.id));
    for (const auto& e : existing) {
      if (e.team != r.team) continue;
      if (r.kind == kind::kSchedulerConfig) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Cluster ", c.name, " already has ", Named(e),
            "; a cluster has only one cluster policy. Update it or delete it first."));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "Team ", r.team, " already has ", Named(e), " on cluster ", c.name,
          "; a team has only one compute quota per cluster. Update it or delete it first."));
    }
    return absl::OkStatus();
  };
  HF_RETURN_IF_ERROR(conflict());

  store::WriteBatch batch;
  std::vector<model::SchedulerResource> quotas;
  if (r.kind == kind::kComputeQuota) {
    HF_ASSIGN_OR_RETURN(quotas, store_.schedulerResources(kind::kComputeQuota, c.id));
    if (static_cast<int>(quotas.size()) >= options_.max_compute_quotas_per_cluster) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Cluster ", c.name, " has ", quotas.size(), " compute quotas; the limit is ",
          options_.max_compute_quotas_per_cluster, " per cluster."));
    }
    quotas.push_back(r);
  }
  batch.scheduler_resources.push_back({r, store::kMustNotExist, false});
  batch.events.push_back(event(c.id, "Info",
                               absl::StrCat(Noun(r.kind), " ", r.name, " (", r.kind, " ", r.id,
                                            r.team.empty() ? "" : absl::StrCat(", team ", r.team),
                                            ") creation started, version 1"),
                               now));
  if (auto excess = excessEvent(c, quotas, now)) batch.events.push_back(std::move(*excess));
  const std::vector<model::Tag> tag_list = TagsFrom(tags);
  if (!tag_list.empty()) batch.tags.push_back({r.arn, tag_list, {}});
  auto committed = store_.commit(batch);
  if (!committed.ok()) {
    // Lost a race to a concurrent create for the same target: name the winner.
    if (absl::IsAlreadyExists(committed.status())) HF_RETURN_IF_ERROR(conflict());
    if (absl::IsFailedPrecondition(committed.status())) {
      return absl::NotFoundError(absl::StrCat("Cluster ", c.arn, " not found."));
    }
    return committed.status();
  }
  if (options_.auto_settle) HF_RETURN_IF_ERROR(settle(c.id));
  return Json{{absl::StrCat(r.kind, "Arn"), r.arn}, {id_member, r.id}};
}

StatusOr<Json> GovernanceOperations::createClusterSchedulerConfig(const Json& in) {
  const Json config = in.value("SchedulerConfig", Json::object());
  HF_RETURN_IF_ERROR(CheckSchedulerConfig(config));
  HF_RETURN_IF_ERROR(CheckTagList(in.value("Tags", Json::array())));
  HF_ASSIGN_OR_RETURN(auto c, liveCluster(Str(in, "ClusterArn")));
  model::SchedulerResource r;
  r.kind = kind::kSchedulerConfig;
  r.name = Str(in, "Name");
  r.body["SchedulerConfig"] = WithSchedulerDefaults(config);
  if (in.contains("Description")) r.body["Description"] = in["Description"];
  return create(std::move(r), c, in.value("Tags", Json::array()));
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

// ---- describe -------------------------------------------------------------------------------

namespace {

Json Common(const model::SchedulerResource& r) {
  Json out = {{absl::StrCat(r.kind, "Arn"), r.arn},
              {absl::StrCat(r.kind, "Id"), r.id},
              {"Name", r.name},
              {absl::StrCat(r.kind, "Version"), r.version},
              {"Status", r.status},
              {"CreationTime", ToEpochSeconds(r.creation_time)},
              {"LastModifiedTime", ToEpochSeconds(r.last_modified_time)}};
  if (r.body.contains("ClusterArn")) out["ClusterArn"] = r.body["ClusterArn"];
  return out;
}

Json DescribeOf(const model::SchedulerResource& r) {
  Json out = Common(r);
  for (const char* key : {"Description", "SchedulerConfig", "ComputeQuotaConfig",
                          "ComputeQuotaTarget", "ActivationState", "FailureReason"}) {
    if (r.body.contains(key)) out[key] = r.body[key];
  }
  if (r.kind == kind::kSchedulerConfig) {
    // Every component of the policy moves with the policy as a whole.
    Json details = Json::object();
    for (auto it = r.body["SchedulerConfig"].begin(); it != r.body["SchedulerConfig"].end();
         ++it) {
      details[it.key()] = r.status;
    }
    out["StatusDetails"] = details;
  }
  return out;
}

}  // namespace

StatusOr<Json> GovernanceOperations::describe(const std::string& k, const Json& in,
                                               const char* id_member,
                                               const char* version_member) {
  const std::string id = Str(in, id_member);
  if (in.contains(version_member)) {
    auto r = store_.schedulerResourceVersion(k, id, in[version_member].get<int>());
    if (!r.ok()) return r.status();
    return DescribeOf(*r);
  }
  HF_ASSIGN_OR_RETURN(auto r, find(k, id));
  return DescribeOf(r);
}

StatusOr<Json> GovernanceOperations::describeClusterSchedulerConfig(const Json& in) {
  return describe(kind::kSchedulerConfig, in, "ClusterSchedulerConfigId",
                  "ClusterSchedulerConfigVersion");
}

StatusOr<Json> GovernanceOperations::describeComputeQuota(const Json& in) {
  return describe(kind::kComputeQuota, in, "ComputeQuotaId", "ComputeQuotaVersion");
}

// ---- update ---------------------------------------------------------------------------------

StatusOr<Json> GovernanceOperations::mutate(
    const std::string& k, const std::string& id,
    const std::function<Status(model::SchedulerResource&, const model::Cluster&,
                               store::WriteBatch&)>& fn,
    const std::function<Json(const model::SchedulerResource&)>& out) {
  for (int attempt = 0;; ++attempt) {
    HF_ASSIGN_OR_RETURN(auto r, find(k, id));
    const int64_t read_revision = r.revision;
    HF_ASSIGN_OR_RETURN(auto c, store_.clusterById(r.cluster_id));
    store::WriteBatch batch;
    HF_RETURN_IF_ERROR(fn(r, c, batch));
    if (batch.empty()) return out(r);
    for (auto& w : batch.scheduler_resources) {
      if (w.resource.id == r.id) w.expected_revision = read_revision;
    }
    auto committed = store_.commit(batch);
    if (committed.ok()) {
      if (options_.auto_settle) HF_RETURN_IF_ERROR(settle(r.cluster_id));
      return out(r);
    }
    // A concurrent writer won; re-reading re-checks TargetVersion against its result.
    if (!absl::IsFailedPrecondition(committed.status()) || attempt >= 20) {
      return committed.status();
    }
  }
}

namespace {

/// The common checks of an update: the version the client read, and no change in flight.
Status CheckUpdatable(const model::SchedulerResource& r, const Json& in) {
  const int target = in["TargetVersion"].get<int>();
  if (target != r.version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "TargetVersion ", target, " does not match the current version ", r.version, " of ",
        Named(r), ": it was changed since you read it. Describe it again and retry."));
  }
  if (r.status == st::kCreating || r.status == st::kUpdating || r.status == st::kDeleting) {
    return absl::FailedPreconditionError(
        absl::StrCat(Named(r), " is ", r.status, "; retry once it has settled."));
  }
  return absl::OkStatus();
}

Json UpdateResult(const model::SchedulerResource& r) {
  return Json{{absl::StrCat(r.kind, "Arn"), r.arn},
              {absl::StrCat(r.kind, "Version"), r.version}};
}

}  // namespace

StatusOr<Json> GovernanceOperations::updateClusterSchedulerConfig(const Json& in) {
  if (in.contains("SchedulerConfig")) HF_RETURN_IF_ERROR(CheckSchedulerConfig(in["SchedulerConfig"]));
  return mutate(
      kind::kSchedulerConfig, Str(in, "ClusterSchedulerConfigId"),
      [&](model::SchedulerResource& r, const model::Cluster& c,
          store::WriteBatch& batch) -> Status {
        HF_RETURN_IF_ERROR(CheckUpdatable(r, in));
        if (c.status == model::cluster_status::kDeleting) {
          return absl::FailedPreconditionError(
              absl::StrCat("Cluster ", c.name, " is being deleted."));
        }
        if (in.contains("SchedulerConfig")) {
          r.body["SchedulerConfig"] = WithSchedulerDefaults(in["SchedulerConfig"]);
        }
        if (in.contains("Description")) r.body["Description"] = in["Description"];
        r.body.erase("FailureReason");
        r.version += 1;
        r.status = st::kUpdating;
        r.last_modified_time = clock_.now();
        batch.scheduler_resources.push_back({r, r.revision, false});
        batch.events.push_back(event(c.id, "Info",
                                     absl::StrCat(Named(r), " update started, version ",
                                                  r.version),
                                     r.last_modified_time));
        return absl::OkStatus();
      },
      UpdateResult);
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
        HF_RETURN_IF_ERROR(CheckUpdatable(r, in));
        if (c.status == model::cluster_status::kDeleting) {
          return absl::FailedPreconditionError(
              absl::StrCat("Cluster ", c.name, " is being deleted."));
        }
        if (in.contains("ComputeQuotaConfig")) {
          r.body["ComputeQuotaConfig"] = WithQuotaDefaults(in["ComputeQuotaConfig"]);
        }
        if (in.contains("ComputeQuotaTarget")) {
          r.body["ComputeQuotaTarget"] = WithTargetDefaults(in["ComputeQuotaTarget"]);
        }
        if (in.contains("ActivationState")) r.body["ActivationState"] = in["ActivationState"];
        if (in.contains("Description")) r.body["Description"] = in["Description"];
        r.body.erase("FailureReason");
        r.version += 1;
        r.status = st::kUpdating;
        r.last_modified_time = clock_.now();
        batch.scheduler_resources.push_back({r, r.revision, false});
        batch.events.push_back(event(c.id, "Info",
                                     absl::StrCat(Named(r), " update started, version ",
                                                  r.version),
                                     r.last_modified_time));
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

// ---- delete ---------------------------------------------------------------------------------

StatusOr<Json> GovernanceOperations::remove(const std::string& k, const std::string& id) {
  return mutate(
      k, id,
      [&](model::SchedulerResource& r, const model::Cluster& c,
          store::WriteBatch& batch) -> Status {
        if (r.status == st::kDeleting) return absl::OkStatus();  // already under way
        r.status = st::kDeleting;
        r.last_modified_time = clock_.now();
        batch.scheduler_resources.push_back({r, r.revision, false});
        batch.events.push_back(event(c.id, "Info", absl::StrCat(Named(r), " deletion started"),
                                     r.last_modified_time));
        return absl::OkStatus();
      },
      [](const model::SchedulerResource&) { return Json::object(); });
}

StatusOr<Json> GovernanceOperations::deleteClusterSchedulerConfig(const Json& in) {
  return remove(kind::kSchedulerConfig, Str(in, "ClusterSchedulerConfigId"));
}

StatusOr<Json> GovernanceOperations::deleteComputeQuota(const Json& in) {
  return remove(kind::kComputeQuota, Str(in, "ComputeQuotaId"));
}

// ---- settle ---------------------------------------------------------------------------------

Status GovernanceOperations::settle(const std::string& cluster_id) {
  for (const char* k : {kind::kSchedulerConfig, kind::kComputeQuota}) {
    HF_ASSIGN_OR_RETURN(auto all, store_.schedulerResources(k, cluster_id));
    for (auto r : all) {
      std::string done;
      store::WriteBatch batch;
      const SystemTime now = clock_.now();
      const int64_t revision = r.revision;
      if (r.status == st::kCreating) {
        r.status = st::kCreated;
        done = absl::StrCat(Named(r), " created, version ", r.version);
      } else if (r.status == st::kUpdating) {
        r.status = st::kUpdated;
        done = absl::StrCat(Named(r), " updated to version ", r.version);
      } else if (r.status == st::kDeleting) {
        done = absl::StrCat(Named(r), " deleted");
      } else {
        continue;
      }
      batch.scheduler_resources.push_back({r, revision, r.status == st::kDeleting});
      batch.events.push_back(event(r.cluster_id, "Info", done, now));
      auto committed = store_.commit(batch);
      // Changed meanwhile (its own settle follows) or its cluster went: nothing to do.
      if (!committed.ok() && !absl::IsFailedPrecondition(committed.status())) {
        return committed.status();
      }
    }
  }
  return absl::OkStatus();
}

// ---- list -----------------------------------------------------------------------------------

StatusOr<Json> GovernanceOperations::list(const std::string& k, const Json& in) {
  const std::string cluster_arn = Str(in, "ClusterArn");
  std::string cluster_id;
  if (!cluster_arn.empty()) {
    auto c = store_.cluster(cluster_arn);
    if (!c.ok() || c->arn != cluster_arn) {
      if (!c.ok() && !absl::IsNotFound(c.status())) return c.status();
      return Json{{absl::StrCat(k, "Summaries"), Json::array()}};
    }
    cluster_id = c->id;
  }
  HF_ASSIGN_OR_RETURN(auto all, store_.schedulerResources(k, cluster_id));
  const auto after = RequestTimestamp(in, "CreatedAfter");
  const auto before = RequestTimestamp(in, "CreatedBefore");
  const std::string name_contains = Str(in, "NameContains"), status = Str(in, "Status");
  const std::string sort_by = in.value("SortBy", "CreationTime");
  const bool descending = in.value("SortOrder", "Descending") == "Descending";
  const int limit = in.value("MaxResults", 10);

  auto key_of = [&](const model::SchedulerResource& r) -> Json {
    if (sort_by == "Name") return r.name;
    if (sort_by == "Status") return r.status;
    if (sort_by == "ClusterArn") return r.body.value("ClusterArn", "");
    return ToEpochSeconds(r.creation_time);
  };
  // Strict weak order of (key, id) in the requested direction.
  auto before_in_order = [&](const Json& ka, const std::string& ia, const Json& kb,
                             const std::string& ib) {
    if (ka != kb) return descending ? kb < ka : ka < kb;
    return descending ? ib < ia : ia < ib;
  };

  std::optional<Json> start;
  if (const std::string token = Str(in, "NextToken"); !token.empty()) {
    start = Unhex(token);
    const bool numeric = sort_by == "CreationTime";
    if (!start || ((*start)["k"].is_number() != numeric)) {
      return absl::InvalidArgumentError("Invalid pagination token (NextToken).");
    }
  }
  std::vector<model::SchedulerResource> rows;
  for (auto& r : all) {
    if (after && r.creation_time <= *after) continue;
    if (before && r.creation_time >= *before) continue;
    if (!name_contains.empty() && !absl::StrContains(r.name, name_contains)) continue;
    if (!status.empty() && r.status != status) continue;
    if (start && !before_in_order((*start)["k"], (*start)["i"].get<std::string>(), key_of(r),
                                  r.id)) {
      continue;
    }
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return before_in_order(key_of(a), a.id, key_of(b), b.id);
  });
  Json summaries = Json::array();
  std::string next;
  for (const auto& r : rows) {
    if (static_cast<int>(summaries.size()) == limit) {
      const auto& last = rows[limit - 1];
      next = Hex(Json{{"k", key_of(last)}, {"i", last.id}}.dump());
      break;
    }
    Json s = Common(r);
    if (k == kind::kComputeQuota) {
      for (const char* key : {"ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState"}) {
        if (r.body.contains(key)) s[key] = r.body[key];
      }
    }
    summaries.push_back(std::move(s));
  }
  Json out = {{absl::StrCat(k, "Summaries"), std::move(summaries)}};
  if (!next.empty()) out["NextToken"] = next;
  return out;
}

StatusOr<Json> GovernanceOperations::listClusterSchedulerConfigs(const Json& in) {
  return list(kind::kSchedulerConfig, in);
}

StatusOr<Json> GovernanceOperations::listComputeQuotas(const Json& in) {
  return list(kind::kComputeQuota, in);
}

}  // namespace hf::api
