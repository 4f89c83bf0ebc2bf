#pragma once
// An independent checker of the governance invariants (numbered below).
// It mirrors the configuration and every workload from the events it is told about and the
// engine's decisions, with its own quota arithmetic written from the HyperPod / Kueue
// definitions (it calls nothing of the engine but Engine::Usage, to compare usage), and
// checks after every cycle:
//   1 capacity (team: usage ≤ nominal + borrow limit; cohort: borrowed ≤ lendable idle;
//     physical capacity when quotas fit the cluster), 2 lending (DontLend lends nothing,
//     Lend never exceeds nominal), 3 usage conservation, 4 ordering within a team (in a
//     cycle without evictions on the type, nothing is admitted past an earlier, no larger
//     workload of the same team and type; BestEffortFIFO lets a job pass one that was
//     inadmissible when tried),
//   5 preemption legality, 6 preemption minimality, 7 no ping-pong, 8 lender reclaim
//     (nothing that fits in the team's unused nominal stays pending), 11 gangs whole,
//   13 a disabled team admits nothing. Determinism (12) is checked by the tests by
//     replaying a trace twice.
//
// Cost. The cohort sums (what teams borrow, what lenders leave idle, summed nominal quotas)
// are kept per instance type as the checker's own incremental tallies, updated on every
// usage or quota change it mirrors, so a capacity or fair-share check costs O(types), not
// O(teams). The tallies are derived only from the events and decisions above, never from
// the engine's indexes. A full check (CheckCycle with `full`, Recount) recomputes usage,
// pending counts, queues and tallies from the workloads and quotas from scratch and reports
// any difference from the incremental state as a violation, so a bug in the incremental
// path is itself caught. The lender-reclaim check runs every cycle on the queues whose
// team, usage or jobs changed since the previous check, and on every queue in a full check.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hyperfleet/governance/engine.h"

namespace hf::governance {

class InvariantChecker {
 public:
  /// Starts with the cluster's instance types and policy.
  InvariantChecker(std::vector<InstanceTypeCapacity> types, SchedulerPolicy policy);

  /// Configuration events, told after the engine accepted them.
  void SetPolicy(const SchedulerPolicy& policy);
  void UpsertQuota(const TeamQuota& quota);
  void RemoveQuota(const std::string& team);
  /// Workload events, told after the engine accepted them.
  void Submitted(const WorkloadSpec& spec);
  void Removed(uint64_t id);

  /// Checks one cycle's decisions (in order) against the mirrored state, then the
  /// end-of-cycle invariants on the teams, types and queues the cycle or the events since
  /// the previous cycle touched; compares their usage with `engine`. `full` also runs
  /// Recount(), compares every team's usage with `engine` and checks every pending queue.
  /// A cycle after which no workload holds quota (the end of a trace) runs Recount() too.
  void CheckCycle(const CycleResult& result, const Engine& engine, bool full = true);

  /// Recomputes every team's usage and pending count, the queues of jobs not admitted and
  /// the per-type cohort tallies from the mirrored workloads and quotas, from scratch;
  /// each difference from the incremental state is a violation, after which the recount
  /// replaces it. Returns true when everything matched. O(workloads + teams × types).
  bool Recount();

  int64_t violations() const { return violations_; }
  /// The first violations, one line each.
  const std::vector<std::string>& messages() const { return messages_; }

  /// What the checker did, for benchmarks.
  struct Stats {
    int64_t cycles = 0;          ///< CheckCycle calls
    int64_t full_checks = 0;     ///< of which with `full`
    int64_t recounts = 0;        ///< Recount runs (full checks, end of trace, explicit)
    int64_t queues_checked = 0;  ///< pending queues examined by the lender-reclaim check
    int64_t cpu_ns = 0;          ///< thread CPU time inside CheckCycle
  };
  const Stats& stats() const { return stats_; }
  /// Stats summed over every checker of this process (thread-safe), for a driver that does
  /// not own its checker (Simulate).
  static Stats ProcessTotals();

  /// Team usage as the checker sees it (for metrics).
  struct TeamView {
    std::string name;
    int weight = 0;
    bool active = false;
    double weighted_share = 0;  ///< dominant borrowed share ÷ weight (weight 0: unweighted)
    int64_t pending = 0;
  };
  /// Every team the checker has heard of, by name. O(teams × types).
  std::vector<TeamView> Teams() const;
  /// True when `spec`'s request fits within its team's unused nominal quota right now.
  bool FitsUnusedNominal(const WorkloadSpec& spec) const;

 private:
  friend struct CheckerTestPeer;  // unit tests corrupt the tallies to prove Recount sees it

