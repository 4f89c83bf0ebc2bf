#include "hyperfleet/agent/stale_steps.h"

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <sstream>

#include <spdlog/spdlog.h>

#include "hyperfleet/common/fs.h"

namespace hf::agent {
namespace {

std::optional<std::string> ReadSmallFile(const std::filesystem::path& path) {
  auto text = ReadFile(path.string());
  if (!text.ok()) return std::nullopt;
  return std::move(*text);
}

template <typename T>
std::optional<T> ParseNumber(std::string_view s) {
  T value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::pair<uint32_t, std::string>> ParseStepDaemonTitle(std::string_view cmdline) {
  // The title replaces argv[0]; older kernels may show the rest of argv after NULs.
  cmdline = cmdline.substr(0, cmdline.find('\0'));
  constexpr std::string_view kPrefix = "slurmstepd: [";
  if (!cmdline.starts_with(kPrefix)) return std::nullopt;
  cmdline.remove_prefix(kPrefix.size());
  const size_t close = cmdline.find(']');
  if (close == std::string_view::npos) return std::nullopt;
  const std::string_view id = cmdline.substr(0, close);
  const size_t dot = id.find('.');
  if (dot == std::string_view::npos || dot + 1 == id.size()) return std::nullopt;
  auto job = ParseNumber<uint32_t>(id.substr(0, dot));
  if (!job) return std::nullopt;
  return std::make_pair(*job, std::string(id.substr(dot + 1)));
}

std::vector<StepDaemon> ScanStepDaemons(const std::filesystem::path& proc) {
  std::vector<StepDaemon> daemons;
  std::set<int> parents_of_live;  // ppids of non-zombie processes
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc, ec)) {
    const auto pid = ParseNumber<int>(entry.path().filename().string());
    if (!pid) continue;
    auto stat = ReadSmallFile(entry.path() / "stat");
    if (!stat) continue;
    // "pid (comm) S ppid ...": comm may hold spaces and parentheses.
    const size_t paren = stat->rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat->substr(paren + 1));
    std::string state;
    int ppid = 0;
    if (!(rest >> state >> ppid)) continue;
    if (state != "Z" && state != "X") parents_of_live.insert(ppid);
    auto comm = ReadSmallFile(entry.path() / "comm");
    if (!comm || !comm->starts_with("slurmstepd")) continue;
    auto cmdline = ReadSmallFile(entry.path() / "cmdline");
    if (!cmdline) continue;
    if (auto id = ParseStepDaemonTitle(*cmdline)) {
      daemons.push_back(StepDaemon{*pid, id->first, id->second, false});
    }
  }
  for (auto& d : daemons) d.has_tasks = parents_of_live.count(d.pid) > 0;
  std::sort(daemons.begin(), daemons.end(),
            [](const StepDaemon& a, const StepDaemon& b) { return a.pid < b.pid; });
  return daemons;
}

std::map<uint32_t, std::string> ParseJobStates(std::string_view text) {
  std::map<uint32_t, std::string> states;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    const size_t bar = line.find('|');
    if (bar == std::string_view::npos) continue;
    auto id = ParseNumber<uint32_t>(line.substr(0, bar));
    if (!id) continue;
    states[*id] = std::string(line.substr(bar + 1));
  }
  return states;
}

bool JobStillRunning(std::string_view state) {
  // Everything else (PENDING after a requeue, COMPLETING, the terminal states) means the
  // job's processes on this node are being or have been ended.
  static const std::set<std::string_view> kRunning = {
      "RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING", "SIGNALING", "STAGE_OUT",
      "STOPPED", "RESV_DEL_HOLD", "UPDATE_DB", "POWER_UP_NODE"};
  return kRunning.count(state) > 0;
}

std::vector<uint32_t> StaleStepTracker::Observe(const std::vector<StepDaemon>& daemons,
                                                SystemTime now) {
  std::map<int, SystemTime> idle;
  std::set<uint32_t> jobs;
  for (const auto& d : daemons) {
    if (d.has_tasks) continue;
    auto it = idle_since_.find(d.pid);
    const SystemTime since = it == idle_since_.end() ? now : it->second;
    idle[d.pid] = since;
    if (now - since >= grace_) jobs.insert(d.job_id);
  }
  idle_since_ = std::move(idle);
  last_ = daemons;
  return {jobs.begin(), jobs.end()};
}

std::vector<StepDaemon> StaleStepTracker::Orphans(const std::map<uint32_t, std::string>& states,
                                                  SystemTime now) const {
  std::vector<StepDaemon> orphans;
  for (const auto& d : last_) {
    if (d.has_tasks) continue;
    auto idle = idle_since_.find(d.pid);
    if (idle == idle_since_.end() || now - idle->second < grace_) continue;
    auto state = states.find(d.job_id);
    if (state != states.end() && JobStillRunning(state->second)) continue;
    orphans.push_back(d);
  }
  return orphans;
}

StaleStepReaper::StaleStepReaper(std::filesystem::path proc, Duration interval, Duration grace,
                                 QueryJobs query_jobs, const Clock& clock)
    : proc_(std::move(proc)), interval_(interval), query_jobs_(std::move(query_jobs)),
      clock_(clock), tracker_(grace) {
  if (interval_ > Duration::zero()) thread_ = std::thread([this] { Loop(); });
}

StaleStepReaper::~StaleStepReaper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<StepDaemon> StaleStepReaper::RunOnce() {
  const SystemTime now = clock_.now();
  const std::vector<uint32_t> jobs = tracker_.Observe(ScanStepDaemons(proc_), now);
  if (jobs.empty()) return {};
  // No answer (slurmctld down): decide nothing this round.
  const auto text = query_jobs_();
  if (!text) return {};
  const auto states = ParseJobStates(*text);
  std::vector<StepDaemon> ended;
  for (const auto& d : tracker_.Orphans(states, now)) {
    auto state = states.find(d.job_id);
    if (::kill(d.pid, SIGKILL) != 0) continue;
    spdlog::warn(
        "ended slurmstepd [{}.{}] (pid {}): its tasks are gone and slurmctld shows the job {}; "
        "it waited for a failed node's step-complete message (Slurm waits 60 s)",
        d.job_id, d.step, d.pid, state == states.end() ? "no longer" : state->second);
    ended.push_back(d);
  }
  return ended;
}

void StaleStepReaper::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    RunOnce();
    lock.lock();
    cv_.wait_for(lock, interval_, [&] { return stop_; });
  }
}

}  // namespace hf::agent
