// The controller agent's side of task governance: squeue/sinfo parsing, the job action and
// sacctmgr scripts, and the helper thread (governed accounts file, actions, reports).
#include "hyperfleet/agent/slurm_jobs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hf::agent {
namespace {

using nlohmann::json;

// The control plane's messages as the agent decodes them (agentapi/protocol.h).
agentapi::HeartbeatResponse Response(const json& j) {
  return agentapi::Decode<agentapi::HeartbeatResponse>(j).value();
}
std::vector<agentapi::SlurmJobAction> Actions(const json& list) {
  return Response(json{{"slurm_job_actions", list}}).slurm_job_actions;
}
agentapi::Governance GovernanceOf(const json& g) {
  return Response(json{{"governance", g}}).governance.value();
}

// Polls `done` under `mu` until it holds (true) or `deadline` passes (false): the agent's
// thread changes what `done` reads under the same mutex.
bool WaitUnder(std::mutex& mu, std::chrono::steady_clock::time_point deadline,
               const std::function<bool()>& done) {
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard l(mu);
      if (done()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// One job as SlurmJobsQuery's squeue prints it: id, account, qos, partition, nodes, max
// nodes, state, submit, reason, admin comment; \037 between, \036 and a newline after.
std::string Row(const std::vector<std::string>& f) {
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) out += (i ? "\037" : "") + f[i];
  return out + "\036\n";
}

TEST(ParseSlurmJobs, KeepsGovernedJobsAndPartitions) {
  const std::string text =
      Row({"12", "team-a", "training-priority", "workers", "3", "3", "PENDING",
           "2026-01-01T00:00:05", "JobHeldUser", "(null)"}) +
      Row({"13", "team-b", "normal", "workers,dev", "2", "2", "RUNNING", "2026-01-01T00:00:06",
           "None", "hyperfleet-held"}) +
      Row({"14", "other", "normal", "dev", "1", "1", "RUNNING", "2026-01-01T00:00:07", "None",
           "(null)"}) +
      Row({"15_[1-3]", "team-a", "normal", "dev", "1", "1", "PENDING", "2026-01-01T00:00:07",
           "JobHeldUser", "(null)"}) +
      "garbage\n" +
      Row({"16", "team-a", "(null)", "dev", "1", "1", "PENDING", "2026-01-01T00:00:07",
           "Reason|with bar", ""}) +
      "#partitions\n"
      "ip-10-1-0-2|workers\n"
      "ip-10-1-0-2|dev\n"
      "ip-10-1-0-3|dev\n";
  const json out = json(ParseSlurmJobs(text, {"team-a", "team-b"}));
  ASSERT_EQ(out["jobs"].size(), 3u) << out.dump();
  const json& a = out["jobs"][0];
  EXPECT_EQ(a["id"], 12);
  EXPECT_EQ(a["account"], "team-a");
  EXPECT_EQ(a["qos"], "training-priority");
  EXPECT_EQ(a["partition"], "workers");
  EXPECT_EQ(a["nodes"], 3);
  EXPECT_EQ(a["state"], "PENDING");
  EXPECT_EQ(a["reason"], "JobHeldUser");
  EXPECT_FALSE(a.contains("mark"));
  EXPECT_GT(a["submit_time"].get<double>(), 1.7e9);
  EXPECT_EQ(out["jobs"][1]["qos"], "");  // "normal" is no class
  EXPECT_EQ(out["jobs"][1]["partition"], "workers,dev");
  EXPECT_EQ(out["jobs"][1]["mark"], "hyperfleet-held");
  EXPECT_EQ(out["jobs"][2]["id"], 16);  // the garbage line before it is no part of it
  EXPECT_EQ(out["jobs"][2]["qos"], "");
  EXPECT_EQ(out["jobs"][2]["reason"], "Reason|with bar");
  EXPECT_EQ(out["partitions"]["workers"], json::array({"ip-10-1-0-2"}));
  EXPECT_EQ(out["partitions"]["dev"], json::array({"ip-10-1-0-2", "ip-10-1-0-3"}));
}

// An operator's AdminComment is free text: '|', the field separator, newlines, even lines
// shaped like another job's or like the partitions header, stay in that job's comment (it is
// no mark), and every job of the report is still there (a job missing from a report counts
// as ended).
TEST(ParseSlurmJobs, AnAdminCommentCannotBreakTheReport) {
  const std::string text =
      Row({"40", "team-a", "", "dev", "1", "1", "PENDING", "2026-01-01T00:00:05", "JobHeldAdmin",
           "ops|hold\nsee ticket 7\n41|team-a|x"}) +
      Row({"41", "team-a", "", "dev", "2", "2", "RUNNING", "2026-01-01T00:00:05", "None",
           "a\037b\nhyperfleet-held"}) +
      Row({"42", "team-a", "", "dev", "1", "1", "PENDING", "2026-01-01T00:00:05", "JobHeldUser",
           "hyperfleet-governed"}) +
      Row({"43", "team-a", "", "dev", "1", "1", "PENDING", "2026-01-01T00:00:05", "JobHeldAdmin",
           "\n#partitions\nip-x|dev\n"}) +
      "#partitions\nip-10-1-0-2|dev\n";
  const json out = json(ParseSlurmJobs(text, {"team-a"}));
  std::vector<uint64_t> ids;
  for (const auto& j : out["jobs"]) ids.push_back(j["id"].get<uint64_t>());
  ASSERT_EQ(ids, (std::vector<uint64_t>{40, 41, 42, 43})) << out.dump();
  EXPECT_FALSE(out["jobs"][0].contains("mark"));
  EXPECT_EQ(out["jobs"][0]["reason"], "JobHeldAdmin");
  EXPECT_EQ(out["jobs"][1]["nodes"], 2);
  EXPECT_EQ(out["jobs"][1]["state"], "RUNNING");
  EXPECT_FALSE(out["jobs"][1].contains("mark"));
  EXPECT_EQ(out["jobs"][2]["mark"], "hyperfleet-governed");
  EXPECT_EQ(out["partitions"], json::parse(R"({"dev": ["ip-10-1-0-2"]})"));
}

// -N min-max: squeue's NumNodes is the minimum while the job waits, but Slurm starts it on as
// many nodes of the range as it finds; the report carries the most it may take, bounded by
// its partitions' nodes, never less than NumNodes.
TEST(ParseSlurmJobs, NodeRangesReportTheirMaximum) {
  auto row = [](const char* id, const char* partition, const char* nodes, const char* max,
                const char* state) {
    return Row({id, "team-a", "", partition, nodes, max, state, "2026-01-01T00:00:05",
                "JobHeldAdmin", ""});
  };
  const std::string text =
      row("50", "workers", "1", "4", "PENDING") + row("51", "workers", "1", "100", "PENDING") +
      row("52", "workers,dev", "2", "100", "PENDING") +
      row("53", "nowhere", "3", "8", "PENDING") + row("54", "workers", "3", "3", "RUNNING") +
      row("55", "workers", "2", "N/A", "PENDING") +
      "#partitions\n"
      "w1|workers\nw2|workers\nw3|workers\nw4|workers\nw5|workers\n"
      "w1|dev\nw2|dev\nw3|dev\nw4|dev\nw5|dev\nlogin1|dev\n";
  const json out = json(ParseSlurmJobs(text, {"team-a"}));
  std::vector<int> nodes;
  for (const auto& j : out["jobs"]) nodes.push_back(j["nodes"].get<int>());
  EXPECT_EQ(nodes, (std::vector<int>{4, 5, 6, 3, 3, 2})) << out.dump();
}

// Issue 6 leftover 1: a marked held job is reported whatever its account, so that the control
// plane releases it once its account left governance; unmarked or unheld ones of other
// accounts are not (an operator's hold is theirs).
TEST(ParseSlurmJobs, ReportsMarkedHeldJobsOfAnyAccount) {
  auto row = [](const char* id, const char* state, const char* reason, const char* comment) {
    return Row({id, "gone", "", "workers", "1", "1", state, "2026-01-01T00:00:05", reason,
                comment});
  };
  const std::string text =
      row("20", "PENDING", "JobHeldAdmin", "hyperfleet-held") +
      row("21", "PENDING", "job requeued in held state", "hyperfleet-governed") +
      row("22", "REQUEUE_HOLD", "None", "hyperfleet-governed") +
      row("23", "PENDING", "JobHeldAdmin", "(null)") +
      row("24", "PENDING", "Priority", "hyperfleet-held") +
      row("25", "RUNNING", "None", "hyperfleet-held") +
      row("26", "PENDING", "JobHeldAdmin", "hyperfleet-released") + "#partitions\n";
  const json out = json(ParseSlurmJobs(text, {"team-a"}));
  std::vector<uint64_t> ids;
  for (const auto& j : out["jobs"]) ids.push_back(j["id"].get<uint64_t>());
  EXPECT_EQ(ids, (std::vector<uint64_t>{20, 21, 22})) << out.dump();
  EXPECT_EQ(out["jobs"][0]["mark"], "hyperfleet-held");
  EXPECT_EQ(out["jobs"][1]["mark"], "hyperfleet-governed");
}

// The query itself on sh, with a fake squeue that prints its -O argument: the separators
// reach squeue as the bytes ParseSlurmJobs splits on, the comment last.
TEST(SlurmJobsQuery, ReadsTheAdminCommentLastBetweenSeparatorsNoCommentHolds) {
  const std::string q = SlurmJobsQuery();
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("hf-query-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream squeue(dir + "/squeue");
    squeue << "#!/bin/sh\nfor a; do last=\"$a\"; done; printf '%s\\n' \"$last\"\n";
    std::ofstream sinfo(dir + "/sinfo");
    sinfo << "#!/bin/sh\necho 'w1|workers'\n";
    std::ofstream script(dir + "/query.sh");
    script << q << "\n";
  }
  for (const char* f : {"/squeue", "/sinfo"}) {
    std::filesystem::permissions(dir + f, std::filesystem::perms::owner_all);
  }
  const std::string cmd = "PATH=" + dir + ":$PATH sh " + dir + "/query.sh > " + dir + "/out";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir + "/out");
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(out,
            "JobArrayID:0\037,Account:0\037,QOS:0\037,Partition:0\037,NumNodes:0\037,"
            "MaxNodes:0\037,State:0\037,SubmitTime:0\037,Reason:0\037,admin_comment:0\036\n"
            "#partitions\nw1|workers\n");
  std::filesystem::remove_all(dir);
}

TEST(SlurmJobActionCommands, OneGuardedLinePerValidAction) {
  const json actions = json::parse(R"([{"job": 12, "action": "release"},
    {"job": 13, "action": "requeuehold"}, {"job": 14, "action": "hold"},
    {"job": 17, "action": "disown"},
    {"job": "15; rm -rf /", "action": "release"}, {"job": 16, "action": "cancel"}])");
  EXPECT_EQ(SlurmJobActionCommands(Actions(actions)),
            "{ scontrol release 12; } || echo 'scontrol release 12 failed'\n"
            "{ scontrol update JobId=13 AdminComment=hyperfleet-governed; scontrol requeuehold "
            "13; } || echo 'scontrol requeuehold 13 failed'\n"
            "{ scontrol update JobId=14 AdminComment=hyperfleet-held Priority=0; } || "
            "echo 'scontrol hold 14 failed'\n"
            "{ scontrol release 17 && scontrol update JobId=17 AdminComment=hyperfleet-released; "
            "} || echo 'scontrol disown 17 failed'\n");
  EXPECT_EQ(SlurmJobActionCommands(Actions(json::object())), "");
}

