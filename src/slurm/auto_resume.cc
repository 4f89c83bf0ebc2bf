#include "hyperfleet/slurm/auto_resume.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace hf::slurm {

namespace {
// Debian's Abseil has its own string_view type.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }
}  // namespace

std::vector<NodeHealth> ParseSinfoNodes(std::string_view text) {
  std::vector<NodeHealth> out;
  std::set<std::string> seen;
  for (absl::string_view line : absl::StrSplit(A(text), '\n', absl::SkipWhitespace())) {
    line = absl::StripAsciiWhitespace(line);
    // The reason is last and may itself contain '|': split at the first two only.
    const size_t a = line.find('|');
    if (a == absl::string_view::npos) continue;
    const size_t b = line.find('|', a + 1);
    if (b == absl::string_view::npos) continue;
    NodeHealth n{std::string(line.substr(0, a)), std::string(line.substr(a + 1, b - a - 1)),
                 std::string(line.substr(b + 1))};
    if (n.name.empty() || !seen.insert(n.name).second) continue;
    out.push_back(std::move(n));
  }
  return out;
}

bool IsFaultReason(std::string_view reason) {
  return absl::StartsWith(A(reason), A(kHyperfleetReasonPrefix)) || reason == "Action:Replace" ||
         reason == "Action:Reboot";
}

std::optional<std::string> FaultOf(const NodeHealth& node) {
  if (!IsFaultReason(node.reason)) return std::nullopt;
  // sinfo's long states carry flags as suffixes ("down*", "drained~"); the base name decides.
  std::string base = absl::AsciiStrToLower(node.state);
  while (!base.empty() && !absl::ascii_isalpha(static_cast<unsigned char>(base.back()))) {
    base.pop_back();
  }
  static const std::set<std::string> kUnavailable = {"down", "fail", "failing", "drain",
                                                     "drained", "draining"};
  if (!kUnavailable.contains(base)) return std::nullopt;
  return absl::StrCat(node.name, " is ", node.state, " (reason \"", node.reason, "\")");
}

std::vector<std::string> Faults(const std::vector<NodeHealth>& nodes) {
  std::vector<std::string> out;
  for (const NodeHealth& n : nodes) {
    if (auto f = FaultOf(n)) out.push_back(*f);
  }
  return out;
}

std::optional<std::string> ConfigValue(std::string_view show_config, std::string_view key) {
  for (absl::string_view line : absl::StrSplit(A(show_config), '\n')) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    if (absl::StripAsciiWhitespace(line.substr(0, eq)) != A(key)) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(eq + 1)));
  }
  return std::nullopt;
}

std::optional<std::string> JobField(std::string_view show_job, std::string_view field) {
  for (absl::string_view token : absl::StrSplit(A(show_job), absl::ByAnyChar(" \t\n"),
                                                absl::SkipEmpty())) {
    const size_t eq = token.find('=');
    if (eq == absl::string_view::npos || token.substr(0, eq) != A(field)) continue;
    return std::string(token.substr(eq + 1));
  }
  return std::nullopt;
}

std::string TaskPluginError(std::string_view task_plugin) {
  const std::string value(absl::StripAsciiWhitespace(A(task_plugin)));
  if (value == "task/none") return "";
  return absl::StrCat("Configuration error: slurm.conf has TaskPlugin=",
                      value.empty() ? "(unset)" : value,
                      "; srun --auto-resume supports only TaskPlugin=task/none");
}

std::optional<bool> ParseAutoResumeValue(std::string_view value) {
  if (value == "1") return true;
  if (value == "0") return false;
  return std::nullopt;
}


std::string JoinHostlists(const std::vector<std::string>& lists) {
  std::vector<std::string> kept;
  std::set<std::string> seen;
  for (const std::string& l : lists) {
    const std::string v(absl::StripAsciiWhitespace(l));
    if (v.empty() || v == "(null)" || !seen.insert(v).second) continue;
    kept.push_back(v);
  }
  return absl::StrJoin(kept, ",");
}

}  // namespace hf::slurm
