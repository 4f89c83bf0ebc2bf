#include "hyperfleet/agentapi/protocol.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------
// Reading members. `Fits` assigns a JSON value to a C++ member when its type fits.

bool Fits(const json& v, std::string& out) {
  if (!v.is_string()) return false;
  out = v.get_ref<const std::string&>();
  return true;
}
bool Fits(const json& v, bool& out) {
  if (!v.is_boolean()) return false;
  out = v.get<bool>();
  return true;
}
bool Fits(const json& v, int64_t& out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return false;
  }
  out = v.get<int64_t>();
  return true;
}
bool Fits(const json& v, int& out) {
  int64_t x = 0;
  if (!Fits(v, x) || x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max()) {
    return false;
  }
  out = static_cast<int>(x);
  return true;
}
bool Fits(const json& v, uint64_t& out) {
  // A value built in C++ from a signed integer is "integer", one parsed from text "unsigned".
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (!v.is_number_integer() || v.get<int64_t>() < 0) return false;
  out = static_cast<uint64_t>(v.get<int64_t>());
  return true;
}
bool Fits(const json& v, unsigned& out) {
  uint64_t x = 0;
  if (!Fits(v, x) || x > std::numeric_limits<unsigned>::max()) return false;
  out = static_cast<unsigned>(x);
  return true;
}
bool Fits(const json& v, double& out) {
  if (!v.is_number()) return false;
  out = v.get<double>();
  return true;
}

template <typename T>
constexpr const char* TypeName() {
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  if constexpr (std::is_same_v<T, bool>) return "a boolean";
  if constexpr (std::is_same_v<T, double>) return "a number";
  if constexpr (std::is_unsigned_v<T>) return "a non-negative integer";
  return "an integer";
}

void RequireObject(const json& j, const char* what) {
  if (!j.is_object()) throw ProtocolError(absl::StrCat(what, " must be a JSON object"));
}

// Member `key` when present and not null; another type is an error naming it.
template <typename T>
bool Optional(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  if (!Fits(*it, out)) throw ProtocolError(absl::StrCat(key, " must be ", TypeName<T>()));
  return true;
}

// Member `key`, which must be there (and not null).
template <typename T>
void Required(const json& j, const char* key, T& out) {
  if (!Optional(j, key, out)) throw ProtocolError(absl::StrCat(key, " is missing"));
}

// Member `key` when present with a fitting type; anything else leaves `out` as it is.
template <typename T>
bool Lenient(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  return it != j.end() && Fits(*it, out);
}

// Member `key` when present and fitting, else nullopt.
template <typename T>
std::optional<T> LenientOptional(const json& j, const char* key) {
  T value{};
  if (!Lenient(j, key, value)) return std::nullopt;
  return value;
}

// Array member `key` (absent or null: empty), every entry decoded; an entry that does not
// match is an error naming its index.
template <typename T>
std::vector<T> Array(const json& j, const char* key) {
  std::vector<T> out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_array()) throw ProtocolError(absl::StrCat(key, " must be an array"));
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    try {
      out.push_back((*it)[i].template get<T>());
    } catch (const ProtocolError& e) {
      throw ProtocolError(absl::StrCat(key, "[", i, "]: ", e.what()));
    }
  }
  return out;
}

// Array member `key`, keeping the entries that decode (commands from the control plane:
// one that does not match is skipped, as an unknown action is).
template <typename T>
std::vector<T> ArrayOfValid(const json& j, const char* key) {
  std::vector<T> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  out.reserve(it->size());
  for (const auto& e : *it) {
    try {
      from_json(e, out.emplace_back());
    } catch (const ProtocolError&) {
      out.pop_back();
    }
  }
  return out;
}

// "version": absent in the messages of programs before this header (0).
int VersionOf(const json& j) {
  int version = 0;
  Lenient(j, "version", version);
  return version;
}

// A file mode: a number, or an octal string ("0640").
uint32_t ModeOf(const json& v, const std::string& path) {
  uint32_t mode = 0;
  if (unsigned m = 0; Fits(v, m)) return m;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() <= 6 && s.find_first_not_of("01234567") == std::string::npos) {
      for (char c : s) mode = mode * 8 + static_cast<uint32_t>(c - '0');
      return mode;
    }
  }
  throw ProtocolError("bad mode for " + path);
}

