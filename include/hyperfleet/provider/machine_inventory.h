#pragma once
// The registered machines as the ssh provider sees them: how to reach each one and its
// pool record (hf_pool's typed Machine), read as a snapshot and written back with
// compare-and-swap. The registry (`hyperfleet machines`, library hf_machines) implements it
// over the store; the ssh provider makes every pool decision with hf_pool's pure functions
// and writes the records it changes through update(). docs/ssh-provider.md.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/pool/machine_pool.h"

namespace hf::provider {

/// How to reach a registered machine over ssh, and what it serves as.
struct MachineAccess {
  std::string address;           ///< IPv4 address the node gets (its CustomerIpAddress)
  uint16_t port = 22;
  std::string user = "root";     ///< root, or a user with passwordless sudo
  std::string identity_file;     ///< path of the private key (owner-only, under the data dir)
  std::string known_hosts_file;  ///< path of the one-line file pinning its host key
};

/// One registered machine: its pool record and how to reach it.
struct PoolMachine {
  pool::Machine machine;  ///< machine.id is the registry's id ("m-" + 12 hex)
  MachineAccess access;
  /// An operator drained it: it is never granted or made a spare; a node on it stays until
  /// the node goes.
  bool drained = false;
  int64_t revision = 0;  ///< the store revision it was read at (compare-and-swap)
};

/// The registered machines. Thread-safe.
class MachineInventory {
 public:
  virtual ~MachineInventory() = default;
  /// Every registered machine, ordered by id.
  virtual StatusOr<std::vector<PoolMachine>> machines() = 0;
  /// Writes the pool records of `changed` (PoolMachine::machine only; access and drained are
  /// the registry's), each at the revision it was read at, in one transaction. Aborted when
  /// any of them changed since (nothing is written); NotFound for an unknown id.
  virtual Status update(std::span<const PoolMachine> changed) = 0;
  /// Hot spares an operator asked to keep per instance type (`hyperfleet machines spares`);
  /// types not listed keep none. Feeds hf_pool's PoolPolicy::spare_target.
  virtual StatusOr<std::map<std::string, int, std::less<>>> spareTargets() = 0;
};

}  // namespace hf::provider
