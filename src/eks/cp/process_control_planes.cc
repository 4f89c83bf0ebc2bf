// eks::ProcessControlPlanes (process_control_planes.h): the effects around the plan
// (control_plane_plan.h): directories, certificates, the detached supervisor, adoption.
#include "hyperfleet/eks/process_control_planes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "eks/cp/control_plane_files.h"
#include "eks/cp/control_plane_host.h"
#include "eks/cp/control_plane_nodes.h"
#include "hyperfleet/common/file_lock.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/eks/control_plane_plan.h"

namespace hf::eks {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  HF_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded()) return absl::InternalError(path + " is not JSON");
  return json;
}

class ProcessControlPlanes final : public ControlPlanes {
 public:
  explicit ProcessControlPlanes(ProcessControlPlanesOptions options)
      : options_(std::move(options)), clock_(options_.clock ? options_.clock : &system_clock_) {}

  // Supervisors outlive us: given up, not killed.
  ~ProcessControlPlanes() override {
    std::lock_guard lock(mu_);
    for (auto& [name, child] : supervisors_) {
      if (!child.TryWait()) (void)child.Release();
    }
  }

  Status ensure(const ControlPlaneSpec& spec) override {
    if (!ValidClusterName(spec.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("name ", spec.name, " is not 1-100 of [0-9A-Za-z_-] starting with a "
                       "letter or digit"));
    }
    HF_RETURN_IF_ERROR(FirstServiceIp(spec.service_cidr).status());  // before any change
    std::lock_guard lock(mu_);
    HF_ASSIGN_OR_RETURN(FileLock across, lockDataDir());
    reap();
    const ControlPlaneLayout layout{dirOf(spec.name)};
    if (host::SupervisorPid(layout.dir)) return absl::OkStatus();  // running: adopted
    // Components of a supervisor that was killed would hold the ports of the new ones.
    HF_RETURN_IF_ERROR(stopStrays(spec.name, layout.dir));
    HF_ASSIGN_OR_RETURN(Binaries binaries, findBinaries());
    HF_ASSIGN_OR_RETURN(ControlPlanePlan plan, loadOrCreate(spec, layout));
    SupervisorConfig config;
    config.components = ComponentCommands(plan, layout, binaries);
    config.apiserver_port = plan.ports.apiserver;
    config.kubectl = kubectl();
    config.admin_kubeconfig = layout.admin_kubeconfig();
    HF_RETURN_IF_ERROR(WriteFileAtomically(layout.dir + "/components.json",
                                           SupervisorConfigToJson(config).dump(2) + "\n", 0600));
    return startSupervisor(spec.name, layout);
  }

  ControlPlaneStatus status(std::string_view name) override {
    ControlPlaneStatus out;
    if (!ValidClusterName(name)) return out;
    const ControlPlaneLayout layout{dirOf(name)};
    auto plan_json = ReadJson(layout.dir + "/control-plane.json");
    if (!plan_json.ok()) return out;  // never made, or removed
    auto plan = PlanFromJson(*plan_json);
    if (!plan.ok()) {
      out.phase = ControlPlanePhase::kFailed;
      out.message = std::string(plan.status().message());
      return out;
    }
    out.endpoint = absl::StrCat("https://", plan->endpoint_host, ":", plan->ports.apiserver);
    out.ca_pem = ReadFile(layout.pki() + "/ca.crt").value_or("");
    if (!host::SupervisorPid(layout.dir)) {
      out.phase = ControlPlanePhase::kFailed;
      out.message = absl::StrCat("the control plane of ", AbslView(name), " is not running (see ",
                                 layout.logs(), "/supervisor.log); ensure starts it again");
      return out;
    }
    auto pin = host::ApiserverPin(layout.dir);
    const bool ready =
        pin.ok() && host::ApiserverGet(plan->ports.apiserver, *pin, "/readyz", 2).ok();
    auto ready_json = ReadJson(layout.dir + "/ready.json");
    if (ready && ready_json.ok()) {
      out.phase = ControlPlanePhase::kReady;
      out.served_version = ready_json->value("served_version", "");
      return out;
    }
    auto failure = ReadFile(layout.dir + "/failure.txt");
    out.phase = failure.ok() ? ControlPlanePhase::kFailed : ControlPlanePhase::kStarting;
    if (failure.ok()) out.message = *failure;
    return out;
  }