template <typename T>
void PutIfSet(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Registration

void to_json(json& j, const RegisterRequest& m) {
  j = json{{"version", m.version}, {"boot_id", m.boot_id}};
}

void from_json(const json& j, RegisterRequest& m) {
  RequireObject(j, "the register request");
  m.version = VersionOf(j);
  Optional(j, "boot_id", m.boot_id);
}

void to_json(json& j, const NodeFile& m) {
  j = json{{"path", m.path}, {"mode", m.mode}, {"content", m.content}};
}

void from_json(const json& j, NodeFile& m) {
  if (!j.is_object() || !j.contains("path") || !j["path"].is_string()) {
    throw ProtocolError("a file has no path");
  }
  m.path = j["path"].get<std::string>();
  if (auto it = j.find("mode"); it != j.end()) m.mode = ModeOf(*it, m.path);
  if (auto it = j.find("content"); it != j.end() && !Fits(*it, m.content)) {
    throw ProtocolError("content of " + m.path + " is not a string");
  }
}

void to_json(json& j, const LifecycleSpec& m) {
  j = json{{"run", m.run}};
  if (m.wait) {
    j["wait"] = true;
    j["wait_reason"] = m.wait_reason;
    j["retry_ms"] = m.retry_ms;
  }
  if (m.run) {
    j["source_s3_uri"] = m.source_s3_uri;
    j["on_create"] = m.on_create;
    j["on_init_complete"] = m.on_init_complete;
    j["directory"] = m.directory;
    j["timeout_seconds"] = m.timeout_seconds;
  }
}

void from_json(const json& j, LifecycleSpec& m) {
  RequireObject(j, "lifecycle");
  Optional(j, "run", m.run);
  Optional(j, "source_s3_uri", m.source_s3_uri);
  Optional(j, "on_create", m.on_create);
  Optional(j, "on_init_complete", m.on_init_complete);
  Optional(j, "directory", m.directory);
  Optional(j, "timeout_seconds", m.timeout_seconds);
  Optional(j, "wait", m.wait);
  Optional(j, "wait_reason", m.wait_reason);
  Optional(j, "retry_ms", m.retry_ms);
}

void to_json(json& j, const RegisterResponse& m) {
  j = json{{"version", m.version},
           {"cluster_id", m.cluster_id},
           {"cluster_name", m.cluster_name},
           {"group", m.group},
           {"instance_id", m.instance_id},
           {"instance_type", m.instance_type},
           {"heartbeat_seconds", m.heartbeat_seconds},
           {"files_revision", m.files_revision},
           {"files", m.files},
           {"lifecycle", m.lifecycle}};
  PutIfSet(j, "expected_gpus", m.expected_gpus);
}

void from_json(const json& j, RegisterResponse& m) {
  RequireObject(j, "the register response");
  m.version = VersionOf(j);
  Optional(j, "cluster_id", m.cluster_id);
  Optional(j, "cluster_name", m.cluster_name);
  Optional(j, "group", m.group);
  Optional(j, "instance_id", m.instance_id);
  Optional(j, "instance_type", m.instance_type);
  Optional(j, "heartbeat_seconds", m.heartbeat_seconds);
  m.expected_gpus = LenientOptional<unsigned>(j, "expected_gpus");
  Optional(j, "files_revision", m.files_revision);
  m.files = Array<NodeFile>(j, "files");
  if (auto it = j.find("lifecycle"); it != j.end() && it->is_object()) {
    m.lifecycle = it->get<LifecycleSpec>();
  }
}

// ---------------------------------------------------------------------------------------
// Heartbeats

void to_json(json& j, const HealthFinding& m) {
  j = json{{"check", m.check}, {"severity", m.severity}, {"action", m.action},
           {"message", m.message}};
}

void from_json(const json& j, HealthFinding& m) {
  RequireObject(j, "a finding");
  Optional(j, "check", m.check);
  Optional(j, "severity", m.severity);
  Optional(j, "action", m.action);
  Optional(j, "message", m.message);
}

void to_json(json& j, const HealthReport& m) {
  j = json{{"verdict", m.verdict},         {"action", m.action},
           {"checked_at", m.checked_at},   {"duration_ms", m.duration_ms},
           {"findings", m.findings}};
}

void from_json(const json& j, HealthReport& m) {
  RequireObject(j, "health");
  Required(j, "verdict", m.verdict);
  Optional(j, "action", m.action);
  Optional(j, "checked_at", m.checked_at);
  Optional(j, "duration_ms", m.duration_ms);
  m.findings = Array<HealthFinding>(j, "findings");
}

void to_json(json& j, const SlurmNode& m) {
  j = json{{"name", m.name},
           {"state", m.state},
           {"alloc_cpus", m.alloc_cpus},
           {"reason", m.reason},
           {"reason_time", m.reason_time}};
}

void from_json(const json& j, SlurmNode& m) {
  RequireObject(j, "a Slurm node");
  Required(j, "name", m.name);
  Required(j, "state", m.state);
  Optional(j, "reason", m.reason);
  Optional(j, "reason_time", m.reason_time);
  Lenient(j, "alloc_cpus", m.alloc_cpus);
}

void to_json(json& j, const SlurmJob& m) {
  j = json{{"id", m.id},
           {"account", m.account},
           {"qos", m.qos},
           {"partition", m.partition},
           {"nodes", m.nodes},
           {"state", m.state},
           {"submit_time", m.submit_time},
           {"reason", m.reason}};
  if (!m.mark.empty()) j["mark"] = m.mark;
}

// Lenient but for the id: the governance ignores what it cannot read, job by job. One pass
// over the members: a controller reports every governed job every second.
void from_json(const json& j, SlurmJob& m) {
  bool has_id = false;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      const json& v = it.value();
      if (key == "id") {
        has_id = Fits(v, m.id);
      } else if (key == "nodes") {
        if (double nodes = 0; Fits(v, nodes)) m.nodes = static_cast<int64_t>(nodes);
      } else if (key == "submit_time") {
        Fits(v, m.submit_time);
      } else if (key == "account") {
        Fits(v, m.account);
      } else if (key == "state") {
        Fits(v, m.state);
      } else if (key == "reason") {
        Fits(v, m.reason);
      } else if (key == "qos") {
        Fits(v, m.qos);
      } else if (key == "partition") {
        Fits(v, m.partition);
      } else if (key == "mark") {
        Fits(v, m.mark);
      }
    }
  }
  if (!has_id) throw ProtocolError("a job needs a non-negative integer id");
}

