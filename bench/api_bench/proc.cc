#include "proc.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace api_bench {
namespace {

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto tv = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

MachineCpu ReadMachineCpu() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long v[10] = {};
  in >> cpu;
  for (auto& x : v) in >> x;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  // user nice system idle iowait irq softirq steal guest guest_nice
  const double idle = static_cast<double>(v[3] + v[4]);
  const double total = static_cast<double>(v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]);
  return {(total - idle) / tick, total / tick};
}

}  // namespace

Memory ReadMemory(int pid) {
  Memory m;
  if (pid <= 0) return m;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &kb) == 1) m.rss_mib = kb / 1024.0;
    if (std::sscanf(line.c_str(), "VmHWM: %ld kB", &kb) == 1) m.hwm_mib = kb / 1024.0;
  }
  return m;
}

double ProcessCpuSeconds(int pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(text.substr(paren + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  // Fields after the command: state(3) ... utime(14) stime(15).
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

CpuSnapshot SnapCpu(int server_pid) {
  return {ProcessCpuSeconds(server_pid), SelfCpuSeconds(), ReadMachineCpu(), Steady::now()};
}

CpuShare Share(const CpuSnapshot& a, const CpuSnapshot& b) {
  CpuShare s;
  s.wall = std::chrono::duration<double>(b.at - a.at).count();
  if (s.wall <= 0) return s;
  s.generator_seconds = b.self - a.self;
  s.generator = 100 * s.generator_seconds / s.wall;
  const double busy = b.machine.busy - a.machine.busy;
  const double total = b.machine.total - a.machine.total;
  const double cores = static_cast<double>(std::thread::hardware_concurrency());
  s.machine = total > 0 ? 100 * cores * busy / total : 0;
  if (a.server >= 0 && b.server >= 0) {
    s.server_seconds = b.server - a.server;
    s.server = 100 * s.server_seconds / s.wall;
  }
  s.other = std::max(0.0, s.machine - s.generator - std::max(0.0, s.server));
  return s;
}

}  // namespace api_bench
