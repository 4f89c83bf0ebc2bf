#pragma once
// `hyperfleet server`: the control plane process.
#include <cstdint>
#include <string>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/status.h"

namespace hf::cli {

/// Flags of `hyperfleet server`.
struct ServerFlags {
  std::string listen = "127.0.0.1:9080";  ///< HOST:PORT; port 0 picks a free port
  std::string data_dir;                   ///< empty: ResolveDataDir()
  std::string region = "us-west-2";
  std::string account_id = "123456789012";
  std::string provider = "local";  ///< local (namespaced nodes, root), ssh, local,ssh or fake
  std::string access_key_id, secret_access_key;  ///< an extra key pair (scripts, tests)
  int io_threads = 2;
  int fake_boot_delay_ms = 200;      ///< fake provider: launch to Running, milliseconds
  int max_clusters = 100;
  int max_eks_clusters = 10;  ///< EksConfig::max_clusters
  int max_instances_per_cluster = 10000;
  std::string log_level = "info";
  // local provider
  uint16_t agent_port = 9081;              ///< agent endpoint on every cluster bridge
  std::string node_network = "10.224.0.0/12";  ///< pool of per-cluster /22 subnets
  std::string image_dir = "/var/lib/hyperfleet/images";  ///< node image cache (host-wide)
  std::string image_mirror = "http://deb.debian.org/debian";  ///< for building the image
  int lifecycle_timeout_seconds = agentapi::kDefaultLifecycleTimeoutSeconds;  ///< per script
  int heartbeat_seconds = agentapi::kDefaultHeartbeatSeconds;  ///< agent heartbeat interval
  /// A running node whose agent is silent this long is unresponsive (hung) and recovered.
  int unresponsive_after_seconds = 10;
  int agent_start_timeout_seconds = 300;   ///< boot to "lifecycle scripts started"
  uint16_t node_apt_proxy_port = 0;        ///< apt proxy on the bridge host address; 0: none
  /// The local OCI registry EKS nodes pull from (docker-registry on every host address; nodes
  /// see it as localhost:PORT); 0: none. docs/kubernetes.md "Registry and images".
  uint16_t registry_port = 5000;
  /// HOST:PORT where the node agent endpoint is also served over TLS, for agents on
  /// machines (port 0 picks one; printed at start, with the certificate's SHA-256); empty:
  /// only on the local provider's cluster bridges (plain HTTP that never leaves the host).
  std::string agent_listen;
  /// HOST[:PORT] machines are told for the agent endpoint ("[v6]" or "[v6]:PORT" for IPv6);
  /// empty: --agent-listen's (refused when that is a wildcard such as 0.0.0.0). Without a
  /// port: the bound one.
  std::string agent_address;
  std::string node_egress = "nat";         ///< nat, proxy or none (docs/nodes.md "Network")
  std::vector<std::string> node_egress_allow;  ///< nat: the only outside IPv4 CIDRs (empty: any)
  // lifecycle bundles
  std::string s3_endpoint_url;             ///< S3-compatible endpoint; empty: <data-dir>/s3
  // EKS clusters' control planes (eks::MakeProcessControlPlanes, docs/kubernetes.md)
  std::string kubernetes_dir;              ///< Kubernetes binaries; empty: scripts/kubernetes'
  /// "TYPE_KEY,REASON_KEY": the fault labels' keys on EKS Nodes; empty: model::FaultLabelKeys'
  /// defaults (docs/kubernetes.md "Health on Nodes").
  std::string kubernetes_fault_labels;
  /// The fault details annotation's key on EKS Nodes; empty: model::FaultLabelKeys' default.
  std::string kubernetes_fault_details_annotation;
};

/// Runs the control plane until SIGINT or SIGTERM. Prints one line
/// "hyperfleet server listening on http://HOST:PORT (data dir DIR)" once it serves.
/// Errors: bad flags (InvalidArgument), unusable data dir or store (Internal),
/// address in use (Unavailable).
Status RunServer(const ServerFlags& flags);

}  // namespace hf::cli
