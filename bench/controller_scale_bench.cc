// controller_scale_bench: the real cluster controller and store at fleet scale (issue 19).
// One cluster of --nodes (each size in turn) nodes: a controller group of one node and a
// worker group of the rest, every node Running with its lifecycle scripts done, agents
// heard, and Slurm's view of every node idle, on an in-memory store and on a file store
// (WAL, synchronous=FULL, in --dir). The provider is a map in this process that reports
// every instance running; a launch runs at once. For each size and store it prints:
//   load      the snapshot load (clusterById + nodes), ms per pass
//   plan      PlanCluster alone on that snapshot, ms per pass
//   pass      ClusterController::reconcileOnce when nothing changes (load, plan, no commit)
//   fault     one worker's instance stops: the passes until the cluster settles again
//             (detect, replace, launch, erase; the new node's scripts succeed between
//             passes, as its agent would say), their count and ms per pass
//   write     the store's commit of one node's change (CAS), ms per write
//   delete    DeleteCluster: each pass until the cluster is gone (terminate all, then erase)
//   bulk      the first commit of all N node records, µs per node
//   files     what the agent service does for a heartbeat (AgentService::nodeFiles: the
//             caller's records, then NodeFilesCache::get): -w, -c of a worker and of the
//             Slurm controller whose agent holds its files; after one node's write that
//             changes the files, -r the first heartbeat (the controller's: what changed read,
//             resource_config.json and slurm.conf built once for the cluster) and -n a
//             worker's next (its files copied and hashed to be sent); ms per heartbeat
//   kept      the heap a copy of the N records takes (what the controller keeps between
//             passes of a cluster it watches), MiB
// Times are medians of CPU time of this thread (the work itself) and wall time (which also
// counts fsync on the file store).
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "hyperfleet/agentapi/node_files_cache.h"
#include "hyperfleet/control/cluster_controller.h"
#include "hyperfleet/control/cluster_plan.h"
#include "hyperfleet/store/store.h"
#include "spdlog/spdlog.h"

namespace {

using nlohmann::json;
using hf::provider::InstanceObservation;
using hf::provider::InstanceState;
namespace is = hf::model::instance_status;

const hf::SystemTime kT0{std::chrono::seconds(1767225600)};

/// Time moves only when the bench says so.
class StepClock final : public hf::Clock {
 public:
  hf::SystemTime now() const override { return t_; }
  void advance(hf::Duration d) { t_ += d; }

 private:
  hf::SystemTime t_ = kT0 + std::chrono::hours(1);
};

/// Instances in a map: a launch runs at once (same address when one is asked for), a
/// terminate removes it. Used from the bench's one thread only.
class MapProvider final : public hf::provider::Provider {
 public:
  std::string_view name() const override { return "bench"; }
  hf::Status launch(const hf::provider::InstanceSpec& spec) override {
    if (instances_.count(spec.instance_id)) return absl::OkStatus();
    const int n = next_ip_++;
    std::string ip = spec.private_ip.empty() ? Ip(n) : spec.private_ip;
    instances_[spec.instance_id] = {spec.instance_id, spec.cluster_id, InstanceState::kRunning,
                                    "", ip, Hostname(ip), kT0};
    launched.push_back(spec.instance_id);
    return absl::OkStatus();
  }
  hf::Status terminate(std::string_view id) override {
    instances_.erase(std::string(id));
    return absl::OkStatus();
  }
  hf::StatusOr<std::vector<InstanceObservation>> list(std::string_view) override {
    std::vector<InstanceObservation> out;
    out.reserve(instances_.size());
    for (const auto& [id, o] : instances_) out.push_back(o);
    return out;
  }
  bool runsLifecycleScripts() const override { return true; }

