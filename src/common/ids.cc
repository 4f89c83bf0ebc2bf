#include "hyperfleet/common/ids.h"

#include <mutex>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "hyperfleet/common/random.h"

namespace hf {
namespace {

constexpr std::string_view kLowerAlnum = "abcdefghijklmnopqrstuvwxyz0123456789";
constexpr std::string_view kHex = "0123456789abcdef";

// 32 hex digits in the 8-4-4-4-12 layout of a UUID.
std::string DashUuid(const std::string& h) {
  return absl::StrCat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-",
                      h.substr(16, 4), "-", h.substr(20, 12));
}

}  // namespace

std::string RandomIdSource::clusterId() { return RandomString(kLowerAlnum, 12); }
std::string RandomIdSource::instanceId() { return "i-" + RandomString(kHex, 17); }
std::string RandomIdSource::eventId() { return uuid(); }
std::string RandomIdSource::uuid() {
  std::string b = RandomBytes(16);
  b[6] = static_cast<char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  return DashUuid(absl::BytesToHexString(b));
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
  return DashUuid(h);
}

}  // namespace hf
