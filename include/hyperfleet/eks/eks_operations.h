#pragma once
// The EKS API subset (REST-JSON, signed for "eks", validated by the embedded EKS model:
// data/aws-models/eks/2017-11-01) on Hyperfleet's endpoint: clusters, tags and access
// entries, kept in the store (store/eks_record.h). The operations only record what is asked;
// eks::EksController brings each cluster's control plane to it (CREATING -> ACTIVE,
// DELETING -> gone). Semantics and wording as EKS answers (docs/kubernetes.md).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/api/json_service.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/store/store.h"

namespace hf::eks {

/// The Kubernetes versions CreateCluster accepts; each round-trips exactly in `version`.
/// Whatever Kubernetes really serves them is DescribeCluster's platformVersion.
inline const std::vector<std::string>& SupportedVersions() {
  static const std::vector<std::string> kVersions = {"1.28", "1.29", "1.30", "1.31",
                                                     "1.32", "1.33", "1.34"};
  return kVersions;
}
/// The version of a CreateCluster without one: the newest supported.
inline std::string_view DefaultVersion() { return SupportedVersions().back(); }

/// The AWS-managed access policies (ListAccessPolicies), and what they grant in Kubernetes.
struct AccessPolicy {
  std::string_view name;   ///< e.g. "AmazonEKSClusterAdminPolicy"
  std::string_view group;  ///< the Kubernetes group the token webhook gives its holders
};
/// The four policies, in ListAccessPolicies' order.
const std::vector<AccessPolicy>& AccessPolicies();
/// The ARN of policy `name`: "arn:aws:eks::aws:cluster-access-policy/<name>".
std::string AccessPolicyArn(std::string_view name);
/// The policy of ARN `arn`; nullptr when it is not one of AccessPolicies().
const AccessPolicy* AccessPolicyOfArn(std::string_view arn);

/// The IAM principal an access key acts as: "arn:aws:iam::<account>:user/<access key id>".
/// (Hyperfleet has no IAM: each key of the credentials file is one user of the account.)
std::string PrincipalArnOf(std::string_view account_id, std::string_view access_key_id);

/// Where the EKS API lives.
struct EksConfig {
  std::string region = "us-west-2";
  std::string account_id = "123456789012";  ///< the one the SageMaker side's ARNs use
  /// EKS clusters at once (DELETING ones count until gone); CreateCluster beyond is
  /// ResourceLimitExceededException. EKS's own quota is 100 per Region; here each is a real
  /// control plane on this host (about 530 MiB when idle).
  int max_clusters = 10;
};

/// The EKS operations. Thread-safe (state lives in the store).
class EksOperations final : public api::JsonService {
 public:
  /// Called with an EKS cluster's name after every accepted write to it (wakes the
  /// controller).
  using ChangeSink = std::function<void(const std::string& name)>;
  /// The name of a HyperPod cluster that uses EKS cluster `arn`, or nullopt: DeleteCluster
  /// refuses a cluster in use (ResourceInUseException). Today nothing uses EKS clusters.
  using InUseCheck = std::function<std::optional<std::string>(const std::string& arn)>;

  EksOperations(store::Store& store, const Clock& clock, IdSource& ids, EksConfig config,
                ChangeSink on_change, InUseCheck in_use = {});

  std::string_view targetPrefix() const override { return ""; }
  std::string_view signingName() const override { return "eks"; }
  const model::ServiceModel& model() const override;
  std::string_view validationErrorType() const override { return "InvalidParameterException"; }
  bool restJson() const override { return true; }
  /// Every operation of the embedded model.
  StatusOr<nlohmann::json> call(std::string_view op, const nlohmann::json& input) override;
  /// As call(), for the caller of access key `access_key_id` (CreateCluster's bootstrap
  /// admin is its PrincipalArnOf).
  StatusOr<nlohmann::json> callAs(std::string_view op, const nlohmann::json& input,
                                  std::string_view access_key_id) override;

