#include "unit/agent/fake_control_plane.h"

#include <string>
#include <string_view>
#include <utility>

namespace hf::agent::testing {

using json = nlohmann::json;

namespace {

std::string UrlDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else if (s[i] == '+') {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

http::HttpResponse Json(int status, const json& body) {
  return http::HttpResponse{status, {{"Content-Type", "application/json"}}, body.dump()};
}

}  // namespace

FakeControlPlane::FakeControlPlane() {
  registration = {
      {"cluster_id", "abcdef012345"},
      {"cluster_name", "test-cluster"},
      {"group", "workers"},
      {"instance_id", kInstanceId},
      {"heartbeat_seconds", 30},
      {"files", json::array()},
      {"lifecycle",
       {{"run", true},
        {"source_s3_uri", "s3://bucket/prefix/"},
        {"on_create", "on_create.sh"},
        {"on_init_complete", ""},
        {"directory", "/tmp/bucket/prefix/"},
        {"timeout_seconds", 60}}},
  };
}

FakeControlPlane::~FakeControlPlane() { Stop(); }

bool FakeControlPlane::Start(uint16_t port, const std::string& tls_certificate_pem,
                             const std::string& tls_private_key_pem) {
  http::HttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  options.tls_certificate_pem = tls_certificate_pem;
  options.tls_private_key_pem = tls_private_key_pem;
  tls_ = !tls_certificate_pem.empty();
  options.io_threads = 1;
  options.stop_grace_seconds = 1;
  auto server = http::HttpServer::Start(options, [this](http::HttpRequest&& request) {
    return Handle(std::move(request));
  });
  if (!server.ok()) {
    last_error = std::string(server.status().message());
    return false;
  }
  server_ = std::move(*server);
  port_ = server_->port();
  return true;
}

void FakeControlPlane::Stop() {
  if (server_) {
    server_->stop();
    server_.reset();
  }
}

bool FakeControlPlane::WaitFor(const std::function<bool()>& pred,
                               std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, pred);
}

std::vector<std::string> FakeControlPlane::LogMessages() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& e : log_events) out.push_back(e["message"].get<std::string>());
  return out;
}

std::vector<std::string> FakeControlPlane::ReportStates() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& r : reports) out.push_back(r["state"].get<std::string>());
  return out;
}

http::HttpResponse FakeControlPlane::Handle(http::HttpRequest&& request) {
  std::lock_guard<std::mutex> lock(mu_);
  struct Notify {
    std::condition_variable& cv;
    ~Notify() { cv.notify_all(); }
  } notify{cv_};
  const std::string path(request.path());
  paths.push_back(path);
  const auto auth = request.header("Authorization");
  if (!auth || *auth != std::string("HyperfleetNode ") + kInstanceId + ":" + kToken) {
    ++forbidden;
    return Json(403, {{"error", "bad token"}});
  }
  const json body = json::parse(request.body, nullptr, false);
  if (request.method == "POST" && path == "/agent/v1/register") {
    if (!body.is_object() || !body.contains("boot_id")) return Json(400, {{"error", "no boot_id"}});
    register_bodies.push_back(body);
    ++registrations;
    if (registrations <= wait_registrations) {
      json held = wait_registration.is_null() ? registration : wait_registration;
      held["lifecycle"] = {{"run", false},
                           {"wait", true},
                           {"wait_reason", "the controller first"},
                           {"retry_ms", 20}};
      return Json(200, held);
    }
    return Json(200, registration);
  }
  if (request.method == "POST" && path == "/agent/v1/heartbeat") {
    ++heartbeats;
    heartbeat_revisions.push_back(body.is_object() ? body.value("files_revision", int64_t{-1}) : -1);
    heartbeat_bodies.push_back(body);
    return Json(200, heartbeat_response);
  }
  if (request.method == "GET" && path == "/agent/v1/bundle") {
    json files = json::array();
    for (const auto& [key, content] : bundle) files.push_back({{"key", key}, {"size", content.size()}});
    for (const auto& key : extra_keys) files.push_back({{"key", key}, {"size", 1}});
    return Json(200, {{"files", files}});
  }
  if (request.method == "GET" && path == "/agent/v1/bundle/file") {
    std::string_view query = request.query();
    if (query.substr(0, 4) != "key=") return Json(400, {{"error", "no key"}});
    const std::string key = UrlDecode(query.substr(4));
    auto it = bundle.find(key);
    if (it == bundle.end()) return Json(404, {{"error", "no such key " + key}});
    return http::HttpResponse{200, {{"Content-Type", "application/octet-stream"}}, it->second};
  }
  if (request.method == "POST" && path == "/agent/v1/logs") {
    if (!body.is_object() || body.value("stream", "") != "LifecycleConfig") {
      return Json(400, {{"error", "bad stream"}});
    }
    log_batches.push_back(body);
    for (const auto& e : body["events"]) log_events.push_back(e);
    return Json(200, json::object());
  }
  if (request.method == "POST" && path == "/agent/v1/lifecycle") {
    reports.push_back(body);
    return Json(200, json::object());
  }
  return Json(404, {{"error", "no route"}});
}

}  // namespace hf::agent::testing
