#pragma once
// Configuration and tunables of one node agent (agent.h): what `hyperfleet agent` reads from
// /etc/hyperfleet/agent.env (env_file.h), and the seams tests replace.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hyperfleet/agent/imds_server.h"
#include "hyperfleet/agent/slurm_controller.h"

namespace hf::agent {

/// Configuration and tunables of one agent.
struct AgentOptions {
  std::string url;          ///< HF_AGENT_URL, e.g. "http://10.224.4.1:9081"
  /// HF_AGENT_CERT_SHA256: lowercase hex SHA-256 of the endpoint certificate's DER, which an
  /// https `url` must present (pinned: no CA, no trust on first use). Required with https,
  /// refused with http (CheckAgentEndpoint).
  std::string cert_sha256;
  std::string instance_id;  ///< HF_INSTANCE_ID, e.g. "i-0123456789abcdef0"
  std::string token;        ///< HF_AGENT_TOKEN (hex HMAC, see docs/nodes.md)
  /// KEY=VALUE added to lifecycle scripts' environment: the proxy variables of agent.env
  /// (http_proxy, https_proxy, no_proxy, upper-case too; docs/nodes.md "Network").
  std::vector<std::string> script_environment;
  /// HF_IMDS=serve and its keys: serve IMDS for this node at 169.254.169.254 (a registered
  /// machine without a metadata service of its own; imds_server.h). nullopt: none here.
  std::optional<AgentImds> imds;
  /// Where that IMDS listens (tests: loopback, no address added).
  ImdsServerOptions imds_listen;
  /// Prefix of every node file the agent reads or writes ("/" on a node; a temp dir in
  /// tests). The script's SAGEMAKER_RESOURCE_CONFIG_PATH carries the prefix too.
  std::string root = "/";
  /// Return from Run() once the lifecycle scripts finished and were reported (tests).
  bool once = false;
  /// Boot id sent on registration; empty: /proc/sys/kernel/random/boot_id.
  std::string boot_id;

  /// Retry delays while the control plane is unreachable (capped exponential backoff).
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{5000};
  /// SIGTERM → SIGKILL delay when a script times out.
  std::chrono::milliseconds kill_grace{5000};
  /// Log batching (see LogShipperOptions): at most this old / this large before sending.
  std::chrono::milliseconds log_flush_interval{250};
  std::size_t log_flush_bytes = 64 * 1024;
  std::size_t max_log_line_bytes = 16 * 1024;
  /// Bound of one HTTP exchange, seconds.
  int request_timeout_seconds = 30;
  /// How long bundle listing and downloads keep retrying transient failures (5xx,
  /// unreachable) before the node fails with reason "download".
  std::chrono::milliseconds download_retry_limit{std::chrono::minutes(5)};
  /// Applies a Slurm reload after the control plane changed slurm.conf (heartbeats only);
  /// returns whether it worked (if not, the new files are not confirmed and the reload is
  /// tried again at the next heartbeat). Empty: with root "/" the agent runs
  /// systemctl/scontrol when the lifecycle scripts enabled slurmctld (the HyperPod cluster
  /// agent's duty), marking removed nodes DOWN first; under any other root it does nothing.
  std::function<bool(SlurmReload)> reload_slurm;
  /// On the Slurm controller node (its files carry slurm.conf), once its lifecycle scripts
  /// ran: returns `sinfo -N -h -o '%N|%T|%H|%C|%E'` output for the heartbeat's "slurm_nodes",
  /// or nullopt when Slurm does not answer. Empty: with root "/" the agent runs sinfo;
  /// under any other root nothing is reported.
  std::function<std::optional<std::string>()> query_slurm_nodes;
  /// Runs the scontrol commands (one per line) of the control plane's "slurm_marks".
  /// Empty: with root "/" a root shell runs them; under any other root nothing runs.
  std::function<bool(const std::string& script)> run_slurm_commands;
  /// On the Slurm controller node, once its lifecycle scripts ran: returns SlurmJobsQuery()
  /// output (slurm_jobs.h) for the heartbeat's "slurm_jobs" (task governance), or nullopt.
  /// Empty: with root "/" the agent runs it; under any other root nothing is reported.
  std::function<std::optional<std::string>()> query_slurm_jobs;
  /// Starts the register response's "start_units" (e.g. an EKS node's containerd.service,
  /// kubelet.service and kube-proxy.service) once the lifecycle scripts allow; returns
  /// whether they started. Empty: with root "/" the agent runs `systemctl start <units>`;
  /// under any other root nothing is started.
  std::function<bool(const std::vector<std::string>& units)> start_units;
  /// Runs the node health checks (health.h) before each heartbeat and sends the report as
  /// the heartbeat's "health" member. Under a root other than "/" systemd units are never
  /// touched (see HealthMonitorOptions::run_command).
  bool health_checks = true;
};

}  // namespace hf::agent
