#pragma once
// `hyperfleet image build|path`: the node image cache (include/hyperfleet/provider/node_image.h).
namespace CLI {
class App;
}

namespace hf::cli {

/// Registers `image` with its subcommands on `app`:
///   image build [--image-dir DIR] [--mirror URL] [--prune]: builds the node image when
///     missing (root), streaming the build's output to stderr, and prints the rootfs path;
///     --prune then removes images of other recipes that no node mounts;
///   image path [--image-dir DIR]: prints the rootfs path, or fails (exit 1) if not built.
void AddImageCommand(CLI::App& app);

}  // namespace hf::cli
