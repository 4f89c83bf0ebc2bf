#include "hyperfleet/provider/routing_provider.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"

namespace hf::provider {
namespace {

std::string_view RouteName(Route route) { return route == Route::kSsh ? "ssh" : "local"; }

}  // namespace

Route RouteFor(std::string_view instance_type, std::span<const PoolMachine> machines) {
  for (const auto& m : machines) {
    if (m.machine.instance_type == instance_type) return Route::kSsh;
  }
  return Route::kLocal;
}

StatusOr<std::unique_ptr<RoutingProvider>> RoutingProvider::Create(Options options) {
  if (!options.local || !options.ssh || options.inventory == nullptr) {
    return absl::InvalidArgumentError(
        "the routing provider needs a local provider, an ssh provider and the machine inventory");
  }
  std::unique_ptr<RoutingProvider> p(new RoutingProvider(std::move(options)));
  HF_RETURN_IF_ERROR(p->load());
  return p;
}

Status RoutingProvider::load() {
  if (options_.state_file.empty()) return absl::OkStatus();
  auto text = ReadFile(options_.state_file);
  if (absl::IsNotFound(text.status())) return absl::OkStatus();
  if (!text.ok()) return text.status();
  const auto bad = [this] {
    return absl::InternalError(
        absl::StrCat("routing provider state ", options_.state_file, " is malformed"));
  };
  const auto state = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("instances") || !state["instances"].is_object()) {
    return bad();
  }
  for (const auto& [id, e] : state["instances"].items()) {
    if (!e.is_object() || !e.contains("provider") || !e["provider"].is_string()) return bad();
    const auto provider = e["provider"].get<std::string>();
    if (provider != "ssh" && provider != "local") return bad();
    Entry entry;
    entry.route = provider == "ssh" ? Route::kSsh : Route::kLocal;
    entry.cluster_id = e.value("cluster", std::string());
    entry.terminating = e.value("terminating", false);
    routes_.emplace(id, std::move(entry));
  }
  return absl::OkStatus();
}

Status RoutingProvider::saveLocked() {
  if (options_.state_file.empty()) return absl::OkStatus();
  nlohmann::json instances = nlohmann::json::object();
  for (const auto& [id, e] : routes_) {
    instances[id] = {{"provider", RouteName(e.route)},
                     {"cluster", e.cluster_id},
                     {"terminating", e.terminating}};
  }
  const nlohmann::json state = {{"instances", instances}};
  return WriteFileAtomically(options_.state_file, state.dump(1) + "\n", 0600);
}

std::optional<Route> RoutingProvider::routeOf(std::string_view instance_id) const {
  std::lock_guard lock(mu_);
  auto it = routes_.find(instance_id);
  if (it == routes_.end()) return std::nullopt;
  return it->second.route;
}

std::optional<Route> RoutingProvider::lookup(std::string_view id, Mark mark) {
  std::lock_guard lock(mu_);
  auto it = routes_.find(id);
  if (it == routes_.end()) return std::nullopt;
  if (mark != Mark::kNone && it->second.terminating != (mark == Mark::kTerminating)) {
    it->second.terminating = mark == Mark::kTerminating;
    // Best effort: a lost mark only delays forgetting the route (or, for a relaunch, lets
    // RouteFor decide again once the old instance is gone).
    (void)saveLocked();
  }
  return it->second.route;
}

Status RoutingProvider::launch(const InstanceSpec& spec) {
  if (auto route = lookup(spec.instance_id, Mark::kLaunching)) return of(*route).launch(spec);
  HF_ASSIGN_OR_RETURN(auto machines, options_.inventory->machines());
  const Route route = RouteFor(spec.instance_type, machines);
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = routes_.try_emplace(spec.instance_id, Entry{route, spec.cluster_id});
    if (inserted) {
      // Recorded before the launch: a crash in between still routes the instance right.
      if (auto st = saveLocked(); !st.ok()) {
        routes_.erase(it);
        return st;
      }
    }
  }
  auto st = of(route).launch(spec);
  if (!st.ok()) {
    std::lock_guard lock(mu_);
    routes_.erase(std::string(spec.instance_id));
    (void)saveLocked();
  }
  return st;
}

Status RoutingProvider::terminateVia(std::string_view id,
                                     Status (Provider::*call)(std::string_view)) {
  if (auto route = lookup(id, Mark::kTerminating)) return (of(*route).*call)(id);
  // Not ours (a state file lost, or never launched): each provider ignores ids it lacks.
  HF_RETURN_IF_ERROR((of(Route::kLocal).*call)(id));
  return (of(Route::kSsh).*call)(id);
}

Status RoutingProvider::terminate(std::string_view id) {
  return terminateVia(id, &Provider::terminate);
}

Status RoutingProvider::terminateNow(std::string_view id) {
  return terminateVia(id, &Provider::terminateNow);
}

Status RoutingProvider::rebootVia(std::string_view id,
                                  Status (Provider::*call)(std::string_view)) {
  if (auto route = lookup(id, Mark::kNone)) return (of(*route).*call)(id);
  auto st = (of(Route::kLocal).*call)(id);
  if (!absl::IsNotFound(st)) return st;
  return (of(Route::kSsh).*call)(id);
}

Status RoutingProvider::reboot(std::string_view id) { return rebootVia(id, &Provider::reboot); }

Status RoutingProvider::powerCycle(std::string_view id) {
  return rebootVia(id, &Provider::powerCycle);
}

StatusOr<int> RoutingProvider::nodeInitPid(std::string_view id) {
  if (auto route = lookup(id, Mark::kNone)) return of(*route).nodeInitPid(id);
  auto pid = of(Route::kLocal).nodeInitPid(id);
  if (pid.ok() || !absl::IsNotFound(pid.status())) return pid;
  return of(Route::kSsh).nodeInitPid(id);
}

StatusOr<std::vector<InstanceObservation>> RoutingProvider::list(std::string_view cluster_id) {
  HF_ASSIGN_OR_RETURN(auto merged, of(Route::kLocal).list(cluster_id));
  const size_t local_count = merged.size();
  HF_ASSIGN_OR_RETURN(auto ssh, of(Route::kSsh).list(cluster_id));
  merged.insert(merged.end(), std::make_move_iterator(ssh.begin()),
                std::make_move_iterator(ssh.end()));
  std::lock_guard lock(mu_);
  bool changed = false;
  std::set<std::string, std::less<>> seen;
  for (size_t i = 0; i < merged.size(); ++i) {
    const auto& o = merged[i];
    seen.insert(o.instance_id);
    const Route route = i < local_count ? Route::kLocal : Route::kSsh;
    auto [it, inserted] = routes_.try_emplace(o.instance_id, Entry{route, std::string(cluster_id)});
    if (inserted) {
      changed = true;  // re-adopted: an instance launched before the state file knew it
    } else if (it->second.route != route) {
      it->second.route = route;  // the provider that lists it is the one that has it
      changed = true;
    }
  }
  // A terminated instance neither provider lists any more is forgotten.
  for (auto it = routes_.begin(); it != routes_.end();) {
    if (it->second.terminating && it->second.cluster_id == cluster_id && !seen.contains(it->first)) {
      it = routes_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) HF_RETURN_IF_ERROR(saveLocked());
  return merged;
}

}  // namespace hf::provider
