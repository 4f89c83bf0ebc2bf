// The ssh provider (ssh_provider.h): node records and their persistence under
// <data_dir>/ssh/nodes/, the Provider operations, adoption of an earlier run's records, and
// Create's checks. The ssh work is in node_work.cc, the spare loop in spares.cc.
#include "hyperfleet/provider/ssh_provider.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/provider/node_image.h"
#include "provider/local/sys.h"
#include "provider/ssh/ssh_provider_impl.h"

namespace hf::provider {
namespace fs = std::filesystem;
using Phase = SshProvider::Impl::Phase;

namespace {

constexpr std::pair<Phase, std::string_view> kPhaseNames[] = {
    {Phase::kAllocating, "allocating"}, {Phase::kProvisioning, "provisioning"},
    {Phase::kRunning, "running"},       {Phase::kRebooting, "rebooting"},
    {Phase::kFailed, "failed"},         {Phase::kTerminating, "terminating"}};

std::string_view PhaseName(Phase p) {
  for (const auto& [phase, name] : kPhaseNames) {
    if (phase == p) return name;
  }
  return "failed";
}

Phase ParsePhase(std::string_view name) {
  for (const auto& [phase, n] : kPhaseNames) {
    if (n == name) return phase;
  }
  return Phase::kFailed;
}

int64_t Seconds(SystemTime t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

pool::PoolPolicy SshProvider::DefaultPolicy() {
  pool::PoolPolicy p;
  p.lemon_failures = 1;
  p.return_check = true;
  return p;
}

SshProvider::Impl::Impl(const Options& options) : options_(options), root_(options.data_dir + "/ssh") {
  if (!options_.ssh_run) options_.ssh_run = hf::ssh::Run;
}

SshProvider::Impl::~Impl() {
  {
    std::lock_guard lock(loop_mu_);
    loop_stop_ = true;
  }
  loop_cv_.notify_all();
  if (loop_thread_.joinable()) loop_thread_.join();
  WorkerThreads workers;
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    workers = workers_.TakeAll();
  }
  workers.JoinAll();
  if (binary_map_) ::munmap(binary_map_, binary_size_);
}

SystemTime SshProvider::Impl::now() const {
  return options_.clock ? options_.clock->now() : std::chrono::system_clock::now();
}

std::string SshProvider::Impl::nodeFile(std::string_view id) const {
  return absl::StrCat(root_, "/nodes/", std::string(id), ".json");
}

void SshProvider::Impl::spawn(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (shutting_down_) return;
  workers_.Spawn(std::move(fn));
}

void SshProvider::Impl::waitIdle() {
  for (;;) {
    WorkerThreads workers;
    {
      std::lock_guard lock(mu_);
      workers = workers_.TakeAll();
    }
    if (workers.empty()) return;
    workers.JoinAll();
  }
}

Status SshProvider::Impl::persist(const NodeRec& rec) {
  nlohmann::json j = {{"phase", PhaseName(rec.phase)},
                      {"machine_id", rec.machine_id},
                      {"private_ip", rec.ip},
                      {"hostname", rec.hostname},
                      {"message", rec.message},
                      {"boot_id", rec.boot_id},
                      {"boot_time", Seconds(rec.boot_time)},
                      {"from_spare", rec.from_spare}};
  WriteInstanceSpec(rec.spec, j);
  return WriteFileAtomically(nodeFile(rec.spec.instance_id), j.dump(2) + "\n", 0600);
}

Status SshProvider::Impl::launch(const InstanceSpec& spec) {
  if (spec.instance_id.empty() || spec.cluster_id.empty() ||
      spec.instance_id.find('/') != std::string::npos ||
      spec.cluster_id.find('/') != std::string::npos || spec.instance_id[0] == '.') {
    return absl::InvalidArgumentError("instance and cluster ids must be non-empty names");
  }
  auto rec = std::make_shared<NodeRec>();
  rec->spec = spec;
  {
    std::lock_guard lock(mu_);
    if (nodes_.count(spec.instance_id)) return absl::OkStatus();  // idempotent
    HF_RETURN_IF_ERROR(persist(*rec));
    nodes_[spec.instance_id] = rec;
  }
  spawn([this, rec] { setUp(rec); });
  return absl::OkStatus();
}

Status SshProvider::Impl::terminate(std::string_view id, bool now) {
  std::shared_ptr<NodeRec> rec;
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return absl::OkStatus();
    rec = it->second;
    if (now) rec->stop_now = true;
    if (rec->phase == Phase::kTerminating) return absl::OkStatus();
    rec->phase = Phase::kTerminating;
    (void)persist(*rec);
  }
  spawn([this, rec] { tearDown(rec); });
  return absl::OkStatus();
}

Status SshProvider::Impl::reboot(std::string_view id) {
  std::shared_ptr<NodeRec> rec;
  {
    std::lock_guard lock(mu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end()) {
      return absl::NotFoundError(absl::StrCat("no instance ", std::string(id)));
    }
    rec = it->second;
    if (rec->phase != Phase::kRunning) {
      return absl::FailedPreconditionError(
          absl::StrCat("instance ", std::string(id), " is ", std::string(PhaseName(rec->phase)), ", not running"));
    }
    rec->phase = Phase::kRebooting;
    (void)persist(*rec);
  }
  spawn([this, rec] { doReboot(rec); });
  return absl::OkStatus();
}

StatusOr<std::vector<InstanceObservation>> SshProvider::Impl::list(std::string_view cluster_id) {
  std::vector<InstanceObservation> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, rec] : nodes_) {
    if (rec->spec.cluster_id != cluster_id) continue;
    InstanceObservation o;
    o.instance_id = id;
    o.cluster_id = rec->spec.cluster_id;
    o.private_ip = rec->ip;
    o.hostname = rec->hostname;
    o.message = rec->message;
    o.boot_time = rec->boot_time;
    switch (rec->phase) {
      case Phase::kAllocating:
      case Phase::kProvisioning:
      case Phase::kRebooting: o.state = InstanceState::kPending; break;
      case Phase::kRunning: o.state = InstanceState::kRunning; break;
      case Phase::kFailed: o.state = InstanceState::kFailed; break;
      case Phase::kTerminating: o.state = InstanceState::kTerminating; break;
    }
    out.push_back(std::move(o));
  }
  return out;
}

