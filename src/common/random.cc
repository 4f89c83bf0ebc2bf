#include "hyperfleet/common/random.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "absl/strings/escaping.h"

namespace hf {

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  // RAND_bytes takes an int count: fill in chunks.
  for (size_t done = 0; done < n;) {
    const size_t chunk = std::min<size_t>(n - done, 1 << 20);
    if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data() + done),
                   static_cast<int>(chunk)) != 1) {
      throw std::runtime_error("RAND_bytes failed");
    }
    done += chunk;
  }
  return out;
}

std::string RandomHex(size_t bytes) { return absl::BytesToHexString(RandomBytes(bytes)); }

std::string RandomString(std::string_view alphabet, size_t n) {
  if (alphabet.empty() || alphabet.size() > 256) {
    throw std::invalid_argument("RandomString: the alphabet must have 1 to 256 symbols");
  }
  // Bytes at or above the largest multiple of the alphabet size are rejected.
  const unsigned limit = 256 - 256 % alphabet.size();
  std::string out;
  out.reserve(n);
  while (out.size() < n) {
    for (const char c : RandomBytes(64)) {
      const auto b = static_cast<unsigned char>(c);
      if (b >= limit) continue;
      out.push_back(alphabet[b % alphabet.size()]);
      if (out.size() == n) break;
    }
  }
  return out;
}

uint64_t Random::below(uint64_t bound) {
  if (bound == 0) return 0;
  // Values at or above the largest multiple of `bound` that fits in 64 bits are redrawn.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  for (;;) {
    const uint64_t v = next();
    if (v < limit) return v % bound;
  }
}

double Random::unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t SecureRandom::next() {
  uint64_t v = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof v) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  return v;
}

uint64_t SeededRandom::next() {
  std::lock_guard lock(mu_);
  return engine_();
}

}  // namespace hf
