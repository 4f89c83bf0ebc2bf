#pragma once
// An independent checker of the governance invariants (../shared/research/governance.md §6).
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
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
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
  /// end-of-cycle invariants; compares usage with `engine`. `full` also runs the checks
  /// that scan every pending workload (8); they are the expensive ones.
  void CheckCycle(const CycleResult& result, const Engine& engine, bool full = true);

  int64_t violations() const { return violations_; }
  /// The first violations, one line each.
  const std::vector<std::string>& messages() const { return messages_; }

  /// Team usage as the checker sees it (for metrics).
  struct TeamView {
    std::string name;
    int weight = 0;
    bool active = false;
    double weighted_share = 0;  ///< dominant borrowed share ÷ weight (weight 0: unweighted)
    int64_t pending = 0;
  };
  std::vector<TeamView> Teams() const;
  /// True when `spec`'s request fits within its team's unused nominal quota right now.
  bool FitsUnusedNominal(const WorkloadSpec& spec) const;

 private:
  struct Amount {
    int64_t a[3] = {0, 0, 0};
  };
  struct Quota {
    bool exists = false;
    bool active = false;
    SharingStrategy strategy = SharingStrategy::kLendAndBorrow;
    PreemptTeamTasks preempt = PreemptTeamTasks::kLowerPriority;
    int weight = 0;
    std::map<std::string, Amount> nominal;  // by instance type
    std::map<std::string, Amount> borrow;   // borrow limits by instance type
    std::map<std::string, Amount> usage;
    int64_t pending = 0;
  };
  struct Job {
    std::string team, type;
    Amount req;
    int prio = 0;
    int64_t ts = 0;
    int state = 0;  // 0 pending, 1 admitted, 2 never fits
    int64_t evicted_cycle = -1;
  };

  Amount NominalOf(const std::string& team, const std::string& type) const;
  Amount BorrowOf(const std::string& team, const std::string& type) const;
  Amount UsageOf(const std::string& team, const std::string& type) const;
  Amount Converted(const QuotaResource& q) const;
  int PriorityOf(const std::string& cls) const;
  bool CohortOk(const std::string& type, std::string* why) const;
  int64_t CohortExcess(const std::string& type, std::string* why) const;
  bool TeamOk(const std::string& team, const std::string& type, const Amount& req,
              std::string* why) const;
  double Share(const std::string& team, const std::string& type, const Amount& delta) const;
  void Fail(std::string msg);
  void ConfigChanged();
  void Add(const std::string& team, const std::string& type, const Amount& req, int sign);

  std::map<std::string, InstanceTypeCapacity> types_;
  SchedulerPolicy policy_;
  std::map<std::string, Quota> teams_;
  std::unordered_map<uint64_t, Job> jobs_;
  // Jobs not admitted (pending or never-fit) by (team, type).
  std::map<std::pair<std::string, std::string>, std::set<uint64_t>> pending_;
  // Who preempted whom by fair sharing, for the ping-pong check: preemptor id → (its
  // type's change count after its admission, victim ids).
  std::unordered_map<uint64_t, std::pair<int64_t, std::set<std::string>>> preempted_by_;
  std::map<std::string, int64_t> changed_;  // type → count of admissions and releases
  int64_t cycle_ = 0;
  int64_t violations_ = 0;
  std::vector<std::string> messages_;
};

}  // namespace hf::governance