  struct Amount {
    int64_t a[3] = {0, 0, 0};
  };
  // Queue flags: the lender-reclaim check must look at the queue; its usage must be
  // compared with the engine's.
  static constexpr uint8_t kReclaimDirty = 1, kUsageDirty = 2;
  struct Quota {
    std::string name;
    bool exists = false;
    bool active = false;
    SharingStrategy strategy = SharingStrategy::kLendAndBorrow;
    PreemptTeamTasks preempt = PreemptTeamTasks::kLowerPriority;
    int weight = 0;
    // By instance type index.
    std::vector<char> has_nominal;    // the quota names the type
    std::vector<Amount> nominal;
    std::vector<Amount> borrow;       // borrow limits
    std::vector<Amount> usage;        // incremental
    std::vector<std::set<uint64_t>> queue;  // jobs not admitted (pending or never fit)
    std::vector<uint8_t> flags;       // kReclaimDirty | kUsageDirty
    int64_t pending = 0;              // incremental
  };
  struct Job {
    int team = 0, type = 0;
    Amount req;
    int prio = 0;
    std::string cls;  // the class it names ("" = none, or its class was deleted)
    int64_t ts = 0;
    int state = 0;  // 0 pending, 1 admitted, 2 never fits
    int64_t evicted_cycle = -1;
  };
  // One instance type's cohort sums over teams (n = nominal of an existing, active team,
  // else 0; u = usage; lenders are existing, active, not DontLend).
  struct Tally {
    int64_t borrowed[3] = {0, 0, 0};     // Σ max(0, u − n)
    int64_t idle[3] = {0, 0, 0};         // Σ_lenders max(0, n − u)
    int64_t nominal_sum[3] = {0, 0, 0};  // Σ n
    int64_t lendable[3] = {0, 0, 0};     // Σ_lenders n
  };

  int TeamIndex(const std::string& name);  // creates an absent team
  int TypeIndex(const std::string& name) const;  // std::out_of_range when unknown
  Amount NominalOf(int team, int type) const;
  Amount BorrowOf(int team, int type) const;
  bool Lends(int team) const;
  void Contribute(Tally& t, int team, int type, const Amount& usage, int sign) const;
  Amount Converted(const QuotaResource& q) const;
  int PriorityOf(const std::string& cls) const;
  int64_t IdleCapacity(int type, int r) const;  // unallocated capacity lent, if shared
  bool CohortOk(int type) const;
  int64_t CohortExcess(int type, std::string* why) const;
  bool TeamOk(int team, int type, const Amount& req, std::string* why) const;
  // Weighted dominant share as the engine ranks it: {tier, value}, compared in that order;
  // tier +1 when the dominant resource has nothing lendable, +1 for weight 0.
  std::pair<int, double> ShareRank(int team, int type, const Amount& delta) const;
  double Share(int team, int type, const Amount& delta) const;  // one number, for metrics
  void Fail(std::string msg);
  void ConfigChanged();
  void Mark(int team, int type, uint8_t flags);
  void Add(int team, int type, const Amount& req, int sign);
  void SetConfig(int team, const TeamQuota* q);  // nullptr: remove
  void CheckReclaim(int team, int type);
  // CheckCycle's steps (checker_cycle.cc), with what they note for the later ones.
  struct CycleNotes {
    std::vector<uint64_t> admitted_now;              // admitted without preemption
    std::vector<char> evicted_types;                 // by type: a victim was evicted there
    std::vector<std::pair<int, int>> evicted_queues;  // (team, type) of each victim
  };
  void CheckAdmission(const Admission& a, CycleNotes& notes);
  void CheckEviction(const Admission& a, const Job& w, const Preemption& p, bool within_nominal,
                     const Amount& own_victims, CycleNotes& notes);
  void CheckOtherTeamVictim(const Admission& a, const Job& w, const Job& v, const Preemption& p,
                            bool within_nominal, const Amount& own_victims);
  void CheckAdmitted(const Admission& a, Job& w, CycleNotes& notes);
  void CheckNeverFits(const std::vector<uint64_t>& never_fits);
  void CompareUsage(const Engine& engine, bool full);
  void CheckDueQueues(bool every_queue, const CycleNotes& notes);
  void CheckOrdering(const CycleNotes& notes);

  std::vector<InstanceTypeCapacity> types_;
  std::vector<Amount> capacity_;  // by type: the whole cluster's
  std::map<std::string, int> type_index_;
  SchedulerPolicy policy_;
  std::vector<Quota> teams_;
  std::map<std::string, int> team_index_;
  std::unordered_map<uint64_t, Job> jobs_;
  std::vector<Tally> tally_;  // by type, incremental
  int64_t admitted_ = 0;      // jobs holding quota, incremental
  // Queues flagged since the last check, and whether every queue must be checked.
  std::vector<std::pair<int, int>> dirty_;
  bool all_dirty_ = false;
  // Who preempted whom by fair sharing, for the ping-pong check: preemptor id → (the
  // change count after its admission, victim ids).
  std::unordered_map<uint64_t, std::pair<int64_t, std::set<uint64_t>>> preempted_by_;
  int64_t changes_ = 0;  // admissions, releases and configuration changes
  int64_t cycle_ = 0;
  int64_t violations_ = 0;
  std::vector<std::string> messages_;
  Stats stats_;
};

}  // namespace hf::governance
