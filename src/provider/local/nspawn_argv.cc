// A local node's systemd-nspawn command line; see nspawn_argv.h.
#include "provider/local/nspawn_argv.h"

#include "absl/strings/str_cat.h"
#include "hyperfleet/provider/local_provider.h"
#include "hyperfleet/provider/node_image_variant.h"
#include "provider/local/ami_facts.h"

namespace hf::provider::local {

std::vector<std::string> NspawnArgv(const nlohmann::json& node) {
  const std::string hostname = node.value("hostname", "");
  std::vector<std::string> argv = {
      "systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--quiet",
      "-D", node.value("merged", ""),
      "--machine=" + hostname, "--hostname=" + hostname,
      "--network-namespace-path=/run/netns/" + node.value("netns", ""),
      "--resolv-conf=off", "--timezone=off", "--link-journal=no", "--console=passive",
      "--bind=" + node.value("fsx", "") + ":/fsx",
      "--bind-ro=" + node.value("binary", "") + ":/opt/hyperfleet/bin/hyperfleet"};
  // The srun --auto-resume plugin comes from the host like the binary (docs/slurm.md).
  if (const std::string plugin = node.value("spank_plugin", ""); !plugin.empty()) {
    argv.push_back(absl::StrCat("--bind-ro=", plugin, ":", kAutoResumePluginPath));
  }
  // Storage volumes and the host's driver modules (ami_facts.h), mounted before the node's
  // systemd starts, as HyperPod's are before lifecycle scripts run.
  for (const NodeBind& b : BindsFromJson(node.value("binds", nlohmann::json()))) {
    argv.push_back(absl::StrCat(b.read_only ? "--bind-ro=" : "--bind=", b.source, ":", b.target));
  }
  if (ParseNodeImageVariant(node.value("image_variant", "")) == NodeImageVariant::kEks) {
    argv.insert(argv.end(), {"--capability=all", "--system-call-filter=@keyring bpf",
                             "--bind-ro=/dev/kmsg"});
    argv.push_back(absl::StrCat("--bind=", node.value("containerd_dir", ""), ":",
                                std::string(kNodeContainerdDir)));
  }
  return argv;
}

}  // namespace hf::provider::local
