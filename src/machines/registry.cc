// The machine registry and its MachineInventory: see include/hyperfleet/machines/registry.h.
#include "hyperfleet/machines/registry.h"

#include <netdb.h>
#include <arpa/inet.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <filesystem>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/machines/checks.h"
#include "hyperfleet/ssh/ssh_client.h"

namespace hf::machines {
namespace {

constexpr int kCasAttempts = 8;

std::string HostArch() {
  utsname u{};
  return ::uname(&u) == 0 ? std::string(u.machine) : std::string();
}

// The first IPv4 address of `name` (resolved once, at registration).
StatusOr<std::string> ResolveIpv4(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Address ", name, " does not resolve to an IPv4 address (",
                                                   ::gai_strerror(rc), ")"));
  }
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
  ::freeaddrinfo(res);
  return std::string(buf);
}

// Exactly `mode` on a directory, whatever the umask or a previous mode.
Status OwnerOnlyDir(const std::string& dir) {
  HF_RETURN_IF_ERROR(MakeDirs(dir, 0700));
  if (::chmod(dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("chmod ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// A pool state in which the machine serves no one and may leave the registry.
bool Removable(pool::MachineState s) {
  return s == pool::MachineState::kFree || s == pool::MachineState::kQuarantined ||
         s == pool::MachineState::kRepairing;
}

}  // namespace

struct MachineRegistry::Staged {
  std::string key_file;
  std::string known_hosts_file;
  Probe probe;
};

MachineRegistry::MachineRegistry(store::Store& store, const Clock& clock, IdSource& ids,
                                 const model::InstanceCatalog& catalog, RegistryOptions options)
    : store_(store), clock_(clock), ids_(ids), catalog_(catalog), options_(std::move(options)) {
  if (options_.host_arch.empty()) options_.host_arch = HostArch();
}

std::string MachineRegistry::machineDir(const std::string& id) const {
  return absl::StrCat(options_.dir, "/", id);
}

provider::MachineAccess MachineRegistry::accessOf(const store::MachineRecord& r) const {
  return {.address = r.address, .port = r.port, .user = r.user,
          .identity_file = machineDir(r.id) + "/key",
          .known_hosts_file = machineDir(r.id) + "/known_hosts"};
}

StatusOr<MachineRegistry::Staged> MachineRegistry::stage(
    const std::string& id, const std::string& address, uint16_t port, const std::string& user,
    const std::string& private_key, const std::string& host_key, const std::string& suffix) {
  auto line = ssh::KnownHostsLine(address, port, host_key);
  if (!line.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("HostPublicKey: ", line.status().message()));
  }
  HF_RETURN_IF_ERROR(OwnerOnlyDir(options_.dir));
  HF_RETURN_IF_ERROR(OwnerOnlyDir(machineDir(id)));
  Staged st;
  st.key_file = machineDir(id) + "/key" + suffix;
  st.known_hosts_file = machineDir(id) + "/known_hosts" + suffix;
  std::string key = std::string(StripAsciiWhitespace(private_key)) + "\n";  // ssh wants the last newline
  HF_RETURN_IF_ERROR(WriteFileAtomically(st.key_file, key, 0600));
  HF_RETURN_IF_ERROR(WriteFileAtomically(st.known_hosts_file, *line + "\n", 0600));

  const ssh::SshTarget target{.address = address, .port = port, .user = user,
                              .identity_file = st.key_file,
                              .known_hosts_file = st.known_hosts_file,
                              .connect_timeout_seconds = options_.connect_timeout_seconds};
  auto run = ssh::Run(target, ProbeCommand(), "", options_.probe_timeout);
  const std::string where = absl::StrCat(user, "@", address, " port ", port);
  if (!run.ok()) {
    const std::string msg(run.status().message());
    if (msg.find("ost key verification failed") != std::string::npos ||
        msg.find("IDENTIFICATION HAS CHANGED") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HostPublicKey does not match the host key ", where,
          " presents: nothing was run on it (check the key, e.g. ssh-keyscan on a trusted path)"));
    }
    if (run.status().code() == absl::StatusCode::kUnavailable ||
        run.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return absl::InvalidArgumentError(absl::StrCat("cannot reach ", where, " over ssh: ", msg));
    }
    return run.status();
  }
  if (run->exit_code != 0) {
    return absl::InvalidArgumentError(absl::StrCat("probing ", where, " failed (exit ",
                                                   run->exit_code, "): ",
                                                   AbslView(StripAsciiWhitespace(run->err))));
  }
  HF_ASSIGN_OR_RETURN(st.probe, ParseProbe(run->out));
  if (!st.probe.root_capable) {
    return absl::InvalidArgumentError(absl::StrCat(
        "User ", user, " on ", address, " is not root and cannot run sudo without a password "
        "(sudo -n true failed); nodes need root"));
  }
  if (std::string why = ArchProblem(st.probe.facts, options_.host_arch); !why.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the machine at ", address, " cannot serve: ", why));
  }
  return st;
}

