#include "hyperfleet/agentapi/protocol.h"

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/json_value.h"

namespace hf::agentapi {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------
// One codec shape for every message: its members are listed once, in a Members overload
// below, as f(Member{key, read rule, write rule}, member); EncodeMembers and DecodeMembers
// walk that list. A message with rules of its own (a file's mode, the job report's hot path,
// what a heartbeat may not refuse) decodes in its own from_json.

/// How a member is read.
enum class Read {
  kOptional,  ///< absent or null: left as it is; another type: an error naming the member
  kRequired,  ///< as kOptional, and absent is an error too
  kLenient,   ///< a value of another type reads as absent
  kVersion,   ///< "version": absent (a program before versions) or not an integer: 0
  kValid,     ///< an array of commands: the entries that decode, others skipped
};
/// When a member is written: always, or only when set (a non-empty string or array; an
/// std::optional member is written only when set in any case).
enum class Write { kAlways, kIfSet };

struct Member {
  const char* key;
  Read read = Read::kOptional;
  Write write = Write::kAlways;
};

template <typename T>
constexpr bool kIsOptional = false;
template <typename T>
constexpr bool kIsOptional<std::optional<T>> = true;
template <typename T>
constexpr bool kIsVector = false;
template <typename T>
constexpr bool kIsVector<std::vector<T>> = true;
/// A value hf::JsonFits reads (a string, number, boolean, or array of strings).
template <typename T>
constexpr bool kIsValue = requires(const json& v, T& out) { JsonFits(v, out); };

void RequireObject(const json& j, const char* what) {
  if (!j.is_object()) throw ProtocolError(absl::StrCat(what, " must be a JSON object"));
}

// Array `v` (null: empty), every entry decoded; an entry that does not match is an error
// naming `key` and its index.
template <typename T>
std::vector<T> Entries(const char* key, const json* v) {
  std::vector<T> out;
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_array()) throw ProtocolError(absl::StrCat(key, " must be an array"));
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    try {
      out.push_back((*v)[i].template get<T>());
    } catch (const ProtocolError& e) {
      throw ProtocolError(absl::StrCat(key, "[", i, "]: ", e.what()));
    }
  }
  return out;
}

// Array `v`, keeping the entries that decode (commands from the control plane: one that does
// not match is skipped, as an unknown action is).
template <typename T>
std::vector<T> ValidEntries(const json* v) {
  std::vector<T> out;
  if (v == nullptr || !v->is_array()) return out;
  out.reserve(v->size());
  for (const auto& e : *v) {
    try {
      from_json(e, out.emplace_back());
    } catch (const ProtocolError&) {
      out.pop_back();
    }
  }
  return out;
}

// A plain value by rule `k.read`.
template <typename T>
void GetValue(const Member& k, const json* v, T& out) {
  if (k.read == Read::kVersion) out = T{};
  if (k.read == Read::kLenient || k.read == Read::kVersion) {
    if (v != nullptr) JsonFits(*v, out);
    return;
  }
  if (v == nullptr || v->is_null()) {
    if (k.read == Read::kRequired) throw ProtocolError(absl::StrCat(k.key, " is missing"));
    return;
  }
  if (!JsonFits(*v, out)) throw ProtocolError(absl::StrCat(k.key, " must be ", JsonTypeName<T>()));
}

// An optional member: set when present with its JSON kind (a fitting value, an array, an
// object), decoded strictly within; else unset.
template <typename T>
std::optional<T> GetOptional(const Member& k, const json* v) {
  if (v == nullptr) return std::nullopt;
  if constexpr (kIsValue<T>) {
    T value{};
    if (!JsonFits(*v, value)) return std::nullopt;
    return value;
  } else if constexpr (kIsVector<T>) {
    if (!v->is_array()) return std::nullopt;
    return Entries<typename T::value_type>(k.key, v);
  } else {
    if (!v->is_object()) return std::nullopt;
    return v->template get<T>();
  }
}

