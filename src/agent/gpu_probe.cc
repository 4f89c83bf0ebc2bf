// What the monitor reads about GPUs on the node: NVIDIA GPUs on the PCI bus (sysfs), NVML
// (nvml.cc, loaded once and kept) and the driver's Xids in the kernel log (/dev/kmsg, kept
// open: each round reads only the new records). The verdicts are gpu_rules.cc's.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "hyperfleet/agent/agent.h"
#include "hyperfleet/agent/health.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/strings.h"

namespace hf::agent {
namespace {

constexpr std::size_t kMaxXidEvents = 4096;  // bounds memory on a GPU spewing Xids

}  // namespace

unsigned CountPciGpus(const std::string& devices_dir) {
  DIR* dir = opendir(devices_dir.c_str());
  if (dir == nullptr) return 0;
  unsigned count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string base = devices_dir + "/" + entry->d_name;
    const auto vendor = ReadFile(base + "/vendor");
    const auto klass = ReadFile(base + "/class");
    if (!vendor.ok() || !klass.ok() || StripAsciiWhitespace(*vendor) != "0x10de") continue;
    const std::string_view c = StripAsciiWhitespace(*klass);
    if (c.starts_with("0x0300") || c.starts_with("0x0302")) ++count;
  }
  closedir(dir);
  return count;
}

void HealthMonitor::CheckGpus(HealthReport* report) {
  if (!options_.nvml) return;
  const unsigned pci_gpus = CountPciGpus(NodePath(options_.root, options_.pci_devices));
  if (!nvml_) {
    auto opened = Nvml::Open(options_.nvml_library);
    if (!opened.ok()) {
      const std::string why(opened.status().message());
      if (absl::IsNotFound(opened.status())) {
        if (pci_gpus > 0) {
          report->findings.push_back(
              {"nvml", Severity::kWarning,
               "not present, but " + std::to_string(pci_gpus) +
                   " NVIDIA GPUs are on the PCI bus: GPU checks skipped (" + why + ")"});
        } else {
          report->findings.push_back({"nvml", Severity::kOk, "not present (" + why + ")"});
          return;  // not a GPU node
        }
      } else {
        // The library is there but cannot talk to the driver: with GPUs on the bus that is a
        // broken GPU stack (HyperPod HMA: NvidiaErrorReboot).
        report->findings.push_back({"nvml", pci_gpus > 0 ? Severity::kSoftFault : Severity::kWarning,
                                    "present but unusable: " + why});
      }
    } else {
      nvml_ = std::move(*opened);
    }
  }
  if (nvml_) {
    report->findings.push_back({"nvml", Severity::kOk, "loaded " + nvml_->library()});
    std::optional<unsigned> expected = options_.expected_gpus;
    std::string source = "instance type";
    if (!expected && pci_gpus > 0) {
      expected = pci_gpus;
      source = "NVIDIA GPUs on the PCI bus";
    }
    for (auto& f : EvaluateGpus(nvml_->Query(), expected, source, options_.gpu)) {
      report->findings.push_back(std::move(f));
    }
  }
  ReadKernelLog();
  if (kmsg_fd_ < 0 && xids_.empty()) {
    report->findings.push_back(
        {"gpu.xid", Severity::kWarning, "kernel log not readable: Xids not checked (" + kmsg_error_ + ")"});
    return;
  }
  for (auto& f : EvaluateXids(xids_)) report->findings.push_back(std::move(f));
}

void HealthMonitor::ReadKernelLog() {
  if (kmsg_fd_ < 0) {
    const std::string path = NodePath(options_.root, options_.kernel_log);
    kmsg_fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (kmsg_fd_ < 0) {
      const int e = errno;
      kmsg_error_ = path + ": " + std::strerror(e);
      return;
    }
  }
  char buffer[8192];  // a /dev/kmsg read returns one record, at most about 1 KiB
  for (;;) {
    const ssize_t n = read(kmsg_fd_, buffer, sizeof buffer);
    if (n == 0) break;  // end of a regular file (tests); more may be appended later
    if (n < 0) {
      if (errno == EINTR || errno == EPIPE) continue;  // EPIPE: records overwritten
      if (errno == EAGAIN) break;                       // no new record
      kmsg_error_ = options_.kernel_log + ": " + std::strerror(errno);
      close(kmsg_fd_);
      kmsg_fd_ = -1;
      break;
    }
    kmsg_partial_.append(buffer, static_cast<std::size_t>(n));
    const std::size_t last = kmsg_partial_.rfind('\n');
    if (last == std::string::npos) {
      if (kmsg_partial_.size() > 65536) kmsg_partial_.clear();  // no line end: garbage
      continue;
    }
    for (auto& e : ParseXids(std::string_view(kmsg_partial_).substr(0, last + 1))) {
      if (xids_.size() >= kMaxXidEvents) break;
      if (e.xid > 0) spdlog::warn("health: {}", e.text);
      xids_.push_back(std::move(e));
    }
    kmsg_partial_.erase(0, last + 1);
  }
}

}  // namespace hf::agent
