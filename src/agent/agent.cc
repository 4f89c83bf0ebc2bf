#include "hyperfleet/agent/agent.h"
#include "hyperfleet/agent/stale_steps.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "hyperfleet/agent/health.h"
#include "hyperfleet/agent/slurm_jobs.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hyperfleet/agent/log_shipper.h"
#include "hyperfleet/agent/script_runner.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/http/http_client.h"

namespace hf::data {
extern const std::string_view kReloadSlurmctld;  // data/slurm/reload-slurmctld.sh, embedded
}  // namespace hf::data

namespace hf::agent {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using agentapi::LifecycleReport;
using agentapi::LifecycleSpec;
using agentapi::NodeFile;
using std::chrono::milliseconds;

// Where the agent keeps its own state on the node; /var/lib survives reboots (the node's
// writable layer is kept), so a reboot does not run the scripts again either (HyperPod:
// reboot → no re-run, docs/hyperpod-contract.md "Bring-up").
constexpr std::string_view kStatePath = "/var/lib/hyperfleet-agent/lifecycle.json";
constexpr std::string_view kNodeLogPath = "/var/log/provision/hyperfleet-lifecycle.log";
constexpr std::string_view kResourceConfigPath = "/opt/ml/config/resource_config.json";
constexpr std::string_view kLogStream = "LifecycleConfig";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string ErrnoText(int e) { return std::strerror(e); }

// Makes `dir` and its parents with mode 0755 (mkdir -p).
Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError("cannot create directory " + dir + ": " + ec.message());
  return absl::OkStatus();
}

// Replaces `path` atomically with `content` at `mode`.
Status WriteFileAtomically(const std::string& path, std::string_view content, uint32_t mode) {
  HF_RETURN_IF_ERROR(MakeDirs(fs::path(path).parent_path().string()));
  const std::string tmp = path + ".hf-tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError("cannot write " + path + ": " + ErrnoText(errno));
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError("cannot write " + path + ": " + ErrnoText(e));
    }
    done += static_cast<std::size_t>(n);
  }
  // fchmod, not the open mode: the umask must not change what the control plane asked for.
  if (fchmod(fd, mode & 07777) != 0 || fsync(fd) != 0 || close(fd) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return absl::InternalError("cannot write " + path + ": " + ErrnoText(e));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return absl::InternalError("cannot rename " + tmp + ": " + ErrnoText(e));
  }
  return absl::OkStatus();
}

bool HasDotDotSegment(std::string_view path) {
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

std::string ReadBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return std::string(Trim(id));
}

// The error a refused request carries, else its status.
std::string BodyError(const http::HttpResponse& response) {
  auto error = agentapi::Parse<agentapi::ErrorBody>(response.body);
  if (error.ok() && !error->error.empty()) return error->error;
  return "HTTP " + std::to_string(response.status);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Configuration and node files

StatusOr<std::map<std::string, std::string>> ParseEnvFile(std::string_view text) {
  std::map<std::string, std::string> values;
  int line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = Trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    if (line.substr(0, 7) == "export ") line = Trim(line.substr(7));
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError("line " + std::to_string(line_number) +
                                        " is not KEY=VALUE");
    }
    std::string_view value = Trim(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    values[std::string(Trim(line.substr(0, eq)))] = std::string(value);
  }
  return values;
}

Status LoadAgentEnv(const std::string& path, AgentOptions* options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read " + path + ": " + ErrnoText(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto values = ParseEnvFile(buffer.str());
  if (!values.ok()) {
    return absl::InvalidArgumentError(path + ": " + std::string(values.status().message()));
  }
  auto take = [&](const char* key, std::string* out) -> Status {
    auto it = values->find(key);
    if (it == values->end() || it->second.empty()) {
      return absl::InvalidArgumentError(path + ": " + key + " is missing");
    }
    *out = it->second;
    return absl::OkStatus();
  };
  HF_RETURN_IF_ERROR(take("HF_AGENT_URL", &options->url));
  HF_RETURN_IF_ERROR(take("HF_INSTANCE_ID", &options->instance_id));
  HF_RETURN_IF_ERROR(take("HF_AGENT_TOKEN", &options->token));
  options->script_environment.clear();
  for (const char* key : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy",
                          "NO_PROXY"}) {
    auto it = values->find(key);
    if (it != values->end()) options->script_environment.push_back(key + ("=" + it->second));
  }
  return absl::OkStatus();
}

std::string NodePath(const std::string& root, std::string_view path) {
  std::string base = root;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (path.empty() || path.front() != '/') base += '/';
  return base + std::string(path);
}

bool IsSafeBundleKey(std::string_view key) {
  if (key.empty() || key.front() == '/') return false;
  if (key.find('\0') != std::string_view::npos) return false;
  return !HasDotDotSegment(key);
}

Status WriteNodeFiles(const std::string& root, const std::vector<agentapi::NodeFile>& files) {
  Status first = absl::OkStatus();
  for (const auto& file : files) {
    Status status;
    if (file.path.empty() || file.path.front() != '/' || HasDotDotSegment(file.path)) {
      status = absl::InvalidArgumentError("refusing node file path " + file.path);
    } else {
      status = WriteFileAtomically(NodePath(root, file.path), file.content, file.mode);
    }
    if (!status.ok()) {
      spdlog::error("{}", std::string(status.message()));
      if (first.ok()) first = status;
    } else {
      spdlog::debug("wrote {} ({:o})", file.path, file.mode);
    }
  }
  return first;
}

// ---------------------------------------------------------------------------------------
// The agent

// One exchange with the control plane, with the node's credentials.
class ControlPlane {
 public:
  ControlPlane(const AgentOptions& options)
      : options_(options),
        authorization_("HyperfleetNode " + options.instance_id + ":" + options.token) {}

