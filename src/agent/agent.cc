// The agent's life as an ordered list of steps (Nomad's task runner: prestart hooks, then
// the run): register, write the node files, start the heartbeat with its hooks, wait for the
// scripts' turn (controller first), run the lifecycle scripts, start the units the control
// plane names (an EKS node's kubelet); then heartbeat until stopped.
// Each step is a function of its own below; the heartbeat's optional hooks (health checks,
// the Slurm controller's duties) are chosen by configuration in HeartbeatHooks().
//
// Where the rest lives (src/agent/): control_plane_client (requests, retries), node_files
// (paths, files, bundle keys), env_file (agent.env), lifecycle_runner (the scripts and their
// record), heartbeat (the loop and the hook interface), health_hook, slurm_controller and
// slurm_controller_hook (with slurm_jobs and stale_steps).
#include "hyperfleet/agent/agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "control_plane_client.h"
#include "health_hook.h"
#include "heartbeat.h"
#include "hyperfleet/agent/env_file.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/common/subprocess.h"
#include "lifecycle_runner.h"
#include "slurm_controller_hook.h"

namespace hf::agent {
namespace {

std::string ReadBootId() {
  auto id = ReadFile("/proc/sys/kernel/random/boot_id");
  return id.ok() ? std::string(StripAsciiWhitespace(*id)) : std::string();
}

/// The Slurm commands of this agent: the options' own where given (tests), else a node's
/// real ones when the agent runs on a node (root "/"), else none.
SlurmCommands SlurmCommandsFor(const AgentOptions& options, const Clock& clock) {
  SlurmCommands commands;
  if (options.root == "/") commands = NodeSlurmCommands(clock);
  if (options.reload_slurm) {
    commands.reload = [reload = options.reload_slurm](SlurmReload kind, const std::string&,
                                                      const std::string&) {
      return reload(kind);
    };
  }
  if (options.query_slurm_nodes) commands.query_nodes = options.query_slurm_nodes;
  if (options.run_slurm_commands) commands.run = options.run_slurm_commands;
  if (options.query_slurm_jobs) commands.query_jobs = options.query_slurm_jobs;
  return commands;
}

/// Whether the files make this node the Slurm controller (only it receives slurm.conf:
/// configless slurmds fetch it).
bool HasSlurmConf(const std::vector<agentapi::NodeFile>& files) {
  return std::any_of(files.begin(), files.end(),
                     [](const agentapi::NodeFile& f) { return f.path == kSlurmConfPath; });
}

/// `systemctl start <units>` on this node: whether it exited 0 within 5 minutes (containerd
/// is Type=notify: systemctl waits until it is up). Its output goes to the log on failure.
bool SystemctlStart(const std::vector<std::string>& units, const std::atomic<bool>& stop) {
  ProcessSpec spec;
  spec.argv = {"systemctl", "start"};
  spec.argv.insert(spec.argv.end(), units.begin(), units.end());
  spec.env = std::vector<std::string>{
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C",
      "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"};
  spec.out = Stdio::Pipe();
  spec.err = Stdio::Stdout();
  spec.group = ProcessGroup::kNewGroup;
  RunOptions run;
  run.timeout = std::chrono::minutes(5);
  run.stop = &stop;
  auto result = RunProcess(spec, run);
  if (!result.ok()) {
    spdlog::error("systemctl start: {}", std::string(result.status().message()));
    return false;
  }
  if (!result->ok()) {
    spdlog::error("systemctl start {} exited {}: {}", absl::StrJoin(units, " "),
                  result->exit.exit_code, std::string(StripAsciiWhitespace(result->out)));
  }
  return result->ok();
}

}  // namespace

/// What one Run() learns, step by step.
struct Agent::Context {
  std::unique_ptr<ImdsServer> imds;  ///< this node's IMDS (registered machines), if asked
  std::unique_ptr<ControlPlaneClient> client;
  std::string boot_id;
  agentapi::RegisterResponse registration;
  agentapi::LifecycleSpec lifecycle;  ///< the last answer on the scripts
  std::thread heartbeat;
  bool finished = false;  ///< the lifecycle result was acknowledged (or none was asked)
};

Agent::Agent(AgentOptions options, const Clock* clock)
    : options_(std::move(options)), clock_(clock) {
  static const SystemClock kSystemClock;
  if (clock_ == nullptr) clock_ = &kSystemClock;
  lifecycle_ = std::make_unique<LifecycleRunner>(
      options_, *clock_, stop_, [this](std::chrono::milliseconds d) { return SleepFor(d); });
}

Agent::~Agent() = default;

bool Agent::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [&] { return stop_.load(); });
  return !stop_.load();
}

