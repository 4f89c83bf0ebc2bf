// Orphaned slurmstepd detection: parsing, the pure decision, and the reaper against real
// processes titled like slurmstepd (seen through a /proc view holding only them, so that no
// other slurmstepd on this machine is ever looked at).
#include "hyperfleet/agent/stale_steps.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace hf::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ManualClock final : public Clock {
 public:
  SystemTime now() const override { return SystemTime(std::chrono::nanoseconds(ns_.load())); }
  void advance(Duration d) { ns_ += d.count(); }

 private:
  std::atomic<int64_t> ns_{1'800'000'000'000'000'000};
};

TEST(StaleSteps, ParsesStepDaemonTitles) {
  using P = std::optional<std::pair<uint32_t, std::string>>;
  EXPECT_EQ(ParseStepDaemonTitle("slurmstepd: [12.0]"), (P{{12, "0"}}));
  EXPECT_EQ(ParseStepDaemonTitle(std::string("slurmstepd: [7.batch]\0x\0", 24)),
            (P{{7, "batch"}}));
  EXPECT_EQ(ParseStepDaemonTitle("slurmstepd: [4294967295.extern]"),
            (P{{4294967295u, "extern"}}));
  EXPECT_EQ(ParseStepDaemonTitle("slurmstepd: [12]"), std::nullopt);
  EXPECT_EQ(ParseStepDaemonTitle("slurmstepd: [12."), std::nullopt);
  EXPECT_EQ(ParseStepDaemonTitle("slurmstepd: [x.0]"), std::nullopt);
  EXPECT_EQ(ParseStepDaemonTitle("slurmd -D"), std::nullopt);
  EXPECT_EQ(ParseStepDaemonTitle(""), std::nullopt);
}

TEST(StaleSteps, ParsesSqueueStates) {
  auto states = ParseJobStates("  12|RUNNING\n13|COMPLETING\n14_2|PENDING\n15+1|RUNNING\n"
                               "garbage\n16|PENDING\r\n");
  ASSERT_EQ(states.size(), 3u);
  EXPECT_EQ(states[12], "RUNNING");
  EXPECT_EQ(states[13], "COMPLETING");
  EXPECT_EQ(states[16], "PENDING");
  EXPECT_TRUE(JobStillRunning("RUNNING"));
  EXPECT_TRUE(JobStillRunning("SUSPENDED"));
  EXPECT_FALSE(JobStillRunning("COMPLETING"));
  EXPECT_FALSE(JobStillRunning("PENDING"));
  EXPECT_FALSE(JobStillRunning("NODE_FAIL"));
}

TEST(StaleSteps, OnlyTasklessDaemonsOfJobsSlurmNoLongerRunsAreOrphans) {
  StaleStepTracker tracker(2s);
  const SystemTime t0 = SystemTime(100s);
  std::vector<StepDaemon> scan = {{10, 5, "0", false},      // idle, job requeued
                                  {11, 6, "0", false},      // idle, job still running
                                  {12, 7, "0", true},       // busy, job completing
                                  {13, 8, "extern", false}, // idle, job purged
                                  {14, 5, "batch", false}};
  // Just seen without tasks: nothing to ask yet.
  EXPECT_TRUE(tracker.Observe(scan, t0).empty());
  EXPECT_TRUE(tracker.Orphans({{5, "PENDING"}}, t0).empty());
  // 1.9 s later: still within the grace.
  EXPECT_TRUE(tracker.Observe(scan, t0 + 1900ms).empty());
  // 2 s later the idle daemons' jobs are asked about.
  EXPECT_EQ(tracker.Observe(scan, t0 + 2s), (std::vector<uint32_t>{5, 6, 8}));
  const std::map<uint32_t, std::string> states = {
      {5, "PENDING"}, {6, "RUNNING"}, {7, "COMPLETING"}};
  std::vector<int> pids;
  for (const auto& d : tracker.Orphans(states, t0 + 2s)) pids.push_back(d.pid);
  EXPECT_EQ(pids, (std::vector<int>{10, 13, 14}));

  // A daemon that gets tasks again starts its grace over.
  scan[0].has_tasks = true;
  tracker.Observe(scan, t0 + 3s);
  scan[0].has_tasks = false;
  tracker.Observe(scan, t0 + 4s);
  pids.clear();
  for (const auto& d : tracker.Orphans(states, t0 + 4s)) pids.push_back(d.pid);
  EXPECT_EQ(pids, (std::vector<int>{13, 14}));
  // A daemon gone from the scan is forgotten; a new one with its pid starts over.
  tracker.Observe({}, t0 + 5s);
  EXPECT_TRUE(tracker.Observe({{13, 8, "extern", false}}, t0 + 6s).empty());
}

