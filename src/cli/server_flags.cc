// The server's flags that need no data dir (server_flags.h).
#include "cli/server_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hf::cli {

StatusOr<Endpoint> ParseListen(const std::string& listen, const std::string& flag) {
  auto colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(listen).substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " must be HOST:PORT (e.g. 127.0.0.1:",
                                                   flag == "--listen" ? "9080" : "0",
                                                   "), got '", listen, "'"));
  }
  std::string host = listen.substr(0, colon);
  // "[v6]:PORT", as in URLs; the resolver wants the address without brackets.
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, static_cast<uint16_t>(port));
}

bool IsWildcard(std::string_view host) {
  return host == "0.0.0.0" || host == "::" || host == "[::]" || host == "*";
}

std::string UrlHost(const std::string& host) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]");
  }
  return host;
}

std::string LocalUrlHost(const std::string& listen_host) {
  if (listen_host.empty() || listen_host == "0.0.0.0" || listen_host == "*") return "127.0.0.1";
  if (listen_host == "::") return "[::1]";
  return UrlHost(listen_host);
}

namespace {

/// --agent-address HOST[:PORT] ("[v6]", "[v6]:PORT"), defaulting to --agent-listen's
/// address; InvalidArgument naming the flag.
StatusOr<Endpoint> AgentAddressOf(const ServerFlags& flags, const Endpoint& agent_listen) {
  auto unbracket = [](std::string host) {
    return host.size() > 2 && host.front() == '[' && host.back() == ']'
               ? host.substr(1, host.size() - 2)
               : host;
  };
  if (flags.agent_address.empty()) {
    if (IsWildcard(agent_listen.first)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--agent-listen ", flags.agent_listen, " listens on every address: say which one "
          "machines reach it at with --agent-address HOST[:PORT]"));
    }
    return Endpoint{unbracket(agent_listen.first), 0};
  }
  const std::string& value = flags.agent_address;
  std::string host = value;
  uint32_t port = 0;
  const auto colon = value.rfind(':');
  const bool bracketed = value.front() == '[';
  const auto close = value.find(']');
  const bool has_port = colon != std::string::npos &&
                        (bracketed ? close != std::string::npos && colon == close + 1
                                   : value.find(':') == colon);
  if (has_port) {
    host = value.substr(0, colon);
    if (!absl::SimpleAtoi(absl::string_view(value).substr(colon + 1), &port) || port == 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--agent-address must be HOST or HOST:PORT with a port from 1 to 65535, got '",
          value, "'"));
    }
  }
  host = unbracket(host);
  if (host.empty() || IsWildcard(host) || host.find_first_of(" /[]") != std::string::npos ||
      (bracketed && close == std::string::npos)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--agent-address must name the host machines reach (HOST, HOST:PORT, [IPv6]:PORT), "
        "got '", value, "'"));
  }
  return Endpoint{host, static_cast<uint16_t>(port)};
}

}  // namespace

StatusOr<model::FaultLabelKeys> FaultLabelKeysOf(const ServerFlags& flags) {
  const model::FaultLabelKeys defaults;
  return model::ParseFaultLabelKeys(
      flags.kubernetes_fault_labels.empty() ? absl::StrCat(defaults.type, ",", defaults.reason)
                                            : flags.kubernetes_fault_labels,
      flags.kubernetes_fault_details_annotation.empty()
          ? defaults.details
          : flags.kubernetes_fault_details_annotation);
}

StatusOr<CheckedFlags> CheckFlags(const ServerFlags& flags) {
  CheckedFlags checked;
  HF_RETURN_IF_ERROR(FaultLabelKeysOf(flags).status());
  HF_ASSIGN_OR_RETURN(checked.listen, ParseListen(flags.listen));
  if (!flags.agent_listen.empty()) {
    HF_ASSIGN_OR_RETURN(checked.agent_listen, ParseListen(flags.agent_listen, "--agent-listen"));
    HF_ASSIGN_OR_RETURN(checked.agent_address, AgentAddressOf(flags, *checked.agent_listen));
  } else if (!flags.agent_address.empty()) {
    return absl::InvalidArgumentError("--agent-address needs --agent-listen");
  }
  if (flags.provider != "fake" && flags.provider != "local" && flags.provider != "ssh" &&
      flags.provider != "local,ssh") {
    return absl::InvalidArgumentError(absl::StrCat("--provider ", flags.provider,
                                                   " is not available; providers: local, ssh, "
                                                   "local,ssh, fake"));
  }
  if ((flags.provider == "ssh" || flags.provider == "local,ssh") && flags.agent_listen.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--provider ", flags.provider,
        " needs --agent-listen HOST:PORT (and --agent-address when it listens on every "
        "address): the agents on machines reach the control plane there over TLS"));
  }
  if (flags.access_key_id.empty() != flags.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        "--access-key-id and --secret-access-key must be given together");
  }
  return checked;
}

}  // namespace hf::cli
