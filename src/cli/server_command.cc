#include "hyperfleet/cli/server_command.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <atomic>
#include <filesystem>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <utility>

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
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/paths.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/eks/eks_controller.h"
#include "hyperfleet/eks/eks_operations.h"
#include "hyperfleet/eks/image_registry.h"
#include "hyperfleet/eks/process_control_planes.h"
#include "hyperfleet/eks/token_webhook.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/control/governance_loop.h"
#include "hyperfleet/http/http_server.h"
#include "hyperfleet/http/tls_identity.h"
#include "hyperfleet/jobsapi/jobs_service.h"
#include "hyperfleet/machines/machines_service.h"
#include "hyperfleet/machines/registry.h"
#include "hyperfleet/logs/log_operations.h"
#include "hyperfleet/logs/log_store.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/model/kubernetes_labels.h"
#include "hyperfleet/model/service_model.h"
#include "hyperfleet/provider/agent_endpoint.h"
#include "hyperfleet/provider/fake_provider.h"
#include "hyperfleet/provider/local_provider.h"
#include "hyperfleet/provider/node_image.h"
#include "hyperfleet/provider/routing_provider.h"
#include "hyperfleet/provider/ssh_provider.h"
#include "hyperfleet/session/session_server.h"
#include "hyperfleet/store/store.h"
#include "cli/server_flags.h"

namespace hf::cli {
namespace {

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


/// Blocks SIGINT and SIGTERM in the calling thread (before any thread starts, so that only
/// sigwait() sees them) and returns that set.
/// Raises the soft limit on open files to the hard limit. Every API connection, node
/// console, pid file and /proc read takes a descriptor, and a server starved of them cannot
/// watch its nodes; systemd's 1024 soft limit is there for select() users, which the server
/// is not. What it starts gets systemd's own limits back inside the nodes.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    spdlog::debug("open files: soft limit {} raised to {}", before, limit.rlim_cur);
  }
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

/// The keys of `<data_dir>/credentials` (made, and printed once, when absent) and the
/// flags' extra key pair.
StatusOr<auth::CredentialStore> LoadCredentials(const ServerFlags& flags,
                                                const std::string& data_dir) {
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
  return credentials;
}

/// Lifecycle bundles: a local bucket directory unless an S3 endpoint is configured.
StatusOr<std::unique_ptr<bundle::BundleSource>> OpenBundles(const ServerFlags& flags,
                                                            const std::string& data_dir,
                                                            const Clock& clock) {
  if (flags.s3_endpoint_url.empty()) {
    HF_RETURN_IF_ERROR(MakeDirs(data_dir + "/s3"));
    return std::make_unique<bundle::LocalBucketSource>(data_dir + "/s3");
  }
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
  return std::make_unique<bundle::S3EndpointSource>(s3, clock);
}

/// The node image the local provider boots: found in --image-dir, else built there.
StatusOr<provider::NodeImage> ReadyNodeImage(const ServerFlags& flags) {
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
  return image;
}

/// The EKS node image's root (--kubernetes-dir's kubelet), found in --image-dir, else built
/// there: asked by the first launch of an EKS-orchestrated cluster's node, so that servers
/// without EKS clusters never hash or build it.
StatusOr<std::string> ReadyEksNodeImage(const ServerFlags& flags) {
  provider::NodeImageOptions image_options;
  image_options.image_dir = flags.image_dir;
  image_options.mirror = flags.image_mirror;
  image_options.variant = provider::NodeImageVariant::kEks;
  image_options.kubernetes_bin = flags.kubernetes_dir;
  image_options.log = [](std::string_view line) { spdlog::info("EKS node image: {}", line); };
  auto image = provider::FindNodeImage(image_options);
  if (!image.ok() && absl::IsNotFound(image.status())) {
    spdlog::info("building the EKS node image in {} (once; a minute or two)", flags.image_dir);
    image = provider::EnsureNodeImage(image_options);
  }
  if (!image.ok()) return image.status();
  return image->rootfs;
}

/// The local provider's options from the flags (the caller fills in the agent endpoint).
provider::LocalProvider::Options LocalOptionsOf(const ServerFlags& flags,
                                                const std::string& data_dir,
                                                const provider::NodeImage& image,
                                                uint16_t registry_port) {
  provider::LocalProvider::Options local;
  local.data_dir = data_dir;
  local.image_rootfs = image.rootfs;
  local.region = flags.region;
  local.node_network = flags.node_network;
  local.agent_port = flags.agent_port;
  local.instance_caps = [](std::string_view type) -> std::optional<provider::InstanceCaps> {
    const auto* spec = model::InstanceCatalog::Embedded().find(type);
    if (!spec) return std::nullopt;
    return provider::InstanceCaps{spec->vcpus, spec->memory_gib, spec->nvme_gb.value_or(0)};
  };
  local.apt_proxy_port = flags.node_apt_proxy_port;
  local.registry_port = registry_port;
  local.node_egress_allow = flags.node_egress_allow;
  local.node_egress = flags.node_egress == "proxy" ? provider::NodeEgress::kProxy
                      : flags.node_egress == "none" ? provider::NodeEgress::kNone
                                                    : provider::NodeEgress::kNat;
  for (const char* name : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                           "no_proxy", "NO_PROXY"}) {
    if (const char* value = std::getenv(name)) local.proxy_environment[name] = value;
  }
  return local;
}

