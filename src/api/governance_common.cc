#include "governance_common.h"

#include "absl/strings/str_cat.h"

namespace hf::api::governance_ops {

namespace kind = model::governance_kind;
namespace st = model::scheduler_status;

Status Invalid(const std::string& path, const std::string& value, const std::string& rule) {
  return absl::InvalidArgumentError(absl::StrCat(
      "1 validation error detected: Value '", value, "' at '", path,
      "' failed to satisfy constraint: ", rule));
}

std::string Str(const Json& in, const char* key) {
  auto it = in.find(key);
  return it != in.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string Shown(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string Noun(const std::string& k) {
  return k == kind::kSchedulerConfig ? "cluster policy" : "compute quota";
}

std::string Named(const model::SchedulerResource& r) {
  return absl::StrCat(Noun(r.kind), " ", r.name, " (", r.kind, " ", r.id, ")");
}

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

Status CheckUpdatable(const model::SchedulerResource& r, const model::Cluster& c,
                      const Json& in) {
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
  if (c.status == model::cluster_status::kDeleting) {
    return absl::FailedPreconditionError(absl::StrCat("Cluster ", c.name, " is being deleted."));
  }
  return absl::OkStatus();
}

Json UpdateResult(const model::SchedulerResource& r) {
  return Json{{absl::StrCat(r.kind, "Arn"), r.arn},
              {absl::StrCat(r.kind, "Version"), r.version}};
}

}  // namespace hf::api::governance_ops