// Records of an earlier run: running nodes stay as they are (their agents reconnect); work
// cut short is done again (provisioning and teardown are idempotent).
void SshProvider::Impl::adopt() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ + "/nodes", ec)) {
    if (entry.path().extension() != ".json") continue;
    auto text = ReadFile(entry.path().string());
    if (!text.ok()) continue;
    const auto j = nlohmann::json::parse(*text, nullptr, false);
    if (!j.is_object()) continue;
    auto rec = std::make_shared<NodeRec>();
    rec->spec = ReadInstanceSpec(j);
    rec->phase = ParsePhase(j.value("phase", ""));
    rec->machine_id = j.value("machine_id", "");
    rec->ip = j.value("private_ip", "");
    rec->hostname = j.value("hostname", "");
    rec->message = j.value("message", "");
    rec->boot_id = j.value("boot_id", "");
    rec->boot_time = SystemTime(std::chrono::seconds(j.value("boot_time", int64_t{0})));
    rec->from_spare = j.value("from_spare", false);
    if (rec->spec.instance_id.empty() || entry.path().stem() != rec->spec.instance_id) continue;
    {
      std::lock_guard lock(mu_);
      nodes_[rec->spec.instance_id] = rec;
    }
    switch (rec->phase) {
      case Phase::kTerminating: spawn([this, rec] { tearDown(rec); }); break;
      case Phase::kAllocating:
      case Phase::kProvisioning: spawn([this, rec] { setUp(rec); }); break;
      case Phase::kRebooting: spawn([this, rec] { doReboot(rec); }); break;
      case Phase::kRunning:
      case Phase::kFailed: break;
    }
    if (rec->phase == Phase::kRunning) {
      // Its machine's access, its /fsx again (the mount lived on our ssh connection).
      spawn([this, rec] {
        std::lock_guard op(*rec->op_mu);
        if (!grant(*rec, /*allocate=*/false).ok()) return;
        if (Status st = startFsx(*rec, targetOf(rec->access)); !st.ok()) {
          spdlog::warn("ssh provider: /fsx of {}: {}", rec->spec.instance_id,
                       std::string(st.message()));
        }
        scheduleHosts(rec->spec.cluster_id);
      });
    }
  }
}

