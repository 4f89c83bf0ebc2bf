#pragma once
// What eks::ProcessControlPlanes and its supervisor read from this host: listening ports,
// addresses, processes, and the apiserver's health (private to hf_eks_cp).
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::eks::host {

/// The hidden subcommand that supervises one control plane; also how its process is known.
inline constexpr const char* kSupervisorCommand = "eks-control-plane-supervisor";

/// TCP ports something listens on now (IPv4 and IPv6, from /proc/net/tcp and tcp6).
std::set<int> ListeningPorts();

/// The IPv4 addresses of this host's interfaces that are up, loopback included.
std::vector<std::string> Ipv4Addresses();

/// The pid in `dir`/supervisor.pid when that process runs and is the supervisor of `dir`
/// (its command line names kSupervisorCommand and `dir`: a reused pid is not taken for it).
std::optional<int> SupervisorPid(const std::string& dir);

/// Processes other than this one whose command line names a path under `dir` or whose
/// working directory is `dir` or below it.
std::vector<int> ProcessesUnder(const std::string& dir);

/// The lowercase hex SHA-256 of the apiserver's certificate in `dir`/pki/apiserver.crt.
StatusOr<std::string> ApiserverPin(const std::string& dir);

/// GET https://127.0.0.1:`port``path` with the apiserver's certificate pinned, anonymously
/// (Kubernetes lets anyone read /readyz and /version), within `timeout_seconds`. Errors:
/// Unavailable when it cannot be reached; FailedPrecondition with the status and body for a
/// status other than 200.
StatusOr<std::string> ApiserverGet(int port, const std::string& pin, const std::string& path,
                                   int timeout_seconds);

}  // namespace hf::eks::host