  static std::string Ip(int n) {
    return "10.1." + std::to_string(n / 250) + "." + std::to_string(2 + n % 250);
  }
  static std::string Hostname(const std::string& ip) {
    std::string h = "ip-" + ip;
    std::replace(h.begin(), h.end(), '.', '-');
    return h;
  }
  void add(InstanceObservation o) { instances_[o.instance_id] = std::move(o); }
  InstanceObservation& at(const std::string& id) { return instances_.at(id); }
  int next_ip_ = 0;
  std::vector<std::string> launched;

 private:
  std::map<std::string, InstanceObservation> instances_;
};

double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

struct Sample {
  double cpu_ms = 0, wall_ms = 0;
};

/// Times `fn` once.
Sample Time(const std::function<void()>& fn) {
  const double c0 = CpuMs();
  const auto w0 = std::chrono::steady_clock::now();
  fn();
  const auto w1 = std::chrono::steady_clock::now();
  return {CpuMs() - c0, std::chrono::duration<double, std::milli>(w1 - w0).count()};
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Row(const char* what, int nodes, const char* store, const std::vector<Sample>& s,
         const char* unit = "ms", double scale = 1.0) {
  std::vector<double> cpu, wall;
  for (const auto& x : s) {
    cpu.push_back(x.cpu_ms * scale);
    wall.push_back(x.wall_ms * scale);
  }
  std::printf("%-6s %6d %-7s n %4zu  CPU %s p50 %9.3f max %9.3f  wall %s p50 %9.3f max %9.3f\n",
              what, nodes, store, s.size(), unit, Median(cpu),
              *std::max_element(cpu.begin(), cpu.end()), unit, Median(wall),
              *std::max_element(wall.begin(), wall.end()));
  std::fflush(stdout);
}

hf::model::InstanceGroup Group(const std::string& name, int count) {
  hf::model::InstanceGroup g;
  g.name = name;
  g.instance_type = "ml.p5.48xlarge";
  g.target_count = count;
  g.spec = {{"InstanceGroupName", name}, {"InstanceType", g.instance_type},
            {"InstanceCount", count},
            {"LifeCycleConfig",
             {{"SourceS3Uri", "s3://bucket/lcs/"}, {"OnCreate", "on_create.sh"}}},
            {"ExecutionRole", "arn:aws:iam::123456789012:role/hyperpod"},
            {"ThreadsPerCore", 1}};
  return g;
}

/// One size on one store.
class Bench {
 public:
  Bench(int nodes, std::unique_ptr<hf::store::Store> store, const char* kind, int passes)
      : nodes_(nodes), store_(std::move(store)), kind_(kind), passes_(passes) {}

  bool Run() {
    if (!Populate()) return false;
    hf::control::ClusterController::Options options;
    options.liveness.listening_since = kT0;
    hf::control::ClusterController::AgentHooks hooks;
    hooks.liveness = [this](const std::string&) { return view_; };
    controller_ = std::make_unique<hf::control::ClusterController>(*store_, provider_, clock_,
                                                                  ids_, options, hooks);
    auto first = controller_->reconcileOnce("c1");
    if (!first.ok() || !*first) {
      std::fprintf(stderr, "not settled at start: %s\n",
                   first.ok() ? "in flight" : first.status().ToString().c_str());
      return false;
    }
    Load();
    Files();
    Kept();
    Plan();
    Pass();
    return Fault() && Write() && Delete();
  }

 private:
  bool Populate() {
    hf::store::WriteBatch b;
    hf::model::Cluster c;
    c.id = "c1";
    c.name = "scale";
    c.arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/c1";
    c.status = hf::model::cluster_status::kInService;
    c.creation_time = kT0;
    c.spec = {{"Orchestrator", {{"Slurm", {{"SlurmConfigStrategy", "Managed"}}}}},
              {"NodeRecovery", "Automatic"}};
    c.groups = {Group("controller", 1), Group("workers", nodes_ - 1)};
    b.clusters.push_back({c});
    view_.controller_group = "controller";
    view_.slurm_nodes.emplace();
    for (int i = 0; i < nodes_; ++i) {
      const hf::model::InstanceGroup& g = c.groups[i == 0 ? 0 : 1];
      hf::model::Node n;
      n.cluster_id = "c1";
      n.instance_id = ids_.instanceId();
      n.logical_id = g.name + "-" + ids_.logicalIdSuffix();
      n.group = g.name;
      n.instance_type = g.instance_type;
      n.status = is::kRunning;
      n.launch_time = kT0 + std::chrono::milliseconds(i);
      n.private_ip = MapProvider::Ip(provider_.next_ip_++);
      n.hostname = MapProvider::Hostname(n.private_ip);
      n.lifecycle = g.spec["LifeCycleConfig"];
      n.spec_extras = {{"ThreadsPerCore", 1}};
      n.lifecycle_state = hf::model::lifecycle_state::kSucceeded;
      provider_.add({n.instance_id, "c1", InstanceState::kRunning, "", n.private_ip, n.hostname,
                     kT0});
      view_.nodes[n.instance_id] = {kT0 + std::chrono::hours(24 * 365), std::nullopt};
      if (i > 0) view_.slurm_nodes->push_back({n.hostname, "idle", 0, "", {}});
      b.nodes.push_back({std::move(n)});
    }
    Sample s = Time([&] { committed_ = store_->commit(b).ok(); });
    if (!committed_) {
      std::fprintf(stderr, "populate failed\n");
      return false;
    }
    Row("bulk", nodes_, kind_, {s}, "us/node", 1000.0 / nodes_);
    return true;
  }

  void Load() {
    std::vector<Sample> s;
    for (int k = 0; k < passes_; ++k) {
      s.push_back(Time([&] {
        auto c = store_->clusterById("c1");
        auto n = store_->nodes("c1");
        if (!c.ok() || !n.ok() || static_cast<int>(n->size()) != nodes_) std::abort();
      }));
    }
    Row("load", nodes_, kind_, s);
  }

  /// A heartbeat as the agent service answers it (AgentService::nodeFiles): the caller's
  /// cluster and node records, then NodeFilesCache::get with the revision the agent holds.
  void Files() {
    const json params = {{"version", "1.0.0"},
                         {"workload_manager", "slurm"},
                         {"controller_group", "controller"},
                         {"worker_groups", json::array({{{"instance_group_name", "workers"},
                                                         {"partition_name", "dev"}}})}};
    hf::agentapi::NodeFilesCache cache(*store_, clock_);
    auto heartbeat = [&](const std::string& id, std::optional<int64_t> held) {
      auto cluster = store_->clusterById("c1");
      auto node = store_->node("c1", id);
      if (!cluster.ok() || !node.ok()) std::abort();
      auto r = cache.get(*cluster, *node, params, held);
      if (!r.ok() || r->controller_group != "controller") std::abort();
      return *std::move(r);
    };
    const auto all = store_->nodes("c1");
    if (!all.ok()) std::abort();
    const std::string ctl = all->front().group == "controller" ? all->front().instance_id
                                                               : all->back().instance_id;
    const std::string worker = all->at(all->size() / 2).instance_id;
    std::map<std::string, int64_t> held;
    for (const std::string& id : {worker, ctl}) {
      held[id] = heartbeat(id, std::nullopt).revision;
      std::vector<Sample> s;
      for (int k = 0; k < passes_; ++k) {
        s.push_back(Time([&] {
          if (!heartbeat(id, held[id]).files.empty()) std::abort();
        }));
      }
      Row(id == worker ? "files-w" : "files-c", nodes_, kind_, s);
    }
    // A change to the files: a third worker readdressed, and back. The controller's heartbeat
    // after it reads what changed and builds the shared texts (files-r); a worker's then
    // copies and hashes its files, which it is sent (files-n).
    const std::string moved = all->at(all->size() / 3).instance_id;
    std::vector<Sample> refresh, rebuild;
    for (int k = 0; k < 2 * passes_; ++k) {
      auto n = store_->node("c1", moved);
      if (!n.ok()) std::abort();
      hf::store::WriteBatch b;
      b.nodes.push_back({*n, n->revision});
      const std::string ip = MapProvider::Ip(provider_.next_ip_ + 1000);
      b.nodes.back().node.private_ip = k % 2 == 0 ? ip : provider_.at(moved).private_ip;
      if (!store_->commit(b).ok()) std::abort();
      for (const std::string& id : {ctl, worker}) {
        (id == ctl ? refresh : rebuild).push_back(Time([&] {
          auto r = heartbeat(id, held[id]);
          if (r.files.empty()) std::abort();
          held[id] = r.revision;
        }));
      }
    }
    Row("files-r", nodes_, kind_, refresh);
    Row("files-n", nodes_, kind_, rebuild);
  }

  void Kept() {
    auto nodes = store_->nodes("c1");
    if (!nodes.ok()) std::abort();
    const size_t before = mallinfo2().uordblks;
    std::vector<hf::model::Node> copy = *nodes;
    const double mib = static_cast<double>(mallinfo2().uordblks - before) / (1 << 20);
    std::printf("kept   %6d %-7s %zu records: %.1f MiB of heap (%.0f bytes per node)\n", nodes_,
                kind_, copy.size(), mib, mib * (1 << 20) / nodes_);
  }

  hf::control::ClusterSnapshot Snapshot() {
    hf::control::ClusterSnapshot snap;
    snap.cluster = *store_->clusterById("c1");
    snap.nodes = *store_->nodes("c1");
    snap.instances = *provider_.list("c1");
    snap.lifecycle_by_agent = true;
    snap.liveness = view_.nodes;
    snap.slurm_nodes = view_.slurm_nodes;
    snap.controller_group = view_.controller_group;
    snap.liveness_policy.listening_since = kT0;
    return snap;
  }

  void Plan() {
    const hf::control::ClusterSnapshot snap = Snapshot();
    std::vector<Sample> s;
    for (int k = 0; k < passes_; ++k) {
      s.push_back(Time([&] {
        hf::control::ClusterPlan plan = hf::control::PlanCluster(snap, clock_.now(), ids_);
        if (!plan.writes.empty() || !plan.settled) std::abort();
      }));
    }
    Row("plan", nodes_, kind_, s);
  }

  void Pass() {
    std::vector<Sample> s;
    for (int k = 0; k < passes_; ++k) {
      s.push_back(Time([&] {
        if (!controller_->reconcileOnce("c1").ok()) std::abort();
      }));
    }
    Row("pass", nodes_, kind_, s);
  }

  /// The new records' lifecycle scripts succeed, as their agents would report.
  void ScriptsSucceed() {
    for (const std::string& id : provider_.launched) {
      auto n = store_->node("c1", id);
      if (!n.ok() || n->lifecycle_state == hf::model::lifecycle_state::kSucceeded) continue;
      hf::model::Node after = *n;
      after.lifecycle_state = hf::model::lifecycle_state::kSucceeded;
      hf::store::WriteBatch b;
      b.nodes.push_back({after, n->revision});
      if (!store_->commit(b).ok()) std::abort();
      view_.nodes[id] = {kT0 + std::chrono::hours(24 * 365), std::nullopt};
    }
    provider_.launched.clear();
  }

  bool Fault() {
    std::vector<Sample> s;
    auto nodes = *store_->nodes("c1");
    const std::string victim = nodes[nodes.size() / 2].instance_id;
    provider_.at(victim).state = InstanceState::kFailed;
    provider_.at(victim).message = "bench: the instance stopped";
    bool settled = false;
    for (int k = 0; k < 20 && !settled; ++k) {
      clock_.advance(std::chrono::seconds(1));
      s.push_back(Time([&] {
        auto r = controller_->reconcileOnce("c1");
        if (!r.ok()) std::abort();
        settled = *r;
      }));
      ScriptsSucceed();
    }
    if (!settled) {
      std::fprintf(stderr, "fault: not settled after 20 passes\n");
      return false;
    }
    auto after = *store_->nodes("c1");
    if (static_cast<int>(after.size()) != nodes_ ||
        std::any_of(after.begin(), after.end(),
                    [&](const auto& n) { return n.instance_id == victim; })) {
      std::fprintf(stderr, "fault: the victim was not replaced\n");
      return false;
    }
    Row("fault", nodes_, kind_, s);
    return true;
  }

  bool Write() {
    std::vector<Sample> s;
    auto nodes = *store_->nodes("c1");
    for (int k = 0; k < passes_; ++k) {
      hf::model::Node n = nodes[(k * 7919) % nodes.size()];
      n.message = "bench write " + std::to_string(k);
      hf::store::WriteBatch b;
      b.nodes.push_back({n, n.revision});
      s.push_back(Time([&] {
        if (!store_->commit(b).ok()) std::abort();
      }));
    }
    Row("write", nodes_, kind_, s);
    return true;
  }

  bool Delete() {
    auto c = store_->clusterById("c1");
    if (!c.ok()) return false;
    hf::model::Cluster deleting = *c;
    deleting.status = hf::model::cluster_status::kDeleting;
    hf::store::WriteBatch b;
    b.clusters.push_back({deleting, c->revision});
    if (!store_->commit(b).ok()) return false;
    std::vector<Sample> s;
    for (int k = 0; k < 10; ++k) {
      clock_.advance(std::chrono::seconds(1));
      bool gone = false;
      s.push_back(Time([&] { gone = absl::IsNotFound(controller_->reconcileOnce("c1").status()); }));
      if (gone) {
        s.pop_back();  // the pass that found nothing to do
        Row("delete", nodes_, kind_, s);
        return true;
      }
    }
    std::fprintf(stderr, "delete: the cluster is still there after 10 passes\n");
    return false;
  }

  int nodes_;
  std::unique_ptr<hf::store::Store> store_;
  const char* kind_;
  int passes_;
  StepClock clock_;
  hf::SequentialIdSource ids_{7};
  MapProvider provider_;
  hf::model::ClusterHealthView view_;
  std::unique_ptr<hf::control::ClusterController> controller_;
  bool committed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The cluster controller and store at fleet scale"};
  std::vector<int> sizes{2048, 10000};
  int passes = 20;
  std::string dir = std::filesystem::temp_directory_path().string();
  std::vector<std::string> stores{"memory", "file"};
  app.add_option("--nodes", sizes, "cluster sizes")->delimiter(',');
  app.add_option("--passes", passes, "repetitions of each timed step")
      ->check(CLI::Range(1, 100000));
  app.add_option("--dir", dir, "where the file store goes (removed after)");
  app.add_option("--stores", stores, "memory, file")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::err);
  for (int n : sizes) {
    if (n < 2) {
      std::fprintf(stderr, "--nodes: at least 2\n");
      return 2;
    }
    for (const std::string& kind : stores) {
      std::string path = ":memory:";
      if (kind == "file") {
        path = dir + "/controller_scale_bench." + std::to_string(getpid()) + ".db";
      } else if (kind != "memory") {
        std::fprintf(stderr, "--stores: memory or file, not %s\n", kind.c_str());
        return 2;
      }
      auto store = hf::store::OpenSqliteStore(path);
      if (!store.ok()) {
        std::fprintf(stderr, "store: %s\n", store.status().ToString().c_str());
        return 1;
      }
      bool ok = Bench(n, std::move(*store), kind.c_str(), passes).Run();
      if (kind == "file") {
        for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
      }
      if (!ok) return 1;
    }
  }
  return 0;
}
