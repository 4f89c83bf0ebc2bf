// `hyperfleet image`: build or locate the node image.
#include "hyperfleet/cli/image_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "hyperfleet/cli/command_error.h"
#include "hyperfleet/provider/node_image.h"

namespace hf::cli {
namespace {

struct ImageFlags {
  std::string image_dir;
  std::string mirror;
  bool prune = false;
  bool eks = false;             // the EKS variant (containerd, kubelet)
  std::string kubernetes_bin;  // where its kubelet and kube-proxy are
};

provider::NodeImageOptions OptionsOf(const ImageFlags& flags) {
  provider::NodeImageOptions options{flags.image_dir, flags.mirror, [](std::string_view line) {
                                       std::fprintf(stderr, "%.*s\n",
                                                    static_cast<int>(line.size()), line.data());
                                     }};
  options.variant =
      flags.eks ? provider::NodeImageVariant::kEks : provider::NodeImageVariant::kSlurm;
  options.kubernetes_bin = flags.kubernetes_bin;
  return options;
}

void AddVariantFlags(CLI::App& cmd, ImageFlags& flags) {
  cmd.add_flag("--eks", flags.eks,
               "The EKS node image (the base image plus containerd, runc, the CNI plugins, "
               "kubelet and kube-proxy)");
  cmd.add_option("--kubernetes-bin", flags.kubernetes_bin,
                 "With --eks: directory of the kubelet and kube-proxy to ship (default " +
                     std::string(provider::kDefaultKubernetesBin) + ")");
}

}  // namespace

void AddImageCommand(CLI::App& app) {
  auto flags = std::make_shared<ImageFlags>();
  auto* image = app.add_subcommand("image", "The node image local nodes boot from");
  image->require_subcommand(1);
  auto dir_help = "Image cache (default " + std::string(provider::kDefaultImageDir) + ")";

  auto* build =
      image->add_subcommand("build", "Build the node image if missing (root); print its rootfs");
  build->add_option("--image-dir", flags->image_dir, dir_help);
  build->add_option(
      "--mirror", flags->mirror,
      "Debian mirror for the build (default " + std::string(provider::kDefaultImageMirror) + ")");
  build->add_flag("--prune", flags->prune, "Also remove images of other recipes no node mounts");
  AddVariantFlags(*build, *flags);
  build->callback([flags] {
    const provider::NodeImageOptions options = OptionsOf(*flags);
    auto image = provider::EnsureNodeImage(options);
    if (!image.ok()) ExitWithError("image build", image.status());
    if (flags->prune) {
      auto removed = provider::PruneNodeImages(options);
      if (!removed.ok()) ExitWithError("image build --prune", removed.status());
    }
    std::printf("%s\n", image->rootfs.c_str());
  });

  auto* path = image->add_subcommand("path", "Print the node image's rootfs; fail if not built");
  path->add_option("--image-dir", flags->image_dir, dir_help);
  AddVariantFlags(*path, *flags);
  path->callback([flags] {
    auto image = provider::FindNodeImage(OptionsOf(*flags));
    if (!image.ok()) ExitWithError("image path", image.status());
    std::printf("%s\n", image->rootfs.c_str());
  });
}

}  // namespace hf::cli
