// The node supervisor: one detached process per node, so that nodes outlive the server.
// Reads <node-dir>/node.json (written by LocalProvider), joins the node's cgroups, runs
// systemd-nspawn, relaunches it after a reboot, powers the node off on SIGTERM.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/nspawn_argv.h"
#include "provider/local/sys.h"

namespace hf::provider {
namespace {
using local::ChildPids;

void Log(const std::string& message) {
  std::fprintf(stderr, "node-supervisor[%d]: %s\n", getpid(), message.c_str());
  std::fflush(stderr);
}

// Best effort: a knob the host lacks is logged, not fatal.
void WriteTo(const std::string& path, const std::string& value) {
  if (Status st = local::WriteKernelFile(path, value); !st.ok()) Log(std::string(st.message()));
}

// Joins hyperfleet/<fleet>/<instance> in every hierarchy: on a hybrid host nspawn nests the
// payload under its own v2 cgroup, so nodes sharing one would collide.
void JoinCgroups(const nlohmann::json& node) {
  const std::string rel = absl::StrCat("hyperfleet/", node.value("fleet_id", ""), "/",
                                       node.value("instance_id", ""));
  const int vcpus = node.value("vcpus", 0);
  const double memory_gib = node.value("memory_gib", 0.0);
  const auto memory_bytes = static_cast<long long>(memory_gib * 1024 * 1024 * 1024);
  for (const std::string& root : local::CgroupHierarchies()) {
    const std::string dir = absl::StrCat(root, "/", rel);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      Log(absl::StrCat("cannot create cgroup ", dir, ": ", ec.message()));
      continue;
    }
    const bool v2 = std::filesystem::exists(root + "/cgroup.controllers");
    // A v1 cpuset cgroup takes no process until it has CPUs and memory nodes: inherit the
    // parent's at every level we created.
    if (!v2 && std::filesystem::exists(dir + "/cpuset.cpus")) {
      std::string level = root;
      for (const std::string& part : {std::string("hyperfleet"),
                                     absl::StrCat("hyperfleet/", node.value("fleet_id", "")),
                                     rel}) {
        const std::string child = absl::StrCat(root, "/", part);
        for (const char* knob : {"cpuset.cpus", "cpuset.mems"}) {
          auto mine = ReadFile(child + "/" + knob);
          if (mine.ok() && absl::StripAsciiWhitespace(*mine).empty()) {
            auto theirs = ReadFile(level + "/" + knob);
            if (theirs.ok()) WriteTo(child + "/" + knob, std::string(absl::StripAsciiWhitespace(*theirs)));
          }
        }
        level = child;
      }
    }
    // On a hybrid host the unified hierarchy carries no controllers: caps go through v1.
    bool v2_controllers = false;
    if (v2) {
      auto controllers = ReadFile(root + "/cgroup.controllers");
      v2_controllers = controllers.ok() && controllers->find("memory") != std::string::npos;
    }
    if (v2_controllers && (vcpus > 0 || memory_bytes > 0)) {
      // Controllers must be enabled on every ancestor below the root (best effort).
      std::string parent = root;
      for (const std::string& part : {std::string("hyperfleet"),
                                     absl::StrCat("hyperfleet/", node.value("fleet_id", ""))}) {
        WriteTo(parent + "/cgroup.subtree_control", "+cpu +memory");
        parent = absl::StrCat(root, "/", part);
      }
      WriteTo(parent + "/cgroup.subtree_control", "+cpu +memory");
      if (vcpus > 0 && std::filesystem::exists(dir + "/cpu.max")) {
        WriteTo(dir + "/cpu.max", absl::StrCat(vcpus * 100000, " 100000"));
      }
      if (memory_bytes > 0 && std::filesystem::exists(dir + "/memory.max")) {
        WriteTo(dir + "/memory.max", std::to_string(memory_bytes));
      }
    }
    if (!v2 && vcpus > 0 && std::filesystem::exists(dir + "/cpu.cfs_quota_us")) {
      WriteTo(dir + "/cpu.cfs_period_us", "100000");
      WriteTo(dir + "/cpu.cfs_quota_us", std::to_string(vcpus * 100000));
    }
    if (!v2 && memory_bytes > 0 && std::filesystem::exists(dir + "/memory.limit_in_bytes")) {
      WriteTo(dir + "/memory.limit_in_bytes", std::to_string(memory_bytes));
    }
    WriteTo(dir + "/cgroup.procs", std::to_string(getpid()));
  }
}

StatusOr<Subprocess> StartNspawn(const nlohmann::json& node) {
  ProcessSpec spec;
  spec.argv = local::NspawnArgv(node);
  // Our environment (the console's stdin/stdout/stderr are inherited too), and a /tmp that is
  // the node's own disk rather than a tmpfs.
  spec.env.emplace();
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "SYSTEMD_NSPAWN_TMPFS_TMP=")) spec.env->push_back(*e);
  }
  spec.env->push_back("SYSTEMD_NSPAWN_TMPFS_TMP=0");
  spec.in = Stdio::Inherit();
  return Subprocess::Spawn(spec);  // with an empty signal mask: ours blocks SIGTERM and SIGCHLD
}

