// EKS clusters and tags: CreateCluster, DescribeCluster, ListClusters, DeleteCluster,
// TagResource, UntagResource, ListTagsForResource (access entries: access_entries.cc).
#include "hyperfleet/eks/eks_operations.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/eks/control_plane.h"
#include "hyperfleet/store/page_token.h"

namespace hf::eks {

using nlohmann::json;
using store::EksCluster;
using store::EksClusterStatus;

namespace {

constexpr size_t kMaxTagsPerResource = 50;

Status ClusterNotFound(const std::string& name) {
  return WithAwsErrorType(
      absl::NotFoundError(absl::StrCat("No cluster found for name: ", name, ".")),
      "ResourceNotFoundException");
}

Status InvalidParameter(std::string message) {
  return WithAwsErrorType(absl::InvalidArgumentError(message), "InvalidParameterException");
}

/// OK when `cidr` is a Service range EKS accepts (the model's documentation of
/// serviceIpv4Cidr): "a.b.c.d/n", n 12 to 24, inside 10.0.0.0/8, 172.16.0.0/12 or
/// 192.168.0.0/16, with no host bits set; else InvalidParameterException naming the member.
/// The control plane could not start on anything else, and the cluster would stay CREATING.
Status CheckServiceCidr(const std::string& cidr) {
  const auto range = ParseIpv4Prefix(cidr);
  const bool in_private =
      range && (PrefixesOverlap(range->first, range->second, 0x0a000000, 8) ||
                PrefixesOverlap(range->first, range->second, 0xac100000, 12) ||
                PrefixesOverlap(range->first, range->second, 0xc0a80000, 16));
  // Written as its range is (no host bits): the text goes to the apiserver's flag as it is.
  const bool canonical =
      range && cidr == absl::StrCat(Ipv4Text(range->first), "/", range->second);
  if (canonical && range->second >= 12 && range->second <= 24 && in_private) {
    return absl::OkStatus();  // /12 or longer: overlapping a private block means inside it
  }
  return InvalidParameter(absl::StrCat(
      "Value '", cidr, "' at 'kubernetesNetworkConfig.serviceIpv4Cidr' is not a CIDR block "
      "between /12 and /24 within 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16."));
}

std::vector<std::string> StringList(const json& in, const char* key) {
  std::vector<std::string> out;
  if (auto it = in.find(key); it != in.end() && it->is_array()) {
    for (const json& v : *it) out.push_back(v.get<std::string>());
  }
  return out;
}

/// A store miss as the operation's error, other errors as they are.
Status OrClusterNotFound(const Status& s, const std::string& name) {
  return s.code() == absl::StatusCode::kNotFound ? ClusterNotFound(name) : s;
}

}  // namespace

const std::vector<AccessPolicy>& AccessPolicies() {
  static const std::vector<AccessPolicy> kPolicies = {
      {"AmazonEKSAdminPolicy", kAdminPolicyGroup},
      {"AmazonEKSClusterAdminPolicy", "system:masters"},
      {"AmazonEKSEditPolicy", kEditPolicyGroup},
      {"AmazonEKSViewPolicy", kViewPolicyGroup},
  };
  return kPolicies;
}

std::string AccessPolicyArn(std::string_view name) {
  return absl::StrCat("arn:aws:eks::aws:cluster-access-policy/", AbslView(name));
}

const AccessPolicy* AccessPolicyOfArn(std::string_view arn) {
  for (const AccessPolicy& p : AccessPolicies()) {
    if (AccessPolicyArn(p.name) == arn) return &p;
  }
  return nullptr;
}

std::string PrincipalArnOf(std::string_view account_id, std::string_view access_key_id) {
  return absl::StrCat("arn:aws:iam::", AbslView(account_id), ":user/",
                      AbslView(access_key_id));
}

StatusOr<std::pair<std::vector<std::string>, std::string>> PageOf(
    const std::vector<std::string>& keys, int max_results, const std::string& next_token) {
  auto start = keys.begin();
  if (!next_token.empty()) {
    auto token = store::DecodePageToken(next_token, /*numeric_key=*/false);
    if (!token.ok()) return InvalidParameter("The nextToken is not valid.");
    start = std::upper_bound(keys.begin(), keys.end(), token->key.get<std::string>());
  }
  std::pair<std::vector<std::string>, std::string> page;
  const auto left = static_cast<size_t>(keys.end() - start);
  const size_t n = std::min(left, static_cast<size_t>(std::max(max_results, 1)));
  page.first.assign(start, start + static_cast<long>(n));
  if (n < left) page.second = store::EncodePageToken(page.first.back(), "");
  return page;
}

EksOperations::EksOperations(store::Store& store, const Clock& clock, IdSource& ids,
                             EksConfig config, ChangeSink on_change, InUseCheck in_use)
    : store_(store),
      clock_(clock),
      ids_(ids),
      config_(std::move(config)),
      on_change_(std::move(on_change)),
      in_use_(std::move(in_use)) {}

const model::ServiceModel& EksOperations::model() const {
  return *model::ServiceModel::EmbeddedEks();
}

StatusOr<json> EksOperations::call(std::string_view op, const json& input) {
  return callAs(op, input, "");
}

StatusOr<json> EksOperations::callAs(std::string_view op, const json& in,
                                     std::string_view access_key_id) {
  if (op == "CreateCluster") return createCluster(in, access_key_id);
  if (op == "DescribeCluster") return describeCluster(in);
  if (op == "ListClusters") return listClusters(in);
  if (op == "DeleteCluster") return deleteCluster(in);
  if (op == "TagResource") return tagResource(in);
  if (op == "UntagResource") return untagResource(in);
  if (op == "ListTagsForResource") return listTags(in);
  if (op == "CreateAccessEntry") return createAccessEntry(in);
  if (op == "DescribeAccessEntry") return describeAccessEntry(in);
  if (op == "ListAccessEntries") return listAccessEntries(in);
  if (op == "DeleteAccessEntry") return deleteAccessEntry(in);
  if (op == "AssociateAccessPolicy") return associatePolicy(in);
  if (op == "DisassociateAccessPolicy") return disassociatePolicy(in);
  if (op == "ListAssociatedAccessPolicies") return listAssociatedPolicies(in);
  if (op == "ListAccessPolicies") return listAccessPolicies(in);
  return absl::UnimplementedError(
      absl::StrCat("Hyperfleet does not implement ", AbslView(op), " yet."));
}

json EksOperations::ClusterJson(const EksCluster& c) {
  const store::EksVpcConfig& v = c.vpc;
  json j = {
      {"name", c.name},
      {"arn", c.arn},
      {"createdAt", ToEpochSeconds(c.created_at)},
      {"version", c.version},
      {"roleArn", c.role_arn},
      {"resourcesVpcConfig",
       {{"subnetIds", v.subnet_ids},
        {"securityGroupIds", v.security_group_ids},
        {"clusterSecurityGroupId", v.cluster_security_group_id},
        {"vpcId", v.vpc_id},
        {"endpointPublicAccess", v.endpoint_public_access},
        {"endpointPrivateAccess", v.endpoint_private_access},
        {"publicAccessCidrs", v.public_access_cidrs}}},
      {"kubernetesNetworkConfig", {{"serviceIpv4Cidr", c.service_cidr}, {"ipFamily", "ipv4"}}},
      {"status", std::string(store::EksClusterStatusName(c.status))},
      {"tags", c.tags},
      {"accessConfig",
       {{"bootstrapClusterCreatorAdminPermissions", c.bootstrap_admin},
        {"authenticationMode", std::string(store::EksAuthModeName(c.auth_mode))}}},
  };
  if (!c.endpoint.empty()) j["endpoint"] = c.endpoint;
  if (!c.ca_pem.empty()) j["certificateAuthority"] = {{"data", absl::Base64Escape(c.ca_pem)}};
  // Which Kubernetes really serves the cluster (docs/kubernetes.md): known once it answers.
  if (!c.served_version.empty()) j["platformVersion"] = "hyperfleet-" + c.served_version;
  return j;
}

StatusOr<json> EksOperations::createCluster(const json& in, std::string_view caller) {
  EksCluster c;
  c.name = in["name"].get<std::string>();
  c.version = in.value("version", std::string(DefaultVersion()));
  const auto& versions = SupportedVersions();
  if (std::find(versions.begin(), versions.end(), c.version) == versions.end()) {
    return InvalidParameter(absl::StrCat("unsupported Kubernetes version '", c.version,
                                         "' at 'version': Hyperfleet supports ",
                                         absl::StrJoin(versions, ", "), "."));
  }
  if (store_.eksCluster(c.name).ok()) {
    return WithAwsErrorType(
        absl::AlreadyExistsError(absl::StrCat("Cluster already exists with name: ", c.name)),
        "ResourceInUseException");
  }
  HF_ASSIGN_OR_RETURN(const auto existing, store_.eksClusters());
  if (static_cast<int>(existing.size()) >= config_.max_clusters) {
    return WithAwsErrorType(
        absl::ResourceExhaustedError(absl::StrCat(
            "Cluster limit exceeded: this endpoint allows ", config_.max_clusters,
            " EKS clusters at once (server flag --max-eks-clusters); delete one first.")),
        "ResourceLimitExceededException");
  }
  c.arn = absl::StrCat("arn:aws:eks:", config_.region, ":", config_.account_id, ":cluster/",
                       c.name);
  c.role_arn = in["roleArn"].get<std::string>();
  const json vpc = in["resourcesVpcConfig"];
  c.vpc.subnet_ids = StringList(vpc, "subnetIds");
  c.vpc.security_group_ids = StringList(vpc, "securityGroupIds");
  c.vpc.endpoint_public_access = vpc.value("endpointPublicAccess", true);
  c.vpc.endpoint_private_access = vpc.value("endpointPrivateAccess", false);
  c.vpc.public_access_cidrs = StringList(vpc, "publicAccessCidrs");
  if (c.vpc.public_access_cidrs.empty()) c.vpc.public_access_cidrs = {"0.0.0.0/0"};
  // Synthetic, stable per cluster: there is no VPC; both come from one fresh id.
  const std::string hex = ids_.instanceId().substr(2);
  c.vpc.vpc_id = "vpc-" + hex;
  c.vpc.cluster_security_group_id = "sg-" + hex;
  const json net = in.value("kubernetesNetworkConfig", json::object());
  c.service_cidr = net.value("serviceIpv4Cidr", std::string("10.100.0.0/16"));
  HF_RETURN_IF_ERROR(CheckServiceCidr(c.service_cidr));
  if (net.value("ipFamily", std::string("ipv4")) != "ipv4") {
    return InvalidParameter(
        "Hyperfleet serves ipFamily ipv4 only ('kubernetesNetworkConfig.ipFamily').");
  }
  const json access = in.value("accessConfig", json::object());
  // The API's default when omitted is CONFIG_MAP (the model's documentation says so).
  c.auth_mode = store::ParseEksAuthMode(access.value("authenticationMode", "CONFIG_MAP"))
                    .value_or(store::EksAuthMode::kConfigMap);
  c.bootstrap_admin = access.value("bootstrapClusterCreatorAdminPermissions", true);
  if (c.auth_mode == store::EksAuthMode::kConfigMap && !c.bootstrap_admin) {
    // EKS's own rule (its answer, word for word): without access entries nobody could get in.
    return InvalidParameter(
        "bootstrapClusterCreatorAdminPermissions must be true if cluster authentication mode is "
        "set to CONFIG_MAP");
  }
  c.status = EksClusterStatus::kCreating;
  c.created_at = clock_.now();
  if (auto tags = in.find("tags"); tags != in.end()) {
    c.tags = tags->get<std::map<std::string, std::string>>();
  }
  store::WriteBatch batch;
  batch.eks_clusters.push_back({c, store::kMustNotExist, false});
  if (c.bootstrap_admin && !caller.empty()) {
    // The creator's admin entry: kept for every mode, so the token webhook maps the creator
    // on a CONFIG_MAP cluster too (as EKS does for its creator).
    store::EksAccessEntry e;
    e.cluster = c.name;
    e.principal_arn = PrincipalArnOf(config_.account_id, caller);
    e.arn = accessEntryArn(c.name, e.principal_arn);
    e.created_at = e.modified_at = c.created_at;
    e.policies.push_back({AccessPolicyArn("AmazonEKSClusterAdminPolicy"), "cluster", {},
                          c.created_at, c.created_at});
    batch.eks_access_entries.push_back({e, store::kMustNotExist, false});
  }
  auto rev = store_.commit(batch);
  if (!rev.ok()) {
    if (rev.status().code() == absl::StatusCode::kFailedPrecondition) {
      return WithAwsErrorType(
          absl::AlreadyExistsError(absl::StrCat("Cluster already exists with name: ", c.name)),
          "ResourceInUseException");
    }
    return rev.status();
  }
  if (on_change_) on_change_(c.name);
  return json{{"cluster", ClusterJson(c)}};
}

StatusOr<json> EksOperations::describeCluster(const json& in) {
  const std::string name = in["name"].get<std::string>();
  auto c = store_.eksCluster(name);
  if (!c.ok()) return OrClusterNotFound(c.status(), name);
  if (c->name != name) return ClusterNotFound(name);  // found by ARN: names only here
  return json{{"cluster", ClusterJson(*c)}};
}

StatusOr<json> EksOperations::listClusters(const json& in) {
  HF_ASSIGN_OR_RETURN(std::vector<EksCluster> all, store_.eksClusters());
  std::vector<std::string> names;
  for (const EksCluster& c : all) names.push_back(c.name);
  HF_ASSIGN_OR_RETURN(auto page,
                      PageOf(names, in.value("maxResults", 100), in.value("nextToken", "")));
  json out = {{"clusters", page.first}};
  if (!page.second.empty()) out["nextToken"] = page.second;
  return out;
}

StatusOr<json> EksOperations::deleteCluster(const json& in) {
  const std::string name = in["name"].get<std::string>();
  // A few tries: the controller may commit the same cluster (CREATING -> ACTIVE) meanwhile.
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto c = store_.eksCluster(name);
    if (!c.ok()) return OrClusterNotFound(c.status(), name);
    if (c->name != name) return ClusterNotFound(name);
    if (in_use_) {
      if (auto user = in_use_(c->arn)) {
        return WithAwsErrorType(
            absl::FailedPreconditionError(absl::StrCat(
                "Cluster ", name, " is in use by HyperPod cluster ", *user,
                ". Delete that cluster first.")),
            "ResourceInUseException");
      }
    }
    if (c->status == EksClusterStatus::kDeleting) return json{{"cluster", ClusterJson(*c)}};
    c->status = EksClusterStatus::kDeleting;
    store::WriteBatch batch;
    batch.eks_clusters.push_back({*c, c->revision, false});
    if (!store_.commit(batch).ok()) continue;
    if (on_change_) on_change_(name);
    return json{{"cluster", ClusterJson(*c)}};
  }
  return WithAwsErrorType(
      absl::FailedPreconditionError(absl::StrCat(
          "Cluster ", name, " kept changing while it was being deleted; retry.")),
      "ResourceInUseException");
}

