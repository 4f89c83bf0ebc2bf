#pragma once
// The machine registry (`hyperfleet machines`, issue 18): an operator registers machines
// reachable over ssh; the ssh provider draws nodes from them (through MachineInventory).
// Registration connects with the pinned host key (nothing runs on a machine whose key
// differs), probes the machine (ProbeCommand) and checks it against the instance type it
// claims (checks.h) unless overridden. Each machine's ssh private key is a secret: a file
// `<dir>/<id>/key`, 0600 in a 0700 directory whatever the umask, never logged nor returned,
// removed with the machine. docs/machines.md.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/ids.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/provider/machine_inventory.h"
#include "hyperfleet/store/store.h"

namespace hf::machines {

/// A machine to register.
struct RegisterRequest {
  std::string address;        ///< IPv4 address, or a host name (resolved once, both kept)
  uint16_t port = 22;
  std::string user = "root";  ///< root, or a user with passwordless sudo
  std::string private_key;    ///< the ssh private key's text (secret; not encrypted)
  std::string host_key;       ///< the machine's host public key, "<type> <base64> [comment]"
  std::string instance_type;  ///< e.g. "ml.g5.xlarge"
  /// Register even when the hardware or OS does not fit the type (recorded and shown).
  bool override_checks = false;
};

/// Changes to how a registered machine is reached; the machine is reached (and probed) with
/// the new settings before they are kept.
struct UpdateRequest {
  std::string id;
  std::optional<uint16_t> port;
  std::optional<std::string> user;
  std::optional<std::string> private_key;
  std::optional<std::string> host_key;
};

struct RegistryOptions {
  std::string dir;                  ///< where machines' keys live: <data dir>/machines
  int connect_timeout_seconds = 10;
  Duration probe_timeout = std::chrono::seconds(60);
  std::string host_arch;            ///< the node binary's architecture; "" = this host's
  /// Accept loopback addresses (tests: an sshd on 127.0.0.1). Off: a machine at a loopback,
  /// unspecified, broadcast, multicast or link-local address is refused, since it would be
  /// this host (or none) rather than a machine of its own.
  bool allow_loopback = false;
};

/// The registry. Thread-safe (the store is; record changes are compare-and-swap, retried).
class MachineRegistry {
 public:
  MachineRegistry(store::Store& store, const Clock& clock, IdSource& ids,
                  const model::InstanceCatalog& catalog, RegistryOptions options);

  /// Registers a machine. Errors: InvalidArgument naming the field (shape, unknown type, an
  /// unreachable machine, a host key that does not match, a user that cannot act as root,
  /// a machine that does not fit its type or OS without override_checks; nothing is kept);
  /// FailedPrecondition (ConflictException) when a machine is registered at that address
  /// and port already.
  StatusOr<store::MachineRecord> registerMachine(const RegisterRequest& request);
  /// Changes port, user, key or host key. Errors: as registerMachine; NotFound.
  StatusOr<store::MachineRecord> update(const UpdateRequest& request);
  /// One machine; NotFound when none.
  StatusOr<store::MachineRecord> describe(const std::string& id);
  /// Every machine, ordered by id.
  StatusOr<std::vector<store::MachineRecord>> list();
  /// Removes a machine and its key. FailedPrecondition typed ResourceInUse while the pool
  /// uses it (anything but free, quarantined or out for repair); NotFound.
  Status deregister(const std::string& id);
  /// Drains (true) or undrains a machine. NotFound.
  StatusOr<store::MachineRecord> setDrained(const std::string& id, bool drained);
  /// An operator returns a quarantined machine: it goes through the return check
  /// (hf_pool kOperatorReturn). FailedPrecondition when it is not quarantined; NotFound.
  StatusOr<store::MachineRecord> returnMachine(const std::string& id);
  /// Keeps `count` (0..1000) hot spares of `instance_type` (0 removes the target).
  /// InvalidArgument for an unknown type or a count out of range.
  Status putSpareTarget(const std::string& instance_type, int count);
  /// The spare targets, by instance type.
  StatusOr<std::map<std::string, int, std::less<>>> spareTargets();

  /// How the ssh provider reaches `record` (paths of its key and known_hosts files).
  provider::MachineAccess accessOf(const store::MachineRecord& record) const;
  /// The store the registry keeps its machines in.
  store::Store& store() { return store_; }

 private:
  struct Staged;
  StatusOr<Staged> stage(const std::string& id, const std::string& address, uint16_t port,
                         const std::string& user, const std::string& private_key,
                         const std::string& host_key, const std::string& suffix);
  /// Applies `change` to the current record of `id` and writes it (compare-and-swap, retried
  /// on a concurrent write).
  template <class Change>
  StatusOr<store::MachineRecord> modify(const std::string& id, Change change);
  std::string machineDir(const std::string& id) const;

  store::Store& store_;
  const Clock& clock_;
  IdSource& ids_;
  const model::InstanceCatalog& catalog_;
  RegistryOptions options_;
  /// One registration or update reaches a machine at a time: the probe blocks its request
  /// thread for up to probe_timeout, and the API has few of them. Others are refused
  /// (ServiceUnavailable, which AWS clients retry) rather than queued.
  std::mutex reach_mu_;
};

/// The MachineInventory the ssh provider reads and writes, over the registry's store.
class StoreMachineInventory final : public provider::MachineInventory {
 public:
  explicit StoreMachineInventory(MachineRegistry& registry) : registry_(registry) {}
  StatusOr<std::vector<provider::PoolMachine>> machines() override;
  Status update(std::span<const provider::PoolMachine> changed) override;
  StatusOr<std::map<std::string, int, std::less<>>> spareTargets() override;

 private:
  MachineRegistry& registry_;
};

}  // namespace hf::machines
