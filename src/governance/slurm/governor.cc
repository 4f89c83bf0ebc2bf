#include "hyperfleet/governance/slurm/governor.h"

#include <algorithm>
#include <climits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace hf::governance::slurm {
namespace {

/// What Slurm must do so that it runs exactly what the engine admitted; nullopt: nothing.
std::optional<JobActionKind> ActionOf(const Governor::Job& job) {
  if (job.admitted) {
    if (job.phase == SlurmPhase::kHeld) return JobActionKind::kRelease;
    return std::nullopt;
  }
  if (job.phase == SlurmPhase::kRunning) return JobActionKind::kRequeueHold;
  if (job.phase == SlurmPhase::kWaiting) return JobActionKind::kHold;
  // Held, but maybe by the user (job_submit.lua, requeuehold): an administrator's hold
  // that the user cannot release, marked as ours.
  if (job.phase == SlurmPhase::kHeld && job.mark != Mark::kHeld) return JobActionKind::kHold;
  return std::nullopt;
}

/// Whether a held job of an account that left governance is held by us, so that it goes
/// back to Slurm's own scheduling ("disown"). Ours carry a mark (a hold action marked them
/// when first seen), so the agent keeps reporting them while held and each report releases
/// them again. A departed job the governor knew (`known`) may have none yet (held by
/// job_submit.lua or requeuehold, the hold action not carried out): it is released once
/// too, from this report's view of it, or the last one's when this one does not list it.
/// An administrator's hold without our mark is an operator's: it stays.
bool HeldByUs(SlurmPhase phase, Mark mark, std::string_view reason, bool known) {
  const bool admin_hold = reason.find("JobHeldAdmin") != std::string_view::npos;
  return phase == SlurmPhase::kHeld && (mark != Mark::kNone || (known && !admin_hold));
}

}  // namespace

std::string_view JobActionName(JobActionKind kind) {
  switch (kind) {
    case JobActionKind::kRelease: return "release";
    case JobActionKind::kRequeueHold: return "requeuehold";
    case JobActionKind::kHold: return "hold";
    case JobActionKind::kDisown: return "disown";
  }
  return "?";
}

Governor::Governor() = default;
Governor::~Governor() = default;
Governor::Governor(Governor&&) noexcept = default;
Governor& Governor::operator=(Governor&&) noexcept = default;

const Governor::Job* Governor::job(uint64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

StatusOr<WhyPending> Governor::Explain(uint64_t id) const {
  if (engine_ == nullptr) return absl::FailedPreconditionError("no engine yet");
  return engine_->Explain(id);
}

void Governor::Track(uint64_t id, const Job& job) {
  if (ActionOf(job)) {
    discordant_.insert(id);
  } else {
    discordant_.erase(id);
  }
}

StatusOr<Actions> Governor::Step(const Config& config, const PartitionMap& partitions,
                                 const Report* report, int64_t now_ms) {
  Actions out;
  std::map<uint64_t, Job> departed = DropUngoverned(config.teams);
  if (!engine_ || config.key != config_.key) HF_RETURN_IF_ERROR(Rebuild(config, out));
  teams_ = config.teams;

  std::set<uint64_t> disowned;
  if (report != nullptr) {
    // A job whose partitions had no type is looked at again when the map changed.
    const bool partitions_changed = !(partitions == partitions_);
    if (partitions_changed) partitions_ = partitions;
    Observe(*report, partitions_changed, departed, disowned);
    Decide(now_ms, out);
    for (uint64_t id : discordant_) {
      if (auto action = ActionOf(jobs_.at(id))) out.jobs.push_back({id, *action});
    }
  }
  for (const auto& [id, job] : departed) {
    if (HeldByUs(job.phase, job.mark, job.reason, true)) disowned.insert(id);
  }
  for (uint64_t id : disowned) out.jobs.push_back({id, JobActionKind::kDisown});
  return out;
}

// Teams that left governance (their quota was deleted): their jobs leave the engine's view.
std::map<uint64_t, Governor::Job> Governor::DropUngoverned(
    const std::set<std::string, std::less<>>& teams) {
  std::map<uint64_t, Job> departed;
  if (teams == teams_) return departed;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (teams.count(it->second.spec.team)) {
      ++it;
      continue;
    }
    discordant_.erase(it->first);
    departed.emplace(it->first, std::move(it->second));
    it = jobs_.erase(it);
  }
  return departed;
}

