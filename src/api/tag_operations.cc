#include "hyperfleet/api/tag_operations.h"

#include <map>
#include <set>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/model/governance.h"

namespace hf::api {
namespace {

using Json = nlohmann::json;

std::string Str(const Json& in, const char* key) {
  auto it = in.find(key);
  return it != in.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// A ValidationException in the model's wording for a rule on one tag key at `path`.
Status InvalidKey(const std::string& path, const std::string& key, const char* rule) {
  return absl::InvalidArgumentError(absl::StrCat("1 validation error detected: Value '", key,
                                                 "' at '", path,
                                                 "' failed to satisfy constraint: ", rule));
}

/// AWS reserves tag keys with this prefix for its own tags.
constexpr const char* kReservedPrefix = "aws:";
constexpr const char* kReservedRule =
    "Tag keys starting with 'aws:' are reserved for AWS use.";

Json TagsJson(const std::vector<model::Tag>& tags) {
  Json out = Json::array();
  for (const auto& t : tags) out.push_back({{"Key", t.key}, {"Value", t.value}});
  return out;
}

/// The object kind of an ARN's resource type, with the noun that messages use; null for a
/// type that Hyperfleet does not tag.
struct TaggableType {
  const char* arn_type;         // between the account and the '/'
  const char* governance_kind;  // model::governance_kind::*, or null for a cluster
  const char* noun;
};
constexpr TaggableType kTaggableTypes[] = {
    {"cluster", nullptr, "Cluster"},
    {"cluster-scheduler-config", model::governance_kind::kSchedulerConfig,
     "ClusterSchedulerConfig"},
    {"compute-quota", model::governance_kind::kComputeQuota, "ComputeQuota"},
};

}  // namespace

std::vector<model::Tag> TagsFrom(const Json& tags) {
  std::vector<model::Tag> out;
  for (const auto& t : tags) out.push_back({Str(t, "Key"), Str(t, "Value")});
  return out;
}

Status CheckTagList(const Json& tags) {
  std::set<std::string> keys;
  for (size_t i = 0; i < tags.size(); ++i) {
    const std::string key = Str(tags[i], "Key");
    const std::string path = absl::StrCat("tags.", i + 1, ".member.key");
    if (absl::StartsWithIgnoreCase(key, kReservedPrefix)) {
      return InvalidKey(path, key, kReservedRule);
    }
    if (!keys.insert(key).second) {
      return InvalidKey(path, key, "Tag keys must be unique within Tags.");
    }
  }
  return absl::OkStatus();
}

Status TagOperations::resolve(const std::string& arn) {
  // arn:<partition>:sagemaker:<region>:<account>:<type>/<id> (the model's pattern holds).
  const std::vector<std::string> parts = absl::StrSplit(arn, absl::MaxSplits(':', 5));
  const std::string_view resource = parts.size() == 6 ? parts[5] : std::string_view();
  const size_t slash = resource.find('/');
  const std::string_view type = resource.substr(0, slash);
  for (const TaggableType& t : kTaggableTypes) {
    if (slash == std::string_view::npos || type != t.arn_type) continue;
    const std::string id(resource.substr(slash + 1));
    Status status;
    std::string found;  // the ARN of the object that `arn` names, when there is one
    if (t.governance_kind == nullptr) {
      auto c = store_.cluster(arn);  // by name or ARN: the ARN is compared below
      status = c.status();
      if (c.ok()) found = c->arn;
    } else {
      auto r = store_.schedulerResource(t.governance_kind, id);
      status = r.status();
      if (r.ok()) found = r->arn;
    }
    if (status.ok() && found == arn) return absl::OkStatus();
    if (!status.ok() && !absl::IsNotFound(status)) return status;
    return absl::NotFoundError(absl::StrCat(t.noun, " ", arn, " not found."));
  }
  return absl::NotFoundError(absl::StrCat(
      "Resource ", arn,
      " not found: Hyperfleet keeps tags on HyperPod clusters (cluster/), cluster scheduler "
      "configs (cluster-scheduler-config/) and compute quotas (compute-quota/)."));
}

Status TagOperations::commit(store::TagWrite write) {
  const std::string arn = write.resource_arn;
  store::WriteBatch batch;
  batch.tags.push_back(std::move(write));
  auto committed = store_.commit(batch);
  // The store refuses tags on an object that no longer exists (deleted since resolve()).
  if (!committed.ok() && absl::IsFailedPrecondition(committed.status())) {
    return absl::NotFoundError(absl::StrCat("Resource ", arn, " not found."));
  }
  return committed.status();
}

StatusOr<Json> TagOperations::addTags(const Json& in) {
  const std::string arn = Str(in, "ResourceArn");
  const Json list = in.value("Tags", Json::array());
  HF_RETURN_IF_ERROR(CheckTagList(list));
  const auto tags = TagsFrom(list);
  std::lock_guard<std::mutex> lock(write_mu_);
  HF_RETURN_IF_ERROR(resolve(arn));
  HF_ASSIGN_OR_RETURN(auto existing, store_.tags(arn));
  std::set<std::string> keys;
  for (const auto& t : existing) keys.insert(t.key);
  for (const auto& t : tags) keys.insert(t.key);
  if (keys.size() > kMaxTagsPerResource) {
    return absl::InvalidArgumentError(absl::StrCat(
        "A resource can have at most ", kMaxTagsPerResource, " tags: ", arn, " has ",
        existing.size(), " and Tags would bring it to ", keys.size(), "."));
  }
  if (!tags.empty()) HF_RETURN_IF_ERROR(commit({arn, tags, {}}));
  return Json{{"Tags", TagsJson(tags)}};
}

StatusOr<Json> TagOperations::listTags(const Json& in) {
  const std::string arn = Str(in, "ResourceArn");
  HF_RETURN_IF_ERROR(resolve(arn));
  HF_ASSIGN_OR_RETURN(auto tags, store_.tags(arn));
  // Pages by position among the keys in order; the token is the last key returned.
  const int limit = in.value("MaxResults", 50);
  const std::string after = Str(in, "NextToken");
  Json page = Json::array();
  std::string next;
  for (const auto& t : tags) {
    if (!after.empty() && t.key <= after) continue;
    if (static_cast<int>(page.size()) == limit) {
      next = page.back()["Key"];
      break;
    }
    page.push_back({{"Key", t.key}, {"Value", t.value}});
  }
  Json out = {{"Tags", std::move(page)}};
  if (!next.empty()) out["NextToken"] = next;
  return out;
}

StatusOr<Json> TagOperations::deleteTags(const Json& in) {
  const std::string arn = Str(in, "ResourceArn");
  const auto keys = in.value("TagKeys", std::vector<std::string>{});
  for (size_t i = 0; i < keys.size(); ++i) {
    if (absl::StartsWithIgnoreCase(keys[i], kReservedPrefix)) {
      return InvalidKey(absl::StrCat("tagKeys.", i + 1, ".member"), keys[i], kReservedRule);
    }
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  HF_RETURN_IF_ERROR(resolve(arn));
  HF_RETURN_IF_ERROR(commit({arn, {}, keys}));
  return Json::object();
}

}  // namespace hf::api
