#include "store/node_json.h"

#include <string>
#include <type_traits>
#include <vector>

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

json Encode(const std::string& v) { return v; }
json Encode(bool v) { return v; }
json Encode(int v) { return v; }
json Encode(SystemTime v) { return ToEpochSeconds(v); }
json Encode(const std::optional<SystemTime>& v) { return ToEpochSeconds(*v); }
json Encode(const std::vector<std::string>& v) { return v; }
json Encode(Request::Action v) { return model::ToString(v); }
json Encode(Request::Source v) { return model::ToString(v); }
json Encode(model::NodeFault::Kind v) { return model::ToString(v); }

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

// Decoders: false when `j` does not hold a value of the type.
bool Decode(const json& j, std::string& v) {
  if (!j.is_string()) return false;
  v = j.get<std::string>();
  return true;
}
bool Decode(const json& j, bool& v) {
  if (!j.is_boolean()) return false;
  v = j.get<bool>();
  return true;
}
bool Decode(const json& j, int& v) {
  if (!j.is_number_integer()) return false;
  v = j.get<int>();
  return true;
}
bool Decode(const json& j, SystemTime& v) {
  if (!j.is_number()) return false;
  v = FromEpochSeconds(j.get<double>());
  return true;
}
bool Decode(const json& j, std::optional<SystemTime>& v) {
  SystemTime t;
  if (!Decode(j, t)) return false;
  v = t;
  return true;
}
bool Decode(const json& j, std::vector<std::string>& v) {
  if (!j.is_array()) return false;
  v.clear();
  for (const auto& s : j) {
    if (s.is_string()) v.push_back(s.get<std::string>());
  }
  return true;
}
template <typename E>
bool DecodeEnum(const json& j, E& v, std::optional<E> (*parse)(std::string_view)) {
  if (!j.is_string()) return false;
  auto e = parse(j.get_ref<const std::string&>());
  if (e) v = *e;
  return e.has_value();
}
bool Decode(const json& j, Request::Action& v) {
  return DecodeEnum(j, v, model::ParseRecoveryAction);
}
bool Decode(const json& j, Request::Source& v) {
  return DecodeEnum(j, v, model::ParseRecoverySource);
}
bool Decode(const json& j, model::NodeFault::Kind& v) {
  return DecodeEnum(j, v, model::ParseFaultKind);
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
  if (auto it = body.find("slurm_conf_nodes"); it != body.end() && it->is_array()) {
    for (const auto& name : *it) {
      if (name.is_string()) n.slurm_conf_nodes.push_back(name.get<std::string>());
    }
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