  Status remove(std::string_view name) override {
    if (!ValidClusterName(name)) return absl::OkStatus();  // cannot exist
    std::lock_guard lock(mu_);
    HF_ASSIGN_OR_RETURN(FileLock across, lockDataDir());
    const std::string dir = dirOf(name);
    std::error_code ec;
    if (!fs::exists(dir, ec)) return absl::OkStatus();
    if (auto pid = host::SupervisorPid(dir)) {
      kill(*pid, SIGTERM);
      (void)waitUntil([&] {
        reap();
        return !host::SupervisorPid(dir).has_value();
      }, 25s);
    }
    HF_RETURN_IF_ERROR(stopStrays(name, dir));
    fs::remove_all(dir, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot delete ", dir, ": ", ec.message()));
    }
    return absl::OkStatus();
  }

  std::vector<std::string> list() override {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options_.data_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_directory() && ValidClusterName(name)) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<NodeJoin> nodeJoin(std::string_view name, std::string_view node_name) override {
    HF_RETURN_IF_ERROR(CheckNodeName(node_name));
    // Both locks: another process (the eks-control-plane command) may join the same node.
    std::lock_guard lock(mu_);
    HF_ASSIGN_OR_RETURN(FileLock across, lockDataDir());
    HF_ASSIGN_OR_RETURN(ControlPlanePlan plan, loadPlan(name));
    return LoadOrMakeNodeJoin(ControlPlaneLayout{dirOf(name)}, plan, node_name);
  }

  StatusOr<std::vector<KubeNode>> nodes(std::string_view name) override {
    HF_ASSIGN_OR_RETURN(ControlPlanePlan plan, loadPlan(name));
    HF_ASSIGN_OR_RETURN(std::string out,
                        runKubectl(name, {"get", "nodes", "-o", "json"}, "kubectl get nodes"));
    auto nodes = ParseNodeList(out);
    if (!nodes.ok()) return absl::InternalError(nodes.status().message());
    KeepPodCidrsWithin(*nodes, plan.pod_cidr);
    return nodes;
  }