/// The cluster controller's options; InvalidArgument when --unresponsive-after is under
/// three heartbeats or a fault label key is invalid.
StatusOr<control::ClusterController::Options> ControllerOptionsOf(const ServerFlags& flags) {
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
  HF_ASSIGN_OR_RETURN(controller_options.fault_labels, FaultLabelKeysOf(flags));
  return controller_options;
}

/// The running control plane: every part, made in order by the steps below (each step
/// uses what the earlier ones made) and destroyed in the reverse order.
class Server {
 public:
  Server(const ServerFlags& flags, std::string data_dir)
      : flags_(flags), data_dir_(std::move(data_dir)) {}

  /// Credentials, the state store, the log store and the lifecycle bundles.
  Status OpenStores();
  /// The agent endpoint's service, the node status cache and the governance loop.
  Status WireAgents();
  /// The local registry (docs/kubernetes.md "Registry and images"): with the local provider
  /// as root and --registry-port not 0. A registry that cannot start (not installed, port
  /// taken) is logged and left off: the server runs on without one.
  void StartRegistry();
  /// The TLS agent endpoint of --agent-listen, if any (before the providers, which tell
  /// machines where it is: agent_endpoint_).
  Status ListenAgents(const CheckedFlags& checked);
  /// The fake provider, or the local one (root; the node image is built when missing), or
  /// with local,ssh both behind a RoutingProvider.
  Status MakeProvider();
  /// The ssh provider over the machine registry (docs/ssh-provider.md).
  Status MakeSshProvider();
  /// The cluster controller, fed by the node status cache.
  Status WireController();
  /// The API handler and its services (clusters, governance, logs, jobs).
  Status WireApi();
  /// The API (and session) listener; starts the controller.
  Status Listen(const CheckedFlags& checked);
  /// Waits for SIGINT or SIGTERM (blocked in `stop_signals`), then stops serving.
  void WaitAndStop(const sigset_t& stop_signals);

