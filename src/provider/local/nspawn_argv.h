#pragma once
// The systemd-nspawn command line of a local node, from its node.json (written by
// LocalProvider, read by the node supervisor). Pure, so that what a Slurm node and an EKS node
// get is table-tested. Internal to hf_local_provider.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hf::provider::local {

/// Where an EKS node's containerd keeps its state: a plain host directory (containerd's
/// overlayfs snapshotter cannot put its upper dirs on the node's overlay root).
inline constexpr std::string_view kNodeContainerdDir = "/var/lib/containerd";

/// argv of systemd-nspawn for `node` (members merged, hostname, netns, fsx, binary,
/// spank_plugin, binds, image_variant, containerd_dir). Every node boots its merged root in
/// its network namespace with /fsx and the hyperfleet binary bound. A node whose
/// image_variant is "eks" also gets what the kubelet and containerd need
/// (docs/kubernetes.md "A kubelet inside a local node"): all capabilities (CNI bridges, veths,
/// iptables), the @keyring and bpf system calls (runc's session keyrings and device filter),
/// the host's /dev/kmsg read-only (the kubelet's OOM watcher) and containerd_dir bound at
/// kNodeContainerdDir.
std::vector<std::string> NspawnArgv(const nlohmann::json& node);

}  // namespace hf::provider::local