  StatusOr<http::HttpResponse> Send(const std::string& method, const std::string& target,
                                    const std::string& body) {
    http::HttpRequest request;
    request.method = method;
    request.target = target;
    request.headers.push_back({"Authorization", authorization_});
    if (method == "POST") request.headers.push_back({"Content-Type", "application/json"});
    request.body = body;
    return client_.Send(options_.url, request, options_.request_timeout_seconds);
  }

  // POSTs message `body`; the response body, OK only for a 2xx response.
  template <typename Message>
  StatusOr<std::string> Post(std::string_view target, const Message& body) {
    HF_ASSIGN_OR_RETURN(auto response,
                        Send("POST", std::string(target), agentapi::Encode(body)));
    if (response.status / 100 != 2) {
      return absl::UnavailableError(absl::StrCat("POST ", std::string(target), ": ",
                                                BodyError(response)));
    }
    return std::move(response.body);
  }

 private:
  const AgentOptions& options_;
  const std::string authorization_;
  http::HttpClient client_;
};

struct Agent::Impl {
  Agent& agent;
  ControlPlane cp;
  std::ofstream node_log;

  static LifecycleReport Report(std::string_view state, std::string script,
                                std::string message) {
    LifecycleReport r;
    r.state = state;
    r.script = std::move(script);
    r.message = std::move(message);
    return r;
  }
  // Failed report with `reason`.
  static LifecycleReport Failed(std::string script, std::string reason, std::string message,
                                std::optional<int> exit_code = std::nullopt) {
    LifecycleReport r = Report(agentapi::kFailed, std::move(script), std::move(message));
    r.reason = std::move(reason);
    r.exit_code = exit_code;
    return r;
  }

  const AgentOptions& opt() const { return agent.options_; }

  // Retries a report until the control plane acknowledges it; false when stopped.
  bool SendReport(const LifecycleReport& report) {
    auto delay = opt().backoff_initial;
    for (;;) {
      auto result = cp.Post(agentapi::kLifecyclePath, report);
      if (result.ok()) {
        spdlog::info("reported lifecycle {} {} {}", report.state, report.script, report.message);
        return true;
      }
      spdlog::warn("lifecycle report {} not acknowledged ({}); retrying",
                   report.state, std::string(result.status().message()));
      if (!agent.SleepFor(delay)) return false;
      delay = std::min(delay * 2, opt().backoff_max);
    }
  }

  // GET with retries of transient failures (transport errors, 5xx) for up to
  // download_retry_limit. A 4xx comes back as the response.
  StatusOr<http::HttpResponse> GetWithRetry(const std::string& target) {
    const auto give_up = std::chrono::steady_clock::now() + opt().download_retry_limit;
    auto delay = opt().backoff_initial;
    for (;;) {
      auto response = cp.Send("GET", target, "");
      if (response.ok() && response->status < 500) return response;
      const std::string why = response.ok() ? BodyError(*response)
                                            : std::string(response.status().message());
      if (std::chrono::steady_clock::now() >= give_up) {
        return absl::UnavailableError(why);
      }
      spdlog::warn("GET {} failed ({}); retrying", target, why);
      if (!agent.SleepFor(delay)) return absl::CancelledError("stopped");
      delay = std::min(delay * 2, opt().backoff_max);
    }
  }

  // State record (kStatePath): {"phase": "running"|"finished", "report", "acknowledged"}.
  std::optional<json> ReadRecord() {
    std::ifstream in(NodePath(opt().root, kStatePath));
    if (!in) return std::nullopt;
    std::stringstream buffer;
    buffer << in.rdbuf();
    json j = json::parse(buffer.str(), nullptr, false);
    if (!j.is_object()) return std::nullopt;
    return j;
  }
  void WriteRecord(const json& record) {
    const Status status =
        WriteFileAtomically(NodePath(opt().root, kStatePath), record.dump(2) + "\n", 0600);
    if (!status.ok()) spdlog::error("{}", std::string(status.message()));
  }

  // Records the final result, reports it until acknowledged, and records the ack.
  bool Finish(const LifecycleReport& report) {
    json record = {{"phase", "finished"}, {"report", report}, {"acknowledged", false}};
    WriteRecord(record);
    AppendNodeLog(report.state == "Succeeded" ? "[hyperfleet] The lifecycle scripts succeeded."
                                              : "[hyperfleet] The lifecycle scripts failed: " +
                                                    report.message);
    if (!SendReport(report)) return false;
    record["acknowledged"] = true;
    WriteRecord(record);
    return true;
  }

  void AppendNodeLog(const std::string& line) {
    if (!node_log.is_open()) {
      const std::string path = NodePath(opt().root, kNodeLogPath);
      (void)MakeDirs(fs::path(path).parent_path().string());
      node_log.open(path, std::ios::app | std::ios::binary);
      if (!node_log) spdlog::warn("cannot append to {}", path);
    }
    if (node_log) {
      node_log << line << '\n';
      node_log.flush();
    }
  }