Status EksOperations::changeTags(
    const std::string& arn,
    const std::function<void(std::map<std::string, std::string>&)>& change) {
  // A few tries: another TagResource, or the controller's status commit, may change the
  // same row between the read and this commit (compare-and-set on its revision).
  for (int attempt = 0; attempt < 5; ++attempt) {
    store::WriteBatch batch;
    std::map<std::string, std::string>* tags = nullptr;
    if (auto c = store_.eksCluster(arn); c.ok() && c->arn == arn) {
      batch.eks_clusters.push_back({*c, c->revision, false});
      tags = &batch.eks_clusters.back().cluster.tags;
    } else if (auto e = store_.eksAccessEntryByArn(arn); e.ok()) {
      batch.eks_access_entries.push_back({*e, e->revision, false});
      tags = &batch.eks_access_entries.back().entry.tags;
    } else {
      return WithAwsErrorType(
          absl::NotFoundError(absl::StrCat("Resource not found: ", arn)),
          "NotFoundException");
    }
    change(*tags);
    if (tags->size() > kMaxTagsPerResource) {  // EKS's quota: 50 tags per resource
      return WithAwsErrorType(
          absl::InvalidArgumentError(absl::StrCat(
              "The resource ", arn, " would have ", tags->size(), " tags; the limit for 'tags' is ",
              kMaxTagsPerResource, ".")),
          "BadRequestException");
    }
    if (store_.commit(batch).ok()) return absl::OkStatus();
  }
  return WithAwsErrorType(
      absl::FailedPreconditionError(absl::StrCat(
          "The resource ", arn, " changed while it was being tagged; retry.")),
      "BadRequestException");
}

StatusOr<json> EksOperations::tagResource(const json& in) {
  const auto tags = in["tags"].get<std::map<std::string, std::string>>();
  HF_RETURN_IF_ERROR(changeTags(in["resourceArn"].get<std::string>(), [&](auto& have) {
    for (const auto& [k, v] : tags) have[k] = v;
  }));
  return json::object();
}

StatusOr<json> EksOperations::untagResource(const json& in) {
  const auto keys = StringList(in, "tagKeys");
  HF_RETURN_IF_ERROR(changeTags(in["resourceArn"].get<std::string>(), [&](auto& have) {
    for (const std::string& k : keys) have.erase(k);
  }));
  return json::object();
}

StatusOr<json> EksOperations::listTags(const json& in) {
  const std::string arn = in["resourceArn"].get<std::string>();
  if (auto c = store_.eksCluster(arn); c.ok() && c->arn == arn) return json{{"tags", c->tags}};
  if (auto e = store_.eksAccessEntryByArn(arn); e.ok()) return json{{"tags", e->tags}};
  return WithAwsErrorType(
      absl::NotFoundError(absl::StrCat("Resource not found: ", arn)),
      "NotFoundException");
}

}  // namespace hf::eks
