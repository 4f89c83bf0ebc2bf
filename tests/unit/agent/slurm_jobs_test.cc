// The controller agent's side of task governance: squeue/sinfo parsing, the job action and
// sacctmgr scripts, and the helper thread (governed accounts file, actions, reports).
#include "hyperfleet/agent/slurm_jobs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
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

TEST(ParseSlurmJobs, KeepsGovernedJobsAndPartitions) {
  const std::string text =
      "12|team-a|training-priority|workers|3|PENDING|2026-01-01T00:00:05|JobHeldAdmin\n"
      "13|team-b|normal|workers,dev|2|RUNNING|2026-01-01T00:00:06|None\n"
      "14|other|normal|dev|1|RUNNING|2026-01-01T00:00:07|None\n"
      "15_[1-3]|team-a|normal|dev|1|PENDING|2026-01-01T00:00:07|JobHeldAdmin\n"
      "garbage\n"
      "16|team-a|(null)|dev|1|PENDING|2026-01-01T00:00:07|Reason|with bar\n"
      "#partitions\n"
      "ip-10-1-0-2|workers\n"
      "ip-10-1-0-2|dev\n"
      "ip-10-1-0-3|dev\n";
  const json out = ParseSlurmJobs(text, {"team-a", "team-b"});
  ASSERT_EQ(out["jobs"].size(), 3u) << out.dump();
  const json& a = out["jobs"][0];
  EXPECT_EQ(a["id"], 12);
  EXPECT_EQ(a["account"], "team-a");
  EXPECT_EQ(a["qos"], "training-priority");
  EXPECT_EQ(a["partition"], "workers");
  EXPECT_EQ(a["nodes"], 3);
  EXPECT_EQ(a["state"], "PENDING");
  EXPECT_EQ(a["reason"], "JobHeldAdmin");
  EXPECT_GT(a["submit_time"].get<double>(), 1.7e9);
  EXPECT_EQ(out["jobs"][1]["qos"], "");  // "normal" is no class
  EXPECT_EQ(out["jobs"][1]["partition"], "workers,dev");
  EXPECT_EQ(out["jobs"][2]["qos"], "");
  EXPECT_EQ(out["jobs"][2]["reason"], "Reason|with bar");
  EXPECT_EQ(out["partitions"]["workers"], json::array({"ip-10-1-0-2"}));
  EXPECT_EQ(out["partitions"]["dev"], json::array({"ip-10-1-0-2", "ip-10-1-0-3"}));
}

TEST(SlurmJobActionCommands, OneGuardedLinePerValidAction) {
  const json actions = json::parse(R"([{"job": 12, "action": "release"},
    {"job": 13, "action": "requeuehold"}, {"job": 14, "action": "hold"},
    {"job": "15; rm -rf /", "action": "release"}, {"job": 16, "action": "cancel"}])");
  EXPECT_EQ(SlurmJobActionCommands(actions),
            "scontrol release 12 || echo 'scontrol release failed'\n"
            "scontrol requeuehold 13 || echo 'scontrol requeuehold failed'\n"
            "scontrol hold 14 || echo 'scontrol hold failed'\n");
  EXPECT_EQ(SlurmJobActionCommands(json::object()), "");
}

TEST(SacctmgrCommands, AccountsAndQosOnlyWithSlurmdbd) {
  const json g = json::parse(R"({"accounts": ["team-a", "Bad Name"],
    "qos": [{"name": "training-priority", "priority": 70}, {"name": "x;y", "priority": 1}]})");
  const std::string s = SacctmgrCommands(g);
  EXPECT_EQ(s.rfind("grep -qs 'accounting_storage/slurmdbd' /opt/slurm/etc/accounting.conf || exit 0\n", 0), 0u) << s;
  EXPECT_NE(s.find("sacctmgr -i add qos training-priority Priority=70 "), std::string::npos) << s;
  EXPECT_NE(s.find("sacctmgr -i add account team-a "), std::string::npos) << s;
  EXPECT_EQ(s.find("Bad"), std::string::npos) << s;
  EXPECT_EQ(s.find("x;y"), std::string::npos) << s;
  EXPECT_EQ(SacctmgrCommands(json::parse(R"({"accounts": [], "qos": []})")), "");
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
    return std::optional<std::string>(
        "7|team-a||workers|1|PENDING|2026-01-01T00:00:05|JobHeldAdmin\n#partitions\n");
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
    jobs.onResponse(json::parse(R"({"governance": {"accounts": ["team-a"], "qos": []},
                                    "slurm_job_actions": [{"job": 7, "action": "release"}]})"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::optional<json> report;
    while (std::chrono::steady_clock::now() < deadline) {
      report = jobs.report();
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

}  // namespace
}  // namespace hf::agent
