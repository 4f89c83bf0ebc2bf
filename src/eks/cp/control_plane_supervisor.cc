// The supervisor of one EKS control plane (RunControlPlaneSupervisor in
// process_control_planes.h): a detached process that keeps etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler running and bootstraps the cluster once.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "eks/cp/control_plane_files.h"
#include "eks/cp/control_plane_host.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/eks/control_plane_plan.h"
#include "hyperfleet/eks/process_control_planes.h"

namespace hf::eks {
namespace {
using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kFirstBackoff = 1s;
constexpr auto kMaxBackoff = 30s;
constexpr auto kHealthyRun = 60s;  // a run this long resets the backoff
constexpr int kFailuresReported = 3;

void Log(const std::string& message) {
  std::fprintf(stderr, "eks-control-plane-supervisor[%d]: %s\n", getpid(), message.c_str());
  std::fflush(stderr);
}

// One component and what the supervisor knows of it.
struct Child {
  Component component;
  std::optional<Subprocess> process;
  Steady::time_point started{};
  Steady::time_point restart_at{};
  std::chrono::seconds backoff = kFirstBackoff;
  int failures = 0;  // consecutive short runs
};

void Start(const std::string& dir, Child& child) {
  ProcessSpec spec;
  spec.argv = child.component.argv;
  spec.cwd = dir;
  spec.group = ProcessGroup::kNewGroup;
  const std::string log = absl::StrCat(dir, "/logs/", child.component.name, ".log");
  const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out >= 0) {
    spec.out = Stdio::Fd(out);
    spec.err = Stdio::Stdout();
  }
  auto started = Subprocess::Spawn(spec);
  if (out >= 0) close(out);
  child.started = Steady::now();
  if (!started.ok()) {
    Log(absl::StrCat("cannot start ", child.component.name, ": ", started.status().message()));
    child.restart_at = child.started + child.backoff;
    return;
  }
  Log(absl::StrCat("started ", child.component.name, " pid ", started->pid()));
  child.process.emplace(*std::move(started));
}

// Notes an ended child and schedules its restart; failure.txt after repeated quick ends.
void Ended(const std::string& dir, Child& child, const ProcessExit& exit) {
  const auto now = Steady::now();
  const bool healthy = now - child.started >= kHealthyRun;
  child.failures = healthy ? 1 : child.failures + 1;
  child.backoff = healthy ? kFirstBackoff : std::min(child.backoff * 2, kMaxBackoff);
  child.restart_at = now + (healthy ? kFirstBackoff : child.backoff);
  child.process.reset();
  const std::string what = absl::StrCat(child.component.name, " exited with status ",
                                        exit.exit_code, " (", child.failures,
                                        " times in a row; see ", dir, "/logs/",
                                        child.component.name, ".log)");
  Log(what);
  if (child.failures >= kFailuresReported) {
    (void)WriteFileAtomically(dir + "/failure.txt", what, 0600);
  }
}

bool ApiserverReady(const std::string& dir, const SupervisorConfig& config) {
  auto pin = host::ApiserverPin(dir);
  return pin.ok() && host::ApiserverGet(config.apiserver_port, *pin, "/readyz", 2).ok();
}

// Once the apiserver is ready: the bootstrap bindings, then ready.json with the served
// version. Returns true when done.
bool Bootstrap(const std::string& dir, const SupervisorConfig& config) {
  auto pin = host::ApiserverPin(dir);
  if (!pin.ok()) return false;
  const std::string objects = dir + "/bootstrap.json";
  if (!WriteFileAtomically(objects, BootstrapObjects().dump(2) + "\n", 0600).ok()) return false;
  ProcessSpec spec;
  spec.argv = {config.kubectl, "--kubeconfig=" + config.admin_kubeconfig, "apply", "-f", objects};
  spec.env = std::vector<std::string>{"HOME=" + dir, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  spec.cwd = dir;
  spec.out = Stdio::Pipe();
  spec.err = Stdio::Stdout();
  RunOptions run;
  run.timeout = 60s;
  auto result = RunProcess(spec, run);
  if (!result.ok() || !result->ok()) {
    Log(absl::StrCat("kubectl apply of the bootstrap bindings failed: ",
                     result.ok() ? result->out : std::string(result.status().message())));
    return false;
  }
  auto version_body = host::ApiserverGet(config.apiserver_port, *pin, "/version", 5);
  if (!version_body.ok()) return false;
  const nlohmann::json version = nlohmann::json::parse(*version_body, nullptr, false);
  const std::string served =
      version.is_object() ? version.value("gitVersion", std::string()) : std::string();
  if (!WriteFileAtomically(dir + "/ready.json",
                           nlohmann::json{{"served_version", served}}.dump() + "\n", 0600)
           .ok()) {
    return false;
  }
  unlink((dir + "/failure.txt").c_str());
  Log("bootstrapped; apiserver " + served + " ready");
  return true;
}

// SIGTERM to every running child (last started first), SIGKILL after `grace`.
void StopAll(std::vector<Child>& children, std::chrono::seconds grace) {
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    if (it->process) it->process->Kill(SIGTERM);
  }
  const auto deadline = Steady::now() + grace;
  for (Child& child : children) {
    if (!child.process) continue;
    while (!child.process->TryWait() && Steady::now() < deadline) {
      usleep(50 * 1000);
    }
    if (!child.process->TryWait()) {
      Log(child.component.name + " did not stop in time; killing it");
      child.process->Kill(SIGKILL);
      (void)child.process->Wait();
    }
  }
}

}  // namespace

int RunControlPlaneSupervisor(const std::string& dir) {
  auto text = ReadFile(dir + "/components.json");
  const nlohmann::json json =
      text.ok() ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  auto config = SupervisorConfigFromJson(json);
  if (!config.ok()) {
    Log(text.ok() ? std::string(config.status().message())
                  : std::string(text.status().message()));
    return 2;
  }
  const sigset_t mask = BlockSupervisorSignals();  // for sigtimedwait below
  // READY is what this supervisor has seen: every component started, the bindings applied.
  unlink((dir + "/ready.json").c_str());
  (void)WriteFileAtomically(dir + "/supervisor.pid", std::to_string(getpid()) + "\n");

  std::vector<Child> children;
  for (const Component& c : config->components) children.push_back(Child{c, {}, {}, {}});
  bool bootstrapped = false;
  bool apiserver_ready = false;  // its /readyz answered ok once since we started
  auto next_check = Steady::now();
  for (;;) {
    if (!apiserver_ready && Steady::now() >= next_check) {
      apiserver_ready = ApiserverReady(dir, *config);
      next_check = Steady::now() + 250ms;
    }
    for (Child& child : children) {
      if (child.process) {
        if (auto exit = child.process->TryWait()) Ended(dir, child, *exit);
      }
      if (!child.process && Steady::now() >= child.restart_at &&
          (apiserver_ready || !child.component.after_apiserver_ready)) {
        Start(dir, child);
      }
    }
    if (apiserver_ready && !bootstrapped && Steady::now() >= next_check) {
      bootstrapped = Bootstrap(dir, *config);
      next_check = Steady::now() + 1s;
    }
    siginfo_t info{};
    timespec ts{0, 250 * 1000 * 1000};
    const int sig = sigtimedwait(&mask, &info, &ts);
    if (sig == SIGTERM || sig == SIGINT) break;
  }
  Log("stopping");
  StopAll(children, 10s);
  unlink((dir + "/supervisor.pid").c_str());
  Log("stopped");
  return 0;
}

}  // namespace hf::eks
