#include "store/node_json.h"

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "hyperfleet/common/json_value.h"

namespace hf::store {
namespace {

using nlohmann::json;
using Request = model::NodeRecoveryRequest;

// Each struct lists its stored members once, in a Fields function used for writing and for
// reading: f(key, member, default member). A member's key is spelt in exactly one place.

template <typename Marks, typename F>
void MarksFields(Marks& m, F&& f) {
  static const model::PlannerMarks d;
  f("RetryOf", m.retry_of, d.retry_of);
  f("ReplacementOf", m.replacement_of, d.replacement_of);
  f("PrivateIp", m.requested_ip, d.requested_ip);
  f("ReplaceAttempt", m.replace_attempt, d.replace_attempt);
  f("SlurmDownPending", m.slurm_down_pending, d.slurm_down_pending);
  f("SlurmDownReasons", m.slurm_down_reasons, d.slurm_down_reasons);
}

template <typename Req, typename F>
void RequestFields(Req& r, F&& f) {
  static const Request d;
  f("Action", r.action, d.action);
  f("Reason", r.reason, d.reason);
  f("RequestedAt", r.requested_at, d.requested_at);
  f("Hard", r.hard, d.hard);
  f("Source", r.source, d.source);
}

// Stored in the same object as the request it belongs to.
template <typename Progress, typename F>
void ProgressFields(Progress& p, F&& f) {
  static const model::RecoveryProgress d;
  f("StartedAt", p.started_at, d.started_at);
  f("BootTimeBefore", p.boot_time_before, d.boot_time_before);
  f("AskedAt", p.asked_at, d.asked_at);
  f("RebootInstead", p.reboot_instead, d.reboot_instead);
}

template <typename Fault, typename F>
void FaultFields(Fault& x, F&& f) {
  static const model::NodeFault d;
  f("Kind", x.kind, d.kind);
  f("Message", x.message, d.message);
  f("DetectedAt", x.detected_at, d.detected_at);
  f("RetryAt", x.retry_at, d.retry_at);
}

/// A member's stored JSON: times as epoch seconds, enums as their names.
template <typename V>
json Encode(const V& v) {
  if constexpr (std::is_same_v<V, SystemTime>) {
    return ToEpochSeconds(v);
  } else if constexpr (std::is_same_v<V, std::optional<SystemTime>>) {
    return ToEpochSeconds(*v);
  } else if constexpr (std::is_enum_v<V>) {
    return model::ToString(v);
  } else {
    return v;
  }
}

/// A recovery's action and a fault's kind are always stored: without them the object means
/// nothing.
template <typename V>
constexpr bool kRequired =
    std::is_same_v<V, Request::Action> || std::is_same_v<V, model::NodeFault::Kind>;

/// Writes the required members and those that differ from their defaults.
struct Writer {
  json out = json::object();
  template <typename V>
  void operator()(const char* key, const V& value, const V& def) {
    if (kRequired<V> || !(value == def)) out[key] = Encode(value);
  }
};

std::optional<Request::Action> ParseEnum(std::string_view s, Request::Action) {
  return model::ParseRecoveryAction(s);
}
std::optional<Request::Source> ParseEnum(std::string_view s, Request::Source) {
  return model::ParseRecoverySource(s);
}
std::optional<model::NodeFault::Kind> ParseEnum(std::string_view s, model::NodeFault::Kind) {
  return model::ParseFaultKind(s);
}

/// Reads stored JSON `j` into `v` (the inverse of Encode); false, leaving `v`, when `j` does
/// not hold a value of its type (hf::JsonFits) or names no value of its enum.
template <typename V>
bool Decode(const json& j, V& v) {
  if constexpr (std::is_same_v<V, SystemTime> || std::is_same_v<V, std::optional<SystemTime>>) {
    double seconds = 0;
    if (!JsonFits(j, seconds)) return false;
    v = FromEpochSeconds(seconds);
    return true;
  } else if constexpr (std::is_enum_v<V>) {
    if (!j.is_string()) return false;
    auto e = ParseEnum(j.get_ref<const std::string&>(), v);
    if (e) v = *e;
    return e.has_value();
  } else {
    return JsonFits(j, v);
  }
}

/// Reads the members present; `bad` when an action or fault kind is missing or unknown (the
/// whole request or fault is then dropped, so that it cannot wedge the node).
struct Reader {
  const json& in;
  bool bad = false;
  template <typename V>
  void operator()(const char* key, V& value, const V&) {
    auto it = in.find(key);
    const bool ok = it != in.end() && Decode(*it, value);
    if (kRequired<V> && !ok) bad = true;
  }
};

}  // namespace

nlohmann::json NodeBody(const model::Node& n) {
  json body{{"lifecycle", n.lifecycle}, {"extras", n.spec_extras}};
  Writer marks;
  MarksFields(n.marks, marks);
  if (!marks.out.empty()) body["marks"] = std::move(marks.out);
  if (!n.lifecycle_state.empty()) body["lcs_state"] = n.lifecycle_state;
  if (!n.lifecycle_message.empty()) body["lcs_message"] = n.lifecycle_message;
  if (!n.slurm_conf_nodes.empty()) body["slurm_conf_nodes"] = n.slurm_conf_nodes;
  if (n.recovery) {
    Writer recovery;
    RequestFields(*n.recovery, recovery);
    ProgressFields(n.recovery_progress, recovery);
    body["recovery"] = std::move(recovery.out);
  }
  if (n.fault) {
    Writer fault;
    FaultFields(*n.fault, fault);
    body["fault"] = std::move(fault.out);
  }
  if (n.recovered_at != SystemTime{}) body["recovered_at"] = ToEpochSeconds(n.recovered_at);
  return body;
}

void ReadNodeBody(const nlohmann::json& body, model::Node& n) {
  if (!body.is_object()) return;
  n.lifecycle = body.value("lifecycle", json());
  n.spec_extras = body.value("extras", json::object());
  if (!n.spec_extras.is_object()) n.spec_extras = json::object();
  n.lifecycle_state = body.value("lcs_state", "");
  n.lifecycle_message = body.value("lcs_message", "");
  n.slurm_conf_nodes.clear();
  if (auto it = body.find("slurm_conf_nodes"); it != body.end()) {
    JsonFits(*it, n.slurm_conf_nodes);  // the string entries of an array
  }
  if (auto it = body.find("marks"); it != body.end() && it->is_object()) {
    Reader marks{*it};
    MarksFields(n.marks, marks);
  }
  if (auto it = body.find("recovery"); it != body.end() && it->is_object()) {
    Reader recovery{*it};
    model::NodeRecoveryRequest request;
    RequestFields(request, recovery);
    ProgressFields(n.recovery_progress, recovery);
    if (!recovery.bad) {
      n.recovery = std::move(request);
    } else {
      n.recovery_progress = {};
    }
  }
  if (auto it = body.find("fault"); it != body.end() && it->is_object()) {
    Reader reader{*it};
    model::NodeFault fault;
    FaultFields(fault, reader);
    if (!reader.bad) n.fault = std::move(fault);
  }
  if (auto it = body.find("recovered_at"); it != body.end() && it->is_number()) {
    n.recovered_at = FromEpochSeconds(it->get<double>());
  }
}

}  // namespace hf::store