// Member `k` of object `j` into `out`, by its rule and type. A nested message is decoded when
// `j` has an object there, and left as it is otherwise.
template <typename T>
void Get(const json& j, const Member& k, T& out) {
  const auto it = j.find(k.key);
  const json* v = it == j.end() ? nullptr : &*it;
  if constexpr (kIsValue<T>) {
    GetValue(k, v, out);
  } else if constexpr (kIsOptional<T>) {
    out = GetOptional<typename T::value_type>(k, v);
  } else if constexpr (kIsVector<T>) {
    using E = typename T::value_type;
    out = k.read == Read::kValid ? ValidEntries<E>(v) : Entries<E>(k.key, v);
  } else if (v != nullptr && v->is_object()) {
    from_json(*v, out);
  }
}

template <typename T>
void Put(json& j, const Member& k, const T& value) {
  if constexpr (kIsOptional<T>) {
    if (value) j[k.key] = *value;
  } else {
    if constexpr (requires { value.empty(); }) {
      if (k.write == Write::kIfSet && value.empty()) return;
    }
    j[k.key] = value;
  }
}

// ---------------------------------------------------------------------------------------
// The members of each message (the wire keys, docs/nodes.md "Agent protocol"). Members are
// read in the order listed (the first that does not match is the error).

template <typename M>
struct Of {};

void Members(Of<RegisterRequest>, auto& m, auto&& f) {
  f(Member{"version", Read::kVersion}, m.version);
  f(Member{"boot_id"}, m.boot_id);
}

void Members(Of<NodeFile>, auto& m, auto&& f) {  // decoded by its from_json
  f(Member{"path"}, m.path);
  f(Member{"mode"}, m.mode);
  f(Member{"content"}, m.content);
}

void Members(Of<LifecycleSpec>, auto& m, auto&& f) {  // encoded by its to_json
  f(Member{"run"}, m.run);
  f(Member{"source_s3_uri"}, m.source_s3_uri);
  f(Member{"on_create"}, m.on_create);
  f(Member{"on_init_complete"}, m.on_init_complete);
  f(Member{"directory"}, m.directory);
  f(Member{"timeout_seconds"}, m.timeout_seconds);
  f(Member{"wait"}, m.wait);
  f(Member{"wait_reason"}, m.wait_reason);
  f(Member{"retry_ms"}, m.retry_ms);
}

void Members(Of<RegisterResponse>, auto& m, auto&& f) {
  f(Member{"version", Read::kVersion}, m.version);
  f(Member{"cluster_id"}, m.cluster_id);
  f(Member{"cluster_name"}, m.cluster_name);
  f(Member{"group"}, m.group);
  f(Member{"instance_id"}, m.instance_id);
  f(Member{"instance_type"}, m.instance_type);
  f(Member{"heartbeat_seconds"}, m.heartbeat_seconds);
  f(Member{"expected_gpus"}, m.expected_gpus);
  f(Member{"files_revision"}, m.files_revision);
  f(Member{"files"}, m.files);
  f(Member{"lifecycle"}, m.lifecycle);
  f(Member{"start_units", Read::kOptional, Write::kIfSet}, m.start_units);
}

void Members(Of<HealthFinding>, auto& m, auto&& f) {
  f(Member{"check"}, m.check);
  f(Member{"severity"}, m.severity);
  f(Member{"action"}, m.action);
  f(Member{"message"}, m.message);
}

void Members(Of<HealthReport>, auto& m, auto&& f) {
  f(Member{"verdict", Read::kRequired}, m.verdict);
  f(Member{"action"}, m.action);
  f(Member{"checked_at"}, m.checked_at);
  f(Member{"duration_ms"}, m.duration_ms);
  f(Member{"findings"}, m.findings);
}

void Members(Of<SlurmNode>, auto& m, auto&& f) {
  f(Member{"name", Read::kRequired}, m.name);
  f(Member{"state", Read::kRequired}, m.state);
  f(Member{"reason"}, m.reason);
  f(Member{"reason_time"}, m.reason_time);
  f(Member{"alloc_cpus", Read::kLenient}, m.alloc_cpus);
}