 private:
  const ServerFlags& flags_;
  const std::string data_dir_;
  std::optional<auth::CredentialStore> credentials_;
  SystemClock clock_;
  RandomIdSource ids_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<logs::LogStore> log_store_;
  agentapi::LogSink log_sink_;
  std::unique_ptr<bundle::BundleSource> bundles_;
  // The controller is made after the provider, which needs the agent service, which
  // tells the controller about lifecycle results: break the cycle with a pointer.
  std::atomic<control::ClusterController*> controller_ptr_{nullptr};
  std::optional<agentapi::NodeTokens> tokens_;
  std::unique_ptr<agentapi::NodeStatusCache> node_status_;
  std::unique_ptr<agentapi::AgentService> agents_;
  std::unique_ptr<http::HttpServer> agent_server_;
  /// Where machines reach agent_server_ (empty without --agent-listen); for the providers.
  provider::AgentEndpoint agent_endpoint_;
  std::unique_ptr<control::GovernanceLoop> governance_loop_;
  std::unique_ptr<provider::Provider> provider_;
  std::unique_ptr<control::ClusterController> controller_;
  api::ApiConfig config_;
  std::shared_ptr<const model::ServiceModel> model_;
  std::unique_ptr<api::ClusterOperations> clusters_;
  std::unique_ptr<api::ApiHandler> handler_;
  std::unique_ptr<api::GovernanceOperations> governance_;
  std::unique_ptr<logs::LogOperations> log_operations_;
  std::unique_ptr<jobsapi::JobsService> jobs_service_;
  /// EKS clusters: their API operations, the control planes behind them, the controller
  /// (made once the API listens: it tells control planes the token webhook's URL) and the
  /// token webhook their apiservers call.
  std::unique_ptr<eks::EksOperations> eks_operations_;
  std::unique_ptr<eks::ControlPlanes> control_planes_;
  std::atomic<eks::EksController*> eks_controller_ptr_{nullptr};
  std::unique_ptr<eks::EksController> eks_controller_;
  std::unique_ptr<eks::TokenWebhook> token_webhook_;
  /// The local OCI registry EKS nodes pull from; null when off or it could not start.
  std::unique_ptr<eks::ImageRegistry> registry_;
  uint16_t registry_port() const { return registry_ ? registry_->port() : 0; }
  /// The machine registry (`hyperfleet machines`), its inventory (the ssh provider draws
  /// from it) and its API operations.
  std::unique_ptr<machines::MachineRegistry> machine_registry_;
  std::unique_ptr<machines::StoreMachineInventory> machine_inventory_;
  std::unique_ptr<machines::MachinesService> machines_service_;
  http::HttpServerOptions http_options_;
  std::unique_ptr<NodeSessionTargets> session_targets_;
  std::unique_ptr<session::SessionService> sessions_;
  std::unique_ptr<http::HttpServer> server_;
};

Status Server::OpenStores() {
  HF_ASSIGN_OR_RETURN(credentials_, LoadCredentials(flags_, data_dir_));
  HF_ASSIGN_OR_RETURN(store_, store::OpenSqliteStore(data_dir_ + "/state.db"));
  // Registered machines; their ssh keys under <data dir>/machines (owner-only).
  machines::RegistryOptions registry_options;
  registry_options.dir = data_dir_ + "/machines";
  machine_registry_ = std::make_unique<machines::MachineRegistry>(
      *store_, clock_, ids_, model::InstanceCatalog::Embedded(), registry_options);
  machine_inventory_ = std::make_unique<machines::StoreMachineInventory>(*machine_registry_);
  // Node output (lifecycle scripts) in the CloudWatch Logs subset's own database.
  HF_ASSIGN_OR_RETURN(log_store_, logs::OpenLogStoreInDataDir(data_dir_, clock_));
  log_sink_ = [log_store = log_store_.get()](const std::string& group, const std::string& stream,
                                             const std::vector<agentapi::LogLine>& lines) {
    std::vector<logs::InputLogEvent> events;
    events.reserve(lines.size());
    for (const auto& l : lines) events.push_back({l.timestamp_ms, l.message});
    Status s = log_store->append(group, stream, events);
    if (!s.ok()) spdlog::warn("log {} {}: {}", group, stream, s.ToString());
  };
  HF_ASSIGN_OR_RETURN(bundles_, OpenBundles(flags_, data_dir_, clock_));
  return absl::OkStatus();
}

