#include "hyperfleet/control/governance_loop.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/governance/engine.h"
#include "hyperfleet/model/governance.h"
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

/// Hyperfleet's mark in a job's AdminComment (agent/slurm_jobs.h kMarkGoverned, kMarkHeld):
/// only root and SlurmUser set it, so a marked hold is ours and an unmarked one an operator's.
enum class Mark : uint8_t {
  kNone,
  kGoverned,  ///< ours; the hold may still be the user's (job_submit.lua, requeuehold)
  kHeld,      ///< ours, and an administrator's hold (set with priority 0 in one update)
};

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
    Mark mark = Mark::kNone;    ///< AdminComment, as last reported
    std::string partition;
    uint64_t seen = 0;          ///< the report (ClusterState::reports) that last listed it
  };
  std::mutex mu;  ///< one heartbeat or why() of this cluster at a time
  std::unique_ptr<gov::Engine> engine;
  std::string config_key;
  Config config;
  std::set<std::string> teams;  ///< governed accounts
  std::unordered_map<uint64_t, Job> jobs;
  /// Jobs whose Slurm state differs from the decision (ActionOf is not null): the response's
  /// job actions, kept up to date as jobs change so that no heartbeat scans every job.
  std::set<uint64_t> discordant;
  std::map<std::string, std::string> partition_type;  ///< partition -> its instance type
  std::map<std::string, std::string> partition_problem;  ///< partition -> why it has none
  std::map<std::string, int64_t> instances;  ///< instance type -> nodes in Slurm's partitions
  json partitions;  ///< the report's "partitions" the three maps above were derived from
  std::map<std::string, std::string> node_types;  ///< the store's nodes: name -> type
  int64_t nodes_revision = 0;  ///< the cluster's store revision node_types was read at
  uint64_t reports = 0;  ///< reports handled
  bool seen_report = false;  ///< a report arrived since this control plane started

  /// Records `job`'s new decision or Slurm state in `discordant`.
  void Track(uint64_t id, const Job& job) {
    if (ActionOf(job)) {
      discordant.insert(id);
    } else {
      discordant.erase(id);
    }
  }

  /// What Slurm must do so that it runs exactly what the engine admitted; null: nothing.
  static const char* ActionOf(const Job& job) {
    if (job.admitted) return job.phase == SlurmPhase::kHeld ? "release" : nullptr;
    if (job.phase == SlurmPhase::kRunning) return "requeuehold";
    if (job.phase == SlurmPhase::kWaiting) return "hold";
    // Held, but maybe by the user (job_submit.lua, requeuehold): an administrator's hold
    // that the user cannot release, marked as ours.
    if (job.phase == SlurmPhase::kHeld && job.mark != Mark::kHeld) return "hold";
    return nullptr;
  }
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

// One job entry of an agent's report, its members read in one pass (the hot path: every
// governed job, every second). Strings are "" and numbers their default when missing or of
// another type; the references point into the report.
struct ReportedJob {
  const json* id = nullptr;
  const std::string* account;
  const std::string* state;
  const std::string* reason;
  const std::string* qos;
  const std::string* partition;
  Mark mark = Mark::kNone;
  double nodes = 1.0;
  double submit_time = 0.0;
};

ReportedJob ReadReportedJob(const json& r) {
  static const std::string kNone;
  ReportedJob j{nullptr, &kNone, &kNone, &kNone, &kNone, &kNone};
  for (auto it = r.begin(); it != r.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (key == "account") j.account = &s;
      else if (key == "state") j.state = &s;
      else if (key == "reason") j.reason = &s;
      else if (key == "qos") j.qos = &s;
      else if (key == "partition") j.partition = &s;
      else if (key == "mark")
        j.mark = s == "hyperfleet-held"       ? Mark::kHeld
                 : s == "hyperfleet-governed" ? Mark::kGoverned
                                              : Mark::kNone;
    } else if (v.is_number()) {
      if (key == "id") j.id = &v;
      else if (key == "nodes") j.nodes = v.get<double>();
      else if (key == "submit_time") j.submit_time = v.get<double>();
    }
  }
  return j;
}

}  // namespace

std::shared_ptr<GovernanceLoop::ClusterState> GovernanceLoop::state(const std::string& cluster_id,
                                                                   bool create) const {
  std::lock_guard lock(mu_);
  auto it = clusters_.find(cluster_id);
  if (it != clusters_.end()) return it->second;
  if (!create) return nullptr;
  auto st = std::make_shared<ClusterState>();
  clusters_.emplace(cluster_id, st);
  return st;
}

void GovernanceLoop::forget(const std::string& cluster_id) {
  // A heartbeat still running on the state finishes on its own copy, then it is freed.
  std::lock_guard lock(mu_);
  clusters_.erase(cluster_id);
}

