#pragma once
// A registered machine as the store keeps it (`hyperfleet machines`, docs/machines.md): how
// to reach it, what it was found to be, and its pool record (hf_pool's typed Machine). The
// store writes it as one row, JSON only inside the row; its ssh private key is never here
// (a file under the data dir, see hf_machines).
#include <cstdint>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/pool/machine_pool.h"

namespace hf::store {

/// What registration found on a machine (its probe over ssh).
struct MachineFacts {
  int cpus = 0;             ///< online CPUs (nproc)
  double memory_gib = 0;    ///< MemTotal of /proc/meminfo, GiB
  int gpus = 0;             ///< NVIDIA GPUs
  std::string gpu_model;    ///< e.g. "NVIDIA H100 80GB HBM3"; empty when none or unknown
  int neuron_devices = 0;   ///< AWS Neuron devices (/dev/neuron*)
  std::string os_id;        ///< /etc/os-release ID, e.g. "debian", "ubuntu"
  std::string os_version;   ///< /etc/os-release VERSION_ID, e.g. "12", "22.04"
  std::string arch;         ///< uname -m, e.g. "x86_64"
  bool operator==(const MachineFacts&) const = default;
};

/// One registered machine.
struct MachineRecord {
  std::string id;             ///< "m-" + 12 hex
  std::string address;        ///< IPv4 address it is reached at
  std::string host_name;      ///< the name it was registered by (resolved once); "" for an address
  uint16_t port = 22;         ///< ssh port
  std::string user = "root";  ///< ssh user: root, or one with passwordless sudo
  std::string host_key;       ///< pinned host public key, "<type> <base64>"
  std::string instance_type;  ///< the ClusterInstanceType it serves as
  MachineFacts facts;
  /// Registered with the explicit override: `mismatches` says what did not fit.
  bool override_checks = false;
  std::vector<std::string> mismatches;
  bool drained = false;       ///< an operator drained it: never granted nor made a spare
  SystemTime registered_at{};
  pool::Machine pool;         ///< pool.id == id, pool.instance_type == instance_type
  int64_t revision = 0;       ///< the store revision it was written at
};

}  // namespace hf::store
