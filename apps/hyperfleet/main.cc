// hyperfleet: one binary, one subcommand per role. This file only parses flags and wires.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "hyperfleet/cli/agent_command.h"
#include "hyperfleet/cli/auto_resume_command.h"
#include "hyperfleet/cli/eks_control_plane_command.h"
#include "hyperfleet/cli/image_command.h"
#include "hyperfleet/cli/jobs_command.h"
#include "hyperfleet/cli/machines_command.h"
#include "hyperfleet/cli/logs_command.h"
#include "hyperfleet/cli/node_supervisor_command.h"
#include "hyperfleet/cli/server_command.h"
#include "hyperfleet/cli/simulate_command.h"
#include "hyperfleet/cli/ssm_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Hyperfleet: a self-hosted SageMaker HyperPod"};
  app.require_subcommand(1);

  hf::cli::ServerFlags server;
  auto* srv = app.add_subcommand("server", "Run the control plane (SageMaker API endpoint)");
  srv->add_option("--listen", server.listen, "HOST:PORT to serve the API on")
      ->capture_default_str();
  srv->add_option("--data-dir", server.data_dir,
                  "State directory (default: $HYPERFLEET_DATA_DIR, /var/lib/hyperfleet as "
                  "root, else ~/.hyperfleet)");
  srv->add_option("--region", server.region, "Region in ARNs and SigV4 scopes")
      ->capture_default_str();
  srv->add_option("--account-id", server.account_id, "Account id in ARNs")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v.size() == 12 && v.find_first_not_of("0123456789") == std::string::npos) return "";
        return "--account-id must be 12 digits";
      });
  srv->add_option("--provider", server.provider,
                  "Where instances come from: local (namespaced nodes on this host; root), "
                  "ssh (registered machines over ssh; needs --agent-listen), "
                  "local,ssh (ssh for instance types with registered machines, local for the "
                  "rest; needs --agent-listen) or fake (no machines, for API tests)")
      ->capture_default_str()
      ->check(CLI::IsMember({"local", "ssh", "local,ssh", "fake"}));
  srv->add_option("--agent-port", server.agent_port,
                  "local provider: node agent endpoint port on every cluster bridge")
      ->capture_default_str();
  srv->add_option("--node-network", server.node_network,
                  "local provider: address pool (CIDR) that cluster subnets (/22) come from")
      ->capture_default_str();
  srv->add_option("--image-dir", server.image_dir, "local provider: node image cache")
      ->capture_default_str();
  srv->add_option("--image-mirror", server.image_mirror,
                  "local provider: Debian mirror for building the node image")
      ->capture_default_str();
  srv->add_option("--lifecycle-timeout", server.lifecycle_timeout_seconds,
                  "Seconds a lifecycle script may run before it is killed and its node fails")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  srv->add_option("--heartbeat-interval", server.heartbeat_seconds,
                  "Seconds between node agent heartbeats")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  srv->add_option("--unresponsive-after", server.unresponsive_after_seconds,
                  "Seconds without a heartbeat after which a running node is unresponsive "
                  "(hung) and recovered per the cluster's NodeRecovery")
      ->capture_default_str()
      ->check(CLI::Range(3, 86400));
  srv->add_option("--agent-start-timeout", server.agent_start_timeout_seconds,
                  "Seconds a booted node may take to start its lifecycle scripts")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  srv->add_option("--node-apt-proxy-port", server.node_apt_proxy_port,
                  "local provider: apt proxy port on the bridge host address (e.g. "
                  "apt-cacher-ng's 3142); 0: none")
      ->capture_default_str();
  srv->add_option("--registry-port", server.registry_port,
                  "local provider: port of the local OCI registry EKS nodes pull from "
                  "(docker-registry on every host address; nodes and the host push and pull "
                  "localhost:PORT/<repo>:<tag>); 0: none. Taken: the server runs without one")
      ->capture_default_str();
  srv->add_option("--node-egress", server.node_egress,
                  "local provider: what nodes reach beyond their cluster: nat (a default "
                  "route, masqueraded by the host), proxy (only the server's http_proxy/"
                  "https_proxy) or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"nat", "proxy", "none"}));
  srv->add_option("--node-egress-allow", server.node_egress_allow,
                  "local provider, nat: the only IPv4 addresses or CIDRs nodes reach beyond the "
                  "host (besides their DNS resolvers); repeat or separate with commas; "
                  "default: anywhere")
      ->delimiter(',');
  srv->add_option("--s3-endpoint-url", server.s3_endpoint_url,
                  "S3-compatible endpoint for lifecycle scripts (signed with AWS_ACCESS_KEY_ID/"
                  "AWS_SECRET_ACCESS_KEY); default: the local bucket directory <data-dir>/s3");
  srv->add_option("--kubernetes-dir", server.kubernetes_dir,
                  "Directory of the Kubernetes binaries EKS clusters' control planes run "
                  "(kube-apiserver, kube-controller-manager, kube-scheduler, kubectl); "
                  "default: where scripts/kubernetes builds them");
  srv->add_option("--kubernetes-fault-labels", server.kubernetes_fault_labels,
                  "TYPE_KEY,REASON_KEY: the label keys of a faulty node's fault category and "
                  "reason on EKS clusters' Nodes (their spelling is unresolved: HyperPod's docs "
                  "say fault-type/fault-reason); default: "
                  "sagemaker.amazonaws.com/fault-types,sagemaker.amazonaws.com/fault-reasons, "
                  "as seen on real clusters");
  srv->add_option("--kubernetes-fault-details-annotation",
                  server.kubernetes_fault_details_annotation,
                  "The annotation key of a faulty node's fault details on EKS clusters' Nodes; "
                  "default: sagemaker.amazonaws.com/fault-details");
  srv->add_option("--access-key-id", server.access_key_id, "Also accept this access key id");
  srv->add_option("--secret-access-key", server.secret_access_key,
                  "Secret of --access-key-id");
  srv->add_option("--io-threads", server.io_threads, "HTTP I/O threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  srv->add_option("--agent-listen", server.agent_listen,
                  "Also serve the node agent endpoint over TLS on HOST:PORT (port 0 picks one), "
                  "for agents on machines (certificate in <data-dir>/agent-tls, pinned by its "
                  "SHA-256); default: only on the local provider's cluster bridges");
  srv->add_option("--agent-address", server.agent_address,
                  "HOST[:PORT] that machines are told for --agent-listen's endpoint; default: "
                  "the listen address (required when that is 0.0.0.0 or ::)");
  srv->add_option("--fake-boot-delay-ms", server.fake_boot_delay_ms,
                  "fake provider: milliseconds from launch to Running")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600000));
  srv->add_option("--max-clusters", server.max_clusters, "Clusters allowed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  srv->add_option("--max-eks-clusters", server.max_eks_clusters,
                  "EKS clusters allowed at once (each runs a control plane on this host)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  srv->add_option("--max-instances-per-cluster", server.max_instances_per_cluster,
                  "Instances allowed per cluster")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  srv->add_option("--log-level", server.log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  srv->callback([&] {
    auto status = hf::cli::RunServer(server);
    if (!status.ok()) {
      std::fprintf(stderr, "hyperfleet server: %s\n", std::string(status.message()).c_str());
      std::exit(1);
    }
  });

  hf::cli::AddAgentCommand(app);
  hf::cli::AddAutoResumeCommand(app);
  hf::cli::AddEksControlPlaneCommands(app);
  hf::cli::AddImageCommand(app);
  hf::cli::AddJobsCommand(app);
  hf::cli::AddLogsCommand(app);
  hf::cli::AddMachinesCommand(app);
  hf::cli::AddNodeSupervisorCommand(app);
  hf::cli::AddSimulateCommand(app);
  hf::cli::AddSsmCommand(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
