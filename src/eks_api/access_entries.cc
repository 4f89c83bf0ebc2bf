// EKS access entries and access policies: CreateAccessEntry, DescribeAccessEntry,
// ListAccessEntries, DeleteAccessEntry, AssociateAccessPolicy, DisassociateAccessPolicy,
// ListAssociatedAccessPolicies, ListAccessPolicies.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/eks/eks_operations.h"

namespace hf::eks {

using nlohmann::json;
using store::EksAccessEntry;

namespace {

Status EntryNotFound(const std::string& principal) {
  return WithAwsErrorType(
      absl::NotFoundError(absl::StrCat(
          "The specified principalArn could not be found: ", principal, ".")),
      "ResourceNotFoundException");
}

Status Conflict(const std::string& what) {
  return WithAwsErrorType(
      absl::FailedPreconditionError(absl::StrCat(what, " changed meanwhile; retry.")),
      "InvalidRequestException");
}

json AssociationJson(const store::EksPolicyAssociation& p) {
  json scope = {{"type", p.scope_type}};
  if (p.scope_type == "namespace") scope["namespaces"] = p.namespaces;
  return {{"policyArn", p.policy_arn},
          {"accessScope", scope},
          {"associatedAt", ToEpochSeconds(p.associated_at)},
          {"modifiedAt", ToEpochSeconds(p.modified_at)}};
}

}  // namespace

json AccessEntryJson(const EksAccessEntry& e) {
  return {{"clusterName", e.cluster},
          {"principalArn", e.principal_arn},
          {"kubernetesGroups", e.kubernetes_groups},
          {"accessEntryArn", e.arn},
          {"createdAt", ToEpochSeconds(e.created_at)},
          {"modifiedAt", ToEpochSeconds(e.modified_at)},
          {"tags", e.tags},
          {"username", e.username.empty() ? e.principal_arn : e.username},
          {"type", e.type}};
}

std::string EksOperations::accessEntryArn(const std::string& cluster,
                                          const std::string& principal_arn) {
  // EKS's form: access-entry/<cluster>/<role|user>/<account>/<name>/<id>.
  std::string kind = "principal", account = config_.account_id, name = "unknown";
  std::vector<std::string> parts = absl::StrSplit(AbslView(principal_arn), ':');
  if (parts.size() >= 6) {
    account = parts[4].empty() ? account : parts[4];
    const std::string& resource = parts[5];
    const size_t slash = resource.find('/');
    if (slash != std::string::npos) {
      kind = resource.substr(0, slash);
      name = resource.substr(resource.rfind('/') + 1);
    }
  }
  return absl::StrCat("arn:aws:eks:", config_.region, ":", config_.account_id,
                      ":access-entry/", cluster, "/", kind, "/", account, "/", name, "/",
                      ids_.uuid());
}

StatusOr<store::EksCluster> EksOperations::entryCluster(const std::string& name) {
  auto c = store_.eksCluster(name);
  if (!c.ok() || c->name != name) {
    if (!c.ok() && c.status().code() != absl::StatusCode::kNotFound) return c.status();
    return WithAwsErrorType(
        absl::NotFoundError(absl::StrCat("No cluster found for name: ", name, ".")),
        "ResourceNotFoundException");
  }
  if (c->auth_mode == store::EksAuthMode::kConfigMap) {
    return WithAwsErrorType(
        absl::InvalidArgumentError(
            "The cluster's authentication mode must be set to one of [API, "
            "API_AND_CONFIG_MAP] to perform this operation."),
        "InvalidRequestException");
  }
  return c;
}

StatusOr<EksAccessEntry> EksOperations::namedAccessEntry(const json& in) {
  const std::string cluster = in["clusterName"].get<std::string>();
  const std::string principal = in["principalArn"].get<std::string>();
  HF_RETURN_IF_ERROR(entryCluster(cluster).status());
  auto e = store_.eksAccessEntry(cluster, principal);
  if (!e.ok()) return EntryNotFound(principal);
  return e;
}

StatusOr<EksAccessEntry> EksOperations::changeAccessEntry(
    const json& in, const std::function<Status(EksAccessEntry&)>& change) {
  // A few tries: concurrent calls on one entry (e.g. several policies associated at once)
  // each read it and commit at its revision; the losers redo their change on the new one.
  for (int attempt = 0; attempt < 5; ++attempt) {
    HF_ASSIGN_OR_RETURN(EksAccessEntry e, namedAccessEntry(in));
    HF_RETURN_IF_ERROR(change(e));
    store::WriteBatch batch;
    batch.eks_access_entries.push_back({e, e.revision, false});
    if (!store_.commit(batch).ok()) continue;
    if (on_change_) on_change_(e.cluster);
    return e;
  }
  return Conflict("The access entry");
}

Status EksOperations::commitAccessEntry(const EksAccessEntry& e, bool erase) {
  store::WriteBatch batch;
  batch.eks_access_entries.push_back({e, e.revision, erase});
  if (auto rev = store_.commit(batch); !rev.ok()) return Conflict("The access entry");
  if (on_change_) on_change_(e.cluster);
  return absl::OkStatus();
}

StatusOr<json> EksOperations::createAccessEntry(const json& in) {
  const std::string cluster = in["clusterName"].get<std::string>();
  HF_RETURN_IF_ERROR(entryCluster(cluster).status());
  EksAccessEntry e;
  e.cluster = cluster;
  e.principal_arn = in["principalArn"].get<std::string>();
  if (!e.principal_arn.starts_with("arn:aws:iam::")) {
    return WithAwsErrorType(
        absl::InvalidArgumentError(absl::StrCat(
            "The principalArn parameter format is not valid: ", e.principal_arn)),
        "InvalidParameterException");
  }
  if (in.contains("kubernetesGroups")) {
    e.kubernetes_groups = in["kubernetesGroups"].get<std::vector<std::string>>();
  }
  for (const std::string& g : e.kubernetes_groups) {
    if (g.starts_with("system:")) {
      return WithAwsErrorType(
          absl::InvalidArgumentError(absl::StrCat(
              "The kubernetesGroups parameter cannot contain '", g,
              "': group names cannot start with system:.")),
          "InvalidParameterException");
    }
  }
  e.username = in.value("username", "");
  // EKS's rule (user guide, "Create access entries"): these prefixes are Kubernetes' and
  // AWS's own; "system:kube-controller-manager" would get that component's RBAC.
  for (const char* reserved : {"system:", "eks:", "aws:", "amazon:", "iam:"}) {
    if (e.username.starts_with(reserved)) {
      return WithAwsErrorType(
          absl::InvalidArgumentError(absl::StrCat(
              "The username parameter cannot be '", e.username, "': usernames cannot start with ",
              reserved, ".")),
          "InvalidParameterException");
    }
  }
  e.type = in.value("type", "STANDARD");
  if (e.type != "STANDARD") {
    return WithAwsErrorType(
        absl::InvalidArgumentError(absl::StrCat(
            "Hyperfleet serves access entries of type STANDARD only ('type' is ", e.type, ").")),
        "InvalidParameterException");
  }
  if (store_.eksAccessEntry(cluster, e.principal_arn).ok()) {
    return WithAwsErrorType(
        absl::AlreadyExistsError(
            "The specified access entry resource is already in use on this cluster."),
        "ResourceInUseException");
  }
  e.arn = accessEntryArn(cluster, e.principal_arn);
  e.created_at = e.modified_at = clock_.now();
  if (in.contains("tags")) e.tags = in["tags"].get<std::map<std::string, std::string>>();
  store::WriteBatch batch;
  batch.eks_access_entries.push_back({e, store::kMustNotExist, false});
  if (auto rev = store_.commit(batch); !rev.ok()) return Conflict("The cluster");
  if (on_change_) on_change_(cluster);
  return json{{"accessEntry", AccessEntryJson(e)}};
}

StatusOr<json> EksOperations::describeAccessEntry(const json& in) {
  HF_ASSIGN_OR_RETURN(EksAccessEntry e, namedAccessEntry(in));
  return json{{"accessEntry", AccessEntryJson(e)}};
}

StatusOr<json> EksOperations::listAccessEntries(const json& in) {
  const std::string cluster = in["clusterName"].get<std::string>();
  HF_RETURN_IF_ERROR(entryCluster(cluster).status());
  HF_ASSIGN_OR_RETURN(std::vector<EksAccessEntry> all, store_.eksAccessEntries(cluster));
  const std::string policy = in.value("associatedPolicyArn", "");
  std::vector<std::string> principals;
  for (const EksAccessEntry& e : all) {
    const bool has = std::any_of(e.policies.begin(), e.policies.end(),
                                 [&](const auto& p) { return p.policy_arn == policy; });
    if (policy.empty() || has) principals.push_back(e.principal_arn);
  }
  std::sort(principals.begin(), principals.end());
  HF_ASSIGN_OR_RETURN(auto page, PageOf(principals, in.value("maxResults", 100),
                                        in.value("nextToken", "")));
  json out = {{"accessEntries", page.first}};
  if (!page.second.empty()) out["nextToken"] = page.second;
  return out;
}

StatusOr<json> EksOperations::deleteAccessEntry(const json& in) {
  HF_ASSIGN_OR_RETURN(EksAccessEntry e, namedAccessEntry(in));
  HF_RETURN_IF_ERROR(commitAccessEntry(e, true));
  return json::object();
}

StatusOr<json> EksOperations::associatePolicy(const json& in) {
  const std::string cluster = in["clusterName"].get<std::string>();
  const std::string principal = in["principalArn"].get<std::string>();
  const std::string policy = in["policyArn"].get<std::string>();
  store::EksPolicyAssociation a;
  auto associate = [&](EksAccessEntry& e) -> Status {
    if (AccessPolicyOfArn(policy) == nullptr) {
      return WithAwsErrorType(
          absl::InvalidArgumentError(absl::StrCat(
              "The policyArn parameter is not an EKS access policy: ", policy)),
          "InvalidParameterException");
    }
    const json& scope = in["accessScope"];
    a = store::EksPolicyAssociation{};
    a.policy_arn = policy;
    a.scope_type = scope.value("type", "cluster");
    if (scope.contains("namespaces")) {
      a.namespaces = scope["namespaces"].get<std::vector<std::string>>();
    }
    if (a.scope_type == "namespace" && a.namespaces.empty()) {
      return WithAwsErrorType(
          absl::InvalidArgumentError(
              "accessScope.namespaces is required when accessScope.type is namespace."),
          "InvalidParameterException");
    }
    if (a.scope_type == "cluster") a.namespaces.clear();
    a.associated_at = a.modified_at = clock_.now();
    auto same = std::find_if(e.policies.begin(), e.policies.end(),
                             [&](const auto& p) { return p.policy_arn == policy; });
    if (same != e.policies.end()) {
      a.associated_at = same->associated_at;  // a re-association modifies the scope
      *same = a;
    } else {
      e.policies.push_back(a);
    }
    e.modified_at = a.modified_at;
    return absl::OkStatus();
  };
  HF_RETURN_IF_ERROR(changeAccessEntry(in, associate).status());
  return json{{"clusterName", cluster},
              {"principalArn", principal},
              {"associatedAccessPolicy", AssociationJson(a)}};
}

StatusOr<json> EksOperations::disassociatePolicy(const json& in) {
  const std::string principal = in["principalArn"].get<std::string>();
  const std::string policy = in["policyArn"].get<std::string>();
  auto disassociate = [&](EksAccessEntry& e) -> Status {
    auto it = std::find_if(e.policies.begin(), e.policies.end(),
                           [&](const auto& p) { return p.policy_arn == policy; });
    if (it == e.policies.end()) {
      return WithAwsErrorType(
          absl::NotFoundError(absl::StrCat(
              "The policy ", policy, " is not associated with ", principal, ".")),
          "ResourceNotFoundException");
    }
    e.policies.erase(it);
    e.modified_at = clock_.now();
    return absl::OkStatus();
  };
  HF_RETURN_IF_ERROR(changeAccessEntry(in, disassociate).status());
  return json::object();
}

StatusOr<json> EksOperations::listAssociatedPolicies(const json& in) {
  const std::string cluster = in["clusterName"].get<std::string>();
  const std::string principal = in["principalArn"].get<std::string>();
  HF_ASSIGN_OR_RETURN(EksAccessEntry e, namedAccessEntry(in));
  std::vector<std::string> arns;
  for (const auto& p : e.policies) arns.push_back(p.policy_arn);
  std::sort(arns.begin(), arns.end());
  HF_ASSIGN_OR_RETURN(auto page,
                      PageOf(arns, in.value("maxResults", 100), in.value("nextToken", "")));
  json list = json::array();
  for (const std::string& arn : page.first) {
    for (const auto& p : e.policies) {
      if (p.policy_arn == arn) list.push_back(AssociationJson(p));
    }
  }
  json out = {{"clusterName", cluster},
              {"principalArn", principal},
              {"associatedAccessPolicies", list}};
  if (!page.second.empty()) out["nextToken"] = page.second;
  return out;
}

StatusOr<json> EksOperations::listAccessPolicies(const json& in) {
  std::vector<std::string> names;
  for (const AccessPolicy& p : AccessPolicies()) names.emplace_back(p.name);
  HF_ASSIGN_OR_RETURN(auto page,
                      PageOf(names, in.value("maxResults", 100), in.value("nextToken", "")));
  json list = json::array();
  for (const std::string& n : page.first) {
    list.push_back({{"name", n}, {"arn", AccessPolicyArn(n)}});
  }
  json out = {{"accessPolicies", list}};
  if (!page.second.empty()) out["nextToken"] = page.second;
  return out;
}

}  // namespace hf::eks
