#include "hyperfleet/model/node_health.h"

#include <array>
#include <utility>

namespace hf::model {
namespace {

// The wire strings of the known values (docs/nodes.md "Health checks"); kUnknown is none.
const std::array<std::pair<HealthSeverity, std::string>, 4>& Severities() {
  static const std::array<std::pair<HealthSeverity, std::string>, 4> names{{
      {HealthSeverity::kOk, "ok"},
      {HealthSeverity::kWarning, "warning"},
      {HealthSeverity::kSoftFault, "soft_fault"},
      {HealthSeverity::kHardFault, "hard_fault"},
  }};
  return names;
}

const std::array<std::pair<HealthAction, std::string>, 3>& Actions() {
  static const std::array<std::pair<HealthAction, std::string>, 3> names{{
      {HealthAction::kNone, "none"},
      {HealthAction::kReboot, "reboot"},
      {HealthAction::kReplace, "replace"},
  }};
  return names;
}

const std::string& Unknown() {
  static const std::string unknown = "unknown";
  return unknown;
}

template <typename Names, typename E>
const std::string& NameOf(const Names& names, E value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return Unknown();
}

template <typename Names, typename E>
E ValueOf(const Names& names, std::string_view text, E unknown) {
  for (const auto& [v, name] : names) {
    if (name == text) return v;
  }
  return unknown;
}

}  // namespace

const std::string& ToString(HealthSeverity s) { return NameOf(Severities(), s); }
const std::string& ToString(HealthAction a) { return NameOf(Actions(), a); }

HealthSeverity ParseHealthSeverity(std::string_view s) {
  return ValueOf(Severities(), s, HealthSeverity::kUnknown);
}

HealthAction ParseHealthAction(std::string_view s) {
  return ValueOf(Actions(), s, HealthAction::kUnknown);
}

}  // namespace hf::model