void Agent::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  lifecycle_->Abandon();
}

Status Agent::Run() {
  Context ctx;
  struct Step {
    std::string_view name;
    Status (Agent::*run)(Context&);
  };
  static constexpr Step kSteps[] = {
      {"imds", &Agent::StartImds},
      {"register", &Agent::Register},
      {"node files", &Agent::WriteFiles},
      {"heartbeat", &Agent::StartHeartbeat},
      {"controller first", &Agent::WaitForTurn},
      {"lifecycle scripts", &Agent::RunLifecycle},
      {"start units", &Agent::StartUnits},
  };
  Status status = absl::OkStatus();
  for (const Step& step : kSteps) {
    spdlog::debug("agent step: {}", step.name);
    status = (this->*step.run)(ctx);
    if (!status.ok()) break;
  }
  if (!ctx.heartbeat.joinable()) return status;  // stopped before registering
  lifecycle_done_ = true;
  if (!options_.once) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_.load(); });
  } else {
    Stop();
  }
  ctx.heartbeat.join();
  if (!ctx.finished && options_.once) return absl::CancelledError("stopped during the lifecycle");
  return absl::OkStatus();
}

// IMDS for this node when agent.env asks (a registered machine without a metadata service):
// before the scripts, which read it. A failure is logged, not fatal: the scripts then see no
// IMDS, as on a machine whose own service was kept (imds_server.h).
Status Agent::StartImds(Context& ctx) {
  if (!options_.imds) return absl::OkStatus();
  auto server = ImdsServer::Start(*options_.imds, options_.imds_listen);
  if (!server.ok()) {
    spdlog::error("IMDS not served: {}", std::string(server.status().message()));
    return absl::OkStatus();
  }
  ctx.imds = std::move(*server);
  return absl::OkStatus();
}

// Registers, retrying until the control plane answers (it may be restarting).
Status Agent::Register(Context& ctx) {
  // Never the token to an endpoint that is not what it should be (no trust on first use).
  HF_RETURN_IF_ERROR(CheckAgentEndpoint(options_));
  ctx.client = std::make_unique<ControlPlaneClient>(
      options_, [this](std::chrono::milliseconds d) { return SleepFor(d); });
  ctx.boot_id = options_.boot_id.empty() ? ReadBootId() : options_.boot_id;
  if (stop_) return absl::CancelledError("stopped before registering");
  HF_ASSIGN_OR_RETURN(ctx.registration, ctx.client->Register(ctx.boot_id));
  ctx.lifecycle = ctx.registration.lifecycle;
  spdlog::info("registered as {} of group {} in cluster {} ({})", options_.instance_id,
               ctx.registration.group, ctx.registration.cluster_name,
               ctx.registration.cluster_id);
  return absl::OkStatus();
}

// The node contract's files. One that cannot be written is logged, not fatal: the scripts
// then fail visibly.
Status Agent::WriteFiles(Context& ctx) {
  if (Status s = WriteNodeFiles(options_.root, ctx.registration.files); !s.ok()) {
    spdlog::error("node files incomplete: {}", std::string(s.message()));
  }
  // User job scripts test this directory to detect HyperPod (docs/hyperpod-contract.md
  // "Node files").
  if (Status s = MakeDirs(NodePath(options_.root, "/opt/sagemaker_cluster"), 0755); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
  }
  return absl::OkStatus();
}