// A configuration change rebuilds the engine from the jobs it knows: admitted ones keep
// their quota (a lowered quota evicts nothing), pending ones queue in submission order.
Status Governor::Rebuild(const Config& config, Actions& out) {
  auto engine = std::make_unique<Engine>();
  Status s = engine->SetCapacity(config.capacity);
  if (s.ok()) s = engine->SetPolicy(config.policy);
  for (const auto& q : config.quotas) {
    if (!s.ok()) break;
    if (Status qs = engine->UpsertQuota(q); !qs.ok()) {
      out.refused_quotas.emplace_back(q.team, std::string(qs.message()));
    }
  }
  HF_RETURN_IF_ERROR(s);
  engine_ = std::move(engine);
  config_ = config;
  // In id order, as the engine saw them before (equal submission times tie by id).
  std::vector<uint64_t> ids;
  ids.reserve(jobs_.size());
  for (const auto& [id, job] : jobs_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    Job& job = jobs_[id];
    job.in_engine = false;
    if (!job.problem.empty() && job.spec.instance_type.empty()) continue;
    job.problem.clear();
    Status js = job.admitted ? engine_->RestoreAdmitted(job.spec) : engine_->Submit(job.spec);
    if (js.ok()) {
      job.in_engine = true;
    } else {
      job.admitted = false;
      job.problem = std::string(js.message());
    }
    Track(id, job);
  }
  return absl::OkStatus();
}

void Governor::Observe(const Report& report, bool partitions_changed,
                       std::map<uint64_t, Job>& departed, std::set<uint64_t>& disowned) {
  const uint64_t n = ++reports_;
  size_t listed = 0;  // known jobs this report lists
  for (const ReportedJob& rj : report.jobs) {
    if (!teams_.count(rj.account)) {
      // Held by us for an account that is no longer governed: Slurm schedules it alone
      // now. Other holds are an operator's (or the user's own) and stay.
      const bool known = departed.erase(rj.id) > 0;
      if (HeldByUs(PhaseOf(rj.state, rj.reason), rj.mark, rj.reason, known)) {
        disowned.insert(rj.id);
      }
      continue;
    }
    ObserveJob(rj, n, partitions_changed, listed);
  }
  EndUnlisted(n, listed);
  seen_report_ = true;
}

// One governed job of report `report`: unchanged, changed state, changed request or new.
void Governor::ObserveJob(const ReportedJob& rj, uint64_t report, bool partitions_changed,
                          size_t& listed) {
  auto [it, fresh] = jobs_.try_emplace(rj.id);
  Job& job = it->second;
  if (job.seen != report) ++listed;
  // Out-of-range counts saturate (and never fit) instead of wrapping to a small gang.
  const int32_t nodes = static_cast<int32_t>(std::clamp(rj.nodes, 1.0, double(INT32_MAX)));
  const int64_t submit_ms = static_cast<int64_t>(std::clamp(rj.submit_time, 0.0, 1e12) * 1000);
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
    const bool stopping = PhaseOf(rj.state, rj.reason) == SlurmPhase::kStopping;
    if (!(partitions_changed && partition_problem) && job.spec.team == rj.account &&
        (job.spec.count == nodes || stopping) && job.spec.priority_class == rj.qos &&
        job.partition == rj.partition) {
      job.seen = report;
      if (job.mark == rj.mark && job.state == rj.state && job.reason == rj.reason) {
        return;  // unchanged: the common case
      }
      job.state = rj.state;
      job.reason = rj.reason;
      job.phase = PhaseOf(rj.state, rj.reason);
      job.mark = rj.mark;
      Track(rj.id, job);
      return;
    }
    if (job.in_engine) (void)engine_->Remove(rj.id);
    discordant_.erase(rj.id);
    // It keeps its place (scontrol update keeps the submit time; a requeue resets it).
    queued_ms = job.spec.submit_time_ms;
    job = Job{};
  }
  job.seen = report;
  job.state = rj.state;
  job.reason = rj.reason;
  job.phase = PhaseOf(rj.state, rj.reason);
  job.mark = rj.mark;
  job.partition = rj.partition;
  job.spec.id = rj.id;
  job.spec.team = rj.account;
  // The QOS names the class: the engine takes "<class>-priority" or "<class>"; the agent
  // reports Slurm's default QOS ("normal") as none.
  job.spec.priority_class = rj.qos;
  job.spec.submit_time_ms = queued_ms;
  job.spec.count = nodes;
  Place(job);
  Track(rj.id, job);
}