Status Server::WireAgents() {
  // The EKS clusters' control planes: their API's controller, the agents of EKS nodes (node
  // credentials) and the cluster controller (Nodes) use them.
  eks::ProcessControlPlanesOptions planes;
  planes.data_dir = data_dir_ + "/eks";
  if (!flags_.kubernetes_dir.empty()) planes.kubernetes_bin_dir = flags_.kubernetes_dir;
  control_planes_ = eks::MakeProcessControlPlanes(planes);
  HF_ASSIGN_OR_RETURN(tokens_,
                      agentapi::NodeTokens::LoadOrCreate(data_dir_ + "/local/node-secret"));
  agentapi::AgentService::Options agent_options;
  agent_options.heartbeat_seconds = flags_.heartbeat_seconds;
  agent_options.lifecycle_timeout_seconds = flags_.lifecycle_timeout_seconds;
  agent_options.control_planes = control_planes_.get();  // EKS nodes' credentials
  StartRegistry();
  agent_options.registry_port = registry_port();  // EKS nodes' containerd maps localhost:PORT
  // What the agents say, kept for the cluster controller (node liveness, health, Slurm).
  node_status_ = std::make_unique<agentapi::NodeStatusCache>(clock_, flags_.heartbeat_seconds);
  agents_ = std::make_unique<agentapi::AgentService>(
      *store_, *bundles_, *tokens_, *node_status_, log_sink_,
      [this](const std::string& id) {
        if (auto* c = controller_ptr_.load()) c->enqueue(id);
      },
      clock_, ids_, agent_options);
  // Task governance on Slurm: the controller agents' job reports drive one admission
  // engine per cluster (docs/governance.md "On Slurm").
  governance_loop_ = std::make_unique<control::GovernanceLoop>(
      *store_, model::InstanceCatalog::Embedded(), clock_);
  agents_->setSlurmJobsHandler(
      [loop = governance_loop_.get()](const std::string& id,
                                      const agentapi::SlurmJobsReport* jobs) {
        return loop->onHeartbeat(id, jobs);
      });
  return absl::OkStatus();
}

Status Server::ListenAgents(const CheckedFlags& checked) {
  if (!checked.agent_listen) return absl::OkStatus();
  const auto& [host, port] = checked.agent_address;
  // One identity per data dir, made once: machines pin its fingerprint (agent.env).
  HF_ASSIGN_OR_RETURN(const http::TlsIdentity identity,
                      http::LoadOrCreateTlsIdentity(data_dir_ + "/agent-tls", host));
  http::HttpServerOptions agent_http;
  agent_http.host = checked.agent_listen->first;  // "[v6]" binds as v6
  if (agent_http.host.size() > 2 && agent_http.host.front() == '[') {
    agent_http.host = agent_http.host.substr(1, agent_http.host.size() - 2);
  }
  agent_http.port = checked.agent_listen->second;
  agent_http.io_threads = 1;
  agent_http.tls_certificate_pem = identity.certificate_pem;
  agent_http.tls_private_key_pem = identity.private_key_pem;
  HF_ASSIGN_OR_RETURN(agent_server_,
                      http::HttpServer::Start(agent_http, [agents = agents_.get()](
                                                              http::HttpRequest&& r) {
                        return agents->handle(std::move(r));
                      }));
  const bool v6 = host.find(':') != std::string::npos;
  agent_endpoint_.url = absl::StrCat("https://", v6 ? "[" : "", host, v6 ? "]" : "", ":",
                                     port != 0 ? port : agent_server_->port());
  agent_endpoint_.cert_sha256 = identity.sha256;
  std::printf("hyperfleet agent endpoint on https://%s:%u for machines at %s (certificate "
              "sha256 %s)\n",
              checked.agent_listen->first.c_str(), agent_server_->port(),
              agent_endpoint_.url.c_str(), agent_endpoint_.cert_sha256.c_str());
  return absl::OkStatus();
}