TEST(MarkUngovernedHeldJobsCommands, MarksUnmarkedUserHoldsOfTheAccounts) {
  const std::string s = MarkUngovernedHeldJobsCommands({"team-a", "team-b", "x;y"});
  EXPECT_NE(s.find("squeue -h -a -t PD -A team-a,team-b -O 'JobArrayID:0|,Reason:0|,"
                   "admin_comment:0') || exit 1"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("[ \"$reason\" = JobHeldUser ] || continue"), std::string::npos) << s;
  EXPECT_NE(s.find("AdminComment=hyperfleet-governed"), std::string::npos) << s;
  EXPECT_EQ(s.find("x;y"), std::string::npos) << s;
  EXPECT_EQ(MarkUngovernedHeldJobsCommands({"Bad Name"}), "");
}

// The script itself, on sh with a fake squeue and scontrol: only the unmarked JobHeldUser
// jobs are marked.
TEST(MarkUngovernedHeldJobsCommands, RunsOnShell) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("hf-mark-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream squeue(dir + "/squeue");
    squeue << "#!/bin/sh\n"
              "printf '%s\\n' '31|JobHeldUser|(null)' '32|JobHeldAdmin|hyperfleet-held' "
              "'33|JobHeldAdmin|(null)' '34|JobHeldUser|ops note' '35_[1-2]|JobHeldUser|(null)' "
              "'36|JobHeldUser|' '37|JobHeldUser|ops|note' '38|JobHeldUser|line one' 'two|JobHeldUser|' "
              "'39|JobHeldUser|(null)'\n";
    std::ofstream scontrol(dir + "/scontrol");
    scontrol << "#!/bin/sh\necho \"$@\" >> " << dir << "/calls\n";
  }
  std::filesystem::permissions(dir + "/squeue", std::filesystem::perms::owner_all);
  std::filesystem::permissions(dir + "/scontrol", std::filesystem::perms::owner_all);
  {
    std::ofstream script(dir + "/sweep.sh");
    script << MarkUngovernedHeldJobsCommands({"team-a"});
  }
  const std::string cmd = "PATH=" + dir + ":$PATH sh " + dir + "/sweep.sh";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir + "/calls");
  std::string calls((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(calls,
            "update JobId=31 AdminComment=hyperfleet-governed\n"
            "update JobId=36 AdminComment=hyperfleet-governed\n"
            "update JobId=39 AdminComment=hyperfleet-governed\n");
  std::filesystem::remove_all(dir);
}

TEST(SacctmgrCommands, AccountsAndQosOnlyWithSlurmdbd) {
  const json g = json::parse(R"({"accounts": ["team-a", "Bad Name"],
    "qos": [{"name": "training-priority", "priority": 70}, {"name": "x;y", "priority": 1}]})");
  const std::string s = SacctmgrCommands(GovernanceOf(g));
  EXPECT_EQ(s.rfind("grep -qs 'accounting_storage/slurmdbd' /opt/slurm/etc/accounting.conf || exit 0\n", 0), 0u) << s;
  EXPECT_NE(s.find("sacctmgr -i add qos training-priority Priority=70 "), std::string::npos) << s;
  EXPECT_NE(s.find("sacctmgr -i add account team-a "), std::string::npos) << s;
  EXPECT_EQ(s.find("Bad"), std::string::npos) << s;
  EXPECT_EQ(s.find("x;y"), std::string::npos) << s;
  EXPECT_EQ(SacctmgrCommands(GovernanceOf(json::parse(R"({"accounts": [], "qos": []})"))), "");
}

