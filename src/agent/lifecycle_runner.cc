#include "lifecycle_runner.h"

#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "hyperfleet/agent/log_shipper.h"
#include "hyperfleet/agent/node_files.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/uri.h"

namespace hf::agent {
namespace {

using agentapi::LifecycleReport;
using agentapi::LifecycleSpec;
using nlohmann::json;

constexpr std::string_view kStatePath = "/var/lib/hyperfleet-agent/lifecycle.json";
constexpr std::string_view kNodeLogPath = "/var/log/provision/hyperfleet-lifecycle.log";
constexpr std::string_view kResourceConfigPath = "/opt/ml/config/resource_config.json";

LifecycleReport Report(std::string_view state, std::string script, std::string message) {
  LifecycleReport r;
  r.state = state;
  r.script = std::move(script);
  r.message = std::move(message);
  return r;
}

LifecycleReport Failed(std::string script, std::string reason, std::string message,
                       std::optional<int> exit_code = std::nullopt) {
  LifecycleReport r = Report(agentapi::kFailed, std::move(script), std::move(message));
  r.reason = std::move(reason);
  r.exit_code = exit_code;
  return r;
}

// The script's environment: HyperPod's fixed one, and the proxy variables of agent.env.
std::vector<std::string> ScriptEnvironment(const AgentOptions& options) {
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=/root",
      "LANG=C.UTF-8",
      "SAGEMAKER_RESOURCE_CONFIG_PATH=" + NodePath(options.root, kResourceConfigPath),
  };
  env.insert(env.end(), options.script_environment.begin(), options.script_environment.end());
  return env;
}

// Why `script` at `path` cannot run (missing, CRLF line endings), else nullopt after making
// it executable: S3 keeps no mode bits, and HyperPod makes scripts executable too.
std::optional<LifecycleReport> CheckScript(const std::string& script, const std::string& path,
                                           const std::string& uri) {
  struct stat st {};
  auto content = ReadFile(path);
  if (!content.ok() || stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Failed(script, "missing",
                  "Lifecycle script " + script + " was not found in " + uri +
                      ". Ensure the script exists in the provided S3 path.");
  }
  if (content->find("\r\n") != std::string::npos) {
    return Failed(script, "crlf",
                  "Lifecycle script " + script +
                      " has Windows (CRLF) line endings; lifecycle scripts must use LF "
                      "line endings");
  }
  chmod(path.c_str(), (st.st_mode & 07777) | 0755);
  return std::nullopt;
}

}  // namespace

