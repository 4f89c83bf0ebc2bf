#include "hyperfleet/common/ipv4.h"

#include <arpa/inet.h>

#include <algorithm>

namespace hf {

std::string Ipv4Text(uint32_t addr) {
  in_addr a{htonl(addr)};
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::optional<uint32_t> ParseIpv4(std::string_view text) {
  in_addr a{};
  // A NUL would end the text inet_pton sees: "10.0.0.1\0x" is no address.
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  if (inet_pton(AF_INET, std::string(text).c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

uint32_t PrefixMask(int bits) {
  return bits <= 0 ? 0 : (bits >= 32 ? ~0u : ~0u << (32 - bits));
}

bool PrefixesOverlap(uint32_t a, int abits, uint32_t b, int bbits) {
  const uint32_t m = PrefixMask(std::min(abits, bbits));
  return (a & m) == (b & m);
}

std::optional<Ipv4Prefix> ParseIpv4Prefix(std::string_view text) {
  const auto slash = text.find('/');
  auto addr = ParseIpv4(text.substr(0, slash));
  int bits = 32;
  if (!addr) return std::nullopt;
  if (slash != std::string_view::npos) {
    const std::string_view len = text.substr(slash + 1);
    // One or two plain digits, no leading zero (SimpleAtoi took " 16", "+16" and "016").
    const bool digits =
        !len.empty() && len.size() <= 2 && !(len.size() == 2 && len[0] == '0') &&
        std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return std::nullopt;
    bits = len.size() == 1 ? len[0] - '0' : (len[0] - '0') * 10 + (len[1] - '0');
    if (bits > 32) return std::nullopt;
  }
  return Ipv4Prefix{*addr & PrefixMask(bits), bits};
}

std::optional<uint32_t> FirstFreeSubnet(Ipv4Prefix pool, int bits,
                                        const std::vector<Ipv4Prefix>& taken) {
  if (bits < pool.second || bits > 32) return std::nullopt;
  const uint64_t count = uint64_t{1} << (bits - pool.second);
  const uint64_t size = uint64_t{1} << (32 - bits);
  for (uint64_t k = 0; k < count; ++k) {
    const auto base = static_cast<uint32_t>(pool.first + k * size);
    const bool free = std::none_of(taken.begin(), taken.end(), [&](const Ipv4Prefix& t) {
      return PrefixesOverlap(base, bits, t.first, t.second);
    });
    if (free) return base;
  }
  return std::nullopt;
}

}  // namespace hf
