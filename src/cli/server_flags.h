#pragma once
// The server's flags that need no data dir, checked before anything starts (server_command.cc),
// and the URL forms of its listen addresses. Private to hf_cli.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "hyperfleet/cli/server_command.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/model/kubernetes_labels.h"

namespace hf::cli {

/// A host (IPv6 without brackets) and a port.
using Endpoint = std::pair<std::string, uint16_t>;

/// The flags that need no data dir: the listen addresses; InvalidArgument naming the flag.
struct CheckedFlags {
  Endpoint listen;
  std::optional<Endpoint> agent_listen;
  /// What machines are told for agent_listen: a host (IPv6 without brackets) and a port
  /// (0: the bound one).
  Endpoint agent_address;
};

/// HOST:PORT or [IPv6]:PORT of flag `flag` (e.g. "--listen"), the host without brackets;
/// InvalidArgument naming the flag otherwise.
StatusOr<Endpoint> ParseListen(const std::string& listen, const std::string& flag = "--listen");

/// True for a host that means every address: 0.0.0.0, ::, [::] or *.
bool IsWildcard(std::string_view host);

/// `host` as the host part of a URL: an IPv6 literal in brackets, anything else as it is.
std::string UrlHost(const std::string& host);

/// The host part of a URL by which processes of this host reach a server listening on
/// `listen_host` (ParseListen's host): loopback for a wildcard (127.0.0.1, or [::1] for
/// "::"), else UrlHost.
std::string LocalUrlHost(const std::string& listen_host);

/// The fault labels' keys of --kubernetes-fault-labels and
/// --kubernetes-fault-details-annotation (each empty: the default); InvalidArgument naming
/// the flag.
StatusOr<model::FaultLabelKeys> FaultLabelKeysOf(const ServerFlags& flags);

/// Checks the flags that need no data dir (listen addresses, provider, keys, fault labels).
/// Errors: InvalidArgument naming the flag.
StatusOr<CheckedFlags> CheckFlags(const ServerFlags& flags);

}  // namespace hf::cli