// The heartbeat on a thread of its own, with the hooks the configuration asks for.
Status Agent::StartHeartbeat(Context& ctx) {
  const Duration interval = std::chrono::seconds(std::max(1, ctx.registration.heartbeat_seconds));
  std::vector<std::unique_ptr<HeartbeatHook>> hooks;
  if (options_.health_checks) {
    HealthMonitorOptions health;
    health.root = options_.root;
    health.expected_gpus = ctx.registration.expected_gpus;
    health.clock = clock_;
    health.stop = &stop_;
    hooks.push_back(std::make_unique<HealthHook>(std::move(health), interval, lifecycle_done_));
  }
  hooks.push_back(std::make_unique<SlurmControllerHook>(
      options_.root, SlurmCommandsFor(options_, *clock_), interval,
      HasSlurmConf(ctx.registration.files), lifecycle_done_, *clock_));
  auto heartbeat = std::make_shared<Heartbeat>(
      options_, stop_, [this](std::chrono::milliseconds d) { return SleepFor(d); },
      std::move(hooks));
  ctx.heartbeat = std::thread([heartbeat, seconds = ctx.registration.heartbeat_seconds,
                               revision = ctx.registration.files_revision] {
    heartbeat->Run(seconds, revision);
  });
  return absl::OkStatus();
}

// Held back (controller first): ask again until the control plane says run (or not).
Status Agent::WaitForTurn(Context& ctx) {
  std::string last_reason;
  while (ctx.lifecycle.wait) {
    if (ctx.lifecycle.wait_reason != last_reason) {
      spdlog::info("lifecycle scripts wait: {}", ctx.lifecycle.wait_reason);
      lifecycle_->AppendNodeLog("[hyperfleet] Waiting to run the lifecycle scripts: " +
                                ctx.lifecycle.wait_reason);
      last_reason = ctx.lifecycle.wait_reason;
    }
    const auto retry = std::chrono::milliseconds(std::clamp<int64_t>(ctx.lifecycle.retry_ms, 50, 60000));
    if (!SleepFor(retry)) return absl::CancelledError("stopped while waiting");
    auto again = ctx.client->Register(ctx.boot_id);
    if (!again.ok()) return again.status();  // stopped
    ctx.lifecycle = again->lifecycle;
    ctx.registration.start_units = std::move(again->start_units);
    if (again->files_revision != ctx.registration.files_revision) {
      // Files the control plane could make only now (an EKS node's kubelet files, once its
      // Kubernetes control plane answers): written before the scripts, as at registration.
      // The heartbeat gets them too and confirms them.
      ctx.registration.files = std::move(again->files);
      ctx.registration.files_revision = again->files_revision;
      HF_RETURN_IF_ERROR(WriteFiles(ctx));
    }
  }
  return absl::OkStatus();
}

Status Agent::RunLifecycle(Context& ctx) {
  ctx.finished = lifecycle_->Run(ctx.lifecycle);
  return absl::OkStatus();
}

// The units the control plane names (start_units): after scripts that succeeded, or at once
// when none were to run (they ran before this boot); never after a failure or a stop. A unit
// that does not start is logged, not fatal: the node stays up for the user to look at.
Status Agent::StartUnits(Context& ctx) {
  const std::vector<std::string>& units = ctx.registration.start_units;
  if (units.empty() || stop_) return absl::OkStatus();
  const std::string names = absl::StrJoin(units, " ");
  if (ctx.lifecycle.run && !lifecycle_->Succeeded()) {
    spdlog::info("not starting {}: the lifecycle scripts did not succeed", names);
    return absl::OkStatus();
  }
  bool started = false;
  if (options_.start_units) {
    started = options_.start_units(units);
  } else if (options_.root == "/") {
    started = SystemctlStart(units, stop_);
  } else {
    spdlog::info("not starting {} under root {}", names, options_.root);
    return absl::OkStatus();
  }
  if (started) {
    spdlog::info("started {}", names);
    lifecycle_->AppendNodeLog("[hyperfleet] Started " + names);
  } else {
    lifecycle_->AppendNodeLog("[hyperfleet] Could not start " + names +
                              " (see the agent's journal)");
  }
  return absl::OkStatus();
}

}  // namespace hf::agent
