#include "provider/local/sys.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/mountinfo.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::provider::local {
namespace fs = std::filesystem;

Status RunOk(const std::vector<std::string>& argv) {
  HF_ASSIGN_OR_RETURN(RunResult r, RunCapture(argv));
  if (!r.ok()) {
    return absl::InternalError(absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (status ",
                                            r.exit.exit_code, "): ", r.out));
  }
  return absl::OkStatus();
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(md), static_cast<std::size_t>(len)));
}

bool ProcessMatches(int pid, const std::vector<std::string>& needles) {
  if (pid <= 0) return false;
  auto cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  if (!cmdline.ok() || cmdline->empty()) return false;  // gone, or a zombie
  for (const auto& needle : needles) {
    if (cmdline->find(needle) == std::string::npos) return false;
  }
  return true;
}

std::vector<int> ChildPids(int pid) {
  std::vector<int> out;
  auto text = ReadFile(absl::StrCat("/proc/", pid, "/task/", pid, "/children"));
  if (!text.ok()) return out;
  for (absl::string_view part : absl::StrSplit(*text, ' ', absl::SkipWhitespace())) {
    int child = 0;
    if (absl::SimpleAtoi(part, &child)) out.push_back(child);
  }
  return out;
}

// When process `pid` started (its /proc stat starttime after the host's btime); zero when
// unknown. A node's init starts anew at every boot, so this is the node's boot time.
SystemTime ProcessStartTime(int pid) {
  auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  auto host = ReadFile("/proc/stat");
  if (!stat.ok() || !host.ok()) return SystemTime{};
  // Fields after the parenthesised command name; starttime is field 22 (1-based).
  const size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 2 > stat->size()) return SystemTime{};
  std::vector<std::string> f = absl::StrSplit(stat->substr(close + 2), ' ');
  double start_ticks = 0;
  if (f.size() < 20 || !absl::SimpleAtod(f[19], &start_ticks)) return SystemTime{};
  double btime = 0;
  for (absl::string_view line : absl::StrSplit(*host, '\n')) {
    if (absl::ConsumePrefix(&line, "btime ") && absl::SimpleAtod(line, &btime)) break;
  }
  if (btime <= 0) return SystemTime{};
  return FromEpochSeconds(btime + start_ticks / static_cast<double>(sysconf(_SC_CLK_TCK)));
}

std::optional<int> ReadPidFile(const std::string& path) {
  auto text = ReadFile(path);
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 0) {
    return std::nullopt;
  }
  return pid;
}

Status WriteKernelFile(const std::string& path, std::string_view value) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && write(fd, value.data(), value.size()) ==
                                 static_cast<ssize_t>(value.size());
  const int err = errno;
  if (fd >= 0) close(fd);
  if (!ok) {
    return absl::InternalError(absl::StrCat("cannot write ", AbslView(value),
                                            " to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

std::vector<std::string> CgroupHierarchies() {
  std::vector<std::string> v2, v1;
  for (const MountEntry& m : ReadMountInfo().value_or(std::vector<MountEntry>{})) {
    if (m.mount_point.rfind("/sys/fs/cgroup", 0) != 0) continue;
    if (m.fs_type == "cgroup2") v2.push_back(m.mount_point);
    if (m.fs_type == "cgroup") v1.push_back(m.mount_point);
  }
  v2.insert(v2.end(), v1.begin(), v1.end());
  return v2;
}

bool IsMountPoint(const std::string& path) {
  return IsMountPointIn(ReadMountInfo().value_or(std::vector<MountEntry>{}), path);
}

void RemoveDirsDepthFirst(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) RemoveDirsDepthFirst(entry.path());
  }
  rmdir(dir.c_str());
}

std::vector<int> CgroupTreePids(const std::string& dir) {
  std::vector<int> pids;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return pids;
  if (auto text = ReadFile(dir + "/cgroup.procs"); text.ok()) {
    for (auto line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
    }
  }
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
      auto below = CgroupTreePids(entry.path().string());
      pids.insert(pids.end(), below.begin(), below.end());
    }
  }
  return pids;
}

bool KillCgroupTree(const std::string& rel, std::chrono::milliseconds timeout) {
  auto all = [&] {
    std::vector<int> pids;
    for (const std::string& root : CgroupHierarchies()) {
      auto more = CgroupTreePids(root + "/" + rel);
      pids.insert(pids.end(), more.begin(), more.end());
    }
    return pids;
  };
  return WaitFor(
      [&] {
        auto pids = all();
        for (int pid : pids) kill(pid, SIGKILL);
        return pids.empty();
      },
      timeout, std::chrono::milliseconds(50));
}

}  // namespace hf::provider::local