// A control plane of another version (or a broken proxy) may send members of other types:
// the helper thread that renders these scripts must skip them, not throw (an exception there
// ends the agent).
TEST(SlurmJobActionCommands, MembersOfOtherTypesAreSkippedNotThrown) {
  std::string s;
  ASSERT_NO_THROW(s = SlurmJobActionCommands(Actions(json::parse(
                      R"([{"job": 12, "action": 5}, {"job": 13, "action": null},
                          {"job": 14, "action": "release"}, 7, [1]])"))));
  EXPECT_EQ(s, "{ scontrol release 14; } || echo 'scontrol release 14 failed'\n");
  ASSERT_NO_THROW(s = SacctmgrCommands(GovernanceOf(json::parse(
                      R"({"qos": [{"name": 5, "priority": 1}, {"name": "a-priority",
                          "priority": "high"}, {"name": "b-priority", "priority": 1e30},
                          {"name": "c-priority", "priority": 20}], "accounts": [3, "team-a"]})"))));
  EXPECT_EQ(s.find("a-priority"), std::string::npos) << s;
  EXPECT_EQ(s.find("b-priority"), std::string::npos) << s;
  EXPECT_NE(s.find("sacctmgr -i add qos c-priority Priority=20 "), std::string::npos) << s;
  EXPECT_NE(s.find("sacctmgr -i add account team-a "), std::string::npos) << s;
}

TEST(SlurmJobs, WritesAccountsAppliesActionsAndReports) {
  const std::string root = std::filesystem::temp_directory_path() /
                           ("hf-slurm-jobs-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::mutex mu;
  std::vector<std::string> scripts;
  SlurmJobs::Options o;
  o.root = root;
  o.interval = std::chrono::milliseconds(20);
  o.query = [] {
    return std::optional<std::string>(Row({"7", "team-a", "", "workers", "1", "1", "PENDING",
                                            "2026-01-01T00:00:05", "JobHeldUser", "(null)"}) +
                                       "#partitions\n");
  };
  o.run = [&](const std::string& s) {
    std::lock_guard l(mu);
    scripts.push_back(s);
    return true;
  };
  o.active = [] { return true; };
  SystemClock clock;
  {
    SlurmJobs jobs(o, clock);
    jobs.onResponse(Response(json::parse(R"({"governance": {"accounts": ["team-a"], "qos": []},
                                    "slurm_job_actions": [{"job": 7, "action": "release"}]})")));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::optional<json> report;
    while (std::chrono::steady_clock::now() < deadline) {
      report.reset();
      if (auto r = jobs.report()) report = json(*r);
      if (report && !(*report)["jobs"].empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(report.has_value());
    ASSERT_EQ((*report)["jobs"].size(), 1u) << report->dump();
    EXPECT_EQ((*report)["jobs"][0]["id"], 7);
  }
  std::ifstream in(root + std::string(kGovernedAccountsPath));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "team-a\n");
  bool released = false;
  for (const auto& s : scripts) released |= s.find("scontrol release 7") != std::string::npos;
  EXPECT_TRUE(released);
  std::filesystem::remove_all(root);
}

// When an account leaves governance, the held jobs job_submit.lua gave it that the control
// plane never saw are marked (MarkUngovernedHeldJobsCommands), tried again until it works.
TEST(SlurmJobs, MarksTheHeldJobsOfAccountsThatLeft) {
  const std::string root = std::filesystem::temp_directory_path() /
                           ("hf-slurm-jobs-left-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::mutex mu;
  std::vector<std::string> sweeps;
  int failures = 1;  // the first sweep fails (slurmctld not answering)
  SlurmJobs::Options o;
  o.root = root;
  o.interval = std::chrono::milliseconds(20);
  int queries = 0;
  o.query = [&] {
    std::lock_guard l(mu);
    ++queries;
    return std::optional<std::string>("#partitions\n");
  };
  o.run = [&](const std::string& s) {
    std::lock_guard l(mu);
    if (s.find("AdminComment=hyperfleet-governed") == std::string::npos) return true;
    sweeps.push_back(s);
    return failures-- <= 0;
  };
  o.active = [] { return true; };
  SystemClock clock;
  {
    SlurmJobs jobs(o, clock);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto wait = [&](const std::function<bool()>& done) { return WaitUnder(mu, deadline, done); };
    jobs.onResponse(Response(json::parse(R"({"governance": {"accounts": ["team-a", "team-b"], "qos": []}})")));
    ASSERT_TRUE(wait([&] {
      std::ifstream in(root + std::string(kGovernedAccountsPath));
      std::string c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return c == "team-a\nteam-b\n";
    }));
    jobs.onResponse(Response(json::parse(R"({"governance": {"accounts": ["team-b"], "qos": []}})")));
    int after = 0;
    ASSERT_TRUE(wait([&] {
      if (sweeps.size() >= 2 && after == 0) after = queries;
      return after > 0 && queries >= after + 3;  // three more rounds: no third sweep
    }));
  }
  std::lock_guard l(mu);
  ASSERT_EQ(sweeps.size(), 2u);
  EXPECT_NE(sweeps[1].find("-A team-a "), std::string::npos) << sweeps[1];
  std::filesystem::remove_all(root);
}

// Without a governed account the agent stops querying Slurm (most clusters), but only once
// no marked held job is left to report: those are reported until the control plane has
// released them (after the last quota was deleted).
TEST(SlurmJobs, QueriesWithoutAccountsWhileMarkedHeldJobsRemain) {
  const std::string root = std::filesystem::temp_directory_path() /
                           ("hf-slurm-jobs-marked-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::mutex mu;
  int queries = 0, rounds = 0;
  bool held = true;  // Slurm still holds job 9 of a departed account, marked
  SlurmJobs::Options o;
  o.root = root;
  o.interval = std::chrono::milliseconds(10);
  o.query = [&] {
    std::lock_guard l(mu);
    ++queries;
    return std::optional<std::string>(
        held ? Row({"9", "gone", "", "workers", "1", "1", "PENDING", "2026-01-01T00:00:05",
                    "JobHeldAdmin", "hyperfleet-held"}) +
                   "#partitions\n"
             : "#partitions\n");
  };
  o.active = [&] {
    std::lock_guard l(mu);
    ++rounds;
    return true;
  };
  SystemClock clock;
  SlurmJobs jobs(o, clock);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto wait = [&](const std::function<bool()>& done) { return WaitUnder(mu, deadline, done); };
  // Reported while held, for as many rounds as it stays so (more than kMarkedQueries).
  int until = 0;
  ASSERT_TRUE(wait([&] { return queries >= 10; }));
  {
    std::lock_guard l(mu);
    held = false;  // released
    until = queries;
  }
  int after = 0;
  ASSERT_TRUE(wait([&] {
    if (after == 0 && queries > until) after = rounds;
    return after > 0 && rounds >= after + 10;
  }));
  std::lock_guard l(mu);
  EXPECT_LE(queries, until + 1 + SlurmJobs::kMarkedQueries) << "still querying";
  std::filesystem::remove_all(root);
}

// Each heartbeat response is the control plane's whole view: a later one supersedes what an
// earlier one asked and the agent has not done yet. A quota deleted and created again while
// the agent's thread was busy (here: in squeue) must neither drop the team from the
// governed accounts nor run the deletion's disown actions.
TEST(SlurmJobs, ALaterResponseSupersedesOneNotAppliedYet) {
  const std::string root = std::filesystem::temp_directory_path() /
                           ("hf-slurm-jobs-stale-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::mutex mu;
  std::condition_variable cv;
  bool blocking = false, blocked = false;
  int queries = 0;
  std::vector<std::string> scripts;
  SlurmJobs::Options o;
  o.root = root;
  o.interval = std::chrono::milliseconds(10);
  o.query = [&] {
    std::unique_lock l(mu);
    ++queries;
    if (blocking) {
      blocked = true;
      cv.notify_all();
      cv.wait(l, [&] { return !blocking; });
      blocked = false;
    }
    return std::optional<std::string>("#partitions\n");
  };
  o.run = [&](const std::string& s) {
    std::lock_guard l(mu);
    scripts.push_back(s);
    return true;
  };
  o.active = [] { return true; };
  auto accounts_file = [&] {
    std::ifstream in(root + std::string(kGovernedAccountsPath));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  SystemClock clock;
  {
    SlurmJobs jobs(o, clock);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    auto wait = [&](const std::function<bool()>& done) { return WaitUnder(mu, deadline, done); };
    const json governed = json::parse(R"({"governance": {"accounts": ["team-a"], "qos": []}})");
    jobs.onResponse(Response(governed));
    ASSERT_TRUE(wait([&] { return accounts_file() == "team-a\n"; }));
    {
      std::lock_guard l(mu);
      blocking = true;
    }
    ASSERT_TRUE(wait([&] { return blocked; }));
    // Deleted (its held job 5 disowned), then created again (nothing to do).
    jobs.onResponse(Response(json::parse(R"({"governance": {"accounts": [], "qos": []},
                                    "slurm_job_actions": [{"job": 5, "action": "disown"}]})")));
    jobs.onResponse(Response(governed));
    int after = 0;
    {
      std::lock_guard l(mu);
      blocking = false;
      after = queries;
    }
    cv.notify_all();
    ASSERT_TRUE(wait([&] { return queries >= after + 3; }));
  }
  std::lock_guard l(mu);
  EXPECT_EQ(accounts_file(), "team-a\n");
  for (const auto& s : scripts) EXPECT_EQ(s.find("scontrol release 5"), std::string::npos) << s;
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace hf::agent