void SshProvider::Impl::startLoop() {
  loop_thread_ = std::thread([this] { loop(); });
}

// ---- SshProvider ----------------------------------------------------------------------------

SshProvider::SshProvider(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SshProvider::~SshProvider() = default;

StatusOr<std::unique_ptr<SshProvider>> SshProvider::Create(const Options& options) {
  if (!options.inventory) return absl::InvalidArgumentError("the ssh provider needs a machine inventory");
  if (options.data_dir.empty()) return absl::InvalidArgumentError("the ssh provider needs a data dir");
  if (!absl::StartsWith(options.agent_url, "http://") &&
      !absl::StartsWith(options.agent_url, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ssh provider needs the agent endpoint's URL as machines reach it (http:// or "
        "https://), got '", options.agent_url, "'"));
  }
  auto impl = std::make_unique<Impl>(options);
  {
    const int fd = ::open(options.node_binary.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size <= 0 ||
        (impl->binary_map_ = ::mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) ==
            MAP_FAILED) {
      if (fd >= 0) ::close(fd);
      impl->binary_map_ = nullptr;
      return absl::FailedPreconditionError(absl::StrCat(
          "the ssh provider copies the node binary to machines: cannot read '",
          options.node_binary, "'"));
    }
    ::close(fd);
    impl->binary_size_ = static_cast<size_t>(st.st_size);
    impl->binary_ = std::string_view(static_cast<const char*>(impl->binary_map_), impl->binary_size_);
  }
  impl->binary_sha_ = local::Sha256Hex(impl->binary_);
  HF_RETURN_IF_ERROR(MakeDirs(impl->root_ + "/nodes"));
  HF_RETURN_IF_ERROR(MakeDirs(impl->root_ + "/clusters"));
  HF_ASSIGN_OR_RETURN(impl->base_script_, [&]() -> StatusOr<std::string> {
    ssh_scripts::BaseInputs in;
    for (const auto& [path, bytes] : NodeImageRecipe()) {
      if (path == "packages.txt") in.packages = ssh_scripts::MachinePackages(bytes);
      if (path == "ami-layer.sh" || absl::StartsWith(path, "units/") ||
          absl::StartsWith(path, "slurm/") || absl::StartsWith(path, "ami/")) {
        in.recipe.emplace_back(path, bytes);
      }
    }
    if (in.packages.empty()) return absl::InternalError("the embedded packages.txt lists nothing");
    return ssh_scripts::RenderBaseScript(in);
  }());
  std::unique_ptr<SshProvider> p(new SshProvider(std::move(impl)));
  p->impl_->adopt();
  p->impl_->startLoop();
  return p;
}

Status SshProvider::launch(const InstanceSpec& spec) { return impl_->launch(spec); }
Status SshProvider::terminate(std::string_view id) { return impl_->terminate(id, false); }
Status SshProvider::terminateNow(std::string_view id) { return impl_->terminate(id, true); }
Status SshProvider::reboot(std::string_view id) { return impl_->reboot(id); }
StatusOr<std::vector<InstanceObservation>> SshProvider::list(std::string_view cluster_id) {
  return impl_->list(cluster_id);
}
void SshProvider::runSparePassForTest() {
  impl_->sparePass();
  impl_->waitIdle();
}
void SshProvider::waitIdleForTest() { impl_->waitIdle(); }

}  // namespace hf::provider
