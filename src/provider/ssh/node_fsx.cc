// SshProvider, a node's shared /fsx (ssh_provider_impl.h): the cluster's export served to
// the node's machine by FsxMount (fsx_mount.h) before its agent starts, unless the machine
// already has its own mount at /fsx or the lifecycle bundle's provisioning_parameters.json
// names FSx (PlanFsx, fsx_plan.h); stopped when the node goes.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "provider/ssh/fsx_plan.h"
#include "provider/ssh/ssh_provider_impl.h"

namespace hf::provider {

std::string SshProvider::Impl::provisioningParameters(const InstanceSpec& spec) const {
  if (!options_.provisioning_parameters || !spec.lifecycle.is_object()) return "";
  const auto uri = spec.lifecycle.find("SourceS3Uri");
  if (uri == spec.lifecycle.end() || !uri->is_string()) return "";
  auto text = options_.provisioning_parameters(uri->get<std::string>());
  if (text.ok()) return *std::move(text);
  // Unreadable now: the default /fsx, which lifecycle scripts that mount FSx mount over.
  if (!absl::IsNotFound(text.status())) {
    spdlog::warn("ssh provider: provisioning_parameters.json of {}: {}", spec.instance_id,
                 text.status().ToString());
  }
  return "";
}

Status SshProvider::Impl::startFsx(const NodeRec& rec, const hf::ssh::SshTarget& target) {
  if (!options_.shared_fsx) return absl::OkStatus();
  {
    std::lock_guard lock(fsx_mu_);
    if (fsx_.count(rec.spec.instance_id)) return absl::OkStatus();
  }
  HF_ASSIGN_OR_RETURN(auto probe, runStep(target, "fsx",
                                          ssh_scripts::RootCommand(
                                              target.user, ssh::FsxMountProbeCommand("/fsx")),
                                          ""));
  HF_ASSIGN_OR_RETURN(ssh::FsxPlan plan,
                      ssh::PlanFsx(provisioningParameters(rec.spec), probe.out));
  if (plan.source != ssh::FsxSource::kDefault) {
    spdlog::info("ssh provider: /fsx of {}: {}", rec.spec.instance_id, plan.reason);
    return absl::OkStatus();
  }
  const std::string cluster_dir = absl::StrCat(root_, "/clusters/", rec.spec.cluster_id);
  ssh::FsxMountOptions o;
  o.export_dir = cluster_dir + "/fsx";
  o.sandbox_dir = absl::StrCat(cluster_dir, "/fsx-sandbox/", rec.spec.instance_id);
  o.user = target.user;
  o.log_name = rec.spec.instance_id;
  o.start_remote = [target](std::string_view command, Stdio in, Stdio out, Stdio err) {
    return hf::ssh::Start(target, command, in, out, err);
  };
  HF_ASSIGN_OR_RETURN(auto mount, ssh::FsxMount::Start(std::move(o)));
  const bool up = mount->WaitMounted(
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.fsx_timeout));
  const std::string error = mount->state().last_error;
  {
    std::lock_guard lock(fsx_mu_);
    fsx_[rec.spec.instance_id] = std::move(mount);  // kept trying even when not up yet
  }
  if (!up) {
    return absl::UnavailableError(absl::StrCat("step fsx on ", target.address,
                                               ": /fsx did not mount: ", error));
  }
  return absl::OkStatus();
}

void SshProvider::Impl::stopFsx(const std::string& instance_id) {
  std::unique_ptr<ssh::FsxMount> mount;
  {
    std::lock_guard lock(fsx_mu_);
    auto it = fsx_.find(instance_id);
    if (it == fsx_.end()) return;
    mount = std::move(it->second);
    fsx_.erase(it);
  }
  mount->Stop();
}

}  // namespace hf::provider