// Waits up to `timeout` for `nspawn` to end; its exit, or nullopt when it still runs.
std::optional<ProcessExit> WaitExit(Subprocess& nspawn, std::chrono::milliseconds timeout) {
  (void)local::WaitFor([&] { return nspawn.TryWait().has_value(); }, timeout);
  return nspawn.TryWait();
}

}  // namespace

int RunNodeSupervisor(const std::string& node_dir) {
  auto text = ReadFile(node_dir + "/node.json");
  if (!text.ok()) {
    Log(std::string(text.status().message()));
    return 2;
  }
  const nlohmann::json node = nlohmann::json::parse(*text, nullptr, false);
  if (!node.is_object()) {
    Log("malformed node.json");
    return 2;
  }
  const sigset_t mask = BlockSupervisorSignals();  // for sigtimedwait below
  (void)WriteFileAtomically(node_dir + "/supervisor.pid", std::to_string(getpid()) + "\n");
  JoinCgroups(node);
  const int stop_timeout = node.value("stop_timeout_seconds", 20);
  const std::string hostname = node.value("hostname", "");

  int exit_code = 0;
  bool stopping = false;
  while (!stopping) {
    auto started = StartNspawn(node);
    if (!started.ok()) {
      Log(std::string(started.status().message()));
      return 1;
    }
    Subprocess& nspawn = *started;
    (void)WriteFileAtomically(node_dir + "/nspawn.pid", std::to_string(nspawn.pid()) + "\n");
    Log(absl::StrCat("started systemd-nspawn pid ", nspawn.pid()));
    std::optional<ProcessExit> ended;
    for (;;) {
      siginfo_t info{};
      timespec ts{1, 0};
      const int sig = sigtimedwait(&mask, &info, &ts);
      if (sig == SIGTERM || sig == SIGINT) {
        stopping = true;
        break;
      }
      if ((ended = nspawn.TryWait())) break;
    }
    if (stopping) {
      const std::vector<int> inits = ChildPids(nspawn.pid());
      if (!inits.empty()) {
        Log(absl::StrCat("powering off the node (init pid ", inits[0], ")"));
        kill(inits[0], SIGRTMIN + 4);
      } else {
        nspawn.Kill(SIGTERM);
      }
      if (!WaitExit(nspawn, std::chrono::seconds(stop_timeout))) {
        Log("the node did not power off in time; killing it");
        for (int init : ChildPids(nspawn.pid())) kill(init, SIGKILL);  // ends its PID namespace
        if (!WaitExit(nspawn, std::chrono::seconds(10))) {
          nspawn.Kill(SIGKILL);
          (void)WaitExit(nspawn, std::chrono::seconds(10));
        }
      }
      break;
    }
    const int code = ended->exit_code;
    if (code == 133) {
      Log("the node rebooted; starting it again");
      continue;
    }
    Log(absl::StrCat("systemd-nspawn exited with status ", code));
    exit_code = code == 0 ? 0 : 1;
    break;
  }
  // However nspawn ended (killed, crashed), nothing of the node may keep running: its init and
  // services, orphaned, would stay in the node's cgroups. Kill all but ourselves.
  const std::string rel = absl::StrCat("hyperfleet/", node.value("fleet_id", ""), "/",
                                       node.value("instance_id", ""));
  (void)local::WaitFor(
      [&] {
        bool others = false;
        for (const std::string& root : local::CgroupHierarchies()) {
          for (int pid : local::CgroupTreePids(root + "/" + rel)) {
            if (pid == getpid()) continue;
            others = true;
            kill(pid, SIGKILL);
          }
        }
        return !others;
      },
      std::chrono::seconds(5), std::chrono::milliseconds(50));
  // nspawn leaves its per-machine propagation directory on the host.
  std::error_code ec;
  std::filesystem::remove_all("/run/systemd/nspawn/propagate/" + hostname, ec);
  unlink((node_dir + "/nspawn.pid").c_str());
  unlink((node_dir + "/supervisor.pid").c_str());
  Log("stopped");
  return exit_code;
}

}  // namespace hf::provider
