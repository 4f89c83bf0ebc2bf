#include "hyperfleet/control/governance_loop.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/governance/engine.h"
#include "hyperfleet/model/governance.h"
#include "hyperfleet/model/service_model.h"
#include "spdlog/spdlog.h"

namespace hf::control {
namespace {

using nlohmann::json;
namespace gov = hf::governance;

/// How a job stands in Slurm, as far as governance cares.
enum class SlurmPhase {
  kHeld,      ///< pending, held (job_submit.lua, requeuehold, hold)
  kWaiting,   ///< pending, released: Slurm starts it when nodes are free
  kRunning,   ///< holds nodes and runs
  kStopping,  ///< completing or being requeued: its nodes free up by themselves
};

SlurmPhase PhaseOf(const std::string& state, const std::string& reason) {
  if (state == "PENDING") {
    // JobHeldAdmin, JobHeldUser, and after requeuehold "job requeued in held state".
    return absl::StrContains(absl::AsciiStrToLower(reason), "held") ? SlurmPhase::kHeld
                                                                    : SlurmPhase::kWaiting;
  }
  if (state == "REQUEUE_HOLD" || state == "SPECIAL_EXIT") return SlurmPhase::kHeld;
  if (state == "COMPLETING" || state == "REQUEUED" || state == "REQUEUE_FED" ||
      state == "STAGE_OUT") {
    return SlurmPhase::kStopping;
  }
  return SlurmPhase::kRunning;  // RUNNING, CONFIGURING, SUSPENDED, RESIZING, SIGNALING, ...
}

std::string_view PhaseName(SlurmPhase p) {
  switch (p) {
    case SlurmPhase::kHeld: return "held";
    case SlurmPhase::kWaiting: return "released, waiting for nodes";
    case SlurmPhase::kRunning: return "running";
    case SlurmPhase::kStopping: return "stopping";
  }
  return "?";
}

/// The stored configuration of one cluster, in engine terms.
struct Config {
  gov::SchedulerPolicy policy;
  std::vector<gov::TeamQuota> quotas;
  std::vector<gov::InstanceTypeCapacity> capacity;
  std::map<std::string, int> class_weight;  ///< class name -> weight
  std::string key;  ///< changes whenever anything above does
};

std::optional<double> Num(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_number()) return std::nullopt;
  return o[key].get<double>();
}

gov::QuotaResource QuotaResourceOf(const json& r) {
  gov::QuotaResource q;
  q.instance_type = r.value("InstanceType", "");
  if (auto c = Num(r, "Count")) q.count = static_cast<int64_t>(*c);
  q.accelerators = Num(r, "Accelerators");
  q.vcpu = Num(r, "VCpu");
  q.memory_gib = Num(r, "MemoryInGiB");
  return q;
}

gov::TeamQuota TeamQuotaOf(const model::SchedulerResource& r) {
  gov::TeamQuota q;
  q.team = r.team;
  const json& config = r.body.value("ComputeQuotaConfig", json::object());
  for (const auto& res : config.value("ComputeQuotaResources", json::array())) {
    q.resources.push_back(QuotaResourceOf(res));
  }
  const json& sharing = config.value("ResourceSharingConfig", json::object());
  const std::string strategy = sharing.value("Strategy", "LendAndBorrow");
  q.strategy = strategy == "Lend"       ? gov::SharingStrategy::kLend
               : strategy == "DontLend" ? gov::SharingStrategy::kDontLend
                                        : gov::SharingStrategy::kLendAndBorrow;
  q.borrow_limit_percent = static_cast<int>(Num(sharing, "BorrowLimit").value_or(
      q.strategy == gov::SharingStrategy::kLendAndBorrow ? 50 : 0));
  for (const auto& res : sharing.value("AbsoluteBorrowLimits", json::array())) {
    q.absolute_borrow_limits.push_back(QuotaResourceOf(res));
  }
  q.preempt_team_tasks = config.value("PreemptTeamTasks", "LowerPriority") == "Never"
                             ? gov::PreemptTeamTasks::kNever
                             : gov::PreemptTeamTasks::kLowerPriority;
  q.fair_share_weight = static_cast<int>(
      Num(r.body.value("ComputeQuotaTarget", json::object()), "FairShareWeight").value_or(0));
  q.active = r.body.value("ActivationState", "Enabled") == "Enabled";
  return q;
}

bool Live(const model::SchedulerResource& r) {
  return r.status != model::scheduler_status::kCreateFailed &&
         r.status != model::scheduler_status::kDeleting;
}

}  // namespace

