#pragma once
// Which node image a node boots: HyperPod has one AMI for Slurm clusters and another for
// EKS-orchestrated ones (containerd, the kubelet); local nodes have one image of each kind
// (node_image.h).
#include <optional>
#include <string_view>

namespace hf::provider {

/// The kind of node image an instance boots.
enum class NodeImageVariant {
  kSlurm,  ///< the base image: Slurm, MariaDB, the AMI layer (clusters without Orchestrator.Eks)
  kEks,    ///< the base image plus containerd, runc, the CNI plugins, kubelet and kube-proxy
};

/// "slurm" or "eks": the name in provider records and image.env.
constexpr std::string_view NodeImageVariantName(NodeImageVariant v) {
  return v == NodeImageVariant::kEks ? "eks" : "slurm";
}

/// The variant named `name` ("slurm", "eks"); nullopt for any other text.
constexpr std::optional<NodeImageVariant> ParseNodeImageVariant(std::string_view name) {
  if (name == "slurm") return NodeImageVariant::kSlurm;
  if (name == "eks") return NodeImageVariant::kEks;
  return std::nullopt;
}

}  // namespace hf::provider
