#pragma once
// `--provider local,ssh`: one server, two providers, chosen per instance. The rule
// (RouteFor) is: an instance whose instance type has any registered machine (in any state:
// busy, draining, quarantined) is served by ssh, every other one by local. So a group whose
// machines are all taken waits for them or fails with the pool's capacity message; it never
// silently falls back to local nodes. The RoutingProvider remembers which provider launched
// each instance id in a JSON file under the data dir, so that after a restart terminate,
// reboot and the rest go to the same provider; an id it does not know is asked of both.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hyperfleet/provider/machine_inventory.h"
#include "hyperfleet/provider/provider.h"

namespace hf::provider {

/// Which of the two providers serves an instance.
enum class Route { kLocal, kSsh };

/// The routing rule (pure): kSsh when any of `machines` serves as `instance_type`, whatever
/// its state or drain mark; else kLocal.
Route RouteFor(std::string_view instance_type, std::span<const PoolMachine> machines);

/// A Provider over a local and an ssh provider. Thread-safe.
class RoutingProvider final : public Provider {
 public:
  struct Options {
    std::unique_ptr<Provider> local;
    std::unique_ptr<Provider> ssh;
    MachineInventory* inventory = nullptr;  ///< not owned; read at each new launch
    std::string state_file;                 ///< instance id -> provider; empty = memory only
  };

  /// Loads `options.state_file` when it exists. Errors: InvalidArgument when a provider or
  /// the inventory is missing; Internal for an unreadable or malformed state file.
  static StatusOr<std::unique_ptr<RoutingProvider>> Create(Options options);

  // hf::provider::Provider
  std::string_view name() const override { return "local,ssh"; }
  /// A known id goes to the provider that launched it; a new one to RouteFor's choice
  /// (recorded before the launch). Errors: the inventory's, or the chosen provider's.
  Status launch(const InstanceSpec& spec) override;
  /// Unknown ids: terminated on both (a no-op where it does not exist).
  Status terminate(std::string_view instance_id) override;
  Status terminateNow(std::string_view instance_id) override;
  /// Unknown ids: the first provider that does not answer NotFound.
  Status reboot(std::string_view instance_id) override;
  Status powerCycle(std::string_view instance_id) override;
  StatusOr<int> nodeInitPid(std::string_view instance_id) override;
  /// The local provider's: only local nodes run pods (the ssh provider runs no EKS nodes).
  Status setPodRoutes(std::string_view cluster_id, const std::vector<PodRoute>& routes) override {
    return of(Route::kLocal).setPodRoutes(cluster_id, routes);
  }
  /// Both providers' instances of the cluster; learns the route of each id it sees.
  StatusOr<std::vector<InstanceObservation>> list(std::string_view cluster_id) override;
  /// Both providers run the lifecycle scripts through the node agent.
  bool runsLifecycleScripts() const override { return true; }

  /// The recorded route of an instance, if any.
  std::optional<Route> routeOf(std::string_view instance_id) const;

 private:
  struct Entry {
    Route route = Route::kLocal;
    std::string cluster_id;
    bool terminating = false;  // dropped once neither provider lists it
  };

  explicit RoutingProvider(Options options) : options_(std::move(options)) {}
  Status load();
  Status saveLocked();
  Provider& of(Route route) { return route == Route::kSsh ? *options_.ssh : *options_.local; }
  /// What a call says about an instance: terminating (forget it once gone), launched again.
  enum class Mark { kNone, kTerminating, kLaunching };
  /// The route of `id` (its terminating flag set or cleared by `mark`), or nullopt.
  std::optional<Route> lookup(std::string_view id, Mark mark);
  Status terminateVia(std::string_view id, Status (Provider::*call)(std::string_view));
  Status rebootVia(std::string_view id, Status (Provider::*call)(std::string_view));

  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> routes_;  // by instance id
};

}  // namespace hf::provider