// Why `ipv4` cannot be a machine's own address ("" when it can): loopback, unspecified,
// broadcast, multicast or link-local (RFC 1122, RFC 3927, RFC 5771).
static std::string SpecialAddress(const std::string& ipv4) {
  const std::optional<uint32_t> parsed = ParseIpv4(ipv4);
  if (!parsed) return "not an IPv4 address";
  const uint32_t ip = *parsed;
  if ((ip >> 24) == 127) return "a loopback address (this host)";
  if ((ip >> 24) == 0) return "an unspecified address";
  if (ip == 0xffffffffu) return "the broadcast address";
  if ((ip >> 28) == 0xe) return "a multicast address";
  if ((ip >> 16) == 0xa9fe) return "a link-local address";
  return "";
}

static Status ReachBusy() {
  return absl::UnavailableError(
      "another RegisterMachine or UpdateMachine is reaching a machine over ssh; they run one "
      "at a time so that the API stays responsive: retry in a few seconds");
}

StatusOr<store::MachineRecord> MachineRegistry::registerMachine(const RegisterRequest& req) {
  HF_RETURN_IF_ERROR(CheckHost(req.address, "Address"));
  if (req.port == 0) return absl::InvalidArgumentError("Port must be 1 to 65535");
  HF_RETURN_IF_ERROR(CheckUser(req.user, "User"));
  HF_RETURN_IF_ERROR(CheckPrivateKey(req.private_key, "SshPrivateKey"));
  if (auto line = ssh::KnownHostsLine("0.0.0.0", 22, req.host_key); !line.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("HostPublicKey: ", line.status().message()));
  }
  const model::InstanceTypeSpec* spec = catalog_.find(req.instance_type);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "InstanceType ", req.instance_type, " is not a HyperPod instance type (data/instance-types.json)"));
  }
  store::MachineRecord r;
  if (IsIpv4(req.address)) {
    r.address = req.address;
  } else {
    HF_ASSIGN_OR_RETURN(r.address, ResolveIpv4(req.address));
    r.host_name = req.address;
  }
  if (std::string why = SpecialAddress(r.address); !why.empty() && !options_.allow_loopback) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Address ", req.address, " (", r.address, ") is ", why,
        ": register a machine at an address of its own"));
  }
  r.port = req.port;
  std::unique_lock reach(reach_mu_, std::try_to_lock);
  if (!reach.owns_lock()) return ReachBusy();
  HF_ASSIGN_OR_RETURN(auto existing, store_.machines());
  for (const auto& m : existing) {
    if (m.address == r.address && m.port == r.port) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Address: machine ", m.id, " is registered at ", r.address, " port ", r.port,
          " already (remove it first, or change it with UpdateMachine)"));
    }
  }
  r.id = "m-" + ids_.logicalIdSuffix();
  r.user = req.user;
  r.host_key = *ssh::KnownHostsLine("0.0.0.0", 22, req.host_key);
  r.host_key = r.host_key.substr(r.host_key.find(' ') + 1);  // "<type> <base64>"
  r.instance_type = spec->name;
  auto staged = stage(r.id, r.address, r.port, r.user, req.private_key, req.host_key, "");
  auto forget = [&] { std::error_code ec; std::filesystem::remove_all(machineDir(r.id), ec); };
  if (!staged.ok()) {
    forget();
    return staged.status();
  }
  r.facts = staged->probe.facts;
  std::vector<std::string> mismatches = HardwareMismatches(r.facts, *spec);
  for (auto& m : OsMismatches(r.facts)) mismatches.push_back(std::move(m));
  if (!mismatches.empty() && !req.override_checks) {
    forget();
    return absl::InvalidArgumentError(absl::StrCat(
        "the machine at ", r.address, " does not fit InstanceType ", spec->name, ": ",
        absl::StrJoin(mismatches, "; "), ". Register it with the override to keep it anyway"));
  }
  r.override_checks = req.override_checks;
  r.mismatches = std::move(mismatches);
  r.registered_at = clock_.now();
  r.pool.id = r.id;
  r.pool.instance_type = r.instance_type;
  r.pool.state = pool::MachineState::kFree;
  r.pool.since = r.registered_at;
  store::WriteBatch batch;
  batch.machines.push_back({r, store::kMustNotExist});
  auto rev = store_.commit(batch);
  if (!rev.ok()) {
    forget();
    return rev.status();
  }
  r.revision = *rev;
  spdlog::info("machines: registered {} at {} port {} as {}{}", r.id, r.address, r.port,
               r.instance_type, r.mismatches.empty() ? "" : " (checks overridden)");
  return r;
}