  // Lists and downloads the bundle into `dir`. Returns a Failed report on failure.
  std::optional<LifecycleReport> DownloadBundle(const LifecycleSpec& spec,
                                                const std::string& dir) {
    const std::string& uri = spec.source_s3_uri;
    auto listing = GetWithRetry(std::string(agentapi::kBundlePath));
    if (!listing.ok()) {
      if (listing.status().code() == absl::StatusCode::kCancelled) return std::nullopt;
      return Failed(spec.on_create, "download",
                    "Could not list the lifecycle scripts at " + uri + ": " +
                        std::string(listing.status().message()));
    }
    if (listing->status / 100 != 2) {
      // The control plane may name the reason itself (e.g. "empty", "unsafe-key").
      auto error = agentapi::Parse<agentapi::ErrorBody>(listing->body);
      const std::string reason =
          error.ok() && !error->reason.empty() ? error->reason : "download";
      return Failed(spec.on_create, reason,
                    "Could not list the lifecycle scripts at " + uri + ": " +
                        BodyError(*listing));
    }
    auto parsed = agentapi::Parse<agentapi::BundleListing>(listing->body);
    if (!parsed.ok()) {
      return Failed(spec.on_create, "download",
                    "Could not list the lifecycle scripts at " + uri + ": " +
                        std::string(parsed.status().message()));
    }
    std::vector<std::string> keys;
    for (auto& f : parsed->files) keys.push_back(std::move(f.key));
    // Every key is checked before anything is written (path traversal).
    for (const auto& key : keys) {
      if (!IsSafeBundleKey(key)) {
        return Failed(spec.on_create, "unsafe-key",
                      "Lifecycle script bundle " + uri + " has an unsafe key \"" + key +
                          "\": keys must be relative paths without \"..\" segments");
      }
    }
    if (keys.empty()) {
      return Failed(spec.on_create, "empty",
                    "No lifecycle scripts found at " + uri + ": the prefix is empty");
    }
    AppendNodeLog("[hyperfleet] Downloading lifecycle scripts from " + uri);
    for (const auto& key : keys) {
      const std::string target = dir + "/" + key;
      if (key.back() == '/') {  // a "folder" placeholder object
        if (Status s = MakeDirs(target); !s.ok()) {
          return Failed(spec.on_create, "download", std::string(s.message()));
        }
        continue;
      }
      auto file = GetWithRetry(absl::StrCat(agentapi::kBundleFilePath, "?key=",
                                            UriEncode(key, /*keep_slash=*/true)));
      if (!file.ok()) {
        if (file.status().code() == absl::StatusCode::kCancelled) return std::nullopt;
        return Failed(spec.on_create, "download",
                      "Could not download " + uri + key + ": " +
                          std::string(file.status().message()));
      }
      if (file->status / 100 != 2) {
        return Failed(spec.on_create, "download",
                      "Could not download " + uri + key + ": " + BodyError(*file));
      }
      if (Status s = WriteFileAtomically(target, file->body, 0644); !s.ok()) {
        return Failed(spec.on_create, "download",
                      "Could not save " + uri + key + ": " + std::string(s.message()));
      }
    }
    spdlog::info("downloaded {} lifecycle files from {} into {}", keys.size(), uri, dir);
    return std::nullopt;
  }

  // Runs one script from the bundle; nullopt on success, else a Failed report.
  // `stopped` is set when the agent was stopped meanwhile.
  std::optional<LifecycleReport> RunOne(const LifecycleSpec& spec, const std::string& dir,
                                        const std::string& script, bool* stopped) {
    const std::string uri = spec.source_s3_uri;
    const std::string path = dir + "/" + script;
    if (!IsSafeBundleKey(script)) {
      return Failed(script, "unsafe-key", "Lifecycle script name \"" + script + "\" is unsafe");
    }
    std::ifstream in(path, std::ios::binary);
    struct stat st;
    if (!in || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return Failed(script, "missing",
                    "Lifecycle script " + script + " was not found in " + uri +
                        ". Ensure the script exists in the provided S3 path.");
    }
    std::stringstream content;
    content << in.rdbuf();
    if (content.str().find("\r\n") != std::string::npos) {
      return Failed(script, "crlf",
                    "Lifecycle script " + script +
                        " has Windows (CRLF) line endings; lifecycle scripts must use LF "
                        "line endings");
    }
    // S3 keeps no mode bits: the script is made executable, as HyperPod does.
    chmod(path.c_str(), (st.st_mode & 07777) | 0755);

    ScriptSpec run;
    run.path = path;
    run.working_directory = dir;
    run.environment = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        "LANG=C.UTF-8",
        "SAGEMAKER_RESOURCE_CONFIG_PATH=" + NodePath(opt().root, kResourceConfigPath),
    };
    run.environment.insert(run.environment.end(), opt().script_environment.begin(),
                           opt().script_environment.end());
    run.timeout = std::chrono::seconds(spec.timeout_seconds);
    run.kill_grace = opt().kill_grace;
    run.max_line_bytes = opt().max_log_line_bytes;

    LogShipperOptions shipping;
    shipping.flush_interval = opt().log_flush_interval;
    shipping.flush_bytes = opt().log_flush_bytes;
    shipping.retry_initial = opt().backoff_initial;
    shipping.retry_max = opt().backoff_max;
    auto log_client = std::make_shared<ControlPlane>(opt());
    LogShipper shipper(shipping, [log_client](const std::vector<LogEvent>& events) {
      agentapi::LogBatch batch;
      batch.events.reserve(events.size());
      for (const auto& e : events) batch.events.push_back({e.timestamp_ms, e.message});
      auto result = log_client->Post(agentapi::kLogsPath, batch);
      if (!result.ok()) {
        spdlog::warn("log batch not acknowledged ({}); retrying",
                     std::string(result.status().message()));
      }
      return result.ok();
    });

    {
      std::lock_guard<std::mutex> lock(agent.mu_);
      if (agent.stop_) shipper.Abandon();
      agent.shipper_ = &shipper;
    }
    struct Unregister {
      Agent& agent;
      ~Unregister() {
        std::lock_guard<std::mutex> lock(agent.mu_);
        agent.shipper_ = nullptr;
      }
    } unregister{agent};