Status Server::MakeProvider() {
  if (flags_.provider == "ssh") return MakeSshProvider();
  if (flags_.provider == "fake") {
    provider::FakeProvider::Options fake_options;
    fake_options.boot_delay = std::chrono::milliseconds(flags_.fake_boot_delay_ms);
    fake_options.state_file = data_dir_ + "/fake-provider.json";
    HF_ASSIGN_OR_RETURN(provider_, provider::FakeProvider::Create(clock_, fake_options));
    return absl::OkStatus();
  }
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "the local provider needs root: it creates network namespaces, mounts and cgroups "
        "for its nodes. Run as root, or use --provider fake (no real nodes).");
  }
  HF_ASSIGN_OR_RETURN(auto image, ReadyNodeImage(flags_));
  provider::LocalProvider::Options local =
      LocalOptionsOf(flags_, data_dir_, image, registry_port());
  local.agent_handler = [agents = agents_.get()](http::HttpRequest&& r) {
    return agents->handle(std::move(r));
  };
  local.agent_token = [tokens = &*tokens_](std::string_view id) { return tokens->tokenFor(id); };
  local.eks_image = [flags = flags_]() { return ReadyEksNodeImage(flags); };
  {
    const eks::ProcessControlPlanesOptions planes;  // the control planes' port range
    local.kubernetes_api_ports = {static_cast<uint16_t>(planes.first_port),
                                  static_cast<uint16_t>(planes.last_port)};
  }
  HF_ASSIGN_OR_RETURN(provider_, provider::LocalProvider::Create(local));
  if (flags_.provider == "local,ssh") {
    // Per instance: ssh when its type has registered machines, else local (docs/nodes.md).
    provider::RoutingProvider::Options routing;
    routing.local = std::move(provider_);
    HF_RETURN_IF_ERROR(MakeSshProvider());
    routing.ssh = std::move(provider_);
    routing.inventory = machine_inventory_.get();
    routing.state_file = data_dir_ + "/provider-routes.json";
    HF_ASSIGN_OR_RETURN(provider_, provider::RoutingProvider::Create(std::move(routing)));
  }
  return absl::OkStatus();
}

Status Server::MakeSshProvider() {
  provider::SshProvider::Options ssh;
  ssh.data_dir = data_dir_;
  ssh.inventory = machine_inventory_.get();
  // The portable node binary built beside this one; else this binary (Debian 12 machines).
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::canonical("/proc/self/exe", ec);
  const std::filesystem::path node = self.parent_path() / "hyperfleet-node";
  ssh.node_binary = std::filesystem::is_regular_file(node, ec) ? node.string() : self.string();
  ssh.agent_url = agent_endpoint_.url;
  ssh.agent_cert_sha256 = agent_endpoint_.cert_sha256;
  ssh.agent_token = [tokens = &*tokens_](std::string_view id) { return tokens->tokenFor(id); };
  ssh.region = flags_.region;
  // Whether the lifecycle scripts mount FSx at /fsx instead of the default sshfs.
  ssh.provisioning_parameters = [bundles = bundles_.get()](
                                    std::string_view uri) -> StatusOr<std::string> {
    HF_ASSIGN_OR_RETURN(auto location, bundle::ParseS3Uri(uri));
    return bundles->read(location, "provisioning_parameters.json");
  };
  // Which spare replaced which node, which machine went to quarantine: cluster events.
  ssh.on_event = [this](const provider::SshProviderEvent& e) {
    store::WriteBatch batch;
    batch.events.push_back(model::MakeEvent(
        ids_.eventId(), e.cluster_id, clock_.now(),
        {"Instance",
         e.kind == provider::SshProviderEvent::Kind::kMachineQuarantined ? "Warn" : "Info",
         e.message, e.group, e.instance_id, nullptr}));
    if (auto st = store_->commit(batch); !st.ok()) {
      spdlog::warn("ssh provider event: {}", st.status().ToString());
    }
  };
  spdlog::info("ssh provider: node binary {}", ssh.node_binary);
  HF_ASSIGN_OR_RETURN(provider_, provider::SshProvider::Create(ssh));
  return absl::OkStatus();
}

Status Server::WireController() {
  HF_ASSIGN_OR_RETURN(auto controller_options, ControllerOptionsOf(flags_));
  control::ClusterController::AgentHooks hooks;
  agentapi::NodeStatusCache* node_status = node_status_.get();
  control::GovernanceLoop* governance_loop = governance_loop_.get();
  hooks.liveness = [node_status](const std::string& id) {
    return node_status->clusterHealth(id);
  };
  hooks.publish_slurm_marks = [node_status](const std::string& id,
                                            std::vector<model::SlurmMark> marks) {
    node_status->setSlurmMarks(id, std::move(marks));
  };
  hooks.forget = [node_status, governance_loop](const std::string& id,
                                                const std::vector<std::string>& instances,
                                                bool cluster_gone) {
    node_status->forget(id, instances, cluster_gone);
    if (cluster_gone) governance_loop->forget(id);
  };
  hooks.kubernetes = control_planes_.get();  // EKS-orchestrated clusters' Nodes
  controller_ = std::make_unique<control::ClusterController>(
      *store_, *provider_, clock_, ids_, controller_options, std::move(hooks));
  controller_ptr_ = controller_.get();
  return absl::OkStatus();
}