void Members(Of<SlurmJob>, auto& m, auto&& f) {  // decoded by its from_json
  f(Member{"id"}, m.id);
  f(Member{"account"}, m.account);
  f(Member{"qos"}, m.qos);
  f(Member{"partition"}, m.partition);
  f(Member{"nodes"}, m.nodes);
  f(Member{"state"}, m.state);
  f(Member{"submit_time"}, m.submit_time);
  f(Member{"reason"}, m.reason);
  f(Member{"mark", Read::kOptional, Write::kIfSet}, m.mark);
}

void Members(Of<HeartbeatRequest>, auto& m, auto&& f) {  // decoded by its from_json
  f(Member{"version", Read::kVersion}, m.version);
  f(Member{"files_revision"}, m.files_revision);
  f(Member{"health"}, m.health);
  f(Member{"slurm_nodes"}, m.slurm_nodes);
  f(Member{"slurm_jobs"}, m.slurm_jobs);
}

void Members(Of<SlurmMark>, auto& m, auto&& f) {
  f(Member{"node", Read::kRequired}, m.node);
  f(Member{"action", Read::kRequired}, m.action);
  f(Member{"reason"}, m.reason);
}

void Members(Of<SlurmJobAction>, auto& m, auto&& f) {
  f(Member{"job", Read::kRequired}, m.job);
  f(Member{"action", Read::kRequired}, m.action);
}

void Members(Of<GovernanceQos>, auto& m, auto&& f) {
  f(Member{"name", Read::kRequired}, m.name);
  f(Member{"priority"}, m.priority);  // missing: 0
}

void Members(Of<Governance>, auto& m, auto&& f) {
  f(Member{"accounts", Read::kLenient}, m.accounts);  // the string entries of an array
  f(Member{"qos", Read::kValid}, m.qos);
}

void Members(Of<HeartbeatResponse>, auto& m, auto&& f) {
  f(Member{"version", Read::kVersion}, m.version);
  f(Member{"files_revision"}, m.files_revision);
  f(Member{"time"}, m.time);
  f(Member{"files"}, m.files);
  f(Member{"slurm_marks", Read::kValid, Write::kIfSet}, m.slurm_marks);
  f(Member{"governance"}, m.governance);
  f(Member{"slurm_job_actions", Read::kValid, Write::kIfSet}, m.slurm_job_actions);
}

void Members(Of<LifecycleReport>, auto& m, auto&& f) {
  f(Member{"version", Read::kVersion}, m.version);
  f(Member{"state"}, m.state);
  f(Member{"script"}, m.script);
  f(Member{"reason", Read::kOptional, Write::kIfSet}, m.reason);
  f(Member{"exit_code"}, m.exit_code);
  f(Member{"message", Read::kOptional, Write::kIfSet}, m.message);
}

void Members(Of<LogEvent>, auto& m, auto&& f) {  // decoded by its from_json
  f(Member{"timestamp"}, m.timestamp_ms);
  f(Member{"message"}, m.message);
}

void Members(Of<LogBatch>, auto& m, auto&& f) {  // decoded by its from_json
  f(Member{"version", Read::kVersion}, m.version);
  f(Member{"stream"}, m.stream);
  f(Member{"events"}, m.events);
}

void Members(Of<BundleObject>, auto& m, auto&& f) {
  f(Member{"key", Read::kRequired}, m.key);
  f(Member{"size", Read::kLenient}, m.size);
}

void Members(Of<BundleListing>, auto& m, auto&& f) {
  f(Member{"version", Read::kVersion}, m.version);
  f(Member{"files", Read::kValid}, m.files);
}

void Members(Of<ErrorBody>, auto& m, auto&& f) {
  f(Member{"error", Read::kLenient}, m.error);
  f(Member{"reason", Read::kLenient, Write::kIfSet}, m.reason);
}

template <typename M>
void EncodeMembers(json& j, const M& m) {
  j = json::object();
  Members(Of<M>{}, m, [&j](const Member& k, const auto& value) { Put(j, k, value); });
}

// Checks that `j` is an object (else "<what> must be a JSON object") and reads every member.
template <typename M>
void DecodeMembers(const json& j, M& m, const char* what) {
  RequireObject(j, what);
  Members(Of<M>{}, m, [&j](const Member& k, auto& value) { Get(j, k, value); });
}

