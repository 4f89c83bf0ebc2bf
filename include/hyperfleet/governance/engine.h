#pragma once
// The task-governance admission engine: HyperPod's ClusterSchedulerConfig / ComputeQuota
// semantics (which HyperPod implements with Kueue v0.19.2) decided by our own, in-memory,
// incremental algorithm. A pure component: configuration and workload events in, admissions,
// preemptions and "why pending" explanations out. No clocks, no I/O, no threads: the caller
// injects every timestamp and owns persistence. See docs/governance.md for the semantics and
// their sources.
//
// Model (flat, one cohort per cluster):
//  - a *flavor* is an instance type; its resources are accelerators, vCPU and memory;
//  - a *team* holds one ComputeQuota: a nominal quota per flavor, a lend/borrow strategy, a
//    borrow limit, a fair-share weight and a PreemptTeamTasks policy;
//  - a *workload* is a gang: `count` pods on one instance type, each a whole instance unless
//    per-pod resources are given; it is admitted whole or not at all.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::governance {

/// The resources quota is accounted in, per instance type.
enum Resource : int {
  kAccelerators = 0,  ///< GPUs or Neuron devices (whole devices)
  kVCpuMilli = 1,     ///< vCPU in thousandths of a vCPU
  kMemoryMiB = 2,     ///< memory in MiB
};
inline constexpr int kNumResources = 3;
/// "accelerators", "vcpu" or "memory".
std::string_view ResourceName(int r);

/// An amount of each resource (units as in Resource). Saturating arithmetic is the caller's
/// concern; quantities in this engine stay far below 2^62.
using Resources = std::array<int64_t, kNumResources>;

/// One instance type of the cluster: the capacity of one instance and how many the cluster
/// has. Usually filled from hf::model::InstanceCatalog (vcpus, memory_gib,
/// accelerator_count) and the instance groups' counts.
struct InstanceTypeCapacity {
  std::string name;        ///< e.g. "ml.p5.48xlarge"
  int vcpus = 0;           ///< per instance
  double memory_gib = 0;   ///< per instance
  int accelerators = 0;    ///< per instance
  int64_t instances = 0;   ///< instances of this type in the cluster (for IdleResourceSharing
                           ///< and the over-quota report); may be 0
};

/// Lend / borrow strategy of a team (HyperPod ResourceSharingConfig.Strategy).
enum class SharingStrategy { kLendAndBorrow, kLend, kDontLend };
/// PreemptTeamTasks: may a team's higher-priority task preempt its own lower-priority one.
enum class PreemptTeamTasks { kLowerPriority, kNever };

/// One ComputeQuotaResourceConfig entry: an instance type and an amount. With `count`, the
/// amount is count × the instance's capacity, and any field also given overrides that
/// resource. Without `count`, the first of accelerators / vcpu / memory_gib given sets a
/// fraction of one instance and the missing resources follow that ratio (HyperPod's ratio
/// fill: "16 of 32 accelerators gives 0.5 of vCPU and memory"); accelerators are 0 when only
/// vcpu or memory is given. Amounts round down to the engine's units.
struct QuotaResource {
  std::string instance_type;
  std::optional<int64_t> count;
  std::optional<double> accelerators;
  std::optional<double> vcpu;
  std::optional<double> memory_gib;
};

/// A team's ComputeQuota (HyperPod doc: ComputeQuotaConfig + ComputeQuotaTarget).
struct TeamQuota {
  std::string team;                         ///< ComputeQuotaTarget.TeamName
  std::vector<QuotaResource> resources;     ///< ComputeQuotaResources (≤ 15)
  SharingStrategy strategy = SharingStrategy::kLendAndBorrow;
  /// BorrowLimit, percent of the team's own nominal quota per resource (0..10000). HyperPod
  /// doc scenario 3 shows borrowingLimit = nominal × BorrowLimit / 100.
  int borrow_limit_percent = 50;
  /// AbsoluteBorrowLimits: per instance type, absolute caps that replace the percentage for
  /// the resources they set (same filling rules as `resources`).
  std::vector<QuotaResource> absolute_borrow_limits;
  int fair_share_weight = 0;                ///< 0..100; 0 = last to borrow, first preempted
  bool active = true;                       ///< ActivationState=Enabled
  PreemptTeamTasks preempt_team_tasks = PreemptTeamTasks::kLowerPriority;
};

