#pragma once
// `hyperfleet server`: the control plane process.
#include <cstdint>
#include <string>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::cli {

/// Flags of `hyperfleet server`.
struct ServerFlags {
  std::string listen = "127.0.0.1:9080";  ///< HOST:PORT; port 0 picks a free port
  std::string data_dir;                   ///< empty: ResolveDataDir()
  std::string region = "us-west-2";
  std::string account_id = "123456789012";
  std::string provider = "fake";
  std::string access_key_id, secret_access_key;  ///< an extra key pair (scripts, tests)
  int io_threads = 2;
  int fake_boot_delay_ms = 200;      ///< fake provider: launch to Running, milliseconds
  int max_clusters = 100;
  int max_instances_per_cluster = 10000;
  std::string log_level = "info";
};

/// Runs the control plane until SIGINT or SIGTERM. Prints one line
/// "hyperfleet server listening on http://HOST:PORT (data dir DIR)" once it serves.
/// Errors: bad flags (InvalidArgument), unusable data dir or store (Internal),
/// address in use (Unavailable).
Status RunServer(const ServerFlags& flags);

}  // namespace hf::cli