// A file mode: a number, or an octal string ("0640").
uint32_t ModeOf(const json& v, const std::string& path) {
  uint32_t mode = 0;
  if (unsigned m = 0; JsonFits(v, m)) return m;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() <= 6 && s.find_first_not_of("01234567") == std::string::npos) {
      for (char c : s) mode = mode * 8 + static_cast<uint32_t>(c - '0');
      return mode;
    }
  }
  throw ProtocolError("bad mode for " + path);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The messages whose members are all read and written by their rules above.

void to_json(json& j, const RegisterRequest& m) { EncodeMembers(j, m); }
void from_json(const json& j, RegisterRequest& m) {
  DecodeMembers(j, m, "the register request");
}
void to_json(json& j, const RegisterResponse& m) { EncodeMembers(j, m); }
void from_json(const json& j, RegisterResponse& m) {
  DecodeMembers(j, m, "the register response");
}
void to_json(json& j, const HealthFinding& m) { EncodeMembers(j, m); }
void from_json(const json& j, HealthFinding& m) { DecodeMembers(j, m, "a finding"); }
void to_json(json& j, const HealthReport& m) { EncodeMembers(j, m); }
void from_json(const json& j, HealthReport& m) { DecodeMembers(j, m, "health"); }
void to_json(json& j, const SlurmNode& m) { EncodeMembers(j, m); }
void from_json(const json& j, SlurmNode& m) { DecodeMembers(j, m, "a Slurm node"); }
void to_json(json& j, const SlurmMark& m) { EncodeMembers(j, m); }
void from_json(const json& j, SlurmMark& m) { DecodeMembers(j, m, "a Slurm mark"); }
void to_json(json& j, const SlurmJobAction& m) { EncodeMembers(j, m); }
void from_json(const json& j, SlurmJobAction& m) { DecodeMembers(j, m, "a job action"); }
void to_json(json& j, const GovernanceQos& m) { EncodeMembers(j, m); }
void from_json(const json& j, GovernanceQos& m) { DecodeMembers(j, m, "a QOS"); }
void to_json(json& j, const Governance& m) { EncodeMembers(j, m); }
void from_json(const json& j, Governance& m) { DecodeMembers(j, m, "governance"); }
void to_json(json& j, const HeartbeatResponse& m) { EncodeMembers(j, m); }
void from_json(const json& j, HeartbeatResponse& m) {
  DecodeMembers(j, m, "the heartbeat response");
}
void to_json(json& j, const LifecycleReport& m) { EncodeMembers(j, m); }
void from_json(const json& j, LifecycleReport& m) {
  DecodeMembers(j, m, "the lifecycle report");
}
void to_json(json& j, const BundleObject& m) { EncodeMembers(j, m); }
void from_json(const json& j, BundleObject& m) { DecodeMembers(j, m, "a bundle object"); }
void to_json(json& j, const ErrorBody& m) { EncodeMembers(j, m); }
void from_json(const json& j, ErrorBody& m) { DecodeMembers(j, m, "the error"); }

// ---------------------------------------------------------------------------------------
// Messages with rules of their own: written by their member lists, read here.

void to_json(json& j, const NodeFile& m) { EncodeMembers(j, m); }

void from_json(const json& j, NodeFile& m) {
  if (!j.is_object() || !j.contains("path") || !j["path"].is_string()) {
    throw ProtocolError("a file has no path");
  }
  m.path = j["path"].get<std::string>();
  if (auto it = j.find("mode"); it != j.end()) m.mode = ModeOf(*it, m.path);
  if (auto it = j.find("content"); it != j.end() && !JsonFits(*it, m.content)) {
    throw ProtocolError("content of " + m.path + " is not a string");
  }
}

// Only what the agent acts on: the script members when it runs them, the retry when held.
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

void from_json(const json& j, LifecycleSpec& m) { DecodeMembers(j, m, "lifecycle"); }

void to_json(json& j, const SlurmJob& m) { EncodeMembers(j, m); }