    spdlog::info("running lifecycle script {} in {}", script, dir);
    AppendNodeLog("[hyperfleet] Running " + script);
    const ScriptOutcome outcome = RunScript(
        run, *agent.clock_,
        [&](OutputLine line) {
          AppendNodeLog(line.text);
          const int64_t ms = std::chrono::duration_cast<milliseconds>(
                                 line.time.time_since_epoch())
                                 .count();
          shipper.Add(LogEvent{ms, std::move(line.text)});
        },
        &agent.stop_);
    // All output reaches the control plane before the result does.
    if (outcome.kind == ScriptOutcome::Kind::kStopped || !shipper.Close()) {
      shipper.Abandon();
      *stopped = true;
      return std::nullopt;
    }
    switch (outcome.kind) {
      case ScriptOutcome::Kind::kExited:
        if (outcome.exit_code == 0) return std::nullopt;
        return Failed(script, "exit",
                      "Lifecycle script " + script + " exited with status " +
                          std::to_string(outcome.exit_code),
                      outcome.exit_code);
      case ScriptOutcome::Kind::kSignaled:
        return Failed(script, "exit",
                      "Lifecycle script " + script + " was killed by signal " +
                          std::to_string(outcome.signal) + " (" + SignalName(outcome.signal) +
                          ")",
                      outcome.exit_code);
      case ScriptOutcome::Kind::kTimedOut:
        return Failed(script, "timeout",
                      "Lifecycle scripts execution timed out after " +
                          std::to_string(spec.timeout_seconds) + " seconds",
                      outcome.exit_code);
      case ScriptOutcome::Kind::kSpawnFailed: {
        const int code = outcome.spawn_errno == ENOENT ? 127 : 126;
        std::string why = ErrnoText(outcome.spawn_errno);
        if (outcome.spawn_errno == ENOEXEC) why += " (does it start with a #! line?)";
        if (outcome.spawn_errno == ENOENT) why += " (is its #! interpreter installed?)";
        return Failed(script, "exit",
                      "Lifecycle script " + script + " could not be executed: " + why, code);
      }
      case ScriptOutcome::Kind::kStopped:
        break;
    }
    return std::nullopt;
  }

  // The whole lifecycle: false when stopped before the result was acknowledged.
  bool RunLifecycle(const LifecycleSpec& spec) {
    if (!spec.run) {
      spdlog::info("the control plane does not ask for lifecycle scripts");
      return true;
    }
    if (auto record = ReadRecord()) {
      const std::string phase = record->value("phase", "");
      if (phase == "finished") {
        if (record->value("acknowledged", false)) {
          spdlog::info("lifecycle scripts already ran on this node; not running them again");
          return true;
        }
        auto report = agentapi::Decode<LifecycleReport>(record->value("report", json()));
        if (report.ok()) {
          spdlog::info("lifecycle scripts already ran; reporting their recorded result");
          return Finish(*report);
        }
        spdlog::warn("unreadable lifecycle record: {}", std::string(report.status().message()));
      }
      if (phase == "running" || phase == "finished") {
        // The agent (or node) went away mid-run, or its record is unreadable: HyperPod does
        // not run the scripts again on reboot.
        return Finish(Failed(spec.on_create, "exit",
                             "Lifecycle scripts were interrupted: the node agent restarted "
                             "while they were running"));
      }
    }
    WriteRecord({{"phase", "running"}});
    if (!SendReport(Report(agentapi::kStarted, spec.on_create, ""))) return false;

    const std::string dir_on_node = spec.directory;
    std::string dir = NodePath(opt().root, dir_on_node);
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (Status s = MakeDirs(dir); !s.ok()) {
      return Finish(Failed(spec.on_create, "download", std::string(s.message())));
    }
    if (auto failure = DownloadBundle(spec, dir)) return Finish(*failure);
    if (agent.stop_) return false;

    for (const std::string& script : {spec.on_create, spec.on_init_complete}) {
      if (script.empty()) continue;
      bool stopped = false;
      auto failure = RunOne(spec, dir, script, &stopped);
      if (stopped) return false;
      if (failure) return Finish(*failure);
    }
    return Finish(Report(agentapi::kSucceeded, spec.on_create,
                         "Lifecycle scripts completed successfully"));
  }
};

Agent::Agent(AgentOptions options, const Clock* clock)
    : options_(std::move(options)), clock_(clock) {
  static const SystemClock kSystemClock;
  if (clock_ == nullptr) clock_ = &kSystemClock;
}

bool Agent::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [&] { return stop_.load(); });
  return !stop_.load();
}

void Agent::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  if (shipper_ != nullptr) shipper_->Abandon();
  cv_.notify_all();
}

