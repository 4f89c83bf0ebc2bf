#pragma once
// Task governance on the Slurm controller node (docs/governance.md "On Slurm"): the agent
// reports the jobs of governed accounts (squeue) with each heartbeat ("slurm_jobs"), keeps the
// list of governed accounts that job_submit.lua reads, creates the accounts and QOS in
// slurmdbd when accounting is in use, and carries out the control plane's job actions
// ("slurm_job_actions": release on admission, requeuehold on preemption, hold for a job
// that runs or waits unheld without admission). Slurm work runs on a thread of its own, as the
// node marks do: the heartbeat never waits for slurmctld.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/clock.h"

namespace hf::agent {

/// Where job_submit.lua looks for the governed accounts (one per line), on the controller.
inline constexpr std::string_view kGovernedAccountsPath =
    "/opt/slurm/etc/hyperfleet-governed-accounts";

/// The shell command whose output ParseSlurmJobs reads: every active job
/// (`squeue -h -a -o '%i|%a|%q|%P|%D|%T|%V|%r'`), a "#partitions" line, then each node's
/// partitions (`sinfo -h -N -o '%N|%R'`).
std::string SlurmJobsQuery();

/// Parses SlurmJobsQuery() output into the heartbeat's "slurm_jobs":
/// {"jobs": [{"id" (number), "account", "qos" ("" for none or "normal"), "partition",
/// "nodes", "state" (squeue's long state, upper case), "submit_time" (epoch seconds; squeue
/// prints the node's local time), "reason"}], "partitions": {name: [node, ...]}}. Only jobs of
/// `accounts` are kept; array jobs and lines that do not parse are skipped.
nlohmann::json ParseSlurmJobs(std::string_view text, const std::set<std::string>& accounts);

/// The root-shell script for the control plane's job actions
/// ([{"job": id, "action": "release"|"hold"|"requeuehold"}]): one scontrol line per valid
/// action, each allowed to fail (a job that ended meanwhile) without stopping the others.
std::string SlurmJobActionCommands(const nlohmann::json& actions);

/// The root-shell script that creates the governance's accounts and QOS in slurmdbd
/// (`sacctmgr -i add account <team>`, every user slurmdbd knows added to it, `sacctmgr -i
/// add qos <class>-priority Priority=<weight>`) from the heartbeat's "governance"
/// ({"accounts": [team...],
/// "qos": [{"name", "priority"}]}); it exits 0 at once where accounting.conf does not use
/// slurmdbd. Names that are not [a-z0-9-] are left out.
std::string SacctmgrCommands(const nlohmann::json& governance);

/// The Slurm side of task governance on the controller node. Thread-safe.
class SlurmJobs {
 public:
  struct Options {
    std::string root = "/";  ///< node file prefix (see AgentOptions::root)
    Duration interval = std::chrono::seconds(1);
    /// SlurmJobsQuery() output, or nullopt when Slurm does not answer. Empty: no report.
    std::function<std::optional<std::string>()> query;
    /// Runs a root-shell script; false when it failed. Empty: nothing runs.
    std::function<bool(const std::string& script)> run;
    /// Whether this node runs slurmctld and its lifecycle scripts are over.
    std::function<bool()> active;
  };
  SlurmJobs(Options options, const Clock& clock);
  ~SlurmJobs();
  SlurmJobs(const SlurmJobs&) = delete;
  SlurmJobs& operator=(const SlurmJobs&) = delete;

  /// The last "slurm_jobs" report if taken within 3 intervals.
  std::optional<nlohmann::json> report();
  /// Takes a heartbeat response's "governance" and "slurm_job_actions" (when present) and
  /// wakes the Slurm thread to apply them.
  void onResponse(const nlohmann::json& response);

 private:
  void Loop();
  /// Writes the governed accounts file and runs sacctmgr when the governance changed.
  void ApplyGovernance(const nlohmann::json& governance);

  const Options options_;
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<std::string> accounts_;           ///< governed accounts as last applied
  std::optional<nlohmann::json> governance_;  ///< received, not yet applied
  std::string applied_governance_;            ///< dump of the last applied one
  std::optional<nlohmann::json> actions_;     ///< received, not yet applied
  std::optional<nlohmann::json> report_;
  SystemTime report_at_{};
  std::thread thread_;
};

}  // namespace hf::agent