std::optional<LifecycleReport> ScriptFailure(const std::string& script,
                                             const ScriptOutcome& outcome,
                                             int64_t timeout_seconds) {
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
                        std::to_string(outcome.signal) + " (" + SignalName(outcome.signal) + ")",
                    outcome.exit_code);
    case ScriptOutcome::Kind::kTimedOut:
      return Failed(script, "timeout",
                    "Lifecycle scripts execution timed out after " +
                        std::to_string(timeout_seconds) + " seconds",
                    outcome.exit_code);
    case ScriptOutcome::Kind::kSpawnFailed: {
      const int code = outcome.spawn_errno == ENOENT ? 127 : 126;
      std::string why = std::strerror(outcome.spawn_errno);
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

LifecycleRunner::LifecycleRunner(const AgentOptions& options, const Clock& clock,
                                 const std::atomic<bool>& stop, ControlPlaneClient::Sleep sleep)
    : options_(options), clock_(clock), stop_(stop), client_(options, std::move(sleep)) {}

LifecycleRunner::~LifecycleRunner() = default;

void LifecycleRunner::Abandon() {
  std::lock_guard lock(mu_);
  if (shipper_ != nullptr) shipper_->Abandon();
}

void LifecycleRunner::AppendNodeLog(const std::string& line) {
  if (!node_log_.is_open()) {
    const std::string path = NodePath(options_.root, kNodeLogPath);
    (void)MakeDirs(std::filesystem::path(path).parent_path().string(), 0755);
    node_log_.open(path, std::ios::app | std::ios::binary);
    if (!node_log_) spdlog::warn("cannot append to {}", path);
  }
  if (node_log_) {
    node_log_ << line << '\n';
    node_log_.flush();
  }
}

// The state record (kStatePath): {"phase": "running"|"finished", "report", "acknowledged"}.
void LifecycleRunner::WriteRecord(const json& record) {
  const Status status = WriteFileWithParents(NodePath(options_.root, kStatePath),
                                             record.dump(2) + "\n", 0600);
  if (!status.ok()) spdlog::error("{}", std::string(status.message()));
}

bool LifecycleRunner::Finish(const LifecycleReport& report) {
  json record = {{"phase", "finished"}, {"report", report}, {"acknowledged", false}};
  WriteRecord(record);
  succeeded_ = report.state == agentapi::kSucceeded;
  AppendNodeLog(report.state == agentapi::kSucceeded
                    ? "[hyperfleet] The lifecycle scripts succeeded."
                    : "[hyperfleet] The lifecycle scripts failed: " + report.message);
  if (!client_.SendReport(report)) return false;
  record["acknowledged"] = true;
  WriteRecord(record);
  return true;
}

std::optional<bool> LifecycleRunner::Resume(const LifecycleSpec& spec) {
  auto text = ReadFile(NodePath(options_.root, kStatePath));
  if (!text.ok()) return std::nullopt;
  const json record = json::parse(*text, nullptr, false);
  if (!record.is_object()) return std::nullopt;
  const std::string phase = record.value("phase", "");
  if (phase == "finished") {
    if (record.value("acknowledged", false)) {
      spdlog::info("lifecycle scripts already ran on this node; not running them again");
      const json report = record.value("report", json());
      succeeded_ = report.is_object() && report.value("state", "") == agentapi::kSucceeded;
      return true;
    }
    auto report = agentapi::Decode<LifecycleReport>(record.value("report", json()));
    if (report.ok()) {
      spdlog::info("lifecycle scripts already ran; reporting their recorded result");
      return Finish(*report);
    }
    spdlog::warn("unreadable lifecycle record: {}", std::string(report.status().message()));
  }
  if (phase == "running" || phase == "finished") {
    // The agent (or node) went away mid-run, or its record is unreadable: HyperPod does not
    // run the scripts again on reboot.
    return Finish(Failed(spec.on_create, "exit",
                         "Lifecycle scripts were interrupted: the node agent restarted while "
                         "they were running"));
  }
  return std::nullopt;
}

bool LifecycleRunner::Run(const LifecycleSpec& spec) {
  if (!spec.run) {
    spdlog::info("the control plane does not ask for lifecycle scripts");
    return true;
  }
  if (auto resumed = Resume(spec)) return *resumed;
  WriteRecord({{"phase", "running"}});
  if (!client_.SendReport(Report(agentapi::kStarted, spec.on_create, ""))) return false;

  std::string dir = NodePath(options_.root, spec.directory);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (Status s = MakeDirs(dir, 0755); !s.ok()) {
    return Finish(Failed(spec.on_create, "download", std::string(s.message())));
  }
  if (auto failure = DownloadBundle(spec, dir)) return Finish(*failure);
  if (stop_) return false;

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

std::optional<LifecycleReport> LifecycleRunner::DownloadBundle(const LifecycleSpec& spec,
                                                               const std::string& dir) {
  const std::string& uri = spec.source_s3_uri;
  auto listing = client_.GetWithRetry(agentapi::kBundlePath);
  if (!listing.ok()) {
    if (listing.status().code() == absl::StatusCode::kCancelled) return std::nullopt;
    return Failed(spec.on_create, "download",
                  "Could not list the lifecycle scripts at " + uri + ": " +
                      std::string(listing.status().message()));
  }
  if (listing->status / 100 != 2) {
    // The control plane may name the reason itself (e.g. "empty", "unsafe-key").
    auto error = agentapi::Parse<agentapi::ErrorBody>(listing->body);
    const std::string reason = error.ok() && !error->reason.empty() ? error->reason : "download";
    return Failed(spec.on_create, reason,
                  "Could not list the lifecycle scripts at " + uri + ": " + BodyError(*listing));
  }
  auto parsed = agentapi::Parse<agentapi::BundleListing>(listing->body);
  if (!parsed.ok()) {
    return Failed(spec.on_create, "download",
                  "Could not list the lifecycle scripts at " + uri + ": " +
                      std::string(parsed.status().message()));
  }
  // Every key is checked before anything is written (path traversal).
  for (const auto& f : parsed->files) {
    if (!IsSafeBundleKey(f.key)) {
      return Failed(spec.on_create, "unsafe-key",
                    "Lifecycle script bundle " + uri + " has an unsafe key \"" + f.key +
                        "\": keys must be relative paths without \"..\" segments");
    }
  }
  if (parsed->files.empty()) {
    return Failed(spec.on_create, "empty",
                  "No lifecycle scripts found at " + uri + ": the prefix is empty");
  }
  AppendNodeLog("[hyperfleet] Downloading lifecycle scripts from " + uri);
  for (const auto& [key, size] : parsed->files) {
    const std::string target = dir + "/" + key;
    if (key.back() == '/') {  // a "folder" placeholder object
      if (Status s = MakeDirs(target.substr(0, target.size() - 1), 0755); !s.ok()) {
        return Failed(spec.on_create, "download", std::string(s.message()));
      }
      continue;
    }
    auto file = client_.GetWithRetry(absl::StrCat(agentapi::kBundleFilePath, "?key=",
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
    if (Status s = WriteFileWithParents(target, file->body, 0644); !s.ok()) {
      return Failed(spec.on_create, "download",
                    "Could not save " + uri + key + ": " + std::string(s.message()));
    }
  }
  spdlog::info("downloaded {} lifecycle files from {} into {}", parsed->files.size(), uri, dir);
  return std::nullopt;
}

std::optional<LifecycleReport> LifecycleRunner::RunOne(const LifecycleSpec& spec,
                                                       const std::string& dir,
                                                       const std::string& script, bool* stopped) {
  if (!IsSafeBundleKey(script)) {
    return Failed(script, "unsafe-key", "Lifecycle script name \"" + script + "\" is unsafe");
  }
  const std::string path = dir + "/" + script;
  if (auto failure = CheckScript(script, path, spec.source_s3_uri)) return failure;

  ScriptSpec run;
  run.path = path;
  run.working_directory = dir;
  run.environment = ScriptEnvironment(options_);
  run.timeout = std::chrono::seconds(spec.timeout_seconds);
  run.kill_grace = options_.kill_grace;
  run.max_line_bytes = options_.max_log_line_bytes;

  LogShipperOptions shipping;
  shipping.flush_interval = options_.log_flush_interval;
  shipping.flush_bytes = options_.log_flush_bytes;
  shipping.retry_initial = options_.backoff_initial;
  shipping.retry_max = options_.backoff_max;
  // The shipper's thread has a client of its own (a client is not shared between threads).
  auto log_client = std::make_shared<ControlPlaneClient>(
      options_, [](std::chrono::milliseconds) { return false; });
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
    std::lock_guard lock(mu_);
    if (stop_) shipper.Abandon();
    shipper_ = &shipper;
  }
  struct Unregister {
    LifecycleRunner& runner;
    ~Unregister() {
      std::lock_guard lock(runner.mu_);
      runner.shipper_ = nullptr;
    }
  } unregister{*this};

  spdlog::info("running lifecycle script {} in {}", script, dir);
  AppendNodeLog("[hyperfleet] Running " + script);
  const ScriptOutcome outcome = RunScript(
      run, clock_,
      [&](OutputLine line) {
        AppendNodeLog(line.text);
        const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               line.time.time_since_epoch())
                               .count();
        shipper.Add(LogEvent{ms, std::move(line.text)});
      },
      &stop_);
  // All output reaches the control plane before the result does.
  if (outcome.kind == ScriptOutcome::Kind::kStopped || !shipper.Close()) {
    shipper.Abandon();
    *stopped = true;
    return std::nullopt;
  }
  return ScriptFailure(script, outcome, spec.timeout_seconds);
}

}  // namespace hf::agent