/// A PriorityClass of the ClusterSchedulerConfig.
struct PriorityClass {
  std::string name;  ///< jobs may name it as "<name>" or "<name>-priority"
  int weight = 0;    ///< 0..100, higher runs first
};

/// The ClusterSchedulerConfig's SchedulerConfig.
struct SchedulerPolicy {
  std::vector<PriorityClass> priority_classes;  ///< ≤ 10; none: first come, first served
  bool fair_share = true;             ///< FairShare=Enabled (default) / Disabled (FCFS)
  bool idle_resource_sharing = false; ///< unallocated capacity is lent to the cohort
};

/// A workload (a job) as submitted.
struct WorkloadSpec {
  uint64_t id = 0;                 ///< caller's unique id
  std::string team;
  std::string priority_class;      ///< "" = priority 0
  int64_t submit_time_ms = 0;      ///< queue order within a class (injected time)
  std::string instance_type;
  int32_t count = 1;               ///< pods (instances for whole-instance pods), ≥ 1
  /// Per-pod resources for sub-instance pods; nullopt = each pod takes a whole instance.
  std::optional<Resources> per_pod;
};

/// Why the engine chose a victim (Kueue's Preempted condition reasons).
enum class PreemptionReason {
  kInClusterQueue,        ///< same team, strictly lower priority (PreemptTeamTasks)
  kReclaim,               ///< a lender takes back its nominal quota, regardless of priority
  kFairSharing,           ///< the victim's team has a larger weighted dominant share
};
std::string_view PreemptionReasonName(PreemptionReason r);

/// One eviction decided in a cycle: `victim` must stop (and be requeued) before `preemptor`
/// starts. Its quota is already released in the engine.
struct Preemption {
  uint64_t victim = 0;
  uint64_t preemptor = 0;
  PreemptionReason reason = PreemptionReason::kReclaim;
};

/// One admission decided in a cycle; `victims` (possibly empty) lists the preemptions it
/// relies on, in the order they were chosen.
struct Admission {
  uint64_t id = 0;
  bool borrows = false;                  ///< the team is above nominal after it
  std::vector<Preemption> victims;
};

/// What one RunCycle decided.
struct CycleResult {
  std::vector<Admission> admitted;       ///< in decision order
  std::vector<uint64_t> never_fits;      ///< newly classified as never fitting
  int64_t considered = 0;                ///< pending workloads examined
};

/// The verdict for a workload.
enum class Verdict {
  kAdmitted,
  kNeverFits,        ///< larger than the team could ever get under this configuration
  kTeamInactive,     ///< ActivationState=Disabled or the quota was deleted
  kWaiting,          ///< fits the team's potential; waits for quota to free up
  kNotConsidered,    ///< submitted since the last cycle
};
std::string_view VerdictName(Verdict v);

/// The quota arithmetic of one resource for a pending workload's team and instance type.
struct ResourceQuotaView {
  int64_t request = 0;        ///< the workload's request
  int64_t nominal = 0;        ///< the team's nominal quota
  int64_t usage = 0;          ///< the team's admitted usage
  int64_t borrow_limit = 0;   ///< how far above nominal the team may go
  int64_t borrowable = 0;     ///< what it may borrow now: min(limit left, idle in cohort)
  int64_t idle_in_cohort = 0; ///< quota other teams lend (and unallocated capacity) not in use
  int64_t available = 0;      ///< the most it could be admitted now without preemption
  int64_t potential = 0;      ///< the most it could ever be admitted (NeverFits bound)
};

/// Why a workload is (not) admitted. Produced by Engine::Explain.
struct WhyPending {
  uint64_t id = 0;
  std::string team;
  std::string instance_type;
  std::string priority_class;
  int priority = 0;
  Verdict verdict = Verdict::kNotConsidered;
  std::string reason;                       ///< one sentence
  std::array<ResourceQuotaView, kNumResources> resources{};
  int64_t jobs_ahead = 0;                   ///< pending jobs of the team ordered before it
  std::vector<uint64_t> first_ahead;        ///< up to 10 of them, in order
};

