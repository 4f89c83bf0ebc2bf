#pragma once
// Internal to the product engine: its state (ProductEngine::Impl), shared by
// product_engine.cc (the cluster, the faults, the job) and driver.cc (the event loop).
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/sim/product/product_engine.h"
#include "hyperfleet/sim/product/sim_agents.h"
#include "hyperfleet/sim/product/sim_provider.h"

namespace hf::sim::product {

/// This thread's CPU time in seconds.
inline double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// The real store, with its commits counted and timed (the driver's "did this pass change
/// anything" reads the count), and the node records as committed: every write of the
/// simulation goes through here, so `mirror()` is what nodes() would read (revisions aside)
/// without reading and decoding every record, for the skip rule's snapshots.
class CountingStore final : public store::Store {
 public:
  CountingStore(store::Store& s, ProductCounters& c) : s_(s), c_(c) {}
  StatusOr<int64_t> commit(const store::WriteBatch& b) override {
    const double t0 = ThreadCpuSeconds();
    auto r = s_.commit(b);
    c_.commit_cpu_s += ThreadCpuSeconds() - t0;
    if (r.ok()) {
      ++c_.commits;
      for (const auto& w : b.nodes) {
        if (w.erase) {
          mirror_.erase(w.node.instance_id);
        } else {
          mirror_[w.node.instance_id] = w.node;
        }
      }
    }
    return r;
  }
  /// The node records as committed, by instance id.
  const std::map<std::string, model::Node>& mirror() const { return mirror_; }
  StatusOr<model::Cluster> cluster(const std::string& n) override { return s_.cluster(n); }
  StatusOr<model::Cluster> clusterById(const std::string& id) override { return s_.clusterById(id); }
  StatusOr<std::vector<model::Cluster>> allClusters() override { return s_.allClusters(); }
  StatusOr<store::Page<model::Cluster>> listClusters(const store::ClusterQuery& q) override {
    return s_.listClusters(q);
  }
  StatusOr<std::vector<model::Node>> nodes(const std::string& c) override { return s_.nodes(c); }
  StatusOr<store::NodeChanges> nodesChangedSince(const std::string& c, int64_t since) override {
    return s_.nodesChangedSince(c, since);
  }
  StatusOr<store::Page<model::Node>> listNodes(const std::string& c,
                                               const store::NodeQuery& q) override {
    return s_.listNodes(c, q);
  }
  StatusOr<std::map<std::string, store::GroupCounts>> groupCounts(const std::string& c) override {
    return s_.groupCounts(c);
  }
  StatusOr<model::Node> node(const std::string& c, const std::string& id) override {
    return s_.node(c, id);
  }
  StatusOr<store::Page<model::Event>> listEvents(const std::string& c,
                                                 const store::EventQuery& q) override {
    return s_.listEvents(c, q);
  }
  StatusOr<model::Event> event(const std::string& c, const std::string& id) override {
    return s_.event(c, id);
  }
  StatusOr<std::vector<model::Tag>> tags(const std::string& arn) override { return s_.tags(arn); }
  StatusOr<model::SchedulerResource> schedulerResource(const std::string& k,
                                                       const std::string& id) override {
    return s_.schedulerResource(k, id);
  }
  StatusOr<model::SchedulerResource> schedulerResourceVersion(const std::string& k,
                                                              const std::string& id,
                                                              int v) override {
    return s_.schedulerResourceVersion(k, id, v);
  }
  StatusOr<std::vector<model::SchedulerResource>> schedulerResources(
      const std::string& k, const std::string& c) override {
    return s_.schedulerResources(k, c);
  }

 private:
  store::Store& s_;
  ProductCounters& c_;
  std::map<std::string, model::Node> mirror_;
};

struct ProductEngine::Impl {
  Impl(const FgufParams& p, const Strategy& s, int spares, uint64_t seed, ProductOptions o);

