#include "hyperfleet/agent/slurm_jobs.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hyperfleet/agent/node_files.h"
#include "hyperfleet/agent/slurm_controller.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/strings.h"
#include "spdlog/spdlog.h"

namespace hf::data {
extern const std::string_view kSlurmJobsQuery;  // data/slurm/query-jobs.sh, embedded
}  // namespace hf::data

namespace hf::agent {
namespace {


// Slurm account and QOS names Hyperfleet creates: team names ([a-z0-9-]) and
// "<class>-priority". Anything else never reaches a shell.
bool SafeName(std::string_view s) {
  return !s.empty() && s.size() <= 64 &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string_view::npos;
}

// Held as far as governance cares (the control plane's PhaseOf says the same).
bool HeldPending(const std::string& state, const std::string& reason) {
  if (state == "REQUEUE_HOLD" || state == "SPECIAL_EXIT") return true;
  return state == "PENDING" && absl::StrContains(absl::AsciiStrToLower(reason), "held");
}

}  // namespace

std::string SlurmJobsQuery() { return std::string(data::kSlurmJobsQuery); }

agentapi::SlurmJobsReport ParseSlurmJobs(std::string_view text,
                                         const std::set<std::string>& accounts) {
  constexpr char kField = '\037';
  constexpr std::string_view kEnd = "\036\n";
  // sinfo's part follows the last "#partitions" line (a comment cannot come after it).
  size_t jobs_end = text.size();
  size_t partitions_at = text.size();
  if (text.substr(0, 12) == "#partitions\n") {
    jobs_end = 0;
    partitions_at = 12;
  }
  if (size_t m = text.rfind("\n#partitions\n"); m != std::string_view::npos) {
    jobs_end = m + 1;
    partitions_at = m + 13;
  }
  std::vector<std::vector<std::string>> rows;
  const std::string_view job_text = text.substr(0, jobs_end);
  for (size_t at = 0; at < job_text.size();) {
    const size_t end = job_text.find(kEnd, at);
    if (end == std::string_view::npos) break;  // no job ends there
    std::string_view record = job_text.substr(at, end - at);
    at = end + kEnd.size();
    // Only the comment may hold a newline: a line before the record's first field is no
    // part of it.
    if (size_t nl = record.rfind('\n', record.find(kField)); nl != std::string_view::npos) {
      record.remove_prefix(nl + 1);
    }
    // id, account, qos, partition, nodes, max nodes, state, submit, reason, admin comment
    // (last: whatever it holds stays in it).
    std::vector<std::string> f = absl::StrSplit(absl::string_view(record.data(), record.size()),
                                                absl::MaxSplits(kField, 9));
    if (f.size() != 10) continue;
    for (auto& x : f) absl::StripAsciiWhitespace(&x);
    rows.push_back(std::move(f));
  }
  agentapi::SlurmJobsReport report;
  std::map<std::string, std::vector<std::string>>& members_of = report.partitions;
  std::istringstream lines{std::string(text.substr(partitions_at))};
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> f = absl::StrSplit(line, '|');
    if (f.size() != 2) continue;
    absl::StripAsciiWhitespace(&f[0]);
    absl::StripAsciiWhitespace(&f[1]);
    if (f[0].empty() || f[1].empty()) continue;
    members_of[f[1]].push_back(f[0]);
  }
  for (const auto& f : rows) {
    uint64_t id = 0;
    int nodes = 0;
    if (!absl::SimpleAtoi(f[0], &id) || !absl::SimpleAtoi(f[4], &nodes)) continue;  // arrays
    const std::string state = absl::AsciiStrToUpper(f[6]);
    const std::string& comment = f[9];
    const bool marked = comment == kMarkGoverned || comment == kMarkHeld;
    // A marked held job is reported whatever its account: if that left governance, the
    // control plane releases it (level-triggered: as long as Slurm still holds it).
    if (!accounts.count(f[1]) && !(marked && HeldPending(state, f[8]))) continue;
    // A pending job of -N min-max shows its minimum (NumNodes) but Slurm gives it as many
    // nodes of the range as it finds: the engine must admit the most it may take, which is
    // no more than its partitions have. Started jobs show their own count in both.
    int max_nodes = 0;
    if (absl::SimpleAtoi(f[5], &max_nodes) && max_nodes > nodes) {
      std::set<std::string> hosts;
      for (const auto& p : absl::StrSplit(f[3], ',', absl::SkipEmpty())) {
        if (auto m = members_of.find(std::string(p)); m != members_of.end()) {
          hosts.insert(m->second.begin(), m->second.end());
        }
      }
      nodes = std::max(nodes, std::min(max_nodes, static_cast<int>(hosts.size())));
    }
    std::string qos = f[2];
    if (qos == "normal" || qos == "(null)" || qos == "N/A") qos.clear();
    agentapi::SlurmJob& job = report.jobs.emplace_back();
    job.id = id;
    job.account = f[1];
    job.qos = std::move(qos);
    job.partition = f[3];
    job.nodes = nodes;
    job.state = state;
    job.submit_time = SlurmTimeToEpoch(f[7]);
    job.reason = f[8];
    if (marked) job.mark = comment;
  }
  return report;
}