  /// The Cluster structure of the wire (DescribeCluster's "cluster") for `c`.
  static nlohmann::json ClusterJson(const store::EksCluster& c);

 private:
  StatusOr<nlohmann::json> createCluster(const nlohmann::json& in, std::string_view caller);
  StatusOr<nlohmann::json> describeCluster(const nlohmann::json& in);
  StatusOr<nlohmann::json> listClusters(const nlohmann::json& in);
  StatusOr<nlohmann::json> deleteCluster(const nlohmann::json& in);
  StatusOr<nlohmann::json> tagResource(const nlohmann::json& in);
  StatusOr<nlohmann::json> untagResource(const nlohmann::json& in);
  StatusOr<nlohmann::json> listTags(const nlohmann::json& in);
  // access_entries.cc
  StatusOr<nlohmann::json> createAccessEntry(const nlohmann::json& in);
  StatusOr<nlohmann::json> describeAccessEntry(const nlohmann::json& in);
  StatusOr<nlohmann::json> listAccessEntries(const nlohmann::json& in);
  StatusOr<nlohmann::json> deleteAccessEntry(const nlohmann::json& in);
  StatusOr<nlohmann::json> associatePolicy(const nlohmann::json& in);
  StatusOr<nlohmann::json> disassociatePolicy(const nlohmann::json& in);
  StatusOr<nlohmann::json> listAssociatedPolicies(const nlohmann::json& in);
  StatusOr<nlohmann::json> listAccessPolicies(const nlohmann::json& in);
  /// The cluster `name` when access entries may be used on it. Errors:
  /// ResourceNotFoundException, InvalidRequestException for a CONFIG_MAP cluster.
  StatusOr<store::EksCluster> entryCluster(const std::string& name);
  /// The access entry of `in`'s principalArn on its clusterName, for the operations on one
  /// entry. Errors: those of entryCluster, ResourceNotFoundException for no such entry.
  StatusOr<store::EksAccessEntry> namedAccessEntry(const nlohmann::json& in);
  /// The access entry named by `in` changed by `change` and committed, re-read and redone
  /// when it changed meanwhile; tells on_change_. Errors: those of namedAccessEntry and of
  /// `change` (which then commits nothing), InvalidRequestException when it kept changing.
  StatusOr<store::EksAccessEntry> changeAccessEntry(
      const nlohmann::json& in, const std::function<Status(store::EksAccessEntry&)>& change);
  /// Commits `e` (erased when `erase`) at its revision and tells on_change_. Errors:
  /// InvalidRequestException when the entry changed meanwhile.
  Status commitAccessEntry(const store::EksAccessEntry& e, bool erase);
  /// The ARN of a new access entry of `principal_arn` on `cluster`.
  std::string accessEntryArn(const std::string& cluster, const std::string& principal_arn);
  /// Tags of `resource_arn` changed by `change`, committed (re-read and redone when the row
  /// changed meanwhile). Errors: NotFoundException; BadRequestException for more than 50
  /// tags after the change, or a row that kept changing.
  Status changeTags(const std::string& resource_arn,
                    const std::function<void(std::map<std::string, std::string>&)>& change);

  store::Store& store_;
  const Clock& clock_;
  IdSource& ids_;
  EksConfig config_;
  ChangeSink on_change_;
  InUseCheck in_use_;
};

/// The AccessEntry structure of the wire for `e`.
nlohmann::json AccessEntryJson(const store::EksAccessEntry& e);

/// One page of `keys` (sorted ascending, unique): at most `max_results` after the position
/// of `next_token` (empty: from the start), and the token of the next page ("" at the end).
/// Errors: InvalidParameterException for a token that is not ours.
StatusOr<std::pair<std::vector<std::string>, std::string>> PageOf(
    const std::vector<std::string>& keys, int max_results, const std::string& next_token);

}  // namespace hf::eks