namespace {

constexpr std::string_view kSlurmConfPath = "/opt/slurm/etc/slurm.conf";

// The lines of a slurm.conf whose change needs a slurmctld restart (Slurm 22.05).
std::vector<std::string_view> RestartLines(std::string_view conf) {
  std::vector<std::string_view> lines;
  while (!conf.empty()) {
    const size_t end = std::min(conf.find('\n'), conf.size());
    const std::string_view line = conf.substr(0, end);
    if (line.starts_with("NodeName=") || line.starts_with("SlurmctldHost=")) {
      lines.push_back(line);
    }
    conf.remove_prefix(std::min(end + 1, conf.size()));
  }
  return lines;
}

// Runs `script` with /bin/sh as root on the node, logging its output; false on failure.
// `args` are the script's $1, $2...
bool RunNodeShell(const std::string& script, const Clock& clock,
                  const std::vector<std::string>& args = {}) {
  ScriptSpec spec;
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script, "sh"};  // the last one is $0
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.working_directory = "/";
  spec.environment = {"PATH=/opt/slurm/bin:/opt/slurm/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                      "HOME=/root"};
  spec.timeout = std::chrono::seconds(120);
  auto outcome = RunScript(
      spec, clock, [](OutputLine line) { spdlog::info("slurm reload: {}", line.text); },
      nullptr);
  return outcome.kind == ScriptOutcome::Kind::kExited && outcome.exit_code == 0;
}

// Names of the nodes a slurm.conf defines (NodeName=<name> ...).
std::set<std::string> SlurmNodeNames(std::string_view conf) {
  std::set<std::string> names;
  for (std::string_view line : RestartLines(conf)) {
    if (!line.starts_with("NodeName=")) continue;
    line.remove_prefix(9);
    names.emplace(line.substr(0, line.find(' ')));
  }
  return names;
}

bool ReloadSlurmOnNode(SlurmReload reload, std::string_view before, std::string_view after,
                       const Clock& clock) {
  if (reload == SlurmReload::kNone) return true;
  const bool ok = RunNodeShell(std::string(SlurmReloadProgram()), clock,
                               SlurmReloadArguments(reload, before, after));
  spdlog::info("slurm.conf changed: {}{}",
               reload == SlurmReload::kRestart ? "restarted slurmctld and reconfigured"
                                               : "reconfigured",
               ok ? "" : " (failed; retried at the next heartbeat)");
  return ok;
}

// Runs `script` with /bin/sh as root on the node and returns its output, or nullopt when
// it fails. Quiet: it runs every heartbeat.
std::optional<std::string> CaptureNodeShell(const std::string& script, const Clock& clock) {
  ScriptSpec spec;
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  spec.working_directory = "/";
  spec.environment = {"PATH=/opt/slurm/bin:/opt/slurm/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
                      "HOME=/root"};
  spec.timeout = std::chrono::seconds(10);
  std::string out;
  auto outcome = RunScript(
      spec, clock, [&out](OutputLine line) { out += line.text + "\n"; }, nullptr);
  if (outcome.kind != ScriptOutcome::Kind::kExited || outcome.exit_code != 0) return std::nullopt;
  return out;
}

// Base of a sinfo long state: "down*" -> "down", "idle+drain" -> "idle".
std::string BaseSlurmState(std::string_view state) {
  const size_t end = state.find_first_of("+*~#!%$@^-");
  return absl::AsciiStrToLower(
      std::string(state.substr(0, end == std::string_view::npos ? state.size() : end)));
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

}  // namespace

std::vector<agentapi::SlurmNode> ParseSinfoNodes(std::string_view text) {
  std::vector<agentapi::SlurmNode> out;
  std::set<std::string> seen;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    // node|state|time|cpus|reason: the reason comes last and may itself contain '|'.
    std::vector<std::string> f;
    size_t start = 0;
    for (int k = 0; k < 4; ++k) {
      const size_t bar = line.find('|', start);
      if (bar == std::string::npos) break;
      f.push_back(line.substr(start, bar - start));
      start = bar + 1;
    }
    if (f.size() != 4) continue;
    f.push_back(line.substr(start));
    // The reason stays exactly as set: "Action:Replace " is not "Action:Replace".
    for (size_t k = 0; k + 1 < f.size(); ++k) absl::StripAsciiWhitespace(&f[k]);
    if (f[0].empty() || f[1].empty()) continue;
    std::string name = f[0];
    if (!seen.insert(name).second) continue;
    double reason_time = 0;
    const std::string& stamp = f[2];
    std::tm tm{};
    if (strptime(stamp.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) != nullptr) {
      tm.tm_isdst = -1;
      const time_t t = mktime(&tm);  // sinfo prints the node's local time
      if (t > 0) reason_time = static_cast<double>(t);
    }
    // CPUs allocated/idle/other/total: a node set to fail while part of it runs jobs may
    // still read "fail" (22.05), so allocated CPUs tell whether jobs remain.
    int alloc_cpus = 0;
    (void)absl::SimpleAtoi(f[3].substr(0, f[3].find('/')), &alloc_cpus);
    std::string reason = f[4];
    if (reason == "none" || reason == "None") reason.clear();
    out.push_back({std::move(name), absl::AsciiStrToLower(f[1]), alloc_cpus, std::move(reason),
                   reason_time});
  }
  return out;
}

std::string SlurmMarkCommands(const std::vector<agentapi::SlurmMark>& marks,
                              const std::vector<agentapi::SlurmNode>& nodes) {
  std::map<std::string_view, const agentapi::SlurmNode*> by_name;
  for (const auto& n : nodes) by_name[n.name] = &n;
  std::string script;
  for (const auto& [node, action, reason] : marks) {
    auto it = by_name.find(node);
    if (node.empty() || it == by_name.end()) continue;
    // Names come from slurm.conf, which the control plane wrote; still, keep them inert.
    if (node.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") !=
        std::string::npos) {
      continue;
    }
    const std::string base = BaseSlurmState(it->second->state);
    const std::string& current_reason = it->second->reason;
    if (action == "down" && base != "down" && base != "fail" && !reason.empty()) {
      absl::StrAppend(&script, "scontrol update nodename=", node, " state=down reason=",
                      ShellQuote(reason), "\n");
    } else if (action == "resume" && current_reason == reason &&
               (base == "down" || base == "fail" || base == "failing" || base == "drain" ||
                base == "drained" || base == "draining")) {
      absl::StrAppend(&script, "scontrol update nodename=", node, " state=resume\n");
    }
  }
  return script;
}

std::string_view SlurmReloadProgram() { return data::kReloadSlurmctld; }