/// One cluster: its engine and the jobs the controller reported.
struct GovernanceLoop::ClusterState {
  struct Job {
    gov::WorkloadSpec spec;
    bool in_engine = false;
    bool admitted = false;      ///< the engine's decision
    std::string problem;        ///< why the engine cannot take it (held meanwhile)
    std::string state, reason;  ///< Slurm's, as last reported
    SlurmPhase phase = SlurmPhase::kHeld;
    std::string partition;
  };
  std::unique_ptr<gov::Engine> engine;
  std::string config_key;
  Config config;
  std::set<std::string> teams;  ///< governed accounts
  std::map<uint64_t, Job> jobs;
  std::map<std::string, std::string> partition_type;  ///< partition -> its instance type
  std::map<std::string, std::string> partition_problem;  ///< partition -> why it has none
  bool seen_report = false;  ///< a report arrived since this control plane started
};

GovernanceLoop::GovernanceLoop(store::Store& store, const model::InstanceCatalog& catalog,
                               const Clock& clock)
    : store_(store), catalog_(catalog), clock_(clock) {}

GovernanceLoop::~GovernanceLoop() = default;

namespace {

/// Reads the cluster's policy and quotas; capacity from the nodes in Slurm's partitions.
StatusOr<Config> LoadConfig(store::Store& store, const model::InstanceCatalog& catalog,
                            const std::string& cluster_id,
                            const std::map<std::string, int64_t>& instances) {
  Config c;
  HF_ASSIGN_OR_RETURN(auto policies, store.schedulerResources(
                                         model::governance_kind::kSchedulerConfig, cluster_id));
  HF_ASSIGN_OR_RETURN(auto quotas, store.schedulerResources(
                                       model::governance_kind::kComputeQuota, cluster_id));
  json key = json::object();
  for (const auto& p : policies) {
    if (!Live(p)) continue;
    const json& sc = p.body.value("SchedulerConfig", json::object());
    for (const auto& pc : sc.value("PriorityClasses", json::array())) {
      gov::PriorityClass cls{pc.value("Name", ""), pc.value("Weight", 0)};
      c.class_weight[cls.name] = cls.weight;
      c.policy.priority_classes.push_back(std::move(cls));
    }
    c.policy.fair_share = sc.value("FairShare", "Enabled") != "Disabled";
    c.policy.idle_resource_sharing = sc.value("IdleResourceSharing", "Disabled") == "Enabled";
    key["policy"] = sc;
    break;  // one per cluster
  }
  std::set<std::string> types;
  for (const auto& [t, n] : instances) types.insert(t);
  for (const auto& q : quotas) {
    if (!Live(q) || q.team.empty()) continue;
    c.quotas.push_back(TeamQuotaOf(q));
    for (const auto& r : c.quotas.back().resources) types.insert(r.instance_type);
    for (const auto& r : c.quotas.back().absolute_borrow_limits) types.insert(r.instance_type);
    key["quotas"][q.team] = {q.body.value("ComputeQuotaConfig", json::object()),
                             q.body.value("ComputeQuotaTarget", json::object()),
                             q.body.value("ActivationState", "Enabled")};
  }
  for (const auto& t : types) {
    const auto* spec = catalog.find(t);
    if (spec == nullptr) continue;
    auto it = instances.find(t);
    c.capacity.push_back({spec->name, spec->vcpus, spec->memory_gib, spec->accelerator_count,
                          it == instances.end() ? 0 : it->second});
    key["capacity"][t] = c.capacity.back().instances;
  }
  c.key = key.dump();
  return c;
}

// A member of an agent's report: a string, or "" when missing or of another type (a
// malformed report must not fail the whole heartbeat).
std::string ReportString(const json& r, const char* key) {
  auto it = r.find(key);
  return it != r.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A numeric member of an agent's report, `fallback` when missing or not a number.
double ReportNumber(const json& r, const char* key, double fallback) {
  auto it = r.find(key);
  return it != r.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace

void GovernanceLoop::forget(const std::string& cluster_id) {
  std::lock_guard lock(mu_);
  clusters_.erase(cluster_id);
}

json GovernanceLoop::onHeartbeat(const std::string& cluster_id, const json* slurm_jobs) {
  std::lock_guard lock(mu_);
  auto& slot = clusters_[cluster_id];
  if (!slot) slot = std::make_unique<ClusterState>();
  ClusterState& st = *slot;

  // Partitions -> instance types, from the nodes Slurm has and the store's nodes.
  const bool have_report = slurm_jobs != nullptr && slurm_jobs->is_object() &&
                           slurm_jobs->contains("jobs") && (*slurm_jobs)["jobs"].is_array();
  std::map<std::string, int64_t> instances;
  if (have_report) {
    auto nodes = store_.nodes(cluster_id);
    if (!nodes.ok()) {
      spdlog::warn("governance: nodes of {}: {}", cluster_id, nodes.status().ToString());
      return json::object();
    }
    std::map<std::string, std::string> type_of;  // Slurm node name -> instance type
    for (const auto& n : *nodes) {
      if (n.hostname.empty()) continue;
      type_of[n.hostname.substr(0, n.hostname.find('.'))] = n.instance_type;
    }
    st.partition_type.clear();
    st.partition_problem.clear();
    std::map<std::string, std::set<std::string>> hosts_of_type;
    const json empty = json::object();
    auto partitions_it = slurm_jobs->find("partitions");
    const json& partitions = partitions_it != slurm_jobs->end() && partitions_it->is_object()
                                 ? *partitions_it
                                 : empty;
    for (auto it = partitions.begin(); it != partitions.end(); ++it) {
      std::set<std::string> types;
      if (!it.value().is_array()) continue;
      for (const auto& h : it.value()) {
        if (!h.is_string()) continue;
        auto t = type_of.find(h.get<std::string>());
        if (t == type_of.end()) continue;
        types.insert(t->second);
        hosts_of_type[t->second].insert(t->first);
      }
      if (types.size() == 1) {
        st.partition_type[it.key()] = *types.begin();
      } else {
        st.partition_problem[it.key()] =
            types.empty() ? absl::StrCat("partition ", it.key(), " has no node of the cluster")
                          : absl::StrCat("partition ", it.key(), " mixes instance types (",
                                         absl::StrJoin(types, ", "),
                                         "); quotas count one type: submit to the partition of "
                                         "one instance group");
      }
    }
    for (const auto& [t, hosts] : hosts_of_type) instances[t] = static_cast<int64_t>(hosts.size());
  } else if (st.engine) {
    for (const auto& c : st.config.capacity) instances[c.name] = c.instances;
  }

  auto config = LoadConfig(store_, catalog_, cluster_id, instances);
  if (!config.ok()) {
    spdlog::warn("governance: configuration of {}: {}", cluster_id, config.status().ToString());
    return json::object();
  }
  std::set<std::string> teams;
  for (const auto& q : config->quotas) teams.insert(q.team);

  json actions = json::array();
  // Teams that left governance (their quota was deleted): their held jobs go back to
  // Slurm's own scheduling.
  for (auto it = st.jobs.begin(); it != st.jobs.end();) {
    if (teams.count(it->second.spec.team)) {
      ++it;
      continue;
    }
    if (it->second.phase == SlurmPhase::kHeld) actions.push_back({{"job", it->first}, {"action", "release"}});
    it = st.jobs.erase(it);
  }

  // A configuration change rebuilds the engine from the jobs it knows: admitted ones keep
  // their quota (a lowered quota evicts nothing), pending ones queue in submission order.
  if (!st.engine || config->key != st.config_key) {
    auto engine = std::make_unique<gov::Engine>();
    Status s = engine->SetCapacity(config->capacity);
    if (s.ok()) s = engine->SetPolicy(config->policy);
    for (const auto& q : config->quotas) {
      if (!s.ok()) break;
      if (Status qs = engine->UpsertQuota(q); !qs.ok()) {
        spdlog::warn("governance: quota of team {} on {}: {}", q.team, cluster_id,
                     std::string(qs.message()));
      }
    }
    if (!s.ok()) {
      spdlog::warn("governance: cluster {}: {}", cluster_id, std::string(s.message()));
      return json::object();
    }
    st.engine = std::move(engine);
    st.config = std::move(*config);
    st.config_key = st.config.key;
    for (auto& [id, job] : st.jobs) {
      job.in_engine = false;
      if (!job.problem.empty() && job.spec.instance_type.empty()) continue;
      job.problem.clear();
      Status js = job.admitted ? st.engine->RestoreAdmitted(job.spec) : st.engine->Submit(job.spec);
      if (js.ok()) {
        job.in_engine = true;
      } else {
        job.admitted = false;
        job.problem = std::string(js.message());
      }
    }
  }
  st.teams = teams;

  if (have_report) {
    std::set<uint64_t> seen;
    for (const auto& r : (*slurm_jobs)["jobs"]) {
      if (!r.is_object() || !r.contains("id") || !r["id"].is_number_unsigned()) continue;
      const uint64_t id = r["id"].get<uint64_t>();
      const std::string account = ReportString(r, "account");
      if (!teams.count(account)) continue;
      seen.insert(id);
      const std::string state = ReportString(r, "state");
      const std::string reason = ReportString(r, "reason");
      const SlurmPhase phase = PhaseOf(state, reason);
      auto [it, fresh] = st.jobs.try_emplace(id);
      ClusterState::Job& job = it->second;
      job.state = state;
      job.reason = reason;
      job.phase = phase;
      if (!fresh) continue;
      job.partition = ReportString(r, "partition");
      job.spec.id = id;
      job.spec.team = account;
      // The QOS names the class: the engine takes "<class>-priority" or "<class>"; the agent
      // reports Slurm's default QOS ("normal") as none.
      job.spec.priority_class = ReportString(r, "qos");
      job.spec.submit_time_ms = static_cast<int64_t>(
          std::clamp(ReportNumber(r, "submit_time", 0.0), 0.0, 1e12) * 1000);
      // Out-of-range counts saturate (and never fit) instead of wrapping to a small gang.
      job.spec.count = static_cast<int32_t>(
          std::clamp(ReportNumber(r, "nodes", 1.0), 1.0, double(INT32_MAX)));
      // A job submitted to several partitions may run in any: they must share one type.
      std::set<std::string> types;
      for (const auto& p : absl::StrSplit(job.partition, ',', absl::SkipEmpty())) {
        const std::string name(p);
        if (auto t = st.partition_type.find(name); t != st.partition_type.end()) {
          types.insert(t->second);
        } else if (auto why = st.partition_problem.find(name); why != st.partition_problem.end()) {
          job.problem = why->second;
        } else {
          job.problem = absl::StrCat("unknown partition ", name);
        }
      }
      if (job.problem.empty() && types.size() != 1) {
        job.problem = absl::StrCat("partitions ", job.partition, " span several instance types");
      }
      if (!job.problem.empty()) continue;
      job.spec.instance_type = *types.begin();
      // Restart safety: before this control plane's first report, a job Slurm runs or has
      // released was admitted by a previous one. Later, only a job already running (it
      // escaped the hold, e.g. submitted before its team was governed) is taken as admitted;
      // an unheld pending one is queued and held again.
      const bool admitted = phase == SlurmPhase::kRunning || phase == SlurmPhase::kStopping ||
                            (!st.seen_report && phase == SlurmPhase::kWaiting);
      Status js = admitted ? st.engine->RestoreAdmitted(job.spec) : st.engine->Submit(job.spec);
      if (js.ok()) {
        job.in_engine = true;
        job.admitted = admitted;
      } else {
        job.problem = std::string(js.message());
      }
    }
    // Jobs Slurm no longer lists ended: their quota is free.
    for (auto it = st.jobs.begin(); it != st.jobs.end();) {
      if (seen.count(it->first)) {
        ++it;
        continue;
      }
      if (it->second.in_engine) (void)st.engine->Remove(it->first);
      it = st.jobs.erase(it);
    }
    st.seen_report = true;

    const gov::CycleResult cycle =
        st.engine->RunCycle(std::chrono::duration_cast<std::chrono::milliseconds>(
                                clock_.now().time_since_epoch())
                                .count());
    for (const auto& a : cycle.admitted) {
      for (const auto& v : a.victims) {
        if (auto it = st.jobs.find(v.victim); it != st.jobs.end()) it->second.admitted = false;
        spdlog::info("governance: cluster {} job {} preempted for job {} ({})", cluster_id,
                     v.victim, v.preemptor, gov::PreemptionReasonName(v.reason));
      }
      if (auto it = st.jobs.find(a.id); it != st.jobs.end()) it->second.admitted = true;
      spdlog::info("governance: cluster {} job {} admitted{}", cluster_id, a.id,
                   a.borrows ? " (borrowing)" : "");
    }

    // What Slurm must do so that it runs exactly what the engine admitted.
    for (const auto& [id, job] : st.jobs) {
      const char* action = nullptr;
      if (job.admitted && job.phase == SlurmPhase::kHeld) {
        action = "release";
      } else if (!job.admitted && job.phase == SlurmPhase::kRunning) {
        action = "requeuehold";
      } else if (!job.admitted && job.phase == SlurmPhase::kWaiting) {
        action = "hold";
      }
      if (action) actions.push_back({{"job", id}, {"action", action}});
    }
  }

  json qos = json::array();
  for (const auto& [name, weight] : st.config.class_weight) {
    qos.push_back({{"name", name + "-priority"}, {"priority", weight}});
  }
  json out = {{"governance", {{"accounts", json(std::vector<std::string>(teams.begin(), teams.end()))},
                              {"qos", std::move(qos)}}}};
  if (!actions.empty()) out["slurm_job_actions"] = std::move(actions);
  return out;
}

StatusOr<json> GovernanceLoop::why(const std::string& cluster_id, uint64_t id) const {
  std::lock_guard lock(mu_);
  auto c = clusters_.find(cluster_id);
  const ClusterState* st = c == clusters_.end() ? nullptr : c->second.get();
  auto j = st ? st->jobs.find(id) : decltype(st->jobs.end()){};
  if (st == nullptr || j == st->jobs.end()) {
    return absl::NotFoundError(absl::StrCat(
        "Job ", id, " is not a governed job of this cluster: Hyperfleet governs the pending "
        "and running jobs of Slurm accounts that have a ComputeQuota (sbatch --account=<team>)."));
  }
  const auto& job = j->second;
  json out = {{"JobId", std::to_string(id)},
              {"Team", job.spec.team},
              {"InstanceType", job.spec.instance_type},
              {"Partition", job.partition},
              {"PriorityClass", job.spec.priority_class},
              {"SlurmState", absl::StrCat(job.state, job.reason.empty() || job.reason == "None"
                                                         ? std::string()
                                                         : " (" + job.reason + ")")}};
  if (!job.in_engine) {
    out["Verdict"] = "Unaccounted";
    out["Reason"] = job.problem;
    out["Text"] = absl::StrCat("job ", id, " (team ", job.spec.team, "): held, Hyperfleet cannot "
                               "account it: ", job.problem, "\n");
    return out;
  }
  HF_ASSIGN_OR_RETURN(gov::WhyPending w, st->engine->Explain(id));
  out["Verdict"] = std::string(gov::VerdictName(w.verdict));
  out["Reason"] = w.reason;
  out["PriorityClass"] = w.priority_class;
  out["Priority"] = w.priority;
  out["JobsAhead"] = w.jobs_ahead;
  out["FirstAhead"] = json::array();
  for (uint64_t a : w.first_ahead) out["FirstAhead"].push_back(std::to_string(a));
  gov::Resources per{};
  for (const auto& t : st->config.capacity) {
    if (t.name == job.spec.instance_type) per = gov::PerInstance(t);
  }
  json resources = json::array();
  std::string instances_line;
  for (int r = 0; r < gov::kNumResources; ++r) {
    const auto& v = w.resources[r];
    json e = {{"Resource", std::string(gov::ResourceName(r))},
              {"Request", v.request},
              {"Nominal", v.nominal},
              {"Usage", v.usage},
              {"BorrowLimit", v.borrow_limit},
              {"Borrowable", v.borrowable},
              {"IdleInCohort", v.idle_in_cohort},
              {"Available", v.available},
              {"Potential", v.potential}};
    if (per[r] > 0) {
      auto inst = [&](int64_t x) { return static_cast<double>(x) / static_cast<double>(per[r]); };
      e["Instances"] = {{"Request", inst(v.request)},       {"Nominal", inst(v.nominal)},
                        {"Usage", inst(v.usage)},           {"BorrowLimit", inst(v.borrow_limit)},
                        {"Borrowable", inst(v.borrowable)}, {"IdleInCohort", inst(v.idle_in_cohort)},
                        {"Available", inst(v.available)},   {"Potential", inst(v.potential)}};
    }
    resources.push_back(std::move(e));
  }
  out["Resources"] = resources;
  // Whole instances are what a Slurm job takes: say it in instances first, on the
  // resource that binds (accelerators when the type has them, else vCPU).
  const int r = per[gov::kAccelerators] > 0 ? gov::kAccelerators : gov::kVCpuMilli;
  if (per[r] > 0) {
    const auto& v = w.resources[r];
    auto n = [&](int64_t x) {
      const double d = static_cast<double>(x) / static_cast<double>(per[r]);
      return std::floor(d) == d ? absl::StrCat(static_cast<int64_t>(d)) : absl::StrCat(d);
    };
    instances_line = absl::StrCat(
        "  instances of ", job.spec.instance_type, ": request ", n(v.request), ", nominal ",
        n(v.nominal), ", in use ", n(v.usage), ", borrow limit ", n(v.borrow_limit),
        ", may borrow now ", n(v.borrowable), ", idle in the cluster ", n(v.idle_in_cohort),
        ", available ", n(v.available), ", at most ever ", n(v.potential), "\n");
  }
  out["Text"] = absl::StrCat(gov::RenderWhyPending(w), instances_line, "  slurm: ", job.state,
                             job.reason.empty() || job.reason == "None" ? "" : " (" + job.reason + ")",
                             job.phase == SlurmPhase::kRunning
                                 ? std::string()
                                 : ", " + std::string(PhaseName(job.phase)),
                             "\n");
  return out;
}

namespace {

constexpr std::string_view kJobsModel = R"({
  "version": "2.0",
  "metadata": {"apiVersion": "2026-11-30", "protocol": "json", "jsonVersion": "1.1",
               "targetPrefix": "Hyperfleet", "signingName": "sagemaker"},
  "operations": {
    "DescribeJobAdmission": {"name": "DescribeJobAdmission",
                             "input": {"shape": "DescribeJobAdmissionRequest"},
                             "output": {"shape": "DescribeJobAdmissionResponse"}}
  },
  "shapes": {
    "DescribeJobAdmissionRequest": {"type": "structure", "required": ["ClusterName", "JobId"],
      "members": {"ClusterName": {"shape": "ClusterNameOrArn"}, "JobId": {"shape": "JobId"}}},
    "DescribeJobAdmissionResponse": {"type": "structure", "members": {}},
    "ClusterNameOrArn": {"type": "string", "min": 1, "max": 256},
    "JobId": {"type": "string", "min": 1, "max": 20, "pattern": "[0-9]+"}
  }
})";

}  // namespace

JobsService::JobsService(store::Store& store, const GovernanceLoop& loop)
    : store_(store), loop_(loop) {
  auto parsed = model::ServiceModel::FromJson(kJobsModel);
  if (!parsed.ok()) std::abort();  // a constant, covered by the unit tests
  model_ = *parsed;
}

StatusOr<json> JobsService::call(std::string_view op, const json& input) {
  if (op != "DescribeJobAdmission") {
    return absl::UnimplementedError(absl::StrCat("Hyperfleet.", std::string(op), " is not implemented"));
  }
  uint64_t id = 0;
  if (!absl::SimpleAtoi(input.value("JobId", ""), &id)) {
    return absl::InvalidArgumentError("JobId must be a Slurm job id (digits)");
  }
  HF_ASSIGN_OR_RETURN(model::Cluster cluster, store_.cluster(input.value("ClusterName", "")));
  HF_ASSIGN_OR_RETURN(json out, loop_.why(cluster.id, id));
  out["ClusterName"] = cluster.name;
  return out;
}

}  // namespace hf::control
