#pragma once
// The node agent protocol's messages (docs/nodes.md "Agent protocol"), shared by the agent
// (hf_agent, inside nodes) and the control plane's agent service (hf_agentapi). JSON exists
// only here: each message has to_json/from_json (nlohmann), and both sides use Parse (or
// Decode) and Encode.
//
// Compatibility: every message but an error carries "version" (kProtocolVersion). A message without one
// comes from a program that predates this header (version 0); it has the same members, so
// it decodes the same way. Members are only ever added; a reader ignores members it does not
// know. tests/unit/agentapi/protocol_test.cc decodes messages captured from the version 0
// agent (tests/unit/agentapi/fixtures/agent_messages_v0.json).
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/status.h"

namespace hf::agentapi {

/// The version this program writes into every message.
inline constexpr int kProtocolVersion = 1;

/// Seconds between an agent's heartbeats: the control plane's default
/// (`hyperfleet server --heartbeat-interval`), and what an agent uses when a register
/// response names none.
inline constexpr int kDefaultHeartbeatSeconds = 1;
/// Seconds a lifecycle script may run (`hyperfleet server --lifecycle-timeout`).
inline constexpr int64_t kDefaultLifecycleTimeoutSeconds = 3600;
/// How soon (milliseconds) an agent held back (controller first) registers again.
inline constexpr int64_t kDefaultLifecycleRetryMs = 1000;
/// The most Slurm nodes a heartbeat may report.
inline constexpr size_t kMaxSlurmNodes = 100000;
/// The log stream of lifecycle output (CloudWatch's LifecycleConfig/<group>/<instance>).
inline constexpr char kLifecycleLogStream[] = "LifecycleConfig";

/// Request targets.
inline constexpr char kRegisterPath[] = "/agent/v1/register";
inline constexpr char kHeartbeatPath[] = "/agent/v1/heartbeat";
inline constexpr char kLifecyclePath[] = "/agent/v1/lifecycle";
inline constexpr char kLogsPath[] = "/agent/v1/logs";
inline constexpr char kBundlePath[] = "/agent/v1/bundle";
/// GET kBundleFilePath?key=<percent-encoded relative path> → the bytes.
inline constexpr char kBundleFilePath[] = "/agent/v1/bundle/file";
/// The Authorization scheme: "HyperfleetNode <instance-id>:<token>".
inline constexpr char kAuthorizationScheme[] = "HyperfleetNode ";

/// Lifecycle report states ("state").
inline constexpr char kStarted[] = "Started";
inline constexpr char kSucceeded[] = "Succeeded";
inline constexpr char kFailed[] = "Failed";

// ---------------------------------------------------------------------------------------
// Registration (POST kRegisterPath)

/// {"version", "boot_id"}.
struct RegisterRequest {
  int version = kProtocolVersion;
  std::string boot_id;  ///< /proc/sys/kernel/random/boot_id
  bool operator==(const RegisterRequest&) const = default;
};

/// One file the control plane wants on the node: {"path", "mode", "content"}. "mode" is a
/// number, or an octal string when decoding.
struct NodeFile {
  std::string path;      ///< absolute path on the node
  uint32_t mode = 0600;  ///< permission bits
  std::string content;
  bool operator==(const NodeFile&) const = default;
};

/// The register response's "lifecycle": {"run": true, "source_s3_uri", "on_create",
/// "on_init_complete" (may be ""), "directory", "timeout_seconds"}, or held back
/// {"run": false, "wait": true, "wait_reason", "retry_ms"}, or {"run": false}.
struct LifecycleSpec {
  bool run = false;
  std::string source_s3_uri;     ///< for messages, e.g. "s3://bucket/prefix/"
  std::string on_create;         ///< relative to the bundle, e.g. "on_create.sh"
  std::string on_init_complete;  ///< may be empty
  std::string directory;         ///< "/tmp/<bucket>/<prefix>/" on the node
  int64_t timeout_seconds = kDefaultLifecycleTimeoutSeconds;
  /// Not yet: the control plane holds the scripts back (e.g. until the Slurm controller's
  /// have succeeded) and the agent registers again after `retry_ms` to ask anew.
  bool wait = false;
  std::string wait_reason;
  int64_t retry_ms = kDefaultLifecycleRetryMs;
  bool operator==(const LifecycleSpec&) const = default;
};

/// {"version", "cluster_id", "cluster_name", "group", "instance_id", "instance_type",
/// "heartbeat_seconds", "expected_gpus" (NVIDIA types only), "files_revision", "files",
/// "lifecycle", "start_units" (only when some)}.
struct RegisterResponse {
  int version = kProtocolVersion;
  std::string cluster_id, cluster_name, group, instance_id, instance_type;
  int heartbeat_seconds = kDefaultHeartbeatSeconds;
  /// NVIDIA GPUs the instance type has (the control plane's catalog); absent for others.
  std::optional<unsigned> expected_gpus;
  int64_t files_revision = 0;  ///< content hash of `files`
  std::vector<NodeFile> files;
  LifecycleSpec lifecycle;
  /// systemd units (e.g. "kubelet.service") the agent starts once the lifecycle scripts have
  /// succeeded in this run, or right after registering when they are not to run (run and
  /// wait false: they ran before this boot); never when they failed. Absent: none.
  std::vector<std::string> start_units;
  bool operator==(const RegisterResponse&) const = default;
};

// ---------------------------------------------------------------------------------------
// Heartbeats (POST kHeartbeatPath)

/// One finding of a health report: {"check", "severity", "action", "message"}.
struct HealthFinding {
  std::string check;     ///< e.g. "slurmd", "gpu.xid"
  std::string severity;  ///< "ok", "warning", "soft_fault", "hard_fault"
  std::string action;    ///< "none", "reboot", "replace"
  std::string message;
  bool operator==(const HealthFinding&) const = default;
};

/// The heartbeat's "health" (docs/nodes.md "Health checks"): {"verdict", "action",
/// "checked_at" (epoch seconds), "duration_ms", "findings"}.
struct HealthReport {
  std::string verdict;  ///< the worst finding's severity
  std::string action;
  double checked_at = 0;
  int64_t duration_ms = 0;
  std::vector<HealthFinding> findings;
  bool operator==(const HealthReport&) const = default;
};

/// One node of the Slurm controller's `sinfo -N` view: {"name", "state" (long, lower case),
/// "alloc_cpus", "reason" (exactly as set, "" for none), "reason_time" (epoch seconds, 0
/// when none)}.
struct SlurmNode {
  std::string name;
  std::string state;
  int alloc_cpus = 0;
  std::string reason;
  double reason_time = 0;
  bool operator==(const SlurmNode&) const = default;
};

/// One governed job (task governance, agent/slurm_jobs.h ParseSlurmJobs): {"id", "account",
/// "qos" ("" for none), "partition", "nodes", "state" (squeue's long state, upper case),
/// "submit_time" (epoch seconds), "reason", "mark" (only when set)}.
struct SlurmJob {
  uint64_t id = 0;
  std::string account, qos, partition;
  int64_t nodes = 1;  ///< the most nodes Slurm may give it
  std::string state;
  double submit_time = 0;
  std::string reason;
  std::string mark;  ///< the AdminComment mark (kMarkGoverned, kMarkHeld) or ""
  bool operator==(const SlurmJob&) const = default;
};

/// The heartbeat's "slurm_jobs": {"jobs": [...], "partitions": {name: [node, ...]}}.
struct SlurmJobsReport {
  std::vector<SlurmJob> jobs;
  std::map<std::string, std::vector<std::string>> partitions;
  bool operator==(const SlurmJobsReport&) const = default;
};

/// {"version", "files_revision", "health", "slurm_nodes", "slurm_jobs"}; the Slurm members
/// come from the Slurm controller node's agent only.
///
/// Decoding is lenient where an agent's report must not cost its heartbeat: a
/// "files_revision" that is not an integer reads as absent (the files are sent again), a
/// "health" that is not a report and a "slurm_jobs" without a "jobs" array read as absent,
/// and a job without an unsigned "id" is left out. A malformed "slurm_nodes" is an error.
struct HeartbeatRequest {
  int version = kProtocolVersion;
  std::optional<int64_t> files_revision;  ///< the revision the agent has applied
  std::optional<HealthReport> health;
  std::optional<std::vector<SlurmNode>> slurm_nodes;
  std::optional<SlurmJobsReport> slurm_jobs;
  bool operator==(const HeartbeatRequest&) const = default;
};

/// A Slurm node change the controller node's agent makes (docs/resiliency.md): {"node",
/// "action": "down"|"resume", "reason"}.
struct SlurmMark {
  std::string node;
  std::string action;
  std::string reason;
  bool operator==(const SlurmMark&) const = default;
};

/// A task governance job action: {"job", "action": "release"|"hold"|"requeuehold"|"disown"}.
struct SlurmJobAction {
  uint64_t job = 0;
  std::string action;
  bool operator==(const SlurmJobAction&) const = default;
};

/// A QOS of task governance: {"name": "<class>-priority", "priority"}.
struct GovernanceQos {
  std::string name;
  int64_t priority = 0;
  bool operator==(const GovernanceQos&) const = default;
};

/// The heartbeat response's "governance": {"accounts": [team...], "qos": [...]}.
struct Governance {
  std::vector<std::string> accounts;
  std::vector<GovernanceQos> qos;
  bool operator==(const Governance&) const = default;
};

/// What task governance adds to a Slurm controller's heartbeat response
/// (control::GovernanceLoop, docs/governance.md "On Slurm").
struct GovernanceAnswer {
  Governance governance;
  std::vector<SlurmJobAction> slurm_job_actions;  ///< in job id order
  bool operator==(const GovernanceAnswer&) const = default;
};

/// {"version", "files_revision", "time" (epoch seconds), "files" (only when the agent's
/// revision differs), "slurm_marks", "governance", "slurm_job_actions" (the last three for
/// the Slurm controller node only; marks and actions only when there are some).
///
/// Decoding skips entries of "slurm_marks", "slurm_job_actions", "governance.accounts" and
/// "governance.qos" that do not match (they would reach a shell); a malformed "files" is an
/// error.
struct HeartbeatResponse {
  int version = kProtocolVersion;
  std::optional<int64_t> files_revision;
  std::optional<double> time;
  std::optional<std::vector<NodeFile>> files;
  std::vector<SlurmMark> slurm_marks;
  std::optional<Governance> governance;
  std::vector<SlurmJobAction> slurm_job_actions;
  bool operator==(const HeartbeatResponse&) const = default;
};

// ---------------------------------------------------------------------------------------
// Lifecycle output and results (POST kLogsPath, kLifecyclePath), the bundle (GET)

/// {"version", "state": kStarted|kSucceeded|kFailed, "script", "reason", "exit_code",
/// "message"}; "reason", "exit_code" and "message" only when set. `reason` on kFailed:
/// "exit", "timeout", "missing", "crlf", "download", "unsafe-key", "empty".
struct LifecycleReport {
  int version = kProtocolVersion;
  std::string state;
  std::string script;
  std::string reason;
  std::optional<int> exit_code;
  std::string message;
  bool operator==(const LifecycleReport&) const = default;
};

/// One line of output: {"timestamp" (ms since the epoch), "message"}.
struct LogEvent {
  std::optional<int64_t> timestamp_ms;  ///< absent: the control plane's time of arrival
  std::string message;
  bool operator==(const LogEvent&) const = default;
};

/// {"version", "stream", "events"}. Decoding: "events" must be an array and each event
/// have a string "message"; a "timestamp" that is not an integer reads as absent.
struct LogBatch {
  int version = kProtocolVersion;
  std::string stream{kLifecycleLogStream};
  std::vector<LogEvent> events;
  bool operator==(const LogBatch&) const = default;
};

/// One object of the lifecycle bundle: {"key" (relative path), "size"}.
struct BundleObject {
  std::string key;
  uint64_t size = 0;
  bool operator==(const BundleObject&) const = default;
};

/// GET kBundlePath: {"version", "files": [...]}. Decoding skips entries without a string
/// "key".
struct BundleListing {
  int version = kProtocolVersion;
  std::vector<BundleObject> files;
  bool operator==(const BundleListing&) const = default;
};

/// Any refused request: {"error", "reason"}; `reason` (a bundle listing's) is the
/// lifecycle failure's kind: "empty", "unsafe-key", "download".
struct ErrorBody {
  std::string error;
  std::string reason;
  bool operator==(const ErrorBody&) const = default;
};

// ---------------------------------------------------------------------------------------
// JSON

/// Thrown by from_json for a message that does not match its schema; says which member.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void to_json(nlohmann::json& j, const RegisterRequest& m);
void from_json(const nlohmann::json& j, RegisterRequest& m);
void to_json(nlohmann::json& j, const NodeFile& m);
void from_json(const nlohmann::json& j, NodeFile& m);
void to_json(nlohmann::json& j, const LifecycleSpec& m);
void from_json(const nlohmann::json& j, LifecycleSpec& m);
void to_json(nlohmann::json& j, const RegisterResponse& m);
void from_json(const nlohmann::json& j, RegisterResponse& m);
void to_json(nlohmann::json& j, const HealthFinding& m);
void from_json(const nlohmann::json& j, HealthFinding& m);
void to_json(nlohmann::json& j, const HealthReport& m);
void from_json(const nlohmann::json& j, HealthReport& m);
void to_json(nlohmann::json& j, const SlurmNode& m);
void from_json(const nlohmann::json& j, SlurmNode& m);
void to_json(nlohmann::json& j, const SlurmJob& m);
void from_json(const nlohmann::json& j, SlurmJob& m);
void to_json(nlohmann::json& j, const SlurmJobsReport& m);
void from_json(const nlohmann::json& j, SlurmJobsReport& m);
void to_json(nlohmann::json& j, const HeartbeatRequest& m);
void from_json(const nlohmann::json& j, HeartbeatRequest& m);
void to_json(nlohmann::json& j, const SlurmMark& m);
void from_json(const nlohmann::json& j, SlurmMark& m);
void to_json(nlohmann::json& j, const SlurmJobAction& m);
void from_json(const nlohmann::json& j, SlurmJobAction& m);
void to_json(nlohmann::json& j, const GovernanceQos& m);
void from_json(const nlohmann::json& j, GovernanceQos& m);
void to_json(nlohmann::json& j, const Governance& m);
void from_json(const nlohmann::json& j, Governance& m);
void to_json(nlohmann::json& j, const HeartbeatResponse& m);
void from_json(const nlohmann::json& j, HeartbeatResponse& m);
void to_json(nlohmann::json& j, const LifecycleReport& m);
void from_json(const nlohmann::json& j, LifecycleReport& m);
void to_json(nlohmann::json& j, const LogEvent& m);
void from_json(const nlohmann::json& j, LogEvent& m);
void to_json(nlohmann::json& j, const LogBatch& m);
void from_json(const nlohmann::json& j, LogBatch& m);
void to_json(nlohmann::json& j, const BundleObject& m);
void from_json(const nlohmann::json& j, BundleObject& m);
void to_json(nlohmann::json& j, const BundleListing& m);
void from_json(const nlohmann::json& j, BundleListing& m);
void to_json(nlohmann::json& j, const ErrorBody& m);
void from_json(const nlohmann::json& j, ErrorBody& m);

/// `j` as message T. Errors: InvalidArgument naming the member that does not match.
template <typename T>
StatusOr<T> Decode(const nlohmann::json& j) {
  try {
    return j.get<T>();
  } catch (const ProtocolError& e) {
    return absl::InvalidArgumentError(e.what());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
}

/// JSON text `body` as message T; an empty body is an empty object. Errors:
/// InvalidArgument for text that is not JSON, or as Decode.
template <typename T>
StatusOr<T> Parse(std::string_view body) {
  const nlohmann::json j =
      body.empty() ? nlohmann::json::object() : nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError("the body is not JSON");
  return Decode<T>(j);
}

/// Message `m` as JSON text. Text a node reports (scripts, squeue, sinfo) may hold bytes
/// that are not UTF-8: they are replaced (U+FFFD) rather than thrown on.
template <typename T>
std::string Encode(const T& m) {
  return nlohmann::json(m).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace hf::agentapi