std::vector<std::string> SlurmReloadArguments(SlurmReload reload, std::string_view before,
                                              std::string_view after) {
  std::vector<std::string> args = {reload == SlurmReload::kRestart ? "restart" : "reconfigure"};
  const auto now_names = SlurmNodeNames(after);
  for (const auto& name : SlurmNodeNames(before)) {
    if (!now_names.count(name)) args.push_back(name);
  }
  return args;
}

SlurmReload SlurmReloadFor(std::string_view before, std::string_view after) {
  if (before.empty() || before == after) return SlurmReload::kNone;
  return RestartLines(before) == RestartLines(after) ? SlurmReload::kReconfigure
                                                      : SlurmReload::kRestart;
}

namespace {

// The health report as the heartbeat carries it.
agentapi::HealthReport ToWire(const HealthReport& report) {
  agentapi::HealthReport out;
  const Severity worst = report.verdict();
  out.verdict = SeverityName(worst);
  out.action = SeverityAction(worst);
  out.checked_at = ToEpochSeconds(report.checked_at);
  out.duration_ms = report.duration.count();
  out.findings.reserve(report.findings.size());
  for (const auto& f : report.findings) {
    out.findings.push_back({f.check, std::string(SeverityName(f.severity)),
                            std::string(SeverityAction(f.severity)), f.message});
  }
  return out;
}

/// Work the heartbeat must never wait for, done on threads of its own: health checks
/// (systemctl can be slow) and Slurm (sinfo, scontrol and reloads block while slurmctld
/// restarts). A heartbeat late by more than the control plane's unresponsive threshold
/// gets a healthy node replaced, so the heartbeat thread only sends what these produced.
class HeartbeatHelpers {
 public:
  using Reload = std::function<bool(SlurmReload, const std::string& before,
                                    const std::string& after)>;
  HeartbeatHelpers(Duration interval, HealthMonitor* health,
                   std::function<std::optional<std::string>()> query_slurm,
                   std::function<bool(const std::string&)> run_slurm, Reload reload,
                   std::function<bool()> slurm_active, const Clock& clock)
      : interval_(interval), health_(health), query_slurm_(std::move(query_slurm)),
        run_slurm_(std::move(run_slurm)), reload_(std::move(reload)),
        slurm_active_(std::move(slurm_active)), clock_(clock) {
    if (health_) health_thread_ = std::thread([this] { HealthLoop(); });
    slurm_thread_ = std::thread([this] { SlurmLoop(); });
  }
  ~HeartbeatHelpers() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (health_thread_.joinable()) health_thread_.join();
    if (slurm_thread_.joinable()) slurm_thread_.join();
  }

  /// Inputs of the next health check (from heartbeat responses).
  void setCheckInputs(CheckInputs inputs) {
    std::lock_guard lock(mu_);
    inputs_ = std::move(inputs);
  }
  /// The last health report, waiting up to `wait` for a first one.
  std::optional<agentapi::HealthReport> health(Duration wait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return stop_ || health_report_.has_value(); });
    return health_report_;
  }
  /// The last Slurm node view (ParseSinfoNodes) if taken within 3 intervals.
  std::optional<std::vector<agentapi::SlurmNode>> slurmNodes() {
    std::lock_guard lock(mu_);
    if (!slurm_nodes_ || clock_.now() - slurm_nodes_at_ > 3 * interval_) return std::nullopt;
    return slurm_nodes_;
  }
  /// Applies the control plane's "slurm_marks" on the Slurm thread (latest wins).
  void applyMarks(std::vector<agentapi::SlurmMark> marks) {
    {
      std::lock_guard lock(mu_);
      marks_ = std::move(marks);
    }
    cv_.notify_all();
  }
  /// Starts a reload for files revision `revision` unless one is running; false if busy.
  bool startReload(int64_t revision, SlurmReload kind, std::string before, std::string after) {
    {
      std::lock_guard lock(mu_);
      if (reload_job_ || reload_done_) return false;
      reload_job_ = ReloadJob{revision, kind, std::move(before), std::move(after)};
    }
    cv_.notify_all();
    return true;
  }
  bool reloadBusy() {
    std::lock_guard lock(mu_);
    return reload_job_.has_value() || reload_done_.has_value();
  }
  /// A finished reload: (revision, kind, whether it worked, the "before" it started from).
  struct ReloadResult {
    int64_t revision;
    SlurmReload kind;
    bool ok;
    std::string before;
  };
  std::optional<ReloadResult> takeReloadResult() {
    std::lock_guard lock(mu_);
    auto r = std::move(reload_done_);
    reload_done_.reset();
    return r;
  }

 private:
  struct ReloadJob {
    int64_t revision;
    SlurmReload kind;
    std::string before, after;
  };

  void HealthLoop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      CheckInputs inputs = inputs_;
      lock.unlock();
      const HealthReport report = health_->Check(inputs);
      if (report.verdict() != last_verdict_) {
        std::string why;
        for (const auto& f : report.findings) {
          if (f.severity != Severity::kOk) why += "; " + f.check + ": " + f.message;
        }
        spdlog::warn("health verdict {} → {}{}", SeverityName(last_verdict_),
                     SeverityName(report.verdict()), why);
        last_verdict_ = report.verdict();
      }
      agentapi::HealthReport wire = ToWire(report);
      lock.lock();
      health_report_ = std::move(wire);
      cv_.notify_all();
      cv_.wait_for(lock, interval_, [&] { return stop_; });
    }
  }

  void SlurmLoop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (reload_job_) {
        ReloadJob job = *reload_job_;
        lock.unlock();
        const bool ok = reload_ ? reload_(job.kind, job.before, job.after) : true;
        lock.lock();
        reload_job_.reset();
        reload_done_ = ReloadResult{job.revision, job.kind, ok, job.before};
        continue;
      }
      const bool active = slurm_active_();
      std::optional<std::vector<agentapi::SlurmMark>> marks = std::move(marks_);
      marks_.reset();
      lock.unlock();
      std::optional<std::vector<agentapi::SlurmNode>> view;
      if (active && query_slurm_) {
        if (auto text = query_slurm_()) view = ParseSinfoNodes(*text);
      }
      if (marks && view) {
        const std::string script = SlurmMarkCommands(*marks, *view);
        if (!script.empty()) {
          spdlog::info("slurm node states from the control plane:\n{}", script);
          if (!run_slurm_ || !run_slurm_(script)) {
            spdlog::warn("setting slurm node states failed; retried after the next heartbeat");
          }
          if (query_slurm_) {
            if (auto text = query_slurm_()) view = ParseSinfoNodes(*text);  // show the result
          }
        }
      }
      lock.lock();
      if (view) {
        slurm_nodes_ = std::move(*view);
        slurm_nodes_at_ = clock_.now();
      }
      cv_.wait_for(lock, interval_, [&] { return stop_ || reload_job_ || marks_; });
    }
  }

  const Duration interval_;
  HealthMonitor* health_;
  std::function<std::optional<std::string>()> query_slurm_;
  std::function<bool(const std::string&)> run_slurm_;
  Reload reload_;
  std::function<bool()> slurm_active_;
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  CheckInputs inputs_;
  std::optional<agentapi::HealthReport> health_report_;
  Severity last_verdict_ = Severity::kOk;
  std::optional<std::vector<agentapi::SlurmNode>> slurm_nodes_;
  SystemTime slurm_nodes_at_{};
  std::optional<std::vector<agentapi::SlurmMark>> marks_;
  std::optional<ReloadJob> reload_job_;
  std::optional<ReloadResult> reload_done_;
  std::thread health_thread_, slurm_thread_;
};

}  // namespace

