#include "hyperfleet/agent/imds_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>

#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/http/http_server.h"

namespace hf::agent {

struct ImdsServer::State {
  std::unique_ptr<http::HttpServer> server;
  std::shared_ptr<imds::ImdsTokens> tokens = std::make_shared<imds::ImdsTokens>();
  std::string added_address;  ///< "a.b.c.d/32" when Start() added it to lo
};

namespace {

/// `ip addr <verb> <cidr> dev lo`; the output on failure.
Status IpAddrOnLo(const char* verb, const std::string& cidr) {
  auto r = RunCapture({"ip", "addr", verb, cidr, "dev", "lo"});
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    return absl::InternalError("ip addr " + std::string(verb) + " " + cidr + " dev lo: " +
                               (r->exit.signal ? "killed by " + SignalName(r->exit.signal)
                                               : "exit " + std::to_string(r->exit.exit_code)) +
                               ": " + r->out + r->err);
  }
  return absl::OkStatus();
}

bool AddressOnLo(const std::string& address) {
  auto r = RunCapture({"ip", "-o", "-4", "addr", "show", "dev", "lo"});
  return r.ok() && r->ok() && r->out.find(" " + address + "/") != std::string::npos;
}

}  // namespace

StatusOr<std::optional<AgentImds>> ImdsFromEnv(const std::map<std::string, std::string>& values,
                                               std::string_view instance_id) {
  auto mode = values.find("HF_IMDS");
  if (mode == values.end() || mode->second.empty() || mode->second == "off") {
    return std::optional<AgentImds>();
  }
  if (mode->second != "serve") {
    return absl::InvalidArgumentError("HF_IMDS must be serve or off, not " + mode->second);
  }
  auto take = [&](const char* key, std::string* out) -> Status {
    auto it = values.find(key);
    if (it == values.end() || it->second.empty()) {
      return absl::InvalidArgumentError(std::string(key) + " is missing (HF_IMDS=serve)");
    }
    *out = it->second;
    return absl::OkStatus();
  };
  AgentImds imds;
  imds.node.instance_id = std::string(instance_id);
  HF_RETURN_IF_ERROR(take("HF_IMDS_INSTANCE_TYPE", &imds.node.instance_type));
  HF_RETURN_IF_ERROR(take("HF_IMDS_LOCAL_IPV4", &imds.node.ip));
  HF_RETURN_IF_ERROR(take("HF_IMDS_HOSTNAME", &imds.node.hostname));
  HF_RETURN_IF_ERROR(take("HF_IMDS_REGION", &imds.region));
  return std::optional<AgentImds>(std::move(imds));
}

bool SomethingListensAt(const std::string& address, uint16_t port, int timeout_ms) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) return false;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  bool connected = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  if (!connected && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, timeout_ms) == 1) {
      int error = 0;
      socklen_t len = sizeof error;
      connected = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
  }
  close(fd);
  return connected;
}

StatusOr<std::unique_ptr<ImdsServer>> ImdsServer::Start(const AgentImds& imds,
                                                         const ImdsServerOptions& options) {
  if (SomethingListensAt(options.address, options.port, options.probe_timeout_ms)) {
    return absl::FailedPreconditionError(
        "a metadata service already answers at " + options.address + ":" +
        std::to_string(options.port) + "; Hyperfleet's IMDS is not started");
  }
  std::unique_ptr<ImdsServer> server(new ImdsServer());
  server->state_ = std::make_unique<State>();
  State& state = *server->state_;
  if (options.add_address) {
    // Already there with nobody listening: left by an agent that was killed; ours to remove.
    if (!AddressOnLo(options.address)) {
      HF_RETURN_IF_ERROR(IpAddrOnLo("add", options.address + "/32"));
    }
    state.added_address = options.address + "/32";
  }
  http::HttpServerOptions ho;
  ho.host = options.address;
  ho.port = options.port;
  ho.io_threads = 1;
  auto started = http::HttpServer::Start(
      ho, [tokens = state.tokens, node = imds.node, region = imds.region](
              http::HttpRequest&& req) {
        return imds::ImdsResponse(
            req, *tokens,
            [&](std::string_view) { return std::optional<imds::ImdsNode>(node); }, region,
            std::chrono::steady_clock::now());
      });
  if (!started.ok()) {
    server->Stop();  // the address goes again
    return started.status();
  }
  state.server = std::move(*started);
  spdlog::info("IMDS for {} at {}:{}", imds.node.instance_id, options.address,
               state.server->port());
  return server;
}

ImdsServer::~ImdsServer() { Stop(); }

uint16_t ImdsServer::port() const {
  return state_ && state_->server ? state_->server->port() : 0;
}

void ImdsServer::Stop() {
  if (!state_) return;
  if (state_->server) state_->server->stop();
  state_->server.reset();
  if (!state_->added_address.empty()) {
    if (Status s = IpAddrOnLo("del", state_->added_address); !s.ok()) {
      spdlog::warn("{}", std::string(s.message()));
    }
    state_->added_address.clear();
  }
}

}  // namespace hf::agent
