#include "hyperfleet/cli/server_command.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/api/api_handler.h"
#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/auth/credentials.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/common/paths.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/model/service_model.h"
#include "hyperfleet/provider/fake_provider.h"
#include "hyperfleet/store/store.h"

namespace hf::cli {
namespace {

StatusOr<std::pair<std::string, uint16_t>> ParseListen(const std::string& listen) {
  auto colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(listen).substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen must be HOST:PORT (e.g. 127.0.0.1:9080), got '", listen, "'"));
  }
  return std::make_pair(listen.substr(0, colon), static_cast<uint16_t>(port));
}

/// Takes an exclusive lock on `<data_dir>/server.lock` and writes our pid into it.
/// FailedPrecondition when another server holds it.
StatusOr<int> LockDataDir(const std::string& data_dir) {
  const std::string path = data_dir + "/server.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "another hyperfleet server (pid ", n > 0 ? absl::StripAsciiWhitespace(pid) : "?",
        ") is using the data dir ", data_dir, "; stop it or use another --data-dir"));
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    spdlog::warn("cannot write pid to {}", path);
  }
  return fd;
}

}  // namespace

Status RunServer(const ServerFlags& flags) {
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  // A few malloc arenas, not one per thread: per-thread arenas keep freed memory that a
  // long-lived server with short bursts never reuses.
  mallopt(M_ARENA_MAX, 2);
  HF_ASSIGN_OR_RETURN(auto listen, ParseListen(flags.listen));
  if (flags.provider != "fake") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--provider ", flags.provider, " is not available; providers: fake"));
  }
  if (flags.access_key_id.empty() != flags.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        "--access-key-id and --secret-access-key must be given together");
  }
  const std::string data_dir = ResolveDataDir(flags.data_dir);
  HF_RETURN_IF_ERROR(EnsureDirectory(data_dir));
  // One server per data dir: two would each drive the same instances from their own view.
  HF_ASSIGN_OR_RETURN(int lock_fd, LockDataDir(data_dir));
  (void)lock_fd;  // held (and the lock with it) until the process exits

  // Block the stop signals before any thread starts, so that only sigwait() sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::optional<auth::AccessKey> created;
  HF_ASSIGN_OR_RETURN(auto credentials,
                      auth::CredentialStore::LoadOrCreate(data_dir + "/credentials", &created));
  if (created) {
    std::printf(
        "Created access key %s in %s/credentials (secret in that file; shown once here):\n"
        "  aws_access_key_id = %s\n  aws_secret_access_key = %s\n",
        created->access_key_id.c_str(), data_dir.c_str(), created->access_key_id.c_str(),
        created->secret_access_key.c_str());
  }
  if (!flags.access_key_id.empty()) {
    credentials.add({flags.access_key_id, flags.secret_access_key});
  }

  SystemClock clock;
  RandomIdSource ids;
  HF_ASSIGN_OR_RETURN(auto store, store::OpenSqliteStore(data_dir + "/state.db"));
  provider::FakeProvider::Options fake_options;
  fake_options.boot_delay = std::chrono::milliseconds(flags.fake_boot_delay_ms);
  fake_options.state_file = data_dir + "/fake-provider.json";
  HF_ASSIGN_OR_RETURN(auto provider, provider::FakeProvider::Create(clock, fake_options));

  control::ClusterController controller(*store, *provider, clock, ids, {});
  api::ApiConfig config;
  config.region = flags.region;
  config.account_id = flags.account_id;
  config.max_clusters = flags.max_clusters;
  config.max_instances_per_cluster = flags.max_instances_per_cluster;
  auto model = model::ServiceModel::Embedded();
  api::ClusterOperations clusters(*store, *model, clock, ids, config,
                                  [&](const std::string& id) { controller.enqueue(id); });
  api::ApiHandler handler(
      *model, clusters,
      [&](std::string_view key) { return credentials.secretFor(key); }, clock, ids, config);

  http::HttpServerOptions http_options;
  http_options.host = listen.first;
  http_options.port = listen.second;
  http_options.io_threads = flags.io_threads;
  HF_ASSIGN_OR_RETURN(auto server, http::HttpServer::Start(http_options, [&](http::HttpRequest&& r) {
                        return handler.handle(std::move(r));
                      }));
  controller.start();
  std::printf("hyperfleet server listening on http://%s:%u (data dir %s, provider %s)\n",
              listen.first.c_str(), server->port(), data_dir.c_str(), flags.provider.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  server->stop();
  controller.stop();
  return absl::OkStatus();
}

}  // namespace hf::cli