// A new (or changed) job: its instance type from its partitions, then into the engine.
void Governor::Place(Job& job) {
  // A job submitted to several partitions may run in any: they must share one type.
  std::set<std::string> types;
  for (const auto& p : absl::StrSplit(job.partition, ',', absl::SkipEmpty())) {
    const std::string name(p);
    if (auto t = partitions_.type.find(name); t != partitions_.type.end()) {
      types.insert(t->second);
    } else if (auto why = partitions_.problem.find(name); why != partitions_.problem.end()) {
      job.problem = why->second;
    } else {
      job.problem = absl::StrCat("unknown partition ", name);
    }
  }
  if (job.problem.empty() && types.size() != 1) {
    job.problem = absl::StrCat("partitions ", job.partition, " span several instance types");
  }
  if (!job.problem.empty()) return;
  job.spec.instance_type = *types.begin();
  // Restart safety: before this Governor's first report, a job Slurm runs or has released
  // was admitted by a previous control plane. Later, only a job already running (it
  // escaped the hold, e.g. submitted before its team was governed) is taken as admitted;
  // an unheld pending one is queued and held again.
  const bool admitted = job.phase == SlurmPhase::kRunning ||
                        job.phase == SlurmPhase::kStopping ||
                        (!seen_report_ && job.phase == SlurmPhase::kWaiting);
  Status js = admitted ? engine_->RestoreAdmitted(job.spec) : engine_->Submit(job.spec);
  if (js.ok()) {
    job.in_engine = true;
    job.admitted = admitted;
  } else {
    job.problem = std::string(js.message());
  }
}

// Jobs Slurm no longer lists ended: their quota is free (in id order, as the engine saw
// them before). Nothing to look for when the report listed every known job.
void Governor::EndUnlisted(uint64_t report, size_t listed) {
  if (listed == jobs_.size()) return;
  std::vector<uint64_t> ended;
  for (const auto& [id, job] : jobs_) {
    if (job.seen != report) ended.push_back(id);
  }
  std::sort(ended.begin(), ended.end());
  for (uint64_t id : ended) {
    auto it = jobs_.find(id);
    if (it->second.in_engine) (void)engine_->Remove(id);
    discordant_.erase(id);
    jobs_.erase(it);
  }
}

// A cycle; its admissions and preemptions become the jobs' decisions.
void Governor::Decide(int64_t now_ms, Actions& out) {
  CycleResult cycle = engine_->RunCycle(now_ms);
  for (const auto& a : cycle.admitted) {
    for (const auto& v : a.victims) {
      if (auto it = jobs_.find(v.victim); it != jobs_.end()) {
        it->second.admitted = false;
        Track(v.victim, it->second);
      }
    }
    if (auto it = jobs_.find(a.id); it != jobs_.end()) {
      it->second.admitted = true;
      Track(a.id, it->second);
    }
  }
  out.admitted = std::move(cycle.admitted);
}

}  // namespace hf::governance::slurm
