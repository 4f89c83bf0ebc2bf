#pragma once
// IPv4 addresses and prefixes of the local provider's cluster networks, as host-order
// integers. Pure.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hf::provider::local {

/// An address and its prefix length, e.g. {10.224.0.0, 12}.
using Ipv4Prefix = std::pair<uint32_t, int>;

/// Dotted text of `addr` ("10.224.4.1").
std::string Ipv4Text(uint32_t addr);

/// The address of dotted text, or nullopt.
std::optional<uint32_t> ParseIpv4(std::string_view text);

/// The netmask of a prefix length (0..32).
uint32_t PrefixMask(int bits);

/// True when the two prefixes share an address.
bool PrefixesOverlap(uint32_t a, int abits, uint32_t b, int bbits);

/// "a.b.c.d/n" (a bare address is /32), the address masked to the prefix; nullopt when
/// malformed.
std::optional<Ipv4Prefix> ParseIpv4Prefix(std::string_view text);

/// The first /`bits` inside `pool` that overlaps none of `taken`, or nullopt.
std::optional<uint32_t> FirstFreeSubnet(Ipv4Prefix pool, int bits,
                                        const std::vector<Ipv4Prefix>& taken);

}  // namespace hf::provider::local
