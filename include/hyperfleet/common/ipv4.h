#pragma once
// The one IPv4 address and prefix ("CIDR") helper of the project, shared by the local
// provider's cluster networks and the EKS control planes' Service and pod ranges. Addresses
// are host-order integers (10.224.4.1 is 0x0ae00401). Pure.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hf {

/// An address and its prefix length, e.g. {10.224.0.0, 12}.
using Ipv4Prefix = std::pair<uint32_t, int>;

/// Dotted text of the host-order address `addr` ("10.224.4.1").
std::string Ipv4Text(uint32_t addr);

/// The host-order address of dotted-quad text (inet_pton's rules: four decimal parts),
/// or nullopt.
std::optional<uint32_t> ParseIpv4(std::string_view text);

/// The netmask of a prefix length (0..32; below 0 is 0, above 32 is all ones).
uint32_t PrefixMask(int bits);

/// True when the two prefixes (addresses with their prefix lengths) share an address.
bool PrefixesOverlap(uint32_t a, int abits, uint32_t b, int bbits);

/// "a.b.c.d/n" (a bare address is /32; n is 0..32), the address masked to the prefix;
/// nullopt when malformed. Callers with narrower rules (a required "/n", other bounds) check
/// the text and the length themselves.
std::optional<Ipv4Prefix> ParseIpv4Prefix(std::string_view text);

/// The first /`bits` inside `pool` that overlaps none of `taken`, or nullopt.
std::optional<uint32_t> FirstFreeSubnet(Ipv4Prefix pool, int bits,
                                        const std::vector<Ipv4Prefix>& taken);

}  // namespace hf
