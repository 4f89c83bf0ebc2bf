#include "hyperfleet/cli/ssm_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "hyperfleet/cli/client_config.h"
#include "hyperfleet/session/protocol.h"
#include "hyperfleet/session/session_client.h"

namespace hf::cli {
namespace {

struct StartSessionFlags {
  ClientFlags client;
  std::string target;
  std::string command;
  bool has_command = false;  // --command given (an empty command is still a command)
};

// Sessions live on the SageMaker API port, so they take SageMaker's endpoint variables, but
// are signed for SSM, whose operation they stand in for.
const ClientService& SessionService() {
  static const ClientService service{std::string(session::kSigningName), "AmazonSSM",
                                     "AWS_ENDPOINT_URL_SAGEMAKER"};
  return service;
}

[[noreturn]] void Fail(const Status& status) {
  std::fprintf(stderr, "%s\n", DescribeCallError(status, "StartSession").c_str());
  std::exit(255);
}

[[noreturn]] void RunStartSession(const StartSessionFlags& flags) {
  // Reject a malformed target before asking anyone anything.
  if (auto target = session::ParseTarget(flags.target); !target.ok()) Fail(target.status());
  auto config = ResolveClientConfig(flags.client, SessionService());
  if (!config.ok()) Fail(config.status());
  auto client = std::make_shared<AwsJsonClient>(*config, SessionService());

  session::SessionClientOptions options;
  options.endpoint_url = config->endpoint_url;
  options.sign = [client](http::HttpRequest& request) { client->Sign(request); };
  options.target = flags.target;
  if (flags.has_command) options.command = flags.command;
  options.pty = !flags.has_command && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  auto status = session::RunSession(options);
  if (!status.ok()) Fail(status.status());
  std::fflush(stdout);
  std::exit(*status);
}

}  // namespace

void AddSsmCommand(CLI::App& app) {
  auto* ssm = app.add_subcommand("ssm", "Shell sessions into cluster nodes (SSM-style)");
  ssm->require_subcommand(1);
  auto flags = std::make_shared<StartSessionFlags>();
  auto* start = ssm->add_subcommand(
      "start-session", "Open a shell in a node, or run one command there (--command)");
  start
      ->add_option("--target", flags->target,
                   std::string("Node: ") + std::string(session::kTargetForm))
      ->required();
  auto* command = start->add_option("--command", flags->command,
                    "Run this with `bash -lc` instead of an interactive shell; exit with its "
                    "status");
  AddClientFlags(*start, flags->client);
  start->callback([flags, command] {
    flags->has_command = command->count() > 0;
    RunStartSession(*flags);
  });
}

}  // namespace hf::cli
