#include "hyperfleet/model/node_state.h"

#include <utility>
#include <vector>

namespace hf::model {
namespace {

// One table per enum: value and its string, used both ways.
template <typename E>
using Names = std::vector<std::pair<E, std::string>>;

using Action = NodeRecoveryRequest::Action;
using Kind = NodeFault::Kind;
using Source = NodeRecoveryRequest::Source;

struct Tables {
  Names<InstanceStatus> statuses{{InstanceStatus::kPending, "Pending"},
                                 {InstanceStatus::kRunning, "Running"},
                                 {InstanceStatus::kFailure, "Failure"},
                                 {InstanceStatus::kShuttingDown, "ShuttingDown"}};
  Names<Action> actions{{Action::kReboot, "Reboot"}, {Action::kReplace, "Replace"}};
  Names<Kind> kinds{{Kind::kDead, "Dead"},
                    {Kind::kUnresponsive, "Unresponsive"},
                    {Kind::kHardwareFault, "HardwareFault"},
                    {Kind::kSoftwareFault, "SoftwareFault"},
                    {Kind::kReplacementFailed, "ReplacementFailed"}};
  Names<Source> sources{{Source::kApi, ""},
                        {Source::kSlurmAction, "Requested"},
                        {Source::kKubernetesLabel, "KubernetesLabel"},
                        {Source::kDead, "Dead"},
                        {Source::kUnresponsive, "Unresponsive"},
                        {Source::kHardwareFault, "HardwareFault"},
                        {Source::kSoftwareFault, "SoftwareFault"},
                        {Source::kReplacementFailed, "ReplacementFailed"}};
};

// A function-local static: safe to use during static initialisation.
const Tables& T() {
  static const Tables tables;
  return tables;
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

const std::string& ToString(InstanceStatus s) { return NameOf(T().statuses, s); }
const std::string& ToString(Action a) { return NameOf(T().actions, a); }
const std::string& ToString(Source s) { return NameOf(T().sources, s); }
const std::string& ToString(Kind k) { return NameOf(T().kinds, k); }

std::optional<InstanceStatus> ParseInstanceStatus(std::string_view s) {
  return ValueOf(T().statuses, s);
}
std::optional<Action> ParseRecoveryAction(std::string_view s) { return ValueOf(T().actions, s); }
std::optional<Source> ParseRecoverySource(std::string_view s) { return ValueOf(T().sources, s); }
std::optional<Kind> ParseFaultKind(std::string_view s) { return ValueOf(T().kinds, s); }

std::ostream& operator<<(std::ostream& os, InstanceStatus s) { return os << ToString(s); }

}  // namespace hf::model
