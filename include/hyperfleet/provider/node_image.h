#pragma once
// The node image: a Debian bookworm root filesystem that every local node boots from, shared
// read-only beneath each node's overlay. Built once per host by the recipe in
// data/node-image/ (debootstrap minbase + packages.txt + the AMI layer), embedded in the
// binary, and cached by content: <image-dir>/<key>/rootfs where <key> hashes the recipe.
// Design: docs/nodes.md ("Host layout"); what the image must provide: docs/hyperpod-contract.md
// "The machine". The EKS variant (NodeImageVariant::kEks) is the base image plus
// data/node-image/eks-layer.sh, keyed by the whole recipe and the Kubernetes binaries it ships
// (docs/kubernetes.md "The EKS node image").
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/provider/node_image_variant.h"

namespace hf::provider {

/// Default host-wide image cache, shared by every data dir.
inline constexpr std::string_view kDefaultImageDir = "/var/lib/hyperfleet/images";
/// Default Debian mirror for debootstrap and apt during the build.
inline constexpr std::string_view kDefaultImageMirror = "http://deb.debian.org/debian";
/// Debian suite of the image; part of the key.
inline constexpr std::string_view kNodeImageSuite = "bookworm";
/// Default directory of the kubelet and kube-proxy the EKS image ships (scripts/kubernetes).
inline constexpr std::string_view kDefaultKubernetesBin =
    "/var/lib/hyperfleet/kubernetes/current/bin";

/// Where the image cache is and how to build into it.
struct NodeImageOptions {
  std::string image_dir;  ///< empty = kDefaultImageDir
  std::string mirror;     ///< empty = kDefaultImageMirror; not part of the key
  /// Receives the build's output, one line at a time (without the newline); may be empty.
  std::function<void(std::string_view)> log;
  NodeImageVariant variant = NodeImageVariant::kSlurm;  ///< which image
  /// kEks: directory holding kubelet and kube-proxy; empty = kDefaultKubernetesBin.
  std::string kubernetes_bin{};
};

/// A built image.
struct NodeImage {
  std::string key;     ///< 16 lowercase hex
  std::string rootfs;  ///< absolute path of <image-dir>/<key>/rootfs
};

/// One recipe file: path relative to data/node-image/ and its bytes.
using RecipeFile = std::pair<std::string, std::string>;

/// The embedded base recipe (data/node-image/* but the EKS layer's files), sorted by path.
const std::vector<RecipeFile>& NodeImageRecipe();

/// The embedded EKS layer (data/node-image/eks-layer.sh and eks/*), sorted by path.
const std::vector<RecipeFile>& EksNodeImageRecipe();

/// Whether a recipe path belongs to the EKS layer (eks-layer.sh, eks/...). Pure.
bool IsEksRecipePath(std::string_view path);

/// Key of an image built from `files` for `suite`: the first 16 hex of SHA-256 over, for
/// each file in path order, "<path>\0<size>\0<bytes>", then "suite\0<suite>". Pure; the
/// order of `files` does not matter.
std::string NodeImageKeyOf(const std::vector<RecipeFile>& files, std::string_view suite);

/// Key of the embedded recipe for kNodeImageSuite.
std::string NodeImageKey();

/// Key of an EKS image: NodeImageKeyOf over the base files, the EKS files and, for each
/// binary, ("kubernetes-bin/<name>", <its lowercase hex SHA-256>). Pure. Never equals a
/// base key (the EKS files are part of it).
std::string EksNodeImageKeyOf(const std::vector<RecipeFile>& base,
                              const std::vector<RecipeFile>& eks,
                              const std::vector<RecipeFile>& binary_sha256,
                              std::string_view suite);

/// Key of the image `options` asks for: NodeImageKey() for kSlurm; for kEks the embedded
/// recipes and the SHA-256 of <kubernetes_bin>/kubelet and kube-proxy (read in full).
/// Errors (kEks): NotFound naming the missing binary and scripts/kubernetes.
StatusOr<std::string> NodeImageKeyFor(const NodeImageOptions& options);

/// The image of `options.variant` if it is built. Errors: NotFound (saying to run
/// `hyperfleet image build [--eks]` or scripts/setup) when <image-dir>/<key>/rootfs is
/// missing; NodeImageKeyFor's.
StatusOr<NodeImage> FindNodeImage(const NodeImageOptions& options);

/// The image for the embedded recipe, built first when missing. Concurrent callers (threads,
/// servers, tests) build once: the build holds flock(<image-dir>/.lock), runs in a temporary
/// <image-dir>/.build-<key>-* and is renamed to <image-dir>/<key> only when complete; stale
/// temporary dirs from crashed builds are removed under the lock. Older keys are left alone.
/// kEks builds the base image first (as kSlurm), then copies it and runs eks-layer.sh over
/// the copy. Errors: FailedPrecondition when not root or debootstrap (kEks: gcc, umoci) is
/// missing (names the package); Internal naming the failing step (debootstrap, packages,
/// ami-layer, cleanup; kEks: base-copy, eks-packages, kubernetes, pause-image, eks-units) with
/// the tail of the build's log; Internal for filesystem errors; NodeImageKeyFor's.
StatusOr<NodeImage> EnsureNodeImage(const NodeImageOptions& options);

/// Removes built images under the image dir whose key is neither the embedded recipe's nor
/// the EKS image's for options.kubernetes_bin (when its binaries are there), and
/// that no mounted overlay uses as a lower layer (checked in /proc/self/mountinfo), under the
/// build lock. Returns the removed keys. Errors: Internal for filesystem errors.
StatusOr<std::vector<std::string>> PruneNodeImages(const NodeImageOptions& options);

}  // namespace hf::provider
