// The cluster policy operations (Create/Describe/Update/Delete/ListClusterSchedulerConfig(s))
// and the rules of a SchedulerConfig; the machinery they share with the compute quotas is
// in governance_operations.cc.
#include <set>

#include "absl/strings/str_cat.h"
#include "governance_common.h"
#include "hyperfleet/api/governance_operations.h"

namespace hf::api {

using namespace governance_ops;  // NOLINT: this file's helpers
namespace kind = model::governance_kind;
namespace st = model::scheduler_status;

namespace {

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

// What Describe shows when the request left a member out.
Json WithSchedulerDefaults(Json config) {
  if (!config.is_object()) config = Json::object();
  if (!config.contains("FairShare")) config["FairShare"] = "Enabled";
  return config;
}

}  // namespace

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

StatusOr<Json> GovernanceOperations::describeClusterSchedulerConfig(const Json& in) {
  return describe(kind::kSchedulerConfig, in, "ClusterSchedulerConfigId",
                  "ClusterSchedulerConfigVersion");
}

StatusOr<Json> GovernanceOperations::updateClusterSchedulerConfig(const Json& in) {
  if (in.contains("SchedulerConfig")) HF_RETURN_IF_ERROR(CheckSchedulerConfig(in["SchedulerConfig"]));
  return mutate(
      kind::kSchedulerConfig, Str(in, "ClusterSchedulerConfigId"),
      [&](model::SchedulerResource& r, const model::Cluster& c,
          store::WriteBatch& batch) -> Status {
        HF_RETURN_IF_ERROR(CheckUpdatable(r, c, in));
        if (in.contains("SchedulerConfig")) {
          r.body["SchedulerConfig"] = WithSchedulerDefaults(in["SchedulerConfig"]);
        }
        if (in.contains("Description")) r.body["Description"] = in["Description"];
        startUpdate(r, batch);
        return absl::OkStatus();
      },
      UpdateResult);
}

StatusOr<Json> GovernanceOperations::deleteClusterSchedulerConfig(const Json& in) {
  return remove(kind::kSchedulerConfig, Str(in, "ClusterSchedulerConfigId"));
}

StatusOr<Json> GovernanceOperations::listClusterSchedulerConfigs(const Json& in) {
  return list(kind::kSchedulerConfig, in);
}

}  // namespace hf::api
