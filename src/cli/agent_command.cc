#include "hyperfleet/cli/agent_command.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "hyperfleet/agent/agent.h"

namespace hf::cli {
namespace {

struct AgentFlags {
  std::string env_file;  // empty: <root>/etc/hyperfleet/agent.env
  std::string root = "/";
  bool once = false;
  std::string log_level = "info";
};

int RunAgentCommand(const AgentFlags& flags) {
  // journald stamps each line itself; keep ours short and on stderr.
  auto logger = spdlog::stderr_logger_mt("hyperfleet-agent");
  logger->set_pattern("%l: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(flags.log_level));

  agent::AgentOptions options;
  options.root = flags.root;
  options.once = flags.once;
  const std::string env_file =
      flags.env_file.empty() ? agent::NodePath(flags.root, "/etc/hyperfleet/agent.env")
                             : flags.env_file;
  if (Status s = agent::LoadAgentEnv(env_file, &options); !s.ok()) {
    std::fprintf(stderr, "hyperfleet agent: %s\n", std::string(s.message()).c_str());
    return 1;
  }

  // SIGTERM/SIGINT go to one thread that stops the agent: they are blocked in every thread
  // (lifecycle scripts are spawned with an empty mask, so they still receive them).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  agent::Agent node_agent(options);
  std::thread([&node_agent, signals] {
    int sig = 0;
    if (sigwait(&signals, &sig) == 0) {
      spdlog::info("signal {}: stopping", sig);
      node_agent.Stop();
    }
  }).detach();

  spdlog::info("hyperfleet agent for {} starting (control plane {})", options.instance_id,
               options.url);
  const Status status = node_agent.Run();
  if (!status.ok() && status.code() != absl::StatusCode::kCancelled) {
    spdlog::error("{}", std::string(status.message()));
    return 1;
  }
  spdlog::info("hyperfleet agent stopped");
  return 0;
}

}  // namespace

void AddAgentCommand(CLI::App& app) {
  auto flags = std::make_shared<AgentFlags>();
  auto* cmd = app.add_subcommand("agent", "Run the node agent (inside a node)");
  cmd->add_option("--env-file", flags->env_file,
                  "KEY=VALUE file with HF_AGENT_URL, HF_INSTANCE_ID, HF_AGENT_TOKEN, and "
                  "HF_AGENT_CERT_SHA256 for an https URL (default: "
                  "<root>/etc/hyperfleet/agent.env)");
  cmd->add_option("--root", flags->root, "Prefix of every node file the agent reads or writes")
      ->capture_default_str();
  cmd->add_flag("--once", flags->once,
                "Exit once the lifecycle scripts' result is reported (tests)");
  cmd->add_option("--log-level", flags->log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  cmd->callback([flags] { std::exit(RunAgentCommand(*flags)); });
}

}  // namespace hf::cli