/// Human-readable rendering of `why` (several lines, ends with '\n'), as printed by
/// `hyperfleet jobs why <job>`. vCPU and memory print in vCPU and GiB.
std::string RenderWhyPending(const WhyPending& why);

/// Per-instance-type excess of the summed nominal quotas over the cluster's capacity
/// (HyperPod accepts such quotas; the excess is reported).
struct QuotaExcess {
  std::string instance_type;
  Resources nominal_sum{};
  Resources capacity{};
};

/// The engine. Not thread-safe: one per cluster, driven from one thread. Every method is
/// deterministic given the sequence of calls.
class Engine {
 public:
  Engine();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Sets the cluster's instance types. Must name every type quotas and workloads use.
  /// Errors: InvalidArgument (empty or duplicate name, negative figures); FailedPrecondition
  /// when a type in use by a quota or workload disappears.
  Status SetCapacity(const std::vector<InstanceTypeCapacity>& types);
  /// Sets the cluster policy. Re-orders every queue. Errors: InvalidArgument (> 10 classes,
  /// weight outside 0..100, duplicate name).
  Status SetPolicy(const SchedulerPolicy& policy);
  /// Creates or replaces a team's quota. Lowering a quota never evicts (Kueue semantics);
  /// it only stops new borrowing. Errors: InvalidArgument naming the field (unknown
  /// instance type, duplicate type, negative amount, ranges, > 15 entries).
  Status UpsertQuota(const TeamQuota& quota);
  /// Deletes a team's quota: its capacity leaves the cohort at once; its running workloads
  /// keep running as borrowers (reclaimable); its pending ones wait. NotFound if unknown.
  Status RemoveQuota(std::string_view team);

  /// Queues a workload. Errors: AlreadyExists (id), NotFound (team without quota ever),
  /// InvalidArgument (unknown instance type or priority class, count < 1, negative per_pod).
  Status Submit(const WorkloadSpec& spec);
  /// Restores an already-admitted workload (snapshot load); its usage counts at once even
  /// above quota. Same errors as Submit.
  Status RestoreAdmitted(const WorkloadSpec& spec);
  /// Finishes, cancels or deletes a workload, releasing its quota. NotFound if unknown.
  Status Remove(uint64_t id);

  /// One scheduling cycle at injected time `now_ms`: decides every pending workload that an
  /// event since the last cycle may have made admissible. Admitted workloads and victims
  /// take effect in the engine immediately.
  CycleResult RunCycle(int64_t now_ms);

  /// Why `id` is or is not admitted. NotFound if unknown.
  StatusOr<WhyPending> Explain(uint64_t id) const;

  /// The team's usage of an instance type (for checkers and status). Zero when unknown.
  Resources Usage(std::string_view team, std::string_view instance_type) const;
  /// The team's nominal quota of an instance type as the engine computed it.
  Resources Nominal(std::string_view team, std::string_view instance_type) const;
  /// Instance types whose summed nominal quota exceeds the cluster's capacity.
  std::vector<QuotaExcess> QuotaExcessReport() const;
  /// Number of pending (including never-fit) and admitted workloads.
  int64_t PendingCount() const;
  int64_t AdmittedCount() const;
  /// Bytes the engine holds for its workloads and queues (approximate, for the benchmark).
  int64_t ApproxWorkloadBytes() const;
  /// Verifies the engine's incremental indexes (per-type borrower sets and their order by
  /// weighted share, pending equivalence classes, queue summaries, per-class admitted
  /// usage, counters) against a recomputation from scratch. For tests: O(workloads + teams²
  /// × types). Internal error naming the first mismatch.
  Status CheckConsistency() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Resolves a QuotaResource to amounts given one instance's capacity (the ratio fill rules
/// of QuotaResource). Errors: InvalidArgument naming `field` when nothing is set, a value is
/// negative, or accelerators are asked of a type without accelerators.
StatusOr<Resources> ResolveQuotaResource(const QuotaResource& q, const Resources& per_instance,
                                         std::string_view field);

/// One instance's capacity in engine units.
Resources PerInstance(const InstanceTypeCapacity& t);

}  // namespace hf::governance
