#pragma once
// The Slurm controller node's part of the heartbeat (docs/slurm.md, docs/resiliency.md,
// docs/governance.md "On Slurm"): once its lifecycle scripts are over, the node that received
// slurm.conf reports its Slurm nodes' states and its governed jobs, sets the node states and
// carries out the job actions the control plane answers, and reloads Slurm when slurm.conf
// changes, confirming the new files only once the reload worked. Slurm work runs on threads
// of their own (sinfo, scontrol and reloads block while slurmctld restarts); the hook only
// hands over what they produced. On a node, step daemons left waiting for a failed node are
// ended too (stale_steps.h).
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "heartbeat.h"
#include "hyperfleet/agent/slurm_controller.h"
#include "hyperfleet/agent/slurm_jobs.h"
#include "hyperfleet/agent/stale_steps.h"

namespace hf::agent {

class SlurmControllerHook final : public HeartbeatHook {
 public:
  /// `root`: where node files live; `controller`: the node received slurm.conf at
  /// registration; `lifecycle_done`: its lifecycle scripts are over (before, Slurm is the
  /// scripts' business). Starts the Slurm thread, the jobs' thread, and the stale step
  /// reaper when `commands` can query steps.
  SlurmControllerHook(std::string root, SlurmCommands commands, Duration interval,
                      bool controller, const std::atomic<bool>& lifecycle_done,
                      const Clock& clock);
  ~SlurmControllerHook() override;

  std::string_view Name() const override { return "slurm controller"; }
  /// The Slurm nodes' states (if taken within 3 intervals) and the governed jobs.
  void Fill(agentapi::HeartbeatRequest& request) override;
  /// The marks to set (latest wins), the governance and the job actions.
  void Take(const agentapi::HeartbeatResponse& response) override;
  /// False while a reload runs; else remembers the slurm.conf the new files replace.
  bool ReadyForFiles() override;
  /// Starts a reload when slurm.conf changed (or one that failed is still owed).
  bool FilesWritten(int64_t revision, const std::vector<agentapi::NodeFile>& files) override;
  /// The revision of a reload that worked; a failed one is owed again.
  std::optional<int64_t> TakeConfirmed() override;

 private:
  struct ReloadJob {
    int64_t revision;
    SlurmReload kind;
    std::string before, after;
  };
  struct ReloadResult {
    int64_t revision;
    SlurmReload kind;
    bool ok;
    std::string before;
  };
  bool Active() const { return controller_ && lifecycle_done_; }
  void Loop();

  const std::string root_;
  const SlurmCommands commands_;
  const Duration interval_;
  const std::atomic<bool>& lifecycle_done_;
  const Clock& clock_;
  /// This node received slurm.conf: it runs slurmctld and reports Slurm node states.
  std::atomic<bool> controller_;

  // Heartbeat thread only: a reload that failed is retried (and the new revision not
  // confirmed) until it works, from the slurm.conf before the first attempt.
  SlurmReload pending_reload_ = SlurmReload::kNone;
  std::string reload_before_;
  std::string before_;  ///< slurm.conf before the files being written

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<std::vector<agentapi::SlurmNode>> view_;
  SystemTime view_at_{};
  std::optional<std::vector<agentapi::SlurmMark>> marks_;
  std::optional<ReloadJob> reload_job_;
  std::optional<ReloadResult> reload_done_;
  std::thread thread_;

  std::unique_ptr<SlurmJobs> jobs_;
  std::unique_ptr<StaleStepReaper> reaper_;
};

}  // namespace hf::agent
