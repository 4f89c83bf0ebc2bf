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

/// Where the control planes of every data dir on this host record the ports they chose
/// (ListeningPorts misses a port chosen but not yet bound, e.g. the controller-manager's
/// until the apiserver is ready): /run/hyperfleet/eks-ports as root, else
/// /tmp/hyperfleet-eks-ports-<uid>.
std::string DefaultPortReservationsDir();

/// The ports reserved in `dir` by control planes whose directory still holds
/// control-plane.json; reservations of planes that are gone are deleted. Call while holding
/// flock(`dir`/.lock). A missing `dir` has none.
std::set<int> ReservedPorts(const std::string& dir);

/// Records `ports` as those of the control plane in `plan_dir` (replacing any record it
/// had), in one file of `dir` named after `plan_dir`. Call while holding flock(`dir`/.lock).
/// Errors: Internal when the file cannot be written.
Status ReservePorts(const std::string& dir, const std::string& plan_dir,
                    const std::vector<int>& ports);

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
