#include "hyperfleet/common/mountinfo.h"

#include <vector>

#include "absl/strings/str_split.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/strings.h"

namespace hf {
namespace {

bool IsOctal(char c) { return c >= '0' && c <= '7'; }

// Decodes the kernel's \ooo escapes (it escapes space, tab, newline and
// backslash).
std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && IsOctal(s[i + 1]) &&
        IsOctal(s[i + 2]) && IsOctal(s[i + 3])) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 +
                                      (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

} // namespace

std::vector<MountEntry> ParseMountInfo(std::string_view text) {
  std::vector<MountEntry> out;
  for (absl::string_view line :
       absl::StrSplit(AbslView(text), '\n', absl::SkipEmpty())) {
    // id parent major:minor root mount-point options [optional fields...] -
    // fstype source super
    const size_t sep = line.find(" - ");
    if (sep == absl::string_view::npos)
      continue;
    const std::vector<absl::string_view> head =
        absl::StrSplit(line.substr(0, sep), ' ');
    const std::vector<absl::string_view> tail =
        absl::StrSplit(line.substr(sep + 3), ' ');
    if (head.size() < 6 || tail.size() < 3)
      continue;
    MountEntry e;
    e.root = Unescape(StdView(head[3]));
    e.mount_point = Unescape(StdView(head[4]));
    e.options = std::string(StdView(head[5]));
    e.fs_type = std::string(StdView(tail[0]));
    e.source = Unescape(StdView(tail[1]));
    e.super_options = std::string(StdView(tail[2]));
    out.push_back(std::move(e));
  }
  return out;
}

StatusOr<std::vector<MountEntry>> ReadMountInfo() {
  StatusOr<std::string> text = ReadFile("/proc/self/mountinfo");
  if (!text.ok())
    return text.status();
  return ParseMountInfo(*text);
}

bool IsMountPointIn(const std::vector<MountEntry> &mounts,
                    std::string_view dir) {
  for (const MountEntry &e : mounts) {
    if (e.mount_point == dir)
      return true;
  }
  return false;
}

} // namespace hf
