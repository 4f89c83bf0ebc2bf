#pragma once
// What registration decides, as pure functions (table-tested): the probe a machine runs and
// how its output reads, whether the machine fits the instance type it claims (data/
// instance-types.json) and runs a supported OS, and the shape of the request's fields.
// docs/machines.md.
#include <string>
#include <string_view>
#include <vector>

#include "hyperfleet/common/status.h"
#include "hyperfleet/model/instance_catalog.h"
#include "hyperfleet/store/machine_record.h"

namespace hf::machines {

/// The remote shell command (POSIX sh; coreutils, sed, and nvidia-smi only when present)
/// that prints a machine's facts as "key=value" lines: cpus, mem_kb, gpus, gpu (one line per
/// GPU model), neuron, os_id, os_version, arch, sudo (yes/no: root, or passwordless sudo).
std::string_view ProbeCommand();

/// What the probe found, and whether the ssh user may act as root.
struct Probe {
  store::MachineFacts facts;
  bool root_capable = false;  ///< root, or `sudo -n` works
};

/// Reads ProbeCommand's output. InvalidArgument naming the line or key when a required key
/// (cpus, mem_kb, os_id, arch) is missing or not a number where one is due.
StatusOr<Probe> ParseProbe(std::string_view output);

/// MemTotal is below the installed memory (firmware and the kernel keep some): a machine
/// fits a type's memory when MemTotal is at least this share of the catalog's figure.
inline constexpr double kMemoryTolerance = 0.90;

/// Why `facts` do not fit `spec`, one sentence per mismatch with the numbers ("GPUs: the
/// machine has 0 NVIDIA GPUs, ml.p5.48xlarge has 8 (H100)"); empty when it fits. GPUs (or
/// Neuron devices) exactly; CPUs at least; memory at least kMemoryTolerance of the catalog.
std::vector<std::string> HardwareMismatches(const store::MachineFacts& facts,
                                            const model::InstanceTypeSpec& spec);

/// Why the OS is not one nodes are supported on (Debian 12, Ubuntu 22.04 or 24.04); empty
/// when it is.
std::vector<std::string> OsMismatches(const store::MachineFacts& facts);

/// Why a machine of architecture facts.arch cannot run this control plane's node binary,
/// built for `host_arch` (uname -m of this host); empty when they are the same. Never
/// overridable.
std::string ArchProblem(const store::MachineFacts& facts, std::string_view host_arch);

/// An IPv4 address in dotted decimal ("10.0.0.5"), nothing else.
bool IsIpv4(std::string_view text);

/// Checks a host name or IPv4 address given to register a machine: InvalidArgument naming
/// `field` when empty, longer than 253, or with characters outside [A-Za-z0-9.-] (or
/// starting with '-').
Status CheckHost(std::string_view host, std::string_view field);

/// Checks an ssh login name: InvalidArgument naming `field` unless it is 1..32 of
/// [a-z0-9_.-], starting with a letter or '_'.
Status CheckUser(std::string_view user, std::string_view field);

/// Checks an OpenSSH private key's text: InvalidArgument naming `field` unless it is a PEM
/// block of an OpenSSH, RSA, EC or PKCS#8 private key that is not encrypted (a passphrase
/// cannot be typed in BatchMode). The key's content never appears in the message.
Status CheckPrivateKey(std::string_view key, std::string_view field);

}  // namespace hf::machines
