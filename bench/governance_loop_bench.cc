// governance_loop_bench: the control plane's side of task governance on Slurm
// (control::GovernanceLoop::onHeartbeat) with a large governed queue. One cluster of --nodes
// ml.g5.8xlarge workers, --teams teams of equal quota, --jobs governed jobs submitted at
// once (held, as job_submit.lua holds them); Slurm is simulated in this process: a released
// job runs, a requeue-held or held one waits. Then it times heartbeats in the steady state:
// `unchanged` (the same report again, the common case) and `churn` (--churn jobs end and as
// many are submitted between heartbeats). Prints milliseconds per heartbeat (p50, p99) of the
// handler, in CPU time of the calling thread and in wall time; the report's JSON is built
// before the timer starts (the agent service parses the body), its decoding into the typed
// report (agentapi/protocol.h, as the agent service does) is timed with the handler.
// The loop's info logs (one per admission) are off.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "hyperfleet/control/governance_loop.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/store/store.h"
#include "spdlog/spdlog.h"

namespace {

using nlohmann::json;

/// Time moves only when the bench says so (decisions stay deterministic).
class StepClock final : public hf::Clock {
 public:
  hf::SystemTime now() const override { return t_; }
  void advance(std::chrono::seconds s) { t_ += s; }

 private:
  hf::SystemTime t_{std::chrono::seconds(1767225600)};
};

struct SlurmJob {
  std::string account, qos;
  int nodes = 1;
  std::string state = "PENDING", reason = "JobHeldUser", mark;
};

// This thread's CPU time in milliseconds: unlike wall time, it does not count the time other
// processes of a busy host take.
double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

struct Sample {
  double cpu_ms, wall_ms;
};

void PrintRow(const char* name, std::vector<Sample> s) {
  std::vector<double> cpu, wall;
  for (const auto& x : s) {
    cpu.push_back(x.cpu_ms);
    wall.push_back(x.wall_ms);
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  auto at = [](const std::vector<double>& v, double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  std::printf("%-10s heartbeats %4zu  CPU ms p50 %8.2f  p99 %8.2f   wall ms p50 %8.2f  p99 %8.2f\n",
              name, s.size(), at(cpu, 0.5), at(cpu, 0.99), at(wall, 0.5), at(wall, 0.99));
}

// The store: one cluster "c1" of `nodes` ml.g5.8xlarge workers w0.., a policy with three
// classes, and `teams` quotas of nodes/teams instances each. Null (and a message) on error.
std::unique_ptr<hf::store::Store> MakeStore(int nodes, int teams) {
  auto opened = hf::store::OpenSqliteStore(":memory:");
  if (!opened.ok()) {
    std::fprintf(stderr, "store: %s\n", opened.status().ToString().c_str());
    return nullptr;
  }
  auto store = std::move(*opened);
  hf::store::WriteBatch b;
  hf::model::Cluster c;
  c.id = "c1";
  c.name = "bench";
  c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/c1";
  b.clusters.push_back({c});
  for (int i = 0; i < nodes; ++i) {
    hf::model::Node n;
    n.cluster_id = "c1";
    n.instance_id = "i-" + std::to_string(100000000 + i);
    n.group = "workers";
    n.instance_type = "ml.g5.8xlarge";
    n.hostname = "w" + std::to_string(i);
    b.nodes.push_back({n});
  }
  hf::model::SchedulerResource policy;
  policy.id = policy.name = "policy";
  policy.arn = "arn:policy";
  policy.kind = hf::model::governance_kind::kSchedulerConfig;
  policy.cluster_id = "c1";
  policy.status = hf::model::scheduler_status::kCreated;
  policy.body = {{"SchedulerConfig",
                  {{"PriorityClasses", json::array({{{"Name", "inference"}, {"Weight", 90}},
                                                    {{"Name", "training"}, {"Weight", 70}},
                                                    {{"Name", "fine-tuning"}, {"Weight", 50}}})},
                   {"FairShare", "Enabled"}}}};
  b.scheduler_resources.push_back({policy});
  for (int t = 0; t < teams; ++t) {
    hf::model::SchedulerResource q;
    q.team = "team-" + std::to_string(t);
    q.id = q.name = "q-" + q.team;
    q.arn = "arn:" + q.id;
    q.kind = hf::model::governance_kind::kComputeQuota;
    q.cluster_id = "c1";
    q.status = hf::model::scheduler_status::kCreated;
    q.body = {{"ComputeQuotaConfig",
               {{"ComputeQuotaResources",
                 json::array({{{"InstanceType", "ml.g5.8xlarge"}, {"Count", nodes / teams}}})},
                {"ResourceSharingConfig", {{"Strategy", "LendAndBorrow"}, {"BorrowLimit", 50}}},
                {"PreemptTeamTasks", "LowerPriority"}}},
              {"ComputeQuotaTarget", {{"TeamName", q.team}, {"FairShareWeight", 0}}},
              {"ActivationState", "Enabled"}};
    b.scheduler_resources.push_back({q});
  }
  if (auto s = store->commit(b); !s.ok()) {
    std::fprintf(stderr, "store: %s\n", s.status().ToString().c_str());
    return nullptr;
  }
  return store;
}

/// Slurm, simulated: the governed jobs, the agent's report of them, and the agent's job
/// actions carried out at once (a released job runs, a requeue-held or held one waits).
class SlurmSim {
 public:
  SlurmSim(int nodes, int teams) : teams_(teams) {
    for (int i = 0; i < nodes; ++i) hosts_.push_back("w" + std::to_string(i));
  }

  /// A new job, held as job_submit.lua holds it.
  void Submit() {
    const uint64_t id = next_id_++;
    SlurmJob& j = jobs[id];
    j.account = "team-" + std::to_string(id % teams_);
    j.qos = kClasses[id % 3];
    j.nodes = static_cast<int>(1 + id % 4);
  }

  /// The heartbeat's "slurm_jobs".
  json Report() const {
    json js = json::array();
    for (const auto& [id, j] : jobs) {
      json e = {{"id", id},          {"account", j.account}, {"qos", j.qos},
                {"partition", "workers"}, {"nodes", j.nodes}, {"state", j.state},
                {"reason", j.reason}, {"submit_time", 1767225600.0 + static_cast<double>(id)}};
      if (!j.mark.empty()) e["mark"] = j.mark;
      js.push_back(std::move(e));
    }
    return json{{"jobs", std::move(js)}, {"partitions", {{"workers", hosts_}}}};
  }

  /// Carries out a heartbeat answer's "slurm_job_actions".
  void Apply(const std::optional<hf::agentapi::GovernanceAnswer>& out) {
    if (!out) return;
    for (const auto& a : out->slurm_job_actions) {
      auto it = jobs.find(a.job);
      if (it == jobs.end()) continue;
      const std::string& action = a.action;
      SlurmJob& j = it->second;
      if (action == "release") {
        j.state = "RUNNING";
        j.reason = "None";
      } else if (action == "requeuehold") {
        j.state = "PENDING";
        j.reason = "job requeued in held state";
        j.mark = "hyperfleet-governed";
      } else if (action == "hold") {
        j.reason = "JobHeldAdmin";
        j.mark = "hyperfleet-held";
      } else if (action == "disown") {
        j.reason = "Priority";
        j.mark.clear();
      }
    }
  }

  /// The oldest `n` running jobs end.
  void EndRunning(int n) {
    int ended = 0;
    for (auto it = jobs.begin(); it != jobs.end() && ended < n;) {
      if (it->second.state == "RUNNING") {
        it = jobs.erase(it);
        ++ended;
      } else {
        ++it;
      }
    }
  }

  std::map<uint64_t, SlurmJob> jobs;

 private:
  static constexpr const char* kClasses[] = {"inference-priority", "training-priority",
                                             "fine-tuning-priority"};
  const int teams_;
  json hosts_ = json::array();
  uint64_t next_id_ = 1;
};

/// One heartbeat; returns the handler's time. Slurm applies the actions at once.
Sample Beat(hf::control::GovernanceLoop& loop, StepClock& clock, SlurmSim& slurm) {
  const json r = slurm.Report();
  clock.advance(std::chrono::seconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = CpuMs();
  const auto typed = hf::agentapi::Decode<hf::agentapi::SlurmJobsReport>(r);
  const auto out = loop.onHeartbeat("c1", typed.ok() ? &*typed : nullptr);
  const Sample ms{CpuMs() - c0, std::chrono::duration<double, std::milli>(
                                    std::chrono::steady_clock::now() - t0).count()};
  slurm.Apply(out);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GovernanceLoop heartbeat cost with many governed Slurm jobs"};
  int nodes = 1000, teams = 10, jobs = 20000, churn = 10, beats = 50;
  app.add_option("--nodes", nodes, "worker nodes (ml.g5.8xlarge)");
  app.add_option("--teams", teams, "teams, each with nodes/teams instances of quota");
  app.add_option("--jobs", jobs, "governed jobs submitted before the timed heartbeats");
  app.add_option("--churn", churn, "jobs that end and are submitted per churn heartbeat");
  app.add_option("--beats", beats, "timed heartbeats per row");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);

  auto store = MakeStore(nodes, teams);
  if (store == nullptr) return 1;
  StepClock clock;
  hf::control::GovernanceLoop loop(*store, hf::model::InstanceCatalog::Embedded(), clock);
  SlurmSim slurm(nodes, teams);
  for (int i = 0; i < jobs; ++i) slurm.Submit();
  const Sample first = Beat(loop, clock, slurm);
  for (int i = 0; i < 3; ++i) Beat(loop, clock, slurm);  // conversions to admin holds
  int running = 0;
  for (const auto& [id, j] : slurm.jobs) running += j.state == "RUNNING";
  std::printf("governance_loop_bench: %d nodes, %d teams, %d governed jobs (%d running)\n",
              nodes, teams, jobs, running);
  std::printf("first      heartbeat  CPU ms %8.2f  wall ms %8.2f (every job new)\n",
              first.cpu_ms, first.wall_ms);
  std::vector<Sample> unchanged, churned;
  for (int i = 0; i < beats; ++i) unchanged.push_back(Beat(loop, clock, slurm));
  PrintRow("unchanged", unchanged);
  for (int i = 0; i < beats; ++i) {
    // The oldest running jobs end; new ones arrive held.
    slurm.EndRunning(churn);
    for (int k = 0; k < churn; ++k) slurm.Submit();
    churned.push_back(Beat(loop, clock, slurm));
  }
  PrintRow("churn", churned);
  return 0;
}
