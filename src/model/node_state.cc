#include "hyperfleet/model/node_state.h"

#include <utility>
#include <vector>

namespace hf::model {
namespace {

// One table per enum: value and its string, used both ways. Function-local statics: safe to
// use during static initialisation.
template <typename E>
using Names = std::vector<std::pair<E, std::string>>;

using Action = NodeRecoveryRequest::Action;
using Kind = NodeFault::Kind;
using Source = NodeRecoveryRequest::Source;

const Names<InstanceStatus>& Statuses() {
  static const Names<InstanceStatus> names{{InstanceStatus::kPending, "Pending"},
                                           {InstanceStatus::kRunning, "Running"},
                                           {InstanceStatus::kFailure, "Failure"},
                                           {InstanceStatus::kShuttingDown, "ShuttingDown"}};
  return names;
}

const Names<Action>& Actions() {
  static const Names<Action> names{{Action::kReboot, "Reboot"}, {Action::kReplace, "Replace"}};
  return names;
}

const Names<Kind>& Kinds() {
  static const Names<Kind> names{{Kind::kDead, "Dead"},
                                 {Kind::kUnresponsive, "Unresponsive"},
                                 {Kind::kHardwareFault, "HardwareFault"},
                                 {Kind::kSoftwareFault, "SoftwareFault"},
                                 {Kind::kReplacementFailed, "ReplacementFailed"}};
  return names;
}

const Names<Source>& Sources() {
  static const Names<Source> names{{Source::kApi, ""},
                                   {Source::kSlurmAction, "Requested"},
                                   {Source::kDead, "Dead"},
                                   {Source::kUnresponsive, "Unresponsive"},
                                   {Source::kHardwareFault, "HardwareFault"},
                                   {Source::kSoftwareFault, "SoftwareFault"},
                                   {Source::kReplacementFailed, "ReplacementFailed"}};
  return names;
}

template <typename E>
const std::string& NameOf(const Names<E>& names, E value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  static const std::string unknown = "?";  // unreachable: every value is listed
  return unknown;
}

template <typename E>
std::optional<E> ValueOf(const Names<E>& names, std::string_view text) {
  for (const auto& [v, name] : names) {
    if (name == text) return v;
  }
  return std::nullopt;
}

}  // namespace

const std::string& ToString(InstanceStatus s) { return NameOf(Statuses(), s); }
const std::string& ToString(Action a) { return NameOf(Actions(), a); }
const std::string& ToString(Source s) { return NameOf(Sources(), s); }
const std::string& ToString(Kind k) { return NameOf(Kinds(), k); }

std::optional<InstanceStatus> ParseInstanceStatus(std::string_view s) {
  return ValueOf(Statuses(), s);
}
std::optional<Action> ParseRecoveryAction(std::string_view s) { return ValueOf(Actions(), s); }
std::optional<Source> ParseRecoverySource(std::string_view s) { return ValueOf(Sources(), s); }
std::optional<Kind> ParseFaultKind(std::string_view s) { return ValueOf(Kinds(), s); }

std::ostream& operator<<(std::ostream& os, InstanceStatus s) { return os << ToString(s); }

}  // namespace hf::model
