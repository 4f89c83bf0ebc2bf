#pragma once
// EKS clusters and their access entries as the store keeps them (hf_eks serves them through
// the EKS API subset, docs/kubernetes.md). One row each, JSON only inside the row's body.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/clock.h"

namespace hf::store {

/// An EKS cluster's status (the model's ClusterStatus values that Hyperfleet reaches).
enum class EksClusterStatus { kCreating, kActive, kDeleting, kFailed };
/// The wire name, e.g. "CREATING".
std::string_view EksClusterStatusName(EksClusterStatus s);
/// The status of wire name `name`; nullopt when unknown.
std::optional<EksClusterStatus> ParseEksClusterStatus(std::string_view name);

/// How the Kubernetes API authenticates IAM principals (the model's AuthenticationMode).
enum class EksAuthMode { kConfigMap, kApi, kApiAndConfigMap };
/// The wire name, e.g. "API_AND_CONFIG_MAP".
std::string_view EksAuthModeName(EksAuthMode m);
/// The mode of wire name `name`; nullopt when unknown.
std::optional<EksAuthMode> ParseEksAuthMode(std::string_view name);

/// The cluster's VPC, as asked for plus the synthetic ids Hyperfleet gives it.
struct EksVpcConfig {
  std::vector<std::string> subnet_ids;
  std::vector<std::string> security_group_ids;
  bool endpoint_public_access = true;   ///< EKS's default
  bool endpoint_private_access = false; ///< EKS's default
  std::vector<std::string> public_access_cidrs;  ///< default {"0.0.0.0/0"}
  std::string vpc_id;                    ///< "vpc-" + 17 hex, synthetic
  std::string cluster_security_group_id; ///< "sg-" + 17 hex, synthetic
  bool operator==(const EksVpcConfig&) const = default;
};

/// One EKS cluster.
struct EksCluster {
  std::string name;             ///< 1-100 of [0-9A-Za-z_-], starting alphanumeric
  std::string arn;              ///< arn:aws:eks:<region>:<account>:cluster/<name>
  std::string version;          ///< requested Kubernetes version, e.g. "1.31", as asked
  std::string role_arn;
  EksVpcConfig vpc;
  std::string service_cidr = "10.100.0.0/16";
  EksAuthMode auth_mode = EksAuthMode::kConfigMap;
  bool bootstrap_admin = true;  ///< bootstrapClusterCreatorAdminPermissions
  EksClusterStatus status = EksClusterStatus::kCreating;
  SystemTime created_at{};
  std::map<std::string, std::string> tags;
  std::string endpoint;         ///< "https://host:port" once ACTIVE; "" before
  std::string ca_pem;           ///< the apiserver's CA (PEM) once ACTIVE; "" before
  std::string served_version;   ///< what the apiserver reports, e.g. "v1.20.2"; "" before
  std::string message;          ///< why FAILED
  int64_t revision = 0;         ///< the store's, for compare-and-swap
  bool operator==(const EksCluster&) const = default;
};

/// An access policy associated with an access entry.
struct EksPolicyAssociation {
  std::string policy_arn;  ///< arn:aws:eks::aws:cluster-access-policy/AmazonEKS...Policy
  std::string scope_type = "cluster";     ///< "cluster" or "namespace"
  std::vector<std::string> namespaces;    ///< for "namespace"
  SystemTime associated_at{};
  SystemTime modified_at{};
  bool operator==(const EksPolicyAssociation&) const = default;
};

/// One access entry of an EKS cluster: an IAM principal and what it is in Kubernetes.
struct EksAccessEntry {
  std::string cluster;          ///< the EKS cluster's name
  std::string principal_arn;    ///< the IAM principal, e.g. arn:aws:iam::123456789012:role/x
  std::string arn;              ///< arn:aws:eks:<region>:<account>:access-entry/<cluster>/...
  std::vector<std::string> kubernetes_groups;
  std::string username;         ///< "" -> the principal's ARN is the username
  std::string type = "STANDARD";
  SystemTime created_at{};
  SystemTime modified_at{};
  std::map<std::string, std::string> tags;
  std::vector<EksPolicyAssociation> policies;
  int64_t revision = 0;
  bool operator==(const EksAccessEntry&) const = default;
};

}  // namespace hf::store
