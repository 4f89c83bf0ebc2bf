#pragma once
// The product engine's simulated provider: instances on simulated machines, whose launches,
// terminations and reboots complete as scheduled events with latencies drawn from
// ProductLatencies. It also keeps each instance's node agent state (heartbeating, silent,
// health verdict, slurmd up), which SimAgents reports to the controller: heartbeats are
// state, not events.
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hyperfleet/model/node_health.h"
#include "hyperfleet/provider/provider.h"
#include "hyperfleet/sim/failure_process.h"
#include "hyperfleet/sim/product/latencies.h"
#include "hyperfleet/sim/product/policy_pool.h"
#include "hyperfleet/sim/product/sim_clock.h"

namespace hf::sim::product {

/// One simulated instance and the agent on it.
struct SimInstance {
  provider::InstanceSpec spec;
  provider::InstanceState state = provider::InstanceState::kPending;
  std::string message;
  int machine = -1;  ///< -1 while waiting for a free machine
  std::string private_ip, hostname;
  SystemTime boot_time{};
  uint64_t generation = 0;  ///< moves on every transition: a stale completion is ignored
  bool agent_up = false;    ///< the agent heartbeats (from boot)
  bool slurmd_up = false;   ///< slurmd runs (lifecycle scripts started, or after a reboot)
  std::optional<SystemTime> silent_since;     ///< heartbeats stopped (hung, cut off)
  std::optional<model::HealthReport> health;  ///< the agent's last verdict, when not ok
};

/// The simulated provider. Single-threaded (the product engine's thread).
class SimProvider final : public provider::Provider {
 public:
  struct Hooks {
    /// A new instance booted (not a reboot): its agent starts the lifecycle scripts.
    std::function<void(const std::string& instance_id)> booted;
    /// An instance booted again after reboot()/powerCycle().
    std::function<void(const std::string& instance_id)> rebooted;
    /// An instance is gone; its machine (or -1) is free of it.
    std::function<void(const std::string& instance_id, int machine)> gone;
    /// A launch found no free machine (it waits for one): spare-pool exhaustion.
    std::function<void()> exhausted;
  };

  SimProvider(SimClock& clock, EventQueue& events, PolicyMachinePool& pool,
              const ProductLatencies& latencies, SimRng rng, Hooks hooks);

  std::string_view name() const override { return "sim"; }
  Status launch(const provider::InstanceSpec& spec) override;
  Status terminate(std::string_view instance_id) override;
  Status terminateNow(std::string_view instance_id) override;
  Status reboot(std::string_view instance_id) override;
  Status powerCycle(std::string_view instance_id) override;
  StatusOr<std::vector<provider::InstanceObservation>> list(std::string_view cluster_id) override;
  bool runsLifecycleScripts() const override { return true; }

  // ---- the simulated world's side ----
  /// The machine stopped: the instance is reported failed after dead_visible.
  void stop(const std::string& instance_id, const std::string& why);
  /// The agent falls silent from now on (hung node, cut off from the network).
  void silence(const std::string& instance_id);
  /// The agent's health verdict becomes `verdict` after health_report.
  void reportHealth(const std::string& instance_id, model::HealthSeverity verdict,
                    const std::string& check, const std::string& message);
  /// A machine freed by a terminated instance or a repair: waiting launches take it.
  void machineFree(int machine);
  /// Marks slurmd up on the instance (its lifecycle scripts started).
  void slurmdUp(const std::string& instance_id);

  const SimInstance* find(const std::string& instance_id) const;
  const std::map<std::string, SimInstance>& instances() const { return instances_; }
  /// The instance on machine `m`, or "" when none.
  std::string onMachine(int m) const;
  /// Moves on every change a list() or the agents' reports can show.
  uint64_t version() const { return version_; }

 private:
  SimInstance* get(std::string_view id);
  void place(SimInstance& i);  // takes a machine and schedules the boot
  void gone(const std::string& id);
  Status restart(std::string_view instance_id, bool hard);
  SystemTime after(const Dist& d) { return clock_.now() + Minutes(rng_.Sample(d)); }
  std::string addressFor(const provider::InstanceSpec& spec);

  SimClock& clock_;
  EventQueue& events_;
  PolicyMachinePool& pool_;
  const ProductLatencies& latencies_;
  SimRng rng_;
  Hooks hooks_;
  std::map<std::string, SimInstance> instances_;
  std::map<int, std::string> by_machine_;
  std::deque<std::string> waiting_;  ///< launches without a machine, in order
  uint64_t version_ = 0;
  uint32_t next_address_ = 0;
};

}  // namespace hf::sim::product