Status Server::WireApi() {
  config_.region = flags_.region;
  config_.account_id = flags_.account_id;
  config_.max_clusters = flags_.max_clusters;
  config_.max_instances_per_cluster = flags_.max_instances_per_cluster;
  // The ssh provider runs no EKS nodes: the API refuses EKS groups that would launch there.
  if (flags_.provider == "ssh") {
    config_.runs_on_ssh = [](std::string_view) -> StatusOr<bool> { return true; };
  } else if (flags_.provider == "local,ssh") {
    config_.runs_on_ssh = [inventory = machine_inventory_.get()](
                              std::string_view type) -> StatusOr<bool> {
      HF_ASSIGN_OR_RETURN(auto machines, inventory->machines());
      return provider::RouteFor(type, machines) == provider::Route::kSsh;
    };
  }
  model_ = model::ServiceModel::Embedded();
  clusters_ = std::make_unique<api::ClusterOperations>(
      *store_, *model_, clock_, ids_, config_,
      [controller = controller_.get()](const std::string& id) { controller->enqueue(id); });
  handler_ = std::make_unique<api::ApiHandler>(
      [credentials = &*credentials_](std::string_view key) { return credentials->secretFor(key); },
      clock_, ids_, config_);
  handler_->addService(*clusters_);
  governance_ = std::make_unique<api::GovernanceOperations>(*store_, clock_, ids_, config_);
  // Governance changes that a stop left half-way (between change and settle) settle now.
  HF_RETURN_IF_ERROR(governance_->settle(""));
  handler_->addService(*governance_);

  logs::LogsConfig logs_config;
  logs_config.region = flags_.region;
  logs_config.account_id = flags_.account_id;
  log_operations_ = std::make_unique<logs::LogOperations>(*log_store_, logs_config);
  handler_->addService(*log_operations_);
  // hyperfleet jobs why
  jobs_service_ = std::make_unique<jobsapi::JobsService>(*store_, *governance_loop_);
  handler_->addService(*jobs_service_);
  // hyperfleet machines
  machines_service_ = std::make_unique<machines::MachinesService>(*machine_registry_);
  handler_->addService(*machines_service_);
  // EKS (REST-JSON on the same endpoint); its controller wakes after each accepted write.
  eks::EksConfig eks_config;
  eks_config.region = flags_.region;
  eks_config.account_id = flags_.account_id;
  eks_config.max_clusters = flags_.max_eks_clusters;
  eks_operations_ = std::make_unique<eks::EksOperations>(
      *store_, clock_, ids_, eks_config, [this](const std::string&) {
        if (auto* c = eks_controller_ptr_.load()) c->wake();
      });
  handler_->addService(*eks_operations_);
  token_webhook_ = std::make_unique<eks::TokenWebhook>(
      *store_,
      [credentials = &*credentials_](std::string_view key) { return credentials->secretFor(key); },
      clock_, flags_.region, flags_.account_id);
  return absl::OkStatus();
}

void Server::StartRegistry() {
  if (flags_.registry_port == 0 || geteuid() != 0 ||
      flags_.provider.find("local") == std::string::npos) {
    return;
  }
  eks::ImageRegistryOptions options;
  options.dir = data_dir_ + "/registry";
  options.port = flags_.registry_port;
  auto registry = eks::ImageRegistry::Start(options);
  if (!registry.ok()) {
    spdlog::warn("no local registry for EKS nodes: {}",
                 std::string(registry.status().message()));
    return;
  }
  registry_ = std::move(*registry);
  std::printf("hyperfleet registry on port %u (EKS nodes pull localhost:%u/<repo>:<tag>)\n",
              registry_->port(), registry_->port());
}