void to_json(json& j, const SlurmJobsReport& m) {
  json partitions = json::object();
  for (const auto& [name, nodes] : m.partitions) partitions[name] = nodes;
  j = json{{"jobs", m.jobs}, {"partitions", std::move(partitions)}};
}

void from_json(const json& j, SlurmJobsReport& m) {
  auto jobs = j.is_object() ? j.find("jobs") : j.end();
  if (!j.is_object() || jobs == j.end() || !jobs->is_array()) {
    throw ProtocolError("slurm_jobs needs a jobs array");
  }
  m.jobs = ArrayOfValid<SlurmJob>(j, "jobs");
  m.partitions.clear();
  auto partitions = j.find("partitions");
  if (partitions == j.end() || !partitions->is_object()) return;
  for (auto it = partitions->begin(); it != partitions->end(); ++it) {
    if (!it.value().is_array()) continue;
    auto& hosts = m.partitions[it.key()];
    for (const auto& h : it.value()) {
      if (h.is_string()) hosts.push_back(h.get<std::string>());
    }
  }
}

void to_json(json& j, const HeartbeatRequest& m) {
  j = json{{"version", m.version}};
  PutIfSet(j, "files_revision", m.files_revision);
  PutIfSet(j, "health", m.health);
  PutIfSet(j, "slurm_nodes", m.slurm_nodes);
  PutIfSet(j, "slurm_jobs", m.slurm_jobs);
}

void from_json(const json& j, HeartbeatRequest& m) {
  RequireObject(j, "the heartbeat");
  m.version = VersionOf(j);
  m.files_revision = LenientOptional<int64_t>(j, "files_revision");
  m.health.reset();
  if (auto it = j.find("health"); it != j.end()) {
    try {
      m.health = it->get<HealthReport>();
    } catch (const ProtocolError&) {
      // An unreadable report is no reason to refuse the heartbeat: liveness is the point.
    }
  }
  m.slurm_nodes.reset();
  if (j.contains("slurm_nodes")) {
    if (!j["slurm_nodes"].is_array()) throw ProtocolError("slurm_nodes must be an array");
    if (j["slurm_nodes"].size() > kMaxSlurmNodes) {
      throw ProtocolError("slurm_nodes has too many entries");
    }
    m.slurm_nodes = Array<SlurmNode>(j, "slurm_nodes");
  }
  m.slurm_jobs.reset();
  if (auto it = j.find("slurm_jobs"); it != j.end()) {
    try {
      m.slurm_jobs = it->get<SlurmJobsReport>();
    } catch (const ProtocolError&) {
      // Without a jobs array there is no report (the governance then decides on none).
    }
  }
}

void to_json(json& j, const SlurmMark& m) {
  j = json{{"node", m.node}, {"action", m.action}, {"reason", m.reason}};
}

void from_json(const json& j, SlurmMark& m) {
  RequireObject(j, "a Slurm mark");
  Required(j, "node", m.node);
  Required(j, "action", m.action);
  Optional(j, "reason", m.reason);
}

void to_json(json& j, const SlurmJobAction& m) {
  j = json{{"job", m.job}, {"action", m.action}};
}

void from_json(const json& j, SlurmJobAction& m) {
  RequireObject(j, "a job action");
  Required(j, "job", m.job);
  Required(j, "action", m.action);
}

void to_json(json& j, const GovernanceQos& m) {
  j = json{{"name", m.name}, {"priority", m.priority}};
}