json GovernanceLoop::onHeartbeat(const std::string& cluster_id, const json* slurm_jobs) {
  const std::shared_ptr<ClusterState> slot = state(cluster_id, true);
  ClusterState& st = *slot;
  std::lock_guard lock(st.mu);

  // Partitions -> instance types, from the nodes Slurm has and the store's nodes; derived
  // again only when either changed.
  const bool have_report = slurm_jobs != nullptr && slurm_jobs->is_object() &&
                           slurm_jobs->contains("jobs") && (*slurm_jobs)["jobs"].is_array();
  std::map<std::string, int64_t> instances;
  bool partitions_changed = false;  // partition -> type derived anew in this heartbeat
  if (have_report) {
    // The store's nodes are read again only when the cluster's revision moved (it moves
    // with every write of its nodes).
    auto cluster = store_.clusterById(cluster_id);
    const int64_t revision = cluster.ok() ? cluster->revision : -1;  // -1: read every time
    bool nodes_changed = !st.seen_report || revision < 0 || revision != st.nodes_revision;
    if (nodes_changed) {
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
      nodes_changed = !st.seen_report || type_of != st.node_types;
      st.node_types = std::move(type_of);
      st.nodes_revision = revision;
    }
    const std::map<std::string, std::string>& type_of = st.node_types;
    const json empty = json::object();
    auto partitions_it = slurm_jobs->find("partitions");
    const json& partitions = partitions_it != slurm_jobs->end() && partitions_it->is_object()
                                 ? *partitions_it
                                 : empty;
    if (nodes_changed || partitions != st.partitions) {
      partitions_changed = true;
      st.partition_type.clear();
      st.partition_problem.clear();
      st.instances.clear();
      std::map<std::string, std::set<std::string>> hosts_of_type;
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
                                           "); quotas count one type: submit to the partition "
                                           "of one instance group");
        }
      }
      for (const auto& [t, hosts] : hosts_of_type) {
        st.instances[t] = static_cast<int64_t>(hosts.size());
      }
      st.partitions = partitions;
    }
    instances = st.instances;
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
  // Slurm's own scheduling ("disown"). Ours carry a mark (a hold action marked them when
  // first seen), so the agent keeps reporting them while held and each report releases
  // them again below. A departed job the loop knew may have none yet (held by
  // job_submit.lua or requeuehold, the hold action not carried out): it is released once
  // too, from this report's view of it, or the last one's when this one does not list it.
  // An administrator's hold without our mark is an operator's: it stays.
  auto ours = [](SlurmPhase phase, Mark mark, const std::string& reason, bool known) {
    return phase == SlurmPhase::kHeld &&
           (mark != Mark::kNone || (known && !absl::StrContains(reason, "JobHeldAdmin")));
  };
  std::set<uint64_t> disowned;
  std::map<uint64_t, ClusterState::Job> departed;
  if (teams != st.teams) {
    for (auto it = st.jobs.begin(); it != st.jobs.end();) {
      if (teams.count(it->second.spec.team)) {
        ++it;
        continue;
      }
      st.discordant.erase(it->first);
      departed.emplace(it->first, std::move(it->second));
      it = st.jobs.erase(it);
    }
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
    // In id order, as the engine saw them before (equal submission times tie by id).
    std::vector<uint64_t> ids;
    ids.reserve(st.jobs.size());
    for (const auto& [id, job] : st.jobs) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (uint64_t id : ids) {
      auto& job = st.jobs[id];
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
      st.Track(id, job);
    }
  }
  st.teams = teams;

  if (have_report) {
    const uint64_t report = ++st.reports;
    size_t listed = 0;  // known jobs this report lists
    for (const auto& r : (*slurm_jobs)["jobs"]) {
      if (!r.is_object()) continue;
      const ReportedJob rj = ReadReportedJob(r);
      if (rj.id == nullptr || !rj.id->is_number_unsigned()) continue;
      const uint64_t id = rj.id->get<uint64_t>();
      const std::string& account = *rj.account;
      const std::string& state = *rj.state;
      const std::string& reason = *rj.reason;
      const Mark mark = rj.mark;
      if (!teams.count(account)) {
        // Held by us for an account that is no longer governed: Slurm schedules it alone
        // now. Other holds are an operator's (or the user's own) and stay.
        const bool known = departed.erase(id) > 0;
        if (ours(PhaseOf(state, reason), mark, reason, known)) disowned.insert(id);
        continue;
      }
      auto [it, fresh] = st.jobs.try_emplace(id);
      ClusterState::Job& job = it->second;
      if (job.seen != report) ++listed;
      // Out-of-range counts saturate (and never fit) instead of wrapping to a small gang.
      const int32_t nodes =
          static_cast<int32_t>(std::clamp(rj.nodes, 1.0, double(INT32_MAX)));
      const int64_t submit_ms =
          static_cast<int64_t>(std::clamp(rj.submit_time, 0.0, 1e12) * 1000);
      int64_t queued_ms = submit_ms;  // its place in the queue
      if (!fresh) {
        // The job's owner may change a pending job's account, QOS, partitions or node count
        // (scontrol update), also after its release; a reused id is another job. The engine
        // must then decide it anew, or Slurm runs a request the engine never admitted. The
        // submit time is no sign of change: Slurm resets it when it requeues a job (a
        // preemption's requeuehold), and a victim keeps its place in the queue.
        // A job whose partitions had no type (nodes not known yet, mixed types) is looked
        // at again when the partition map changed.
        const bool partition_problem = job.spec.instance_type.empty() && !job.problem.empty();
        // While a job stops (COMPLETING after a requeue), Slurm's node count is the nodes
        // still completing, not its request: no change.
        const bool stopping = PhaseOf(state, reason) == SlurmPhase::kStopping;
        if (!(partitions_changed && partition_problem) && job.spec.team == account &&
            (job.spec.count == nodes || stopping) &&
            job.spec.priority_class == *rj.qos && job.partition == *rj.partition) {
          job.seen = report;
          if (job.mark == mark && job.state == state && job.reason == reason) {
            continue;  // unchanged: the common case
          }
          job.state = state;
          job.reason = reason;
          job.phase = PhaseOf(state, reason);
          job.mark = mark;
          st.Track(id, job);
          continue;
        }
        if (job.in_engine) (void)st.engine->Remove(id);
        st.discordant.erase(id);
        // It keeps its place (scontrol update keeps the submit time; a requeue resets it).
        queued_ms = job.spec.submit_time_ms;
        job = ClusterState::Job{};
      }
      const SlurmPhase phase = PhaseOf(state, reason);
      job.seen = report;
      job.state = state;
      job.reason = reason;
      job.phase = phase;
      job.mark = mark;
      job.partition = *rj.partition;
      job.spec.id = id;
      job.spec.team = account;
      // The QOS names the class: the engine takes "<class>-priority" or "<class>"; the agent
      // reports Slurm's default QOS ("normal") as none.
      job.spec.priority_class = *rj.qos;
      job.spec.submit_time_ms = queued_ms;
      job.spec.count = nodes;
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
      if (job.problem.empty()) {
        job.spec.instance_type = *types.begin();
        // Restart safety: before this control plane's first report, a job Slurm runs or has
        // released was admitted by a previous one. Later, only a job already running (it
        // escaped the hold, e.g. submitted before its team was governed) is taken as
        // admitted; an unheld pending one is queued and held again.
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
      st.Track(id, job);
    }
    // Jobs Slurm no longer lists ended: their quota is free (in id order, as the engine
    // saw them before). Nothing to look for when the report listed every known job.
    if (listed != st.jobs.size()) {
      std::vector<uint64_t> ended;
      for (const auto& [id, job] : st.jobs) {
        if (job.seen != report) ended.push_back(id);
      }
      std::sort(ended.begin(), ended.end());
      for (uint64_t id : ended) {
        auto it = st.jobs.find(id);
        if (it->second.in_engine) (void)st.engine->Remove(id);
        st.discordant.erase(id);
        st.jobs.erase(it);
      }
    }
    st.seen_report = true;

    const gov::CycleResult cycle =
        st.engine->RunCycle(std::chrono::duration_cast<std::chrono::milliseconds>(
                                clock_.now().time_since_epoch())
                                .count());
    for (const auto& a : cycle.admitted) {
      for (const auto& v : a.victims) {
        if (auto it = st.jobs.find(v.victim); it != st.jobs.end()) {
          it->second.admitted = false;
          st.Track(v.victim, it->second);
        }
        spdlog::info("governance: cluster {} job {} preempted for job {} ({})", cluster_id,
                     v.victim, v.preemptor, gov::PreemptionReasonName(v.reason));
      }
      if (auto it = st.jobs.find(a.id); it != st.jobs.end()) {
        it->second.admitted = true;
        st.Track(a.id, it->second);
      }
      spdlog::info("governance: cluster {} job {} admitted{}", cluster_id, a.id,
                   a.borrows ? " (borrowing)" : "");
    }

    // What Slurm must do so that it runs exactly what the engine admitted.
    for (uint64_t id : st.discordant) {
      if (const char* action = ClusterState::ActionOf(st.jobs.at(id))) {
        actions.push_back({{"job", id}, {"action", action}});
      }
    }
  }
  for (const auto& [id, job] : departed) {
    if (ours(job.phase, job.mark, job.reason, true)) disowned.insert(id);
  }
  for (uint64_t id : disowned) actions.push_back({{"job", id}, {"action", "disown"}});

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
  const std::shared_ptr<ClusterState> st = state(cluster_id, false);
  std::unique_lock<std::mutex> lock;
  if (st) lock = std::unique_lock(st->mu);
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

}  // namespace hf::control
