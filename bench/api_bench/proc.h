#pragma once
// /proc readings: a process's memory and CPU, the machine's CPU.
#include "options.h"

namespace api_bench {

/// VmRSS and VmHWM in MiB; -1 when unknown.
struct Memory {
  double rss_mib = -1, hwm_mib = -1;
};
Memory ReadMemory(int pid);

/// CPU seconds (user + system) used so far by process `pid`; -1 when unknown.
double ProcessCpuSeconds(int pid);

/// Machine-wide busy and total CPU seconds from /proc/stat.
struct MachineCpu {
  double busy = 0, total = 0;
};

/// The server's, this process's and the machine's CPU at one moment.
struct CpuSnapshot {
  double server = -1, self = 0;
  MachineCpu machine;
  Steady::time_point at;
};
CpuSnapshot SnapCpu(int server_pid);

/// CPU used between two snapshots, in percent of one core.
struct CpuShare {
  double server = -1, generator = 0, other = 0, machine = 0, wall = 0;
  double server_seconds = -1, generator_seconds = 0;
};
CpuShare Share(const CpuSnapshot& a, const CpuSnapshot& b);

}  // namespace api_bench