StatusOr<store::MachineRecord> MachineRegistry::update(const UpdateRequest& req) {
  std::unique_lock reach(reach_mu_, std::try_to_lock);
  if (!reach.owns_lock()) return ReachBusy();
  HF_ASSIGN_OR_RETURN(store::MachineRecord current, store_.machine(req.id));
  if (req.port && *req.port == 0) return absl::InvalidArgumentError("Port must be 1 to 65535");
  if (req.user) HF_RETURN_IF_ERROR(CheckUser(*req.user, "User"));
  if (req.private_key) HF_RETURN_IF_ERROR(CheckPrivateKey(*req.private_key, "SshPrivateKey"));
  const uint16_t port = req.port.value_or(current.port);
  const std::string user = req.user.value_or(current.user);
  const std::string host_key = req.host_key.value_or(current.host_key);
  std::string key;
  if (req.private_key) {
    key = *req.private_key;
  } else {
    HF_ASSIGN_OR_RETURN(key, ReadFile(machineDir(req.id) + "/key"));
  }
  auto staged = stage(req.id, current.address, port, user, key, host_key, ".new");
  auto forget = [&] {
    std::error_code ec;
    std::filesystem::remove(machineDir(req.id) + "/key.new", ec);
    std::filesystem::remove(machineDir(req.id) + "/known_hosts.new", ec);
  };
  if (!staged.ok()) {
    forget();
    return staged.status();
  }
  auto line = ssh::KnownHostsLine("0.0.0.0", 22, host_key);
  auto written = modify(req.id, [&](store::MachineRecord& r) -> Status {
    r.port = port;
    r.user = user;
    r.host_key = line->substr(line->find(' ') + 1);
    r.facts = staged->probe.facts;
    return absl::OkStatus();
  });
  if (!written.ok()) {
    forget();
    return written.status();
  }
  // The files follow the record; each rename is atomic.
  std::error_code ec;
  std::filesystem::rename(staged->key_file, machineDir(req.id) + "/key", ec);
  if (!ec) std::filesystem::rename(staged->known_hosts_file, machineDir(req.id) + "/known_hosts", ec);
  if (ec) return absl::InternalError(absl::StrCat("keeping machine ", req.id, "'s files: ", ec.message()));
  spdlog::info("machines: updated {} (port {}, user {})", req.id, port, user);
  return written;
}

template <class Change>
StatusOr<store::MachineRecord> MachineRegistry::modify(const std::string& id, Change change) {
  for (int attempt = 0;; ++attempt) {
    HF_ASSIGN_OR_RETURN(store::MachineRecord r, store_.machine(id));
    HF_RETURN_IF_ERROR(change(r));
    store::WriteBatch batch;
    batch.machines.push_back({r, r.revision});
    auto rev = store_.commit(batch);
    if (rev.ok()) {
      r.revision = *rev;
      return r;
    }
    if (rev.status().code() != absl::StatusCode::kFailedPrecondition || attempt + 1 >= kCasAttempts) {
      return rev.status();
    }
  }
}

StatusOr<store::MachineRecord> MachineRegistry::describe(const std::string& id) {
  return store_.machine(id);
}

StatusOr<std::vector<store::MachineRecord>> MachineRegistry::list() { return store_.machines(); }

