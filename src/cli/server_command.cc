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
#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/agentapi/agent_service.h"
#include "hyperfleet/agentapi/node_tokens.h"
#include "hyperfleet/api/api_handler.h"
#include "hyperfleet/api/cluster_operations.h"
#include "hyperfleet/api/governance_operations.h"
#include "hyperfleet/auth/credentials.h"
#include "hyperfleet/bundle/bundle_source.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/common/paths.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/control/governance_loop.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/jobsapi/jobs_service.h"
#include "hyperfleet/logs/log_operations.h"
#include "hyperfleet/logs/log_store.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/model/service_model.h"
#include "hyperfleet/provider/fake_provider.h"
#include "hyperfleet/provider/local_provider.h"
#include "hyperfleet/provider/node_image.h"
#include "hyperfleet/session/session_server.h"
#include "hyperfleet/store/store.h"

namespace hf::cli {
namespace {

/// HOST:PORT of flag `flag` (e.g. "--listen"); InvalidArgument naming the flag otherwise.
StatusOr<std::pair<std::string, uint16_t>> ParseListen(const std::string& listen,
                                                       const std::string& flag = "--listen") {
  auto colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(listen).substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be HOST:PORT (e.g. 127.0.0.1:",
                                                   flag == "--listen" ? "9080" : "0",
                                                   "), got '", listen, "'"));
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

/// Session targets from the store and the provider: the node must be in that cluster and
/// group, and its init must run.
class NodeSessionTargets final : public session::SessionTargets {
 public:
  NodeSessionTargets(store::Store& store, provider::Provider& provider)
      : store_(store), provider_(provider) {}
  StatusOr<int> resolve(const session::SessionTarget& target) override {
    auto node = store_.node(target.cluster_id, target.instance_id);
    if (!node.ok()) {
      return absl::NotFoundError(absl::StrCat("no instance ", target.instance_id,
                                              " in cluster ", target.cluster_id));
    }
    if (node->group != target.group) {
      return absl::NotFoundError(absl::StrCat("instance ", target.instance_id,
                                              " is not in instance group ", target.group,
                                              " (it is in ", node->group, ")"));
    }
    auto pid = provider_.nodeInitPid(target.instance_id);
    if (!pid.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "instance ", target.instance_id, " is not running: ", pid.status().message()));
    }
    return *pid;
  }

 private:
  store::Store& store_;
  provider::Provider& provider_;
};

}  // namespace