// A process whose comm is "slurmstepd" and whose title is "slurmstepd: [<job>.0]": a
// symlink named slurmstepd to sleep (no child) or to sh running "sleep & wait" (a child,
// as a step's task), run with that argv[0], in a process group of its own.
class FakeStepDaemon {
 public:
  FakeStepDaemon(const fs::path& dir, uint32_t job, bool with_task) {
    const fs::path bin = dir / (with_task ? "sh" : "sleep");
    const fs::path link = bin / "slurmstepd";
    fs::create_directories(bin);
    if (!fs::exists(link)) fs::create_symlink(with_task ? "/bin/sh" : "/bin/sleep", link);
    title_ = "slurmstepd: [" + std::to_string(job) + ".0]";
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      if (with_task) {
        execl(link.c_str(), title_.c_str(), "-c", "sleep 60 & wait", nullptr);
      } else {
        execl(link.c_str(), title_.c_str(), "60", nullptr);
      }
      _exit(127);
    }
  }
  ~FakeStepDaemon() {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  /// True once the process has exited (reaped here).
  bool Exited() {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return pid_ < 0;
  }

 private:
  std::string title_;
  pid_t pid_ = -1;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits until /proc shows `pid` with the wanted comm and, when `children`, a child.
bool WaitForProcess(pid_t pid, bool children) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  const fs::path p = "/proc/" + std::to_string(pid);
  while (std::chrono::steady_clock::now() < deadline) {
    const bool named = ReadFile(p / "comm").starts_with("slurmstepd");
    const std::string kids = ReadFile(p / "task" / std::to_string(pid) / "children");
    if (named && (!children || !kids.empty())) return true;
    std::this_thread::sleep_for(10ms);  // polling /proc, with a deadline
  }
  return false;
}

// A /proc view holding only `pids` and their children.
fs::path ProcView(const fs::path& dir, const std::vector<pid_t>& pids) {
  const fs::path view = dir / "proc";
  fs::create_directories(view);
  for (pid_t pid : pids) {
    fs::create_directory_symlink("/proc/" + std::to_string(pid), view / std::to_string(pid));
    std::istringstream kids(
        ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
    for (std::string kid; kids >> kid;) {
      fs::create_directory_symlink("/proc/" + kid, view / kid);
    }
  }
  return view;
}

TEST(StaleSteps, ReaperKillsOnlyOrphanedDaemons) {
  const fs::path dir = fs::temp_directory_path() /
                       ("hf-stale-steps-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  FakeStepDaemon requeued(dir, 901, false);   // job requeued: orphaned
  FakeStepDaemon running(dir, 902, false);    // job still running: left alone
  FakeStepDaemon busy(dir, 903, true);        // tasks still alive: left alone
  ASSERT_TRUE(WaitForProcess(requeued.pid(), false));
  ASSERT_TRUE(WaitForProcess(running.pid(), false));
  ASSERT_TRUE(WaitForProcess(busy.pid(), true));
  const fs::path proc = ProcView(dir, {requeued.pid(), running.pid(), busy.pid()});

  const auto scan = ScanStepDaemons(proc);
  ASSERT_EQ(scan.size(), 3u);
  for (const auto& d : scan) {
    EXPECT_EQ(d.has_tasks, d.pid == busy.pid()) << d.pid;
    EXPECT_EQ(d.step, "0");
  }

  ManualClock clock;
  int queries = 0;
  std::optional<std::string> answer;  // slurmctld down at first
  StaleStepReaper reaper(proc, Duration::zero(), 2s, [&] {
    ++queries;
    return answer;
  }, clock);
  EXPECT_TRUE(reaper.RunOnce().empty());
  EXPECT_EQ(queries, 0);  // nobody idle long enough: slurmctld is not asked
  clock.advance(2s);
  EXPECT_TRUE(reaper.RunOnce().empty());  // asked, no answer: nothing is killed
  EXPECT_EQ(queries, 1);
  answer = "901|PENDING\n902|RUNNING\n903|COMPLETING\n";
  clock.advance(1s);
  const auto ended = reaper.RunOnce();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].pid, requeued.pid());
  EXPECT_EQ(ended[0].job_id, 901u);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!requeued.Exited() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);  // polling /proc, with a deadline
  }
  EXPECT_TRUE(requeued.Exited());
  EXPECT_FALSE(running.Exited());
  EXPECT_FALSE(busy.Exited());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hf::agent