Status Server::Listen(const CheckedFlags& checked) {
  http_options_.host = checked.listen.first;
  http_options_.port = checked.listen.second;
  http_options_.io_threads = flags_.io_threads;
  // Shell sessions into nodes (hyperfleet ssm start-session): WebSockets on the API port.
  session_targets_ = std::make_unique<NodeSessionTargets>(*store_, *provider_);
  session::SessionServiceOptions session_options;
  session_options.policy.region = flags_.region;
  session_options.policy.services = {"ssm"};
  sessions_ = std::make_unique<session::SessionService>(
      *session_targets_,
      [credentials = &*credentials_](std::string_view key) { return credentials->secretFor(key); },
      clock_, session_options);
  sessions_->install(http_options_);
  HF_ASSIGN_OR_RETURN(
      server_, http::HttpServer::Start(http_options_, [handler = handler_.get(),
                                                       webhook = token_webhook_.get()](
                                                          http::HttpRequest&& r) {
        // The EKS token webhook is asked by apiservers, outside SigV4 (docs/kubernetes.md).
        if (eks::TokenWebhook::Handles(r)) return webhook->handle(r);
        return handler->handle(std::move(r));
      }));
  controller_->start();
  // Control planes on this host reach the webhook on loopback when the API listens on all
  // addresses.
  const std::string webhook_host = LocalUrlHost(checked.listen.first);
  eks::EksController::Options eks_options;
  eks_options.token_webhook_prefix = absl::StrCat("http://", webhook_host, ":", server_->port(),
                                                  AbslView(eks::kTokenWebhookPath));
  eks_controller_ = std::make_unique<eks::EksController>(*store_, *control_planes_, clock_,
                                                         eks_options);
  eks_controller_->start();
  eks_controller_ptr_ = eks_controller_.get();
  std::printf("hyperfleet server listening on http://%s:%u (data dir %s, provider %s)\n",
              UrlHost(checked.listen.first).c_str(), server_->port(), data_dir_.c_str(),
              flags_.provider.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

void Server::WaitAndStop(const sigset_t& stop_signals) {
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  server_->stop();
  if (agent_server_) agent_server_->stop();
  sessions_->stop();
  controller_->stop();
  eks_controller_ptr_ = nullptr;
  if (eks_controller_) eks_controller_->stop();
  if (registry_) registry_->stop();
}

}  // namespace

Status RunServer(const ServerFlags& flags) {
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  // A few malloc arenas, not one per thread: per-thread arenas keep freed memory that a
  // long-lived server with short bursts never reuses.
  mallopt(M_ARENA_MAX, 2);
  // A fixed mmap threshold (glibc's default start): otherwise each large free raises it (up
  // to 32 MiB), and from then on the controller's per-pass arrays of a large cluster come
  // from the heap, which keeps their pages after they are freed (api_bench: 10,000 nodes,
  // RSS after its cells 52-58 MiB before, 36-43 MiB with it).
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  RaiseOpenFileLimit();
  HF_ASSIGN_OR_RETURN(const CheckedFlags checked, CheckFlags(flags));
  const std::string data_dir = ResolveDataDir(flags.data_dir);
  HF_RETURN_IF_ERROR(MakeDirs(data_dir));
  // Credentials and state are the owner's only (README "Threat model"), also when something
  // else made the directory first (the node image cache below /var/lib/hyperfleet, an admin).
  if (::chmod(data_dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot make ", data_dir, " owner-only: ",
                                            std::strerror(errno)));
  }
  // One server per data dir: two would each drive the same instances from their own view.
  HF_ASSIGN_OR_RETURN(int lock_fd, LockDataDir(data_dir));
  (void)lock_fd;  // held (and the lock with it) until the process exits
  const sigset_t stop_signals = BlockStopSignals();

  Server server(flags, data_dir);
  HF_RETURN_IF_ERROR(server.OpenStores());
  HF_RETURN_IF_ERROR(server.WireAgents());
  HF_RETURN_IF_ERROR(server.ListenAgents(checked));
  HF_RETURN_IF_ERROR(server.MakeProvider());
  HF_RETURN_IF_ERROR(server.WireController());
  HF_RETURN_IF_ERROR(server.WireApi());
  HF_RETURN_IF_ERROR(server.Listen(checked));
  server.WaitAndStop(stop_signals);
  return absl::OkStatus();
}

}  // namespace hf::cli
