#include "hyperfleet/agent/node_files.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "hyperfleet/common/fs.h"

namespace hf::agent {
namespace {

bool HasDotDotSegment(std::string_view path) {
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

std::string NodePath(const std::string& root, std::string_view path) {
  std::string base = root;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (path.empty() || path.front() != '/') base += '/';
  return base + std::string(path);
}

Status WriteFileWithParents(const std::string& path, std::string_view content, unsigned mode) {
  HF_RETURN_IF_ERROR(MakeDirs(std::filesystem::path(path).parent_path().string(), 0755));
  return WriteFileAtomically(path, content, mode);
}

bool IsSafeBundleKey(std::string_view key) {
  if (key.empty() || key.front() == '/') return false;
  if (key.find('\0') != std::string_view::npos) return false;
  return !HasDotDotSegment(key);
}

Status WriteNodeFiles(const std::string& root, const std::vector<agentapi::NodeFile>& files) {
  Status first = absl::OkStatus();
  for (const auto& file : files) {
    Status status;
    if (file.path.empty() || file.path.front() != '/' || HasDotDotSegment(file.path)) {
      status = absl::InvalidArgumentError("refusing node file path " + file.path);
    } else {
      status = WriteFileWithParents(NodePath(root, file.path), file.content, file.mode & 07777);
    }
    if (!status.ok()) {
      spdlog::error("{}", std::string(status.message()));
      if (first.ok()) first = status;
    } else {
      spdlog::debug("wrote {} ({:o})", file.path, file.mode);
    }
  }
  return first;
}

}  // namespace hf::agent
