#include "hyperfleet/agent/slurm_controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "hyperfleet/agent/script_runner.h"
#include "hyperfleet/agent/slurm_jobs.h"
#include "hyperfleet/common/strings.h"

namespace hf::data {
extern const std::string_view kReloadSlurmctld;  // data/slurm/reload-slurmctld.sh, embedded
}  // namespace hf::data

namespace hf::agent {
namespace {

constexpr char kSlurmPath[] = "PATH=/opt/slurm/bin:/opt/slurm/sbin:/usr/sbin:/usr/bin:/sbin:/bin";

// The lines of a slurm.conf whose change needs a slurmctld restart (Slurm 22.05).
std::vector<std::string_view> RestartLines(std::string_view conf) {
  std::vector<std::string_view> lines;
  while (!conf.empty()) {
    const size_t end = std::min(conf.find('\n'), conf.size());
    const std::string_view line = conf.substr(0, end);
    if (line.starts_with("NodeName=") || line.starts_with("SlurmctldHost=")) {
      lines.push_back(line);
    }
    conf.remove_prefix(std::min(end + 1, conf.size()));
  }
  return lines;
}

// Names of the nodes a slurm.conf defines (NodeName=<name> ...).
std::set<std::string> SlurmNodeNames(std::string_view conf) {
  std::set<std::string> names;
  for (std::string_view line : RestartLines(conf)) {
    if (!line.starts_with("NodeName=")) continue;
    line.remove_prefix(9);
    names.emplace(line.substr(0, line.find(' ')));
  }
  return names;
}

// Runs `script` with /bin/sh as root on the node, logging its output; false on failure.
// `args` are the script's $1, $2...
bool RunNodeShell(const std::string& script, const Clock& clock,
                  const std::vector<std::string>& args = {}) {
  ScriptSpec spec;
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script, "sh"};  // the last one is $0
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.working_directory = "/";
  spec.environment = {kSlurmPath, "HOME=/root"};
  spec.timeout = std::chrono::seconds(120);
  auto outcome = RunScript(
      spec, clock, [](OutputLine line) { spdlog::info("slurm reload: {}", line.text); },
      nullptr);
  return outcome.kind == ScriptOutcome::Kind::kExited && outcome.exit_code == 0;
}

// Runs `script` with /bin/sh as root on the node and returns its output, or nullopt when
// it fails. Quiet: it runs every heartbeat.
std::optional<std::string> CaptureNodeShell(const std::string& script, const Clock& clock) {
  ScriptSpec spec;
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  spec.working_directory = "/";
  spec.environment = {kSlurmPath, "HOME=/root"};
  spec.timeout = std::chrono::seconds(10);
  std::string out;
  auto outcome = RunScript(
      spec, clock, [&out](OutputLine line) { out += line.text + "\n"; }, nullptr);
  if (outcome.kind != ScriptOutcome::Kind::kExited || outcome.exit_code != 0) return std::nullopt;
  return out;
}

// Base of a sinfo long state: "down*" -> "down", "idle+drain" -> "idle".
std::string BaseSlurmState(std::string_view state) {
  const size_t end = state.find_first_of("+*~#!%$@^-");
  return absl::AsciiStrToLower(
      AbslView(state.substr(0, end == std::string_view::npos ? state.size() : end)));
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

}  // namespace

double SlurmTimeToEpoch(std::string_view stamp) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%S", AbslView(stamp), absl::LocalTimeZone(), &t,
                       &error)) {
    return 0;
  }
  const double seconds = static_cast<double>(absl::ToUnixSeconds(t));
  return seconds > 0 ? seconds : 0;
}

