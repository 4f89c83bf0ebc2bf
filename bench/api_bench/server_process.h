#pragma once
// The `hyperfleet server` the benchmark starts (fake provider, a temporary data dir).
#include <sys/types.h>

#include <string>
#include <thread>

#include "options.h"

namespace api_bench {

class ServerProcess {
 public:
  ~ServerProcess() { stop(); }

  /// Starts `binary server ...` and waits for its "listening on http://HOST:PORT" line.
  bool start(const Options& o, std::string* host_port);

  int pid() const { return pid_; }
  const std::string& data_dir() const { return data_dir_; }

  /// SIGTERM (SIGKILL after 10 s), then removes the data dir unless it is to be kept.
  void stop();

 private:
  bool makeDataDir(const Options& o);
  bool spawn(const Options& o);
  bool awaitListening(std::string* host_port);
  // Keeps reading the server's output (so it never blocks on a full pipe) into server.log.
  void drain();

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool keep_ = false;
  std::string data_dir_, log_path_, early_output_;
  std::thread drain_;
};

/// The hyperfleet binary next to this one (or in its bin/).
std::string DefaultServerBinary();

}  // namespace api_bench