Status RunServer(const ServerFlags& flags) {
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  // A few malloc arenas, not one per thread: per-thread arenas keep freed memory that a
  // long-lived server with short bursts never reuses.
  mallopt(M_ARENA_MAX, 2);
  HF_ASSIGN_OR_RETURN(auto listen, ParseListen(flags.listen));
  std::optional<std::pair<std::string, uint16_t>> agent_listen;
  if (!flags.agent_listen.empty()) {
    HF_ASSIGN_OR_RETURN(agent_listen, ParseListen(flags.agent_listen, "--agent-listen"));
  }
  if (flags.provider != "fake" && flags.provider != "local") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--provider ", flags.provider, " is not available; providers: local, fake"));
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
  // Node output (lifecycle scripts) in the CloudWatch Logs subset's own database.
  HF_ASSIGN_OR_RETURN(auto log_store, logs::OpenLogStoreInDataDir(data_dir, clock));
  agentapi::LogSink log_sink = [&log_store](const std::string& group, const std::string& stream,
                                            const std::vector<agentapi::LogLine>& lines) {
    std::vector<logs::InputLogEvent> events;
    events.reserve(lines.size());
    for (const auto& l : lines) events.push_back({l.timestamp_ms, l.message});
    Status s = log_store->append(group, stream, events);
    if (!s.ok()) spdlog::warn("log {} {}: {}", group, stream, s.ToString());
  };

  // Lifecycle bundles: a local bucket directory unless an S3 endpoint is configured.
  std::unique_ptr<bundle::BundleSource> bundles;
  if (flags.s3_endpoint_url.empty()) {
    HF_RETURN_IF_ERROR(EnsureDirectory(data_dir + "/s3"));
    bundles = std::make_unique<bundle::LocalBucketSource>(data_dir + "/s3");
  } else {
    bundle::S3EndpointOptions s3;
    s3.endpoint_url = flags.s3_endpoint_url;
    s3.region = flags.region;
    const char* key = std::getenv("AWS_ACCESS_KEY_ID");
    const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
    if (!key || !secret) {
      return absl::InvalidArgumentError(
          "--s3-endpoint-url needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
          "environment to sign its requests");
    }
    s3.key = {key, secret};
    bundles = std::make_unique<bundle::S3EndpointSource>(s3, clock);
  }

  // The controller is made after the provider, which needs the agent service, which
  // tells the controller about lifecycle results: break the cycle with a pointer.
  std::atomic<control::ClusterController*> controller_ptr{nullptr};
  HF_ASSIGN_OR_RETURN(auto tokens,
                      agentapi::NodeTokens::LoadOrCreate(data_dir + "/local/node-secret"));
  agentapi::AgentService::Options agent_options;
  agent_options.heartbeat_seconds = flags.heartbeat_seconds;
  agent_options.lifecycle_timeout_seconds = flags.lifecycle_timeout_seconds;
  // What the agents say, kept for the cluster controller (node liveness, health, Slurm).
  agentapi::NodeStatusCache node_status(clock, flags.heartbeat_seconds);
  agentapi::AgentService agents(
      *store, *bundles, tokens, node_status, log_sink,
      [&](const std::string& id) {
        if (auto* c = controller_ptr.load()) c->enqueue(id);
      },
      clock, ids, agent_options);
  // Task governance on Slurm: the controller agents' job reports drive one admission
  // engine per cluster (docs/governance.md "On Slurm").
  control::GovernanceLoop governance_loop(*store, model::InstanceCatalog::Embedded(), clock);
  agents.setSlurmJobsHandler(
      [&governance_loop](const std::string& id, const agentapi::SlurmJobsReport* jobs) {
        return governance_loop.onHeartbeat(id, jobs);
      });

  std::unique_ptr<provider::Provider> provider;
  if (flags.provider == "fake") {
    provider::FakeProvider::Options fake_options;
    fake_options.boot_delay = std::chrono::milliseconds(flags.fake_boot_delay_ms);
    fake_options.state_file = data_dir + "/fake-provider.json";
    HF_ASSIGN_OR_RETURN(provider, provider::FakeProvider::Create(clock, fake_options));
  } else {
    if (geteuid() != 0) {
      return absl::FailedPreconditionError(
          "the local provider needs root: it creates network namespaces, mounts and cgroups "
          "for its nodes. Run as root, or use --provider fake (no real nodes).");
    }
    provider::NodeImageOptions image_options;
    image_options.image_dir = flags.image_dir;
    image_options.mirror = flags.image_mirror;
    image_options.log = [](std::string_view line) { spdlog::info("node image: {}", line); };
    auto image = provider::FindNodeImage(image_options);
    if (!image.ok()) {
      std::printf("Building the node image in %s (once; a few minutes)...\n",
                  flags.image_dir.c_str());
      std::fflush(stdout);
      image = provider::EnsureNodeImage(image_options);
    }
    if (!image.ok()) return image.status();
    provider::LocalProvider::Options local;
    local.data_dir = data_dir;
    local.image_rootfs = image->rootfs;
    local.region = flags.region;
    local.node_network = flags.node_network;
    local.agent_port = flags.agent_port;
    local.agent_handler = [&agents](http::HttpRequest&& r) { return agents.handle(std::move(r)); };
    local.agent_token = [&tokens](std::string_view id) { return tokens.tokenFor(id); };
    local.instance_caps =
        [](std::string_view type) -> std::optional<provider::InstanceCaps> {
      const auto* spec = model::InstanceCatalog::Embedded().find(type);
      if (!spec) return std::nullopt;
      return provider::InstanceCaps{spec->vcpus, spec->memory_gib, spec->nvme_gb.value_or(0)};
    };
    local.apt_proxy_port = flags.node_apt_proxy_port;
    local.node_egress_allow = flags.node_egress_allow;
    local.node_egress = flags.node_egress == "proxy" ? provider::NodeEgress::kProxy
                        : flags.node_egress == "none" ? provider::NodeEgress::kNone
                                                      : provider::NodeEgress::kNat;
    for (const char* name : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                             "no_proxy", "NO_PROXY"}) {
      if (const char* value = std::getenv(name)) local.proxy_environment[name] = value;
    }
    HF_ASSIGN_OR_RETURN(provider, provider::LocalProvider::Create(local));
  }

  control::ClusterController::Options controller_options;
  controller_options.agent_start_timeout =
      std::chrono::seconds(flags.agent_start_timeout_seconds);
  controller_options.liveness.unresponsive_after =
      std::chrono::seconds(flags.unresponsive_after_seconds);
  if (flags.unresponsive_after_seconds < 3 * flags.heartbeat_seconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--unresponsive-after (", flags.unresponsive_after_seconds,
        " s) must be at least 3 heartbeats (--heartbeat-interval ", flags.heartbeat_seconds,
        " s), or a late heartbeat would replace a healthy node"));
  }
  control::ClusterController::AgentHooks hooks;
  hooks.liveness = [&node_status](const std::string& id) {
    return node_status.clusterHealth(id);
  };
  hooks.publish_slurm_marks = [&node_status](const std::string& id,
                                             std::vector<model::SlurmMark> marks) {
    node_status.setSlurmMarks(id, std::move(marks));
  };
  hooks.forget = [&node_status, &governance_loop](const std::string& id,
                                                  const std::vector<std::string>& instances,
                                                  bool cluster_gone) {
    node_status.forget(id, instances, cluster_gone);
    if (cluster_gone) governance_loop.forget(id);
  };
  control::ClusterController controller(*store, *provider, clock, ids, controller_options,
                                        std::move(hooks));
  controller_ptr = &controller;
  api::ApiConfig config;
  config.region = flags.region;
  config.account_id = flags.account_id;
  config.max_clusters = flags.max_clusters;
  config.max_instances_per_cluster = flags.max_instances_per_cluster;
  auto model = model::ServiceModel::Embedded();
  api::ClusterOperations clusters(*store, *model, clock, ids, config,
                                  [&](const std::string& id) { controller.enqueue(id); });
  api::ApiHandler handler([&](std::string_view key) { return credentials.secretFor(key); },
                          clock, ids, config);
  handler.addService(clusters);
  api::GovernanceOperations governance(*store, clock, ids, config);
  // Governance changes that a stop left half-way (between change and settle) settle now.
  HF_RETURN_IF_ERROR(governance.settle(""));
  handler.addService(governance);

  logs::LogsConfig logs_config;
  logs_config.region = flags.region;
  logs_config.account_id = flags.account_id;
  logs::LogOperations log_operations(*log_store, logs_config);
  handler.addService(log_operations);
  jobsapi::JobsService jobs_service(*store, governance_loop);  // hyperfleet jobs why
  handler.addService(jobs_service);

  http::HttpServerOptions http_options;
  http_options.host = listen.first;
  http_options.port = listen.second;
  http_options.io_threads = flags.io_threads;
  // Shell sessions into nodes (hyperfleet ssm start-session): WebSockets on the API port.
  NodeSessionTargets session_targets(*store, *provider);
  session::SessionServiceOptions session_options;
  session_options.policy.region = flags.region;
  session_options.policy.services = {"ssm"};
  session::SessionService sessions(
      session_targets, [&](std::string_view key) { return credentials.secretFor(key); }, clock,
      session_options);
  sessions.install(http_options);
  HF_ASSIGN_OR_RETURN(auto server, http::HttpServer::Start(http_options, [&](http::HttpRequest&& r) {
                        return handler.handle(std::move(r));
                      }));
  // The agent endpoint also on an address of the caller's choice: tests act there as the
  // agents of fake instances, with the same per-node tokens as on the cluster bridges.
  std::unique_ptr<http::HttpServer> agent_server;
  if (agent_listen) {
    http::HttpServerOptions agent_http;
    agent_http.host = agent_listen->first;
    agent_http.port = agent_listen->second;
    agent_http.io_threads = 1;
    HF_ASSIGN_OR_RETURN(agent_server,
                        http::HttpServer::Start(agent_http, [&agents](http::HttpRequest&& r) {
                          return agents.handle(std::move(r));
                        }));
    std::printf("hyperfleet agent endpoint on http://%s:%u\n", agent_listen->first.c_str(),
                agent_server->port());
  }
  controller.start();
  std::printf("hyperfleet server listening on http://%s:%u (data dir %s, provider %s)\n",
              listen.first.c_str(), server->port(), data_dir.c_str(), flags.provider.c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  server->stop();
  if (agent_server) agent_server->stop();
  sessions.stop();
  controller.stop();
  return absl::OkStatus();
}

}  // namespace hf::cli