std::string SlurmJobActionCommands(const std::vector<agentapi::SlurmJobAction>& actions) {
  std::string script;
  for (const auto& [job, action] : actions) {
    std::string line;
    if (action == "release") {
      line = absl::StrCat("scontrol release ", job);
    } else if (action == "hold") {
      // Priority 0 from root is an administrator's hold, also over the user's own (the
      // job_submit hold); the mark in the same update says it is ours.
      line = absl::StrCat("scontrol update JobId=", job, " AdminComment=", kMarkHeld,
                          " Priority=0");
    } else if (action == "requeuehold") {
      // The requeued job is held by the user: the mark says a hold action must follow.
      line = absl::StrCat("scontrol update JobId=", job, " AdminComment=", kMarkGoverned,
                          "; scontrol requeuehold ", job);
    } else if (action == "disown") {
      line = absl::StrCat("scontrol release ", job, " && scontrol update JobId=", job,
                          " AdminComment=", kMarkReleased);
    } else {
      continue;
    }
    // A job that ended meanwhile makes scontrol fail; the other actions still run.
    absl::StrAppend(&script, "{ ", line, "; } || echo 'scontrol ", action, " ", job,
                    " failed'\n");
  }
  return script;
}

std::string MarkUngovernedHeldJobsCommands(const std::set<std::string>& accounts) {
  std::vector<std::string> names;
  for (const auto& a : accounts) {
    if (SafeName(a)) names.push_back(a);
  }
  if (names.empty()) return {};
  return absl::StrCat(
      "out=$(squeue -h -a -t PD -A ", absl::StrJoin(names, ","),
      " -O 'JobArrayID:0|,Reason:0|,admin_comment:0') || exit 1\n"
      // The comment last: one holding '|' or a newline cannot pass for another job's line.
      "printf '%s\\n' \"$out\" | while IFS='|' read -r id reason mark; do\n"
      "  case \"$id\" in ''|*[!0-9]*) continue ;; esac\n"
      "  [ \"$reason\" = JobHeldUser ] || continue\n"
      "  [ -z \"$mark\" ] || [ \"$mark\" = '(null)' ] || continue\n"
      "  scontrol update JobId=\"$id\" AdminComment=", kMarkGoverned,
      " || echo \"marking job $id failed\"\n"
      "done\n");
}

std::string SacctmgrCommands(const agentapi::Governance& governance) {
  std::string script =
      "grep -qs 'accounting_storage/slurmdbd' /opt/slurm/etc/accounting.conf || exit 0\n";
  bool any = false;
  for (const auto& [name, priority] : governance.qos) {
    if (!SafeName(name) || priority < 0 || priority > 1000000) continue;
    // "Nothing new added" exits non-zero: an existing QOS is fine.
    absl::StrAppend(&script, "sacctmgr -i add qos ", name, " Priority=", priority,
                    " >/dev/null 2>&1 || true\n");
    any = true;
  }
  for (const auto& a : governance.accounts) {
    if (!SafeName(a)) continue;
    // Slurm replaces an account its user has no association with by the user's default
    // account (then the job is no longer the team's): the cluster's users join it.
    absl::StrAppend(&script, "sacctmgr -i add account ", a, " >/dev/null 2>&1 || true\n",
                    "for u in $(sacctmgr -n -P show user format=user); do sacctmgr -i add user "
                    "\"$u\" account=", a, " >/dev/null 2>&1 || true; done\n");
    any = true;
  }
  return any ? script : std::string();
}

SlurmJobs::SlurmJobs(Options options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  // After an agent restart the list written before is what job_submit.lua still reads.
  const std::string text = ReadFile(NodePath(options_.root, kGovernedAccountsPath)).value_or("");
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (SafeName(StdView(line))) accounts_.insert(std::string(line));
  }
  thread_ = std::thread([this] { Loop(); });
}

SlurmJobs::~SlurmJobs() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<agentapi::SlurmJobsReport> SlurmJobs::report() {
  std::lock_guard lock(mu_);
  if (!report_ || clock_.now() - report_at_ > 3 * options_.interval) return std::nullopt;
  return report_;
}