void from_json(const json& j, GovernanceQos& m) {
  RequireObject(j, "a QOS");
  Required(j, "name", m.name);
  Optional(j, "priority", m.priority);  // missing: 0
}

void to_json(json& j, const Governance& m) {
  j = json{{"accounts", m.accounts}, {"qos", m.qos}};
}

void from_json(const json& j, Governance& m) {
  RequireObject(j, "governance");
  m.accounts.clear();
  if (auto it = j.find("accounts"); it != j.end() && it->is_array()) {
    for (const auto& a : *it) {
      if (a.is_string()) m.accounts.push_back(a.get<std::string>());
    }
  }
  m.qos = ArrayOfValid<GovernanceQos>(j, "qos");
}

void to_json(json& j, const HeartbeatResponse& m) {
  j = json{{"version", m.version}};
  PutIfSet(j, "files_revision", m.files_revision);
  PutIfSet(j, "time", m.time);
  PutIfSet(j, "files", m.files);
  if (!m.slurm_marks.empty()) j["slurm_marks"] = m.slurm_marks;
  PutIfSet(j, "governance", m.governance);
  if (!m.slurm_job_actions.empty()) j["slurm_job_actions"] = m.slurm_job_actions;
}

void from_json(const json& j, HeartbeatResponse& m) {
  RequireObject(j, "the heartbeat response");
  m.version = VersionOf(j);
  m.files_revision = LenientOptional<int64_t>(j, "files_revision");
  m.time = LenientOptional<double>(j, "time");
  m.files.reset();
  if (auto it = j.find("files"); it != j.end() && it->is_array()) {
    m.files = Array<NodeFile>(j, "files");
  }
  m.slurm_marks = ArrayOfValid<SlurmMark>(j, "slurm_marks");
  m.governance.reset();
  if (auto it = j.find("governance"); it != j.end() && it->is_object()) {
    m.governance = it->get<Governance>();
  }
  m.slurm_job_actions = ArrayOfValid<SlurmJobAction>(j, "slurm_job_actions");
}

// ---------------------------------------------------------------------------------------
// Lifecycle output and results, the bundle, errors

void to_json(json& j, const LifecycleReport& m) {
  j = json{{"version", m.version}, {"state", m.state}, {"script", m.script}};
  if (!m.reason.empty()) j["reason"] = m.reason;
  PutIfSet(j, "exit_code", m.exit_code);
  if (!m.message.empty()) j["message"] = m.message;
}

void from_json(const json& j, LifecycleReport& m) {
  RequireObject(j, "the lifecycle report");
  m.version = VersionOf(j);
  Optional(j, "state", m.state);
  Optional(j, "script", m.script);
  Optional(j, "reason", m.reason);
  m.exit_code = LenientOptional<int>(j, "exit_code");
  Optional(j, "message", m.message);
}

void to_json(json& j, const LogEvent& m) {
  j = json::object();
  PutIfSet(j, "timestamp", m.timestamp_ms);
  j["message"] = m.message;
}

void from_json(const json& j, LogEvent& m) {
  if (!j.is_object() || !Lenient(j, "message", m.message)) {
    throw ProtocolError("each event needs a string message");
  }
  m.timestamp_ms = LenientOptional<int64_t>(j, "timestamp");
}

void to_json(json& j, const LogBatch& m) {
  j = json{{"version", m.version}, {"stream", m.stream}, {"events", m.events}};
}

void from_json(const json& j, LogBatch& m) {
  RequireObject(j, "the log batch");
  m.version = VersionOf(j);
  Optional(j, "stream", m.stream);
  auto events = j.find("events");
  if (events == j.end() || !events->is_array()) throw ProtocolError("events must be an array");
  m.events.clear();
  m.events.reserve(events->size());
  for (const auto& e : *events) m.events.push_back(e.get<LogEvent>());
}

void to_json(json& j, const BundleObject& m) { j = json{{"key", m.key}, {"size", m.size}}; }

void from_json(const json& j, BundleObject& m) {
  RequireObject(j, "a bundle object");
  Required(j, "key", m.key);
  Lenient(j, "size", m.size);
}

void to_json(json& j, const BundleListing& m) {
  j = json{{"version", m.version}, {"files", m.files}};
}

void from_json(const json& j, BundleListing& m) {
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) {
    throw ProtocolError("malformed listing from the control plane");
  }
  m.version = VersionOf(j);
  m.files = ArrayOfValid<BundleObject>(j, "files");
}

void to_json(json& j, const ErrorBody& m) {
  j = json{{"error", m.error}};
  if (!m.reason.empty()) j["reason"] = m.reason;
}

void from_json(const json& j, ErrorBody& m) {
  RequireObject(j, "the error");
  Lenient(j, "error", m.error);
  Lenient(j, "reason", m.reason);
}

}  // namespace hf::agentapi
