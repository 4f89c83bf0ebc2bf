// hyperfleet: one binary, one subcommand per role. This file only parses flags and wires.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "hyperfleet/cli/agent_command.h"
#include "hyperfleet/cli/image_command.h"
#include "hyperfleet/cli/logs_command.h"
#include "hyperfleet/cli/server_command.h"
#include "hyperfleet/cli/ssm_command.h"

int main(int argc, char** argv) {
  CLI::App app{"Hyperfleet: a self-hosted SageMaker HyperPod"};
  app.require_subcommand(1);

  hf::cli::ServerFlags server;
  auto* srv = app.add_subcommand("server", "Run the control plane (SageMaker API endpoint)");
  srv->add_option("--listen", server.listen, "HOST:PORT to serve the API on")
      ->capture_default_str();
  srv->add_option("--data-dir", server.data_dir,
                  "State directory (default: $HYPERFLEET_DATA_DIR, /var/lib/hyperfleet as "
                  "root, else ~/.hyperfleet)");
  srv->add_option("--region", server.region, "Region in ARNs and SigV4 scopes")
      ->capture_default_str();
  srv->add_option("--account-id", server.account_id, "Account id in ARNs")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v.size() == 12 && v.find_first_not_of("0123456789") == std::string::npos) return "";
        return "--account-id must be 12 digits";
      });
  srv->add_option("--provider", server.provider, "Where instances come from: fake")
      ->capture_default_str();
  srv->add_option("--access-key-id", server.access_key_id, "Also accept this access key id");
  srv->add_option("--secret-access-key", server.secret_access_key,
                  "Secret of --access-key-id");
  srv->add_option("--io-threads", server.io_threads, "HTTP I/O threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  srv->add_option("--fake-boot-delay-ms", server.fake_boot_delay_ms,
                  "fake provider: milliseconds from launch to Running")
      ->capture_default_str()
      ->check(CLI::Range(0, 3600000));
  srv->add_option("--max-clusters", server.max_clusters, "Clusters allowed at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  srv->add_option("--max-instances-per-cluster", server.max_instances_per_cluster,
                  "Instances allowed per cluster")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  srv->add_option("--log-level", server.log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  srv->callback([&] {
    auto status = hf::cli::RunServer(server);
    if (!status.ok()) {
      std::fprintf(stderr, "hyperfleet server: %s\n", std::string(status.message()).c_str());
      std::exit(1);
    }
  });

  hf::cli::AddAgentCommand(app);
  hf::cli::AddImageCommand(app);
  hf::cli::AddLogsCommand(app);
  hf::cli::AddSsmCommand(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