std::vector<agentapi::SlurmNode> ParseSinfoNodes(std::string_view text) {
  std::vector<agentapi::SlurmNode> out;
  std::set<std::string> seen;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    // node|state|time|cpus|reason: the reason comes last and may itself contain '|'.
    std::vector<std::string> f;
    size_t start = 0;
    for (int k = 0; k < 4; ++k) {
      const size_t bar = line.find('|', start);
      if (bar == std::string::npos) break;
      f.push_back(line.substr(start, bar - start));
      start = bar + 1;
    }
    if (f.size() != 4) continue;
    f.push_back(line.substr(start));
    // The reason stays exactly as set: "Action:Replace " is not "Action:Replace".
    for (size_t k = 0; k + 1 < f.size(); ++k) absl::StripAsciiWhitespace(&f[k]);
    if (f[0].empty() || f[1].empty()) continue;
    std::string name = f[0];
    if (!seen.insert(name).second) continue;
    // CPUs allocated/idle/other/total: a node set to fail while part of it runs jobs may
    // still read "fail" (22.05), so allocated CPUs tell whether jobs remain.
    int alloc_cpus = 0;
    (void)absl::SimpleAtoi(f[3].substr(0, f[3].find('/')), &alloc_cpus);
    std::string reason = f[4];
    if (reason == "none" || reason == "None") reason.clear();
    out.push_back({std::move(name), absl::AsciiStrToLower(f[1]), alloc_cpus, std::move(reason),
                   SlurmTimeToEpoch(f[2])});
  }
  return out;
}

std::string SlurmMarkCommands(const std::vector<agentapi::SlurmMark>& marks,
                              const std::vector<agentapi::SlurmNode>& nodes) {
  std::map<std::string_view, const agentapi::SlurmNode*> by_name;
  for (const auto& n : nodes) by_name[n.name] = &n;
  std::string script;
  for (const auto& [node, action, reason] : marks) {
    auto it = by_name.find(node);
    if (node.empty() || it == by_name.end()) continue;
    // Names come from slurm.conf, which the control plane wrote; still, keep them inert.
    if (node.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") !=
        std::string::npos) {
      continue;
    }
    const std::string base = BaseSlurmState(it->second->state);
    const std::string& current_reason = it->second->reason;
    if (action == "down" && base != "down" && base != "fail" && !reason.empty()) {
      absl::StrAppend(&script, "scontrol update nodename=", node, " state=down reason=",
                      ShellQuote(reason), "\n");
    } else if (action == "resume" && current_reason == reason &&
               (base == "down" || base == "fail" || base == "failing" || base == "drain" ||
                base == "drained" || base == "draining")) {
      absl::StrAppend(&script, "scontrol update nodename=", node, " state=resume\n");
    }
  }
  return script;
}

std::string_view SlurmReloadProgram() { return data::kReloadSlurmctld; }

std::vector<std::string> SlurmReloadArguments(SlurmReload reload, std::string_view before,
                                              std::string_view after) {
  std::vector<std::string> args = {reload == SlurmReload::kRestart ? "restart" : "reconfigure"};
  const auto now_names = SlurmNodeNames(after);
  for (const auto& name : SlurmNodeNames(before)) {
    if (!now_names.count(name)) args.push_back(name);
  }
  return args;
}

SlurmReload SlurmReloadFor(std::string_view before, std::string_view after) {
  if (before.empty() || before == after) return SlurmReload::kNone;
  return RestartLines(before) == RestartLines(after) ? SlurmReload::kReconfigure
                                                      : SlurmReload::kRestart;
}

SlurmCommands NodeSlurmCommands(const Clock& clock) {
  SlurmCommands c;
  c.reload = [&clock](SlurmReload reload, const std::string& before, const std::string& after) {
    if (reload == SlurmReload::kNone) return true;
    const bool ok = RunNodeShell(std::string(SlurmReloadProgram()), clock,
                                 SlurmReloadArguments(reload, before, after));
    spdlog::info("slurm.conf changed: {}{}",
                 reload == SlurmReload::kRestart ? "restarted slurmctld and reconfigured"
                                                 : "reconfigured",
                 ok ? "" : " (failed; retried at the next heartbeat)");
    return ok;
  };
  c.query_nodes = [&clock] { return CaptureNodeShell("sinfo -N -h -o '%N|%T|%H|%C|%E'", clock); };
  c.run = [&clock](const std::string& script) { return RunNodeShell(script, clock); };
  c.query_jobs = [&clock] { return CaptureNodeShell(SlurmJobsQuery(), clock); };
  c.query_steps = [&clock] { return CaptureNodeShell("squeue -h -t all -o '%i|%T'", clock); };
  return c;
}

}  // namespace hf::agent
