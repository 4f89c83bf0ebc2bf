#include "hyperfleet/common/ids.h"

#include <openssl/rand.h>

#include <array>
#include <cstdio>
#include <mutex>
#include <stdexcept>

namespace hf {
namespace {

constexpr std::string_view kLowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789";
constexpr std::string_view kHex = "0123456789abcdef";

std::string RandomString(std::string_view alphabet, int length) {
  std::string out;
  out.reserve(length);
  unsigned char buf[64];
  // Rejection sampling keeps the distribution uniform over the alphabet.
  const unsigned limit = 256 - (256 % alphabet.size());
  while (static_cast<int>(out.size()) < length) {
    if (RAND_bytes(buf, sizeof buf) != 1) throw std::runtime_error("RAND_bytes failed");
    for (unsigned char b : buf) {
      if (b >= limit) continue;
      out.push_back(alphabet[b % alphabet.size()]);
      if (static_cast<int>(out.size()) == length) break;
    }
  }
  return out;
}

std::string FormatUuid(const std::array<unsigned char, 16>& b) {
  char s[37];
  std::snprintf(s, sizeof s,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

}  // namespace

std::string RandomIdSource::clusterId() { return RandomString(kLowerAlnum, 12); }
std::string RandomIdSource::instanceId() { return "i-" + RandomString(kHex, 17); }
std::string RandomIdSource::eventId() { return uuid(); }
std::string RandomIdSource::uuid() {
  std::array<unsigned char, 16> b{};
  if (RAND_bytes(b.data(), b.size()) != 1) throw std::runtime_error("RAND_bytes failed");
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  return FormatUuid(b);
}

std::string SequentialIdSource::next(std::string_view alphabet, int length) {
  // A splitmix64 stream over (seed, counter): deterministic, well spread, no collisions
  // within a run of fewer than 2^32 ids in practice.
  std::lock_guard lock(mu_);
  unsigned long long x = (static_cast<unsigned long long>(seed_) << 32) ^ ++counter_;
  std::string out;
  while (static_cast<int>(out.size()) < length) {
    x += 0x9e3779b97f4a7c15ULL;
    unsigned long long z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    for (int i = 0; i < 8 && static_cast<int>(out.size()) < length; ++i) {
      out.push_back(alphabet[(z >> (i * 8)) % alphabet.size()]);
    }
  }
  return out;
}

std::string SequentialIdSource::clusterId() { return next(kLowerAlnum, 12); }
std::string SequentialIdSource::instanceId() { return "i-" + next(kHex, 17); }
std::string SequentialIdSource::eventId() { return uuid(); }
std::string SequentialIdSource::uuid() {
  std::string h = next(kHex, 32);
  h[12] = '4';
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20, 12);
}

}  // namespace hf