  // ---- product_engine.cc ----
  Status createCluster();
  void onFleetEvent(const FleetEvent& e);
  void faultMachine(int m, const FleetEvent& e);
  void applyEffect(const std::string& instance_id, const FleetEvent& e);
  void onBooted(const std::string& instance_id, bool reboot);
  void onGone(int machine);
  void startRepair(int m);
  void watchdog(const FleetEvent& e, const std::string& host);
  void jobFault(const FleetEvent& e, const std::string& host);
  void jobStop(StopClass cls, Loss phase);
  void onMarkedDown(const std::string& name);
  /// Drops from requeue_wait the hosts that need no DOWN mark any more: DOWN in Slurm
  /// already (marked before the job's fault was recorded), gone from Slurm, or whose
  /// machine's fault ended without one (a reboot fixed it, the machine was replaced).
  void settleRequeueWait();
  void tryStart();
  void startJob();
  void updateSlowdown();
  /// The strategy's assumed straggler eviction of slow machine `m` on Slurm node `host`.
  void evictStraggler(int m, const std::string& host);
  /// Machine `m` failed and is out of service: the pool's policy sends it to repair or, by
  /// the lemon rule, to quarantine.
  void outOfService(int m);
  /// The quarantine repair (FgufParams::quarantine_diagnosis, parts repair, deep check), then
  /// the operator returns machine `m` to the pool.
  void quarantine(int m);
  int machineOf(const std::string& host) const;
  /// Slurm node name -> machine of the instance answering for it (the newest booted).
  std::map<std::string, int> machinesByHost() const;
  RunResult result();

  // ---- driver.cc ----
  /// Runs events and passes until simulated time `end` (events at `end` included).
  void drive(SystemTime end);
  /// The controller's pass at the clock's time.
  void pass();
  std::optional<SystemTime> decisionTime();
  void enqueue(const std::string& cluster_id);

  FgufParams params;
  Strategy strategy;
  int spares;
  uint64_t seed;
  ProductOptions options;
  ProductCounters counters;

  SimClock clock;
  EventQueue events;
  SequentialIdSource ids;
  std::unique_ptr<store::Store> sqlite;
  std::unique_ptr<CountingStore> store;
  PolicyMachinePool pool;
  SimRng rng;
  std::unique_ptr<SimProvider> provider;
  std::unique_ptr<SimAgents> agents;
  std::unique_ptr<control::ClusterController> controller;
  control::ClusterController::Options controller_options;
  FailureProcess process;
  JobLedger ledger;

  std::string cluster_id;
  std::string controller_host;
  int controller_machine = 0;  ///< outside the failure process's fleet: never faults
  SystemTime origin{};         ///< the job's minute 0
  std::vector<std::optional<FleetEvent>> machine_fault;  ///< a machine's unrepaired fault
  /// Machines taken out of service for good (lemons, evicted stragglers: the strategy's
  /// assumptions), and each machine's fault times (minutes) for the lemon rule.
  std::vector<bool> quarantined;
  int lemons_quarantined = 0;
  int healthy_quarantined = 0;
  int straggler_evictions = 0;
  int false_positive_evictions = 0;
  int human_interventions = 0;

  // The job.
  bool running = false;
  bool restarting = false;
  uint64_t restart_gen = 0;
  std::vector<std::string> allocated;  ///< the job's N Slurm nodes (while running or starting)
  std::set<std::string> allocated_set;
  std::set<std::string> requeue_wait;  ///< faulty job nodes Slurm has not set DOWN yet
  SystemTime hold_until{};             ///< no restart before (crash detection, human fix)
  bool sdc_pending = false;
  double transient_factor = 1.0;
  /// Queues the failure process's next event when it is earlier than the one queued (run()).
  std::function<void()> repump;

  // The driver.
  bool started = false;             ///< the first pass ran
  SystemTime last_pass{};
  Duration interval{};              ///< the controller's requeue interval after last_pass
  bool quiet = false;               ///< the last pass changed nothing, no event since
  bool enqueued = false;            ///< a pass is due now (an agent's on_change)
  std::optional<std::optional<SystemTime>> decision;  ///< NextDecisionTime, cached while quiet
};

inline double ToMin(const ProductEngine::Impl& im, SystemTime t) { return ToMinutes(t - im.origin); }

}  // namespace hf::sim::product
