#include "slurm_controller_hook.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "hyperfleet/agent/node_files.h"
#include "hyperfleet/common/fs.h"

namespace hf::agent {

SlurmControllerHook::SlurmControllerHook(std::string root, SlurmCommands commands,
                                         Duration interval, bool controller,
                                         const std::atomic<bool>& lifecycle_done,
                                         const Clock& clock)
    : root_(std::move(root)), commands_(std::move(commands)), interval_(interval),
      lifecycle_done_(lifecycle_done), clock_(clock), controller_(controller) {
  // Task governance (slurm_jobs.h): governed jobs out, job actions in.
  SlurmJobs::Options jobs;
  jobs.root = root_;
  jobs.interval = interval_;
  jobs.query = commands_.query_jobs;
  jobs.run = commands_.run;
  jobs.active = [this] { return Active(); };
  jobs_ = std::make_unique<SlurmJobs>(std::move(jobs), clock_);
  // Step daemons left waiting for a failed node's message (stale_steps.h).
  if (commands_.query_steps) {
    reaper_ = std::make_unique<StaleStepReaper>("/proc", interval_, std::chrono::seconds(2),
                                                commands_.query_steps, clock_);
  }
  thread_ = std::thread([this] { Loop(); });
}

SlurmControllerHook::~SlurmControllerHook() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SlurmControllerHook::Fill(agentapi::HeartbeatRequest& request) {
  {
    std::lock_guard lock(mu_);
    if (view_ && clock_.now() - view_at_ <= 3 * interval_) request.slurm_nodes = view_;
  }
  request.slurm_jobs = jobs_->report();
}

void SlurmControllerHook::Take(const agentapi::HeartbeatResponse& response) {
  if (!response.slurm_marks.empty()) {
    {
      std::lock_guard lock(mu_);
      marks_ = response.slurm_marks;
    }
    cv_.notify_all();
  }
  jobs_->onResponse(response);
}

bool SlurmControllerHook::ReadyForFiles() {
  {
    std::lock_guard lock(mu_);
    if (reload_job_ || reload_done_) return false;
  }
  before_ = ReadFile(NodePath(root_, kSlurmConfPath)).value_or("");
  return true;
}

bool SlurmControllerHook::FilesWritten(int64_t revision,
                                       const std::vector<agentapi::NodeFile>& files) {
  std::string after;
  for (const auto& f : files) {
    if (f.path == kSlurmConfPath) {
      after = f.content;
      controller_ = true;
    }
  }
  if (pending_reload_ == SlurmReload::kNone) reload_before_ = before_;
  const SlurmReload reload =
      std::max(after.empty() ? SlurmReload::kNone : SlurmReloadFor(before_, after),
               pending_reload_);
  if (reload == SlurmReload::kNone) return true;
  {
    std::lock_guard lock(mu_);
    reload_job_ = ReloadJob{revision, reload, reload_before_, after};
  }
  cv_.notify_all();
  return false;
}

std::optional<int64_t> SlurmControllerHook::TakeConfirmed() {
  std::optional<ReloadResult> done;
  {
    std::lock_guard lock(mu_);
    done = std::move(reload_done_);
    reload_done_.reset();
  }
  if (!done) return std::nullopt;
  // Not confirmed, the files come again and the reload is retried.
  pending_reload_ = done->ok ? SlurmReload::kNone : done->kind;
  if (!done->ok) {
    reload_before_ = done->before;
    return std::nullopt;
  }
  return done->revision;
}

void SlurmControllerHook::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (reload_job_) {
      ReloadJob job = *reload_job_;
      lock.unlock();
      const bool ok = commands_.reload ? commands_.reload(job.kind, job.before, job.after) : true;
      lock.lock();
      reload_job_.reset();
      reload_done_ = ReloadResult{job.revision, job.kind, ok, job.before};
      continue;
    }
    const bool active = Active();
    std::optional<std::vector<agentapi::SlurmMark>> marks = std::move(marks_);
    marks_.reset();
    lock.unlock();
    std::optional<std::vector<agentapi::SlurmNode>> view;
    if (active && commands_.query_nodes) {
      if (auto text = commands_.query_nodes()) view = ParseSinfoNodes(*text);
    }
    if (marks && view) {
      const std::string script = SlurmMarkCommands(*marks, *view);
      if (!script.empty()) {
        spdlog::info("slurm node states from the control plane:\n{}", script);
        if (!commands_.run || !commands_.run(script)) {
          spdlog::warn("setting slurm node states failed; retried after the next heartbeat");
        }
        if (commands_.query_nodes) {  // show the result
          if (auto text = commands_.query_nodes()) view = ParseSinfoNodes(*text);
        }
      }
    }
    lock.lock();
    if (view) {
      view_ = std::move(*view);
      view_at_ = clock_.now();
    }
    cv_.wait_for(lock, interval_, [&] { return stop_ || reload_job_ || marks_; });
  }
}

}  // namespace hf::agent
