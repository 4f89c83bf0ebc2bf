#pragma once
// The node agent (`hyperfleet agent`, hyperfleet-agent.service inside every node). It
// registers with the control plane's agent endpoint, lays out the node contract files,
// downloads and runs the lifecycle scripts as HyperPod does, streams their output, reports
// the result and then heartbeats. Protocol: docs/nodes.md "Agent protocol"; behaviour:
// docs/hyperpod-contract.md ("Bring-up", "Results").
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/agentapi/protocol.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"

namespace hf::agent {

class HealthMonitor;
class LogShipper;

/// What Slurm's controller does after its slurm.conf changed. Slurm 22.05 semantics: adding
/// or removing nodes (any NodeName= line) or moving the controller (SlurmctldHost=) needs a
/// slurmctld restart; other changes a `scontrol reconfigure`, which also hands configless
/// slurmds the new file.
enum class SlurmReload { kNone, kReconfigure, kRestart };

/// The reload `before` → `after` (whole slurm.conf texts; `before` empty: first write,
/// nothing runs yet to reload). Pure.
SlurmReload SlurmReloadFor(std::string_view before, std::string_view after);

/// The program that applies a reload on the controller node: data/slurm/reload-slurmctld.sh,
/// embedded at build time, run with /bin/sh as root with SlurmReloadArguments' arguments.
std::string_view SlurmReloadProgram();

/// SlurmReloadProgram()'s arguments for `reload` (not kNone) from slurm.conf `before` to
/// `after`: "restart" or "reconfigure", then the names of the nodes `before` defines and
/// `after` no longer does (in name order). Pure.
std::vector<std::string> SlurmReloadArguments(SlurmReload reload, std::string_view before,
                                              std::string_view after);

/// Configuration and tunables of one agent.
struct AgentOptions {
  std::string url;          ///< HF_AGENT_URL, e.g. "http://10.224.4.1:9081"
  std::string instance_id;  ///< HF_INSTANCE_ID, e.g. "i-0123456789abcdef0"
  std::string token;        ///< HF_AGENT_TOKEN (hex HMAC, see docs/nodes.md)
  /// KEY=VALUE added to lifecycle scripts' environment: the proxy variables of agent.env
  /// (http_proxy, https_proxy, no_proxy, upper-case too; docs/nodes.md "Network").
  std::vector<std::string> script_environment;
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
  /// Runs the node health checks (health.h) before each heartbeat and sends the report as
  /// the heartbeat's "health" member. Under a root other than "/" systemd units are never
  /// touched (see HealthMonitorOptions::run_command).
  bool health_checks = true;
};

/// Parses `sinfo -N -h -o '%N|%T|%H|%C|%E'` output (node, long state, reason time in the
/// node's local time or "Unknown"/"None", CPUs "alloc/idle/other/total", reason exactly as
/// set) into the heartbeat's "slurm_nodes" (state in lower case, reason_time 0 when none).
/// Lines that do not parse are skipped; a node listed twice (in two partitions) appears
/// once.
std::vector<agentapi::SlurmNode> ParseSinfoNodes(std::string_view text);

/// The scontrol commands (one per line, for a root shell) that carry out the control
/// plane's `marks` (docs/resiliency.md) given Slurm's current `nodes` (ParseSinfoNodes):
/// "down" only for a node not already down or fail; "resume" only for a node that is still
/// marked with exactly the given reason. Unknown nodes and actions are skipped. Reasons are
/// single-quoted for the shell.
std::string SlurmMarkCommands(const std::vector<agentapi::SlurmMark>& marks,
                              const std::vector<agentapi::SlurmNode>& nodes);

/// Parses an env file: KEY=VALUE lines; blank lines and lines starting with '#' are
/// skipped; a value in matching single or double quotes loses them; "export " before a key
/// is allowed. Errors: InvalidArgument naming the first line without '='.
StatusOr<std::map<std::string, std::string>> ParseEnvFile(std::string_view text);

/// Reads `path` (e.g. /etc/hyperfleet/agent.env) into `options`: HF_AGENT_URL,
/// HF_INSTANCE_ID and HF_AGENT_TOKEN (all required), the proxy variables into
/// script_environment (optional; other keys are ignored).
/// Errors: NotFound when the file cannot be read, InvalidArgument for a malformed file or
/// a missing key (named).
Status LoadAgentEnv(const std::string& path, AgentOptions* options);

/// `path` (absolute, as on the node) under `root`: NodePath("/tmp/x", "/opt/ml") is
/// "/tmp/x/opt/ml"; with root "/" it is `path` itself.
std::string NodePath(const std::string& root, std::string_view path);

/// Writes each file under `root` with its mode, creating parent directories (0755), by
/// write-to-temp and rename. Errors: InvalidArgument for a path that is not absolute or
/// has a ".." segment (nothing written for it), Internal naming the path and errno text.
/// Every file is attempted; the first error is returned.
Status WriteNodeFiles(const std::string& root, const std::vector<agentapi::NodeFile>& files);

/// Whether a bundle key may be written below the bundle directory: relative, non-empty,
/// no ".." segment, no NUL (the path-traversal rule).
bool IsSafeBundleKey(std::string_view key);

/// The agent. Run() blocks; Stop() may be called from any thread (e.g. a signal thread).
class Agent {
 public:
  explicit Agent(AgentOptions options, const Clock* clock = nullptr);
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Registers (retrying until it succeeds or Stop()), writes the node files, creates
  /// /opt/sagemaker_cluster, runs the lifecycle scripts when the control plane asks and no
  /// result is recorded in /var/lib/hyperfleet-agent/lifecycle.json, reports the result
  /// (retrying until acknowledged), then heartbeats until Stop() (or returns, with
  /// `once`). A node file that cannot be written is logged, not fatal (the scripts then
  /// fail visibly). Errors: Cancelled when stopped before registering, or (with `once`)
  /// before the lifecycle result was acknowledged.
  Status Run();
  /// Asks Run() to return soon; a running script is killed (its result is not reported,
  /// and the next agent reports it as interrupted).
  void Stop();

 private:
  struct Impl;
  bool SleepFor(std::chrono::milliseconds d);  // false when stopped
  // `health` may be null (no checks).
  void HeartbeatLoop(int heartbeat_seconds, int64_t files_revision, HealthMonitor* health);

  AgentOptions options_;
  const Clock* clock_;
  std::atomic<bool> stop_{false};
  /// The lifecycle scripts are over (or never ran): the health checks may restart units.
  std::atomic<bool> lifecycle_done_{false};
  /// This node received slurm.conf: it runs slurmctld and reports Slurm node states.
  std::atomic<bool> slurm_controller_{false};
  std::mutex mu_;
  LogShipper* shipper_ = nullptr;  ///< the running script's, so that Stop() can abandon it
  std::condition_variable cv_;
};

}  // namespace hf::agent