// Lenient but for the id: the governance ignores what it cannot read, job by job. One pass
// over the members (the object's map itself, keys compared as views, length first): a
// controller reports every governed job every second, and this is most of a heartbeat's cost.
void from_json(const json& j, SlurmJob& m) {
  bool has_id = false;
  if (j.is_object()) {
    for (const auto& [name, v] : j.get_ref<const json::object_t&>()) {
      const std::string_view key = name;
      if (key == "id") {
        has_id = JsonFits(v, m.id);
      } else if (key == "nodes") {
        if (double nodes = 0; JsonFits(v, nodes)) m.nodes = static_cast<int64_t>(nodes);
      } else if (key == "submit_time") {
        JsonFits(v, m.submit_time);
      } else if (key == "account") {
        JsonFits(v, m.account);
      } else if (key == "state") {
        JsonFits(v, m.state);
      } else if (key == "reason") {
        JsonFits(v, m.reason);
      } else if (key == "qos") {
        JsonFits(v, m.qos);
      } else if (key == "partition") {
        JsonFits(v, m.partition);
      } else if (key == "mark") {
        JsonFits(v, m.mark);
      }
    }
  }
  if (!has_id) throw ProtocolError("a job needs a non-negative integer id");
}

void to_json(json& j, const SlurmJobsReport& m) {
  j = json{{"jobs", m.jobs}, {"partitions", json(m.partitions)}};
}

void from_json(const json& j, SlurmJobsReport& m) {
  auto jobs = j.is_object() ? j.find("jobs") : j.end();
  if (!j.is_object() || jobs == j.end() || !jobs->is_array()) {
    throw ProtocolError("slurm_jobs needs a jobs array");
  }
  m.jobs = ValidEntries<SlurmJob>(&*jobs);
  m.partitions.clear();
  auto partitions = j.find("partitions");
  if (partitions == j.end() || !partitions->is_object()) return;
  for (auto it = partitions->begin(); it != partitions->end(); ++it) {
    if (std::vector<std::string> hosts; JsonFits(it.value(), hosts)) {
      m.partitions[it.key()] = std::move(hosts);
    }
  }
}

void to_json(json& j, const HeartbeatRequest& m) { EncodeMembers(j, m); }

// What may not cost an agent its heartbeat (liveness is the point) reads as absent.
void from_json(const json& j, HeartbeatRequest& m) {
  RequireObject(j, "the heartbeat");
  const Member version{"version", Read::kVersion}, revision{"files_revision"};
  Get(j, version, m.version);
  Get(j, revision, m.files_revision);
  m.health.reset();
  if (auto it = j.find("health"); it != j.end()) {
    try {
      m.health = it->get<HealthReport>();
    } catch (const ProtocolError&) {
      // An unreadable report is no reason to refuse the heartbeat.
    }
  }
  m.slurm_nodes.reset();
  if (auto it = j.find("slurm_nodes"); it != j.end()) {
    if (!it->is_array()) throw ProtocolError("slurm_nodes must be an array");
    if (it->size() > kMaxSlurmNodes) throw ProtocolError("slurm_nodes has too many entries");
    m.slurm_nodes = Entries<SlurmNode>("slurm_nodes", &*it);
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

void to_json(json& j, const LogEvent& m) { EncodeMembers(j, m); }

void from_json(const json& j, LogEvent& m) {
  const auto message = j.is_object() ? j.find("message") : j.end();
  if (message == j.end() || !JsonFits(*message, m.message)) {
    throw ProtocolError("each event needs a string message");
  }
  Get(j, Member{"timestamp"}, m.timestamp_ms);
}

void to_json(json& j, const LogBatch& m) { EncodeMembers(j, m); }

void from_json(const json& j, LogBatch& m) {
  RequireObject(j, "the log batch");
  Get(j, Member{"version", Read::kVersion}, m.version);
  Get(j, Member{"stream"}, m.stream);
  auto events = j.find("events");
  if (events == j.end() || !events->is_array()) throw ProtocolError("events must be an array");
  m.events.clear();
  m.events.reserve(events->size());
  for (const auto& e : *events) m.events.push_back(e.get<LogEvent>());
}

void to_json(json& j, const BundleListing& m) { EncodeMembers(j, m); }

void from_json(const json& j, BundleListing& m) {
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) {
    throw ProtocolError("malformed listing from the control plane");
  }
  DecodeMembers(j, m, "the bundle listing");
}

}  // namespace hf::agentapi