void Agent::HeartbeatLoop(int heartbeat_seconds, int64_t files_revision, HealthMonitor* health) {
  ControlPlane cp(options_);
  const auto interval = std::chrono::seconds(std::max(1, heartbeat_seconds));
  const bool on_node = options_.root == "/";
  std::function<std::optional<std::string>()> query = options_.query_slurm_nodes;
  if (!query && on_node) {
    query = [this] { return CaptureNodeShell("sinfo -N -h -o '%N|%T|%H|%C|%E'", *clock_); };
  }
  std::function<bool(const std::string&)> run = options_.run_slurm_commands;
  if (!run && on_node) run = [this](const std::string& script) { return RunNodeShell(script, *clock_); };
  HeartbeatHelpers::Reload reload;
  if (options_.reload_slurm) {
    reload = [this](SlurmReload kind, const std::string&, const std::string&) {
      return options_.reload_slurm(kind);
    };
  } else if (on_node) {
    reload = [this](SlurmReload kind, const std::string& before, const std::string& after) {
      return ReloadSlurmOnNode(kind, before, after, *clock_);
    };
  }
  // Task governance (slurm_jobs.h): governed jobs out, job actions in, on the controller.
  SlurmJobs::Options jobs_options;
  jobs_options.root = options_.root;
  jobs_options.interval = interval;
  jobs_options.query = options_.query_slurm_jobs;
  if (!jobs_options.query && on_node) {
    jobs_options.query = [this] { return CaptureNodeShell(SlurmJobsQuery(), *clock_); };
  }
  jobs_options.run = run;
  jobs_options.active = [this] { return slurm_controller_.load() && lifecycle_done_.load(); };
  SlurmJobs jobs(std::move(jobs_options), *clock_);
  HeartbeatHelpers helpers(
      interval, health, std::move(query), std::move(run), std::move(reload),
      [this] { return slurm_controller_.load() && lifecycle_done_.load(); }, *clock_);
  // Step daemons left waiting for a failed node's message (stale_steps.h).
  std::optional<StaleStepReaper> reaper;
  if (on_node) {
    reaper.emplace("/proc", interval, std::chrono::seconds(2),
                   [this] { return CaptureNodeShell("squeue -h -t all -o '%i|%T'", *clock_); },
                   *clock_);
  }
  // After applying new files, confirm them at once (once in a row: never a busy loop).
  bool report_now = false;
  bool reported_early = false;
  // A reload that failed is retried (and the new revision not confirmed) until it works.
  SlurmReload pending_reload = SlurmReload::kNone;
  std::string reload_before;
  std::optional<TimeSample> control_plane_time;  // from the last response carrying "time"
  for (;;) {
    const bool early = report_now && !reported_early;
    if (!early && !SleepFor(interval)) break;
    if (stop_) break;
    reported_early = early;
    report_now = false;
    if (auto done = helpers.takeReloadResult()) {
      // Reported once written and reloaded: the control plane then lets the nodes the new
      // file names start their slurmd. Not confirmed, the files come again and the reload
      // is retried.
      pending_reload = done->ok ? SlurmReload::kNone : done->kind;
      if (done->ok) {
        files_revision = done->revision;
        report_now = true;
      } else {
        reload_before = done->before;
      }
    }
    agentapi::HeartbeatRequest body;
    body.files_revision = files_revision;
    if (health != nullptr) {
      CheckInputs inputs;
      inputs.control_plane_time = control_plane_time;
      inputs.services = lifecycle_done_.load();
      helpers.setCheckInputs(inputs);
      body.health = helpers.health(std::chrono::seconds(2));
      if (stop_) break;
    }
    // The Slurm controller reports its nodes' states (node recovery, docs/resiliency.md).
    body.slurm_nodes = helpers.slurmNodes();
    body.slurm_jobs = jobs.report();
    auto result = cp.Post(agentapi::kHeartbeatPath, body);
    if (!result.ok()) {
      spdlog::warn("heartbeat failed: {}", std::string(result.status().message()));
      continue;
    }
    auto decoded = agentapi::Parse<agentapi::HeartbeatResponse>(*result);
    if (!decoded.ok()) {
      spdlog::error("heartbeat: {}", std::string(decoded.status().message()));
      continue;
    }
    const agentapi::HeartbeatResponse& response = *decoded;
    if (!response.slurm_marks.empty()) helpers.applyMarks(response.slurm_marks);
    jobs.onResponse(response);
    // The control plane's clock, when it sends one (epoch seconds), for the clock check.
    if (response.time) {
      control_plane_time = TimeSample{clock_->now(), FromEpochSeconds(*response.time)};
    }
    if (response.files) {
      if (helpers.reloadBusy()) continue;  // the files come again until confirmed
      const std::vector<NodeFile>* files = &*response.files;
      const std::string conf_path = NodePath(options_.root, kSlurmConfPath);
      std::string before;
      {
        std::ifstream in(conf_path, std::ios::binary);
        before.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
      if (WriteNodeFiles(options_.root, *files).ok()) {
        spdlog::info("updated {} node files", files->size());
        std::string after;
        for (const auto& f : *files) {
          if (f.path == kSlurmConfPath) {
            after = f.content;
            slurm_controller_ = true;
          }
        }
        if (pending_reload == SlurmReload::kNone) reload_before = before;
        SlurmReload reload = after.empty() ? SlurmReload::kNone : SlurmReloadFor(before, after);
        reload = std::max(reload, pending_reload);
        const bool has_revision = response.files_revision.has_value();
        const int64_t revision = response.files_revision.value_or(files_revision);
        if (reload == SlurmReload::kNone) {
          if (has_revision) {
            files_revision = revision;
            report_now = true;
          }
        } else {
          helpers.startReload(has_revision ? revision : files_revision, reload, reload_before, after);
        }
      }
    } else if (response.files_revision) {
      files_revision = *response.files_revision;
    }
  }
}

Status Agent::Run() {
  Impl impl{*this, ControlPlane(options_), {}};
  const std::string boot_id = options_.boot_id.empty() ? ReadBootId() : options_.boot_id;
  // The control plane may be restarting, so retry with capped backoff.
  auto Register = [&](ControlPlane& cp) -> StatusOr<agentapi::RegisterResponse> {
  auto delay = options_.backoff_initial;
  for (;;) {
    if (stop_) return absl::CancelledError("stopped before registering");
    agentapi::RegisterRequest request;
    request.boot_id = boot_id;
    auto response = cp.Post(agentapi::kRegisterPath, request);
    std::string why;
    if (response.ok()) {
      auto parsed = agentapi::Parse<agentapi::RegisterResponse>(*response);
      if (parsed.ok()) return parsed;
      why = "register response: " + std::string(parsed.status().message());
    } else {
      why = std::string(response.status().message());
    }
    spdlog::warn("register with {} failed ({}); retrying in {} ms", options_.url, why,
                 delay.count());
    if (!SleepFor(delay)) return absl::CancelledError("stopped before registering");
    delay = std::min(delay * 2, options_.backoff_max);
  }
  };
  auto registered = Register(impl.cp);
  if (!registered.ok()) return registered.status();
  agentapi::RegisterResponse registration = std::move(*registered);
  spdlog::info("registered as {} of group {} in cluster {} ({})", options_.instance_id,
               registration.group, registration.cluster_name, registration.cluster_id);

  if (Status s = WriteNodeFiles(options_.root, registration.files); !s.ok()) {
    spdlog::error("node files incomplete: {}", std::string(s.message()));
  }
  // Only the Slurm controller node receives slurm.conf (configless slurmds fetch it).
  for (const auto& f : registration.files) {
    if (f.path == kSlurmConfPath) slurm_controller_ = true;
  }
  // User job scripts test this directory to detect HyperPod (docs/hyperpod-contract.md
  // "Node files").
  if (Status s = MakeDirs(NodePath(options_.root, "/opt/sagemaker_cluster")); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
  }

  std::unique_ptr<HealthMonitor> health;
  if (options_.health_checks) {
    HealthMonitorOptions health_options;
    health_options.root = options_.root;
    health_options.expected_gpus = registration.expected_gpus;
    health_options.clock = clock_;
    health_options.stop = &stop_;
    health = std::make_unique<HealthMonitor>(std::move(health_options));
  }
  std::thread heartbeat([this, seconds = registration.heartbeat_seconds,
                         revision = registration.files_revision, monitor = health.get()] {
    HeartbeatLoop(seconds, revision, monitor);
  });
  // Held back (controller first): ask again until the control plane says run (or not).
  LifecycleSpec spec = registration.lifecycle;
  std::string last_reason;
  while (spec.wait) {
    if (spec.wait_reason != last_reason) {
      spdlog::info("lifecycle scripts wait: {}", spec.wait_reason);
      impl.AppendNodeLog("[hyperfleet] Waiting to run the lifecycle scripts: " + spec.wait_reason);
      last_reason = spec.wait_reason;
    }
    if (!SleepFor(std::chrono::milliseconds(std::clamp<int64_t>(spec.retry_ms, 50, 60000)))) break;
    auto again = Register(impl.cp);
    if (!again.ok()) break;  // stopped
    spec = again->lifecycle;
  }
  const bool finished = !spec.wait && impl.RunLifecycle(spec);
  lifecycle_done_ = true;
  if (!options_.once) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_.load(); });
  } else {
    Stop();
  }
  heartbeat.join();
  if (!finished && options_.once) return absl::CancelledError("stopped during the lifecycle");
  return absl::OkStatus();
}

}  // namespace hf::agent