void SlurmJobs::onResponse(const agentapi::HeartbeatResponse& response) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    // Each response is the control plane's whole view (level-triggered): it supersedes what an
    // earlier one asked and the thread has not done yet. A quota deleted and created again
    // before the thread ran left the deletion's governance and disown actions pending.
    if (response.governance) {
      if (response.governance != applied_governance_) {
        governance_ = response.governance;
        wake = true;
      } else {
        governance_.reset();
      }
    }
    if (!response.slurm_job_actions.empty()) {
      actions_ = response.slurm_job_actions;
      wake = true;
    } else {
      actions_.reset();
    }
  }
  if (wake) cv_.notify_all();
}

void SlurmJobs::ApplyGovernance(const agentapi::Governance& governance) {
  std::set<std::string> accounts;
  for (const auto& a : governance.accounts) {
    if (SafeName(a)) accounts.insert(a);
  }
  // Accounts and QOS first: a job naming them must not be refused by slurmdbd's view.
  const std::string sacctmgr = SacctmgrCommands(governance);
  if (!sacctmgr.empty() && options_.run && !options_.run(sacctmgr)) {
    spdlog::warn("creating the governance accounts and QOS with sacctmgr failed");
  }
  std::string content;
  for (const auto& a : accounts) absl::StrAppend(&content, a, "\n");
  agentapi::NodeFile file{std::string(kGovernedAccountsPath), 0644, content};
  if (Status s = WriteNodeFiles(options_.root, {file}); !s.ok()) {
    spdlog::warn("governed accounts: {}", std::string(s.message()));
    return;  // tried again with the next response
  }
  spdlog::info("task governance: governed Slurm accounts [{}]", absl::StrJoin(accounts, ", "));
  std::lock_guard lock(mu_);
  // Accounts that left: job_submit.lua held their jobs until the file above changed; the
  // ones the control plane never saw carry no mark yet (MarkUngovernedHeldJobs).
  for (const auto& a : accounts_) {
    if (!accounts.count(a)) ungoverned_.insert(a);
  }
  for (const auto& a : accounts) ungoverned_.erase(a);
  accounts_ = std::move(accounts);
  applied_governance_ = governance;
}

void SlurmJobs::MarkUngovernedHeldJobs() {
  std::set<std::string> accounts;
  {
    std::lock_guard lock(mu_);
    accounts = ungoverned_;
  }
  if (accounts.empty()) return;
  const std::string script = MarkUngovernedHeldJobsCommands(accounts);
  if (!script.empty() && options_.run && !options_.run(script)) {
    spdlog::warn("marking the held jobs of accounts that left governance failed; tried again");
    return;
  }
  std::lock_guard lock(mu_);
  for (const auto& a : accounts) ungoverned_.erase(a);
}

void SlurmJobs::Loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const bool active = options_.active && options_.active();
    std::optional<agentapi::Governance> governance = std::move(governance_);
    std::optional<std::vector<agentapi::SlurmJobAction>> actions = std::move(actions_);
    governance_.reset();
    actions_.reset();
    lock.unlock();
    std::optional<agentapi::SlurmJobsReport> view;
    if (active) {
      if (governance) ApplyGovernance(*governance);
      MarkUngovernedHeldJobs();
      if (actions) {
        const std::string script = SlurmJobActionCommands(*actions);
        if (!script.empty()) {
          spdlog::info("task governance job actions:\n{}", script);
          if (options_.run && !options_.run(script)) {
            spdlog::warn("task governance job actions failed");
          }
        }
      }
      std::set<std::string> accounts;
      {
        std::lock_guard l(mu_);
        accounts = accounts_;
      }
      // Nothing governed (most clusters): no squeue every second, unless jobs we held may
      // still wait (the last report had some, the last account just left, or the agent
      // just started): they are reported until the control plane has released them.
      if (!accounts.empty()) {
        marked_queries_left_ = kMarkedQueries;
      } else if (last_report_jobs_ > 0) {
        marked_queries_left_ = std::max(marked_queries_left_, 1);
      }
      if (accounts.empty() && marked_queries_left_ <= 0) {
        view = agentapi::SlurmJobsReport{};
      } else if (options_.query) {
        if (accounts.empty()) --marked_queries_left_;
        if (auto text = options_.query()) view = ParseSlurmJobs(*text, accounts);
      }
      if (view) last_report_jobs_ = view->jobs.size();
    }
    lock.lock();
    if (view) {
      report_ = std::move(*view);
      report_at_ = clock_.now();
    }
    cv_.wait_for(lock, options_.interval, [&] { return stop_ || governance_ || actions_; });
  }
}

}  // namespace hf::agent