  Status updateNode(std::string_view name, std::string_view node_name,
                    const NodeUpdate& update) override {
    HF_RETURN_IF_ERROR(CheckNodeName(node_name));
    HF_RETURN_IF_ERROR(loadPlan(name).status());
    const std::string node(node_name);
    // Read, patch with the read's resourceVersion, again when the Node changed in between
    // (the node lifecycle controller adds and removes taints of its own).
    Status last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      HF_ASSIGN_OR_RETURN(std::string text, runKubectl(name, {"get", "node", node, "-o", "json"},
                                                       "kubectl get node " + node));
      const nlohmann::json current = nlohmann::json::parse(text, nullptr, false);
      HF_ASSIGN_OR_RETURN(nlohmann::json patch, NodePatch(current, update));
      if (update == NodeUpdate{}) return absl::OkStatus();
      last = runKubectl(name, {"patch", "node", node, "--type=merge", "-p", patch.dump()},
                        "kubectl patch node " + node)
                 .status();
      if (!absl::IsAborted(last)) return last;
    }
    return last;
  }

  Status removeNode(std::string_view name, std::string_view node_name) override {
    HF_RETURN_IF_ERROR(CheckNodeName(node_name));
    HF_RETURN_IF_ERROR(loadPlan(name).status());
    const std::string node(node_name);
    HF_RETURN_IF_ERROR(runKubectl(name,
                                  {"delete", "pods", "--all-namespaces",
                                   "--field-selector=spec.nodeName=" + node, "--grace-period=0",
                                   "--force", "--wait=false"},
                                  "kubectl delete pods of node " + node)
                           .status());
    HF_RETURN_IF_ERROR(runKubectl(name, {"delete", "node", node, "--ignore-not-found"},
                                  "kubectl delete node " + node)
                           .status());
    std::lock_guard lock(mu_);
    HF_ASSIGN_OR_RETURN(FileLock across, lockDataDir());
    std::error_code ec;
    const std::string node_dir = ControlPlaneLayout{dirOf(name)}.node_dir(node);
    fs::remove_all(node_dir, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot delete ", node_dir, ": ", ec.message()));
    }
    return absl::OkStatus();
  }

 private:
  // flock(<data-dir>/.lock): ensure and remove of two processes (a server and the
  // eks-control-plane command) never interleave; two creations at once chose the same ports.
  StatusOr<FileLock> lockDataDir() const {
    HF_RETURN_IF_ERROR(MakeDirs(options_.data_dir, 0700));
    return FileLock::Acquire(options_.data_dir + "/.lock", 0600);
  }

  // The plan of control plane `name`. Errors: NotFound when it has none (never made, removed).
  StatusOr<ControlPlanePlan> loadPlan(std::string_view name) const {
    auto json = ValidClusterName(name) ? ReadJson(dirOf(name) + "/control-plane.json")
                                       : StatusOr<nlohmann::json>(absl::NotFoundError(""));
    if (!json.ok()) {
      return absl::NotFoundError(
          absl::StrCat("EKS cluster ", AbslView(name), " has no control plane on this host"));
    }
    return PlanFromJson(*json);
  }

  // kubectl `args` against control plane `name` as its admin; its stdout. Errors:
  // KubectlFailure's (prefixed `what`), Unavailable when it took more than 10 s.
  StatusOr<std::string> runKubectl(std::string_view name, std::vector<std::string> args,
                                   const std::string& what) const {
    const ControlPlaneLayout layout{dirOf(name)};
    ProcessSpec spec;
    spec.argv = {kubectl(), "--kubeconfig=" + layout.admin_kubeconfig(), "--request-timeout=8s"};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    // HOME: its discovery cache goes with the control plane's data, as the supervisor's does.
    spec.env = std::vector<std::string>{"HOME=" + layout.dir, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
    spec.out = Stdio::Pipe();
    spec.err = Stdio::Pipe();
    RunOptions run;
    run.timeout = 10s;
    run.clock = clock_;
    HF_ASSIGN_OR_RETURN(RunResult result, RunProcess(spec, run));
    if (result.ending == RunEnding::kTimedOut) {
      return absl::UnavailableError(absl::StrCat(what, ": the apiserver of ", AbslView(name),
                                                 " did not answer within 10 s"));
    }
    if (!result.ok()) return KubectlFailure(what, result.err + result.out);
    return std::move(result.out);
  }

  std::string dirOf(std::string_view name) const {
    return absl::StrCat(options_.data_dir, "/", AbslView(name));
  }

  // The bin dir's own (scripts/kubernetes builds it with the rest): a fresh host has no other.
  std::string kubectl() const { return options_.kubernetes_bin_dir + "/kubectl"; }

  // The binaries, and the release kube-apiserver says it is.
  StatusOr<Binaries> findBinaries() const {
    Binaries b;
    const std::string& bin = options_.kubernetes_bin_dir;
    b.apiserver = bin + "/kube-apiserver";
    b.controller_manager = bin + "/kube-controller-manager";
    b.scheduler = bin + "/kube-scheduler";
    b.etcd = options_.etcd_binary.empty() ? FindProgram("etcd").value_or("etcd")
                                          : options_.etcd_binary;
    for (const std::string* path : {&b.apiserver, &b.controller_manager, &b.scheduler, &b.etcd}) {
      if (!IsExecutable(*path)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Kubernetes control plane: ", *path, " is not an executable (build the binaries "
            "with scripts/kubernetes; etcd is Debian's etcd-server)"));
      }
    }
    ProcessSpec spec;
    spec.argv = {b.apiserver, "--version"};
    spec.out = Stdio::Pipe();
    spec.err = Stdio::Stdout();
    RunOptions run;
    run.timeout = 30s;
    auto result = RunProcess(spec, run);
    const auto version = result.ok() ? ParseKubeVersion(result->out) : std::nullopt;
    if (!version) {
      return absl::FailedPreconditionError(absl::StrCat(
          b.apiserver, " --version did not print a release: ",
          result.ok() ? result->out.substr(0, 200) : std::string(result.status().message())));
    }
    b.version = *version;
    return b;
  }

  // The plan in control-plane.json (its spec updated), or a new control plane's files.
  StatusOr<ControlPlanePlan> loadOrCreate(const ControlPlaneSpec& spec,
                                          const ControlPlaneLayout& layout) {
    const std::string plan_path = layout.dir + "/control-plane.json";
    auto existing = ReadJson(plan_path);
    if (existing.ok()) {
      HF_ASSIGN_OR_RETURN(ControlPlanePlan plan, PlanFromJson(*existing));
      if (plan.spec.token_webhook_url != spec.token_webhook_url ||
          plan.spec.version != spec.version) {
        plan.spec.token_webhook_url = spec.token_webhook_url;
        plan.spec.version = spec.version;
        HF_RETURN_IF_ERROR(WriteTokenWebhookKubeconfig(layout, plan));
        HF_RETURN_IF_ERROR(WriteFileAtomically(plan_path, PlanToJson(plan).dump(2) + "\n", 0600));
      }
      return plan;
    }
    // No plan: nothing of it ever ran (the plan is written last), so start afresh; a
    // creation that fails leaves nothing behind.
    std::error_code ec;
    fs::remove_all(layout.dir, ec);
    auto plan = create(spec, layout);
    if (!plan.ok()) fs::remove_all(layout.dir, ec);
    return plan;
  }

  // A new control plane's directory, files and plan.
  StatusOr<ControlPlanePlan> create(const ControlPlaneSpec& spec,
                                    const ControlPlaneLayout& layout) {
    const std::string plan_path = layout.dir + "/control-plane.json";
    HF_RETURN_IF_ERROR(MakeDirs(options_.data_dir, 0700));
    HF_RETURN_IF_ERROR(MakeDirs(layout.dir, 0700));
    HF_RETURN_IF_ERROR(MakeDirs(layout.logs(), 0700));
    ControlPlanePlan plan;
    plan.spec = spec;
    // Host-wide: another data dir's server may be choosing ports for its own plane now.
    const std::string reservations = options_.port_reservations_dir.empty()
                                         ? host::DefaultPortReservationsDir()
                                         : options_.port_reservations_dir;
    HF_RETURN_IF_ERROR(MakeDirs(reservations, 0755));
    HF_ASSIGN_OR_RETURN(FileLock host_lock, FileLock::Acquire(reservations + "/.lock", 0644));
    std::set<int> unavailable = host::ListeningPorts();
    unavailable.merge(host::ReservedPorts(reservations));
    std::vector<std::string> pod_cidrs;
    for (const std::string& other : list()) {
      auto json = ReadJson(dirOf(other) + "/control-plane.json");
      auto other_plan = json.ok() ? PlanFromJson(*json) : StatusOr<ControlPlanePlan>(json.status());
      if (!other_plan.ok()) continue;
      for (int port : PortList(other_plan->ports)) unavailable.insert(port);
      pod_cidrs.push_back(other_plan->pod_cidr);
    }
    HF_ASSIGN_OR_RETURN(plan.ports,
                        ChoosePorts(unavailable, options_.first_port, options_.last_port));
    HF_ASSIGN_OR_RETURN(plan.pod_cidr, ChoosePodCidr(pod_cidrs, spec.service_cidr));
    HF_RETURN_IF_ERROR(host::ReservePorts(reservations, layout.dir, PortList(plan.ports)));
    std::vector<std::string> addresses = options_.host_addresses;
    if (addresses.empty()) addresses = host::Ipv4Addresses();
    plan.endpoint_host = "127.0.0.1";
    for (const std::string& a : addresses) {
      if (a.rfind("127.", 0) != 0) {
        plan.endpoint_host = a;
        break;
      }
    }
    plan.advertise_address = plan.endpoint_host;
    HF_ASSIGN_OR_RETURN(std::vector<std::string> alt_names,
                        ApiserverAltNames(addresses, spec.service_cidr));
    HF_RETURN_IF_ERROR(WriteControlPlaneFiles(layout, plan, alt_names));
    HF_RETURN_IF_ERROR(WriteFileAtomically(plan_path, PlanToJson(plan).dump(2) + "\n", 0600));
    return plan;
  }

  // Starts the supervisor detached (its own session, cwd the directory, output appended to
  // logs/supervisor.log) and waits for its pid file.
  Status startSupervisor(const std::string& name, const ControlPlaneLayout& layout) {
    unlink((layout.dir + "/supervisor.pid").c_str());
    unlink((layout.dir + "/failure.txt").c_str());
    unlink((layout.dir + "/ready.json").c_str());
    ProcessSpec spec;
    spec.argv = options_.supervisor_command;
    if (spec.argv.empty()) {
      std::error_code ec;
      spec.argv = {fs::read_symlink("/proc/self/exe", ec).string(), host::kSupervisorCommand};
      // Run this very binary through the kernel's link: once a rebuild or an upgrade has
      // replaced the file, the path reads "<path> (deleted)" and names nothing to exec.
      spec.program = "/proc/self/exe";
    }
    spec.argv.push_back(layout.dir);
    spec.cwd = layout.dir;
    spec.group = ProcessGroup::kNewSession;
    const std::string log = layout.logs() + "/supervisor.log";
    HF_RETURN_IF_ERROR(MakeDirs(layout.logs(), 0700));
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (out < 0) {
      return absl::InternalError(absl::StrCat("cannot open ", log, ": ", std::strerror(errno)));
    }
    spec.out = Stdio::Fd(out);
    spec.err = Stdio::Stdout();
    auto child = Subprocess::Spawn(spec);
    close(out);
    HF_RETURN_IF_ERROR(child.status());
    auto it = supervisors_.find(name);
    if (it != supervisors_.end()) {
      if (!it->second.TryWait()) (void)it->second.Release();
      supervisors_.erase(it);
    }
    supervisors_.emplace(name, *std::move(child));
    if (!waitUntil([&] { return host::SupervisorPid(layout.dir).has_value(); }, 10s)) {
      return absl::InternalError(
          absl::StrCat("the control plane supervisor of ", name, " did not start (see ", log, ")"));
    }
    return absl::OkStatus();
  }

  // Ends every process left in `dir` (a killed supervisor's components, a stray kubectl):
  // SIGTERM, then SIGKILL after 5 s. Errors: Internal naming those that did not end.
  Status stopStrays(std::string_view name, const std::string& dir) {
    const std::vector<int> strays = host::ProcessesUnder(dir);
    if (strays.empty()) return absl::OkStatus();
    for (int pid : strays) kill(pid, SIGTERM);
    if (waitUntil([&] { return reap(), host::ProcessesUnder(dir).empty(); }, 5s)) {
      return absl::OkStatus();
    }
    const bool clean = waitUntil([&] {
      reap();
      const std::vector<int> left = host::ProcessesUnder(dir);
      for (int pid : left) kill(pid, SIGKILL);
      return left.empty();
    }, 10s);
    if (clean) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("processes of control plane ", AbslView(name),
                                            " did not end: ",
                                            absl::StrJoin(host::ProcessesUnder(dir), ",")));
  }

  // Our supervisors that have ended, reaped.
  void reap() {
    for (auto it = supervisors_.begin(); it != supervisors_.end();) {
      it = it->second.TryWait() ? supervisors_.erase(it) : std::next(it);
    }
  }

  // Polls `done` every 50 ms until it holds or `timeout` passes (on the injected clock).
  template <class F>
  bool waitUntil(F done, std::chrono::milliseconds timeout) {
    const SteadyTime deadline = clock_->monotonic() + timeout;
    while (!done()) {
      if (clock_->monotonic() >= deadline) return done();
      std::this_thread::sleep_for(50ms);
    }
    return true;
  }

  const ProcessControlPlanesOptions options_;
  SystemClock system_clock_;
  const Clock* clock_;
  std::mutex mu_;  // ensure and remove, one at a time; supervisors_
  std::map<std::string, Subprocess> supervisors_;
};

}  // namespace

std::unique_ptr<ControlPlanes> MakeProcessControlPlanes(
    const ProcessControlPlanesOptions& options) {
  return std::make_unique<ProcessControlPlanes>(options);
}

}  // namespace hf::eks