Status MachineRegistry::deregister(const std::string& id) {
  HF_ASSIGN_OR_RETURN(store::MachineRecord r, store_.machine(id));
  if (!Removable(r.pool.state)) {
    return WithAwsErrorType(
        absl::FailedPreconditionError(absl::StrCat(
            "Machine ", id, " is ", AbslView(pool::MachineStateName(r.pool.state)),
            r.pool.node.empty() ? "" : absl::StrCat(" (node ", r.pool.node, " of cluster ", r.pool.cluster, ")"),
            ": drain it and remove it once it is free")),
        "ResourceInUse");
  }
  store::WriteBatch batch;
  batch.machines.push_back({r, r.revision, /*erase=*/true});
  HF_RETURN_IF_ERROR(store_.commit(batch).status());
  std::error_code ec;
  std::filesystem::remove_all(machineDir(id), ec);
  if (ec) return absl::InternalError(absl::StrCat("removing machine ", id, "'s key: ", ec.message()));
  spdlog::info("machines: removed {} ({} port {})", id, r.address, r.port);
  return absl::OkStatus();
}

StatusOr<store::MachineRecord> MachineRegistry::setDrained(const std::string& id, bool drained) {
  return modify(id, [&](store::MachineRecord& r) -> Status {
    r.drained = drained;
    return absl::OkStatus();
  });
}

StatusOr<store::MachineRecord> MachineRegistry::returnMachine(const std::string& id) {
  const SystemTime now = clock_.now();
  return modify(id, [&](store::MachineRecord& r) -> Status {
    if (r.pool.state != pool::MachineState::kQuarantined) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Machine ", id, " is ", AbslView(pool::MachineStateName(r.pool.state)),
          ", not quarantined: only a quarantined machine is returned"));
    }
    HF_ASSIGN_OR_RETURN(pool::Transition t,
                        pool::Apply(r.pool, pool::Report::kOperatorReturn, pool::PoolPolicy{}, now,
                                    "returned by an operator"));
    r.pool = std::move(t.machine);
    return absl::OkStatus();
  });
}

Status MachineRegistry::putSpareTarget(const std::string& instance_type, int count) {
  if (catalog_.find(instance_type) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("InstanceType ", instance_type,
                                                   " is not a HyperPod instance type"));
  }
  if (count < 0 || count > 1000) return absl::InvalidArgumentError("Count must be 0 to 1000");
  store::WriteBatch batch;
  batch.spare_targets.push_back({instance_type, count});
  return store_.commit(batch).status();
}

StatusOr<std::map<std::string, int, std::less<>>> MachineRegistry::spareTargets() {
  return store_.spareTargets();
}

// ---- MachineInventory -----------------------------------------------------------------------

StatusOr<std::vector<provider::PoolMachine>> StoreMachineInventory::machines() {
  HF_ASSIGN_OR_RETURN(auto records, registry_.list());
  std::vector<provider::PoolMachine> out;
  out.reserve(records.size());
  for (const auto& r : records) {
    out.push_back({.machine = r.pool, .access = registry_.accessOf(r), .drained = r.drained,
                   .revision = r.revision});
  }
  return out;
}

Status StoreMachineInventory::update(std::span<const provider::PoolMachine> changed) {
  store::WriteBatch batch;
  for (const auto& c : changed) {
    auto current = registry_.store().machine(c.machine.id);
    if (!current.ok()) return current.status();
    if (current->revision != c.revision) {
      return absl::AbortedError(absl::StrCat("Machine ", c.machine.id, " changed since revision ",
                                             c.revision, " (now ", current->revision, ")"));
    }
    store::MachineRecord r = *std::move(current);
    r.pool = c.machine;
    r.pool.instance_type = r.instance_type;  // the registry's field
    batch.machines.push_back({std::move(r), c.revision});
  }
  if (batch.empty()) return absl::OkStatus();
  auto rev = registry_.store().commit(batch);
  if (rev.ok()) return absl::OkStatus();
  if (rev.status().code() == absl::StatusCode::kFailedPrecondition) {
    return absl::AbortedError(rev.status().message());
  }
  return rev.status();
}

StatusOr<std::map<std::string, int, std::less<>>> StoreMachineInventory::spareTargets() {
  return registry_.spareTargets();
}

}  // namespace hf::machines
