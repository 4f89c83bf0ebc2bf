#pragma once
// Randomness. Secrets and production ids come from OpenSSL's CSPRNG (RAND_bytes), never from
// /dev/urandom read by hand. Deciding code takes an injected `Random`, so tests and
// simulations replay it from a seed.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

namespace hf {

/// `n` bytes from RAND_bytes. Throws std::runtime_error when OpenSSL cannot deliver them
/// (it does not once seeded; ids have always treated that as fatal).
std::string RandomBytes(size_t n);

/// `bytes` random bytes (RandomBytes) as 2 * `bytes` lowercase hex digits.
std::string RandomHex(size_t bytes);

/// `n` symbols drawn uniformly and independently from `alphabet` (1 to 256 distinct bytes)
/// with RandomBytes; rejection sampling, so no symbol is favoured. Throws as RandomBytes, and
/// std::invalid_argument for an empty or over-long alphabet.
std::string RandomString(std::string_view alphabet, size_t n);

/// A source of uniformly distributed random numbers for deciding code (tie-breaks, jitter,
/// sampling). Thread-safe implementations only.
class Random {
 public:
  virtual ~Random() = default;
  /// 64 uniformly distributed bits.
  virtual uint64_t next() = 0;
  /// Uniform in [0, bound) without modulo bias; 0 when bound is 0.
  uint64_t below(uint64_t bound);
  /// Uniform in [0, 1), 53 bits of precision.
  double unit();
};

/// Production randomness: each value from RAND_bytes.
class SecureRandom final : public Random {
 public:
  uint64_t next() override;
};

/// A reproducible stream (std::mt19937_64) for tests and simulation: the same seed gives the
/// same values on every platform (the engine's output is fixed by the C++ standard).
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed) : engine_(seed) {}
  uint64_t next() override;

 private:
  std::mutex mu_;
  std::mt19937_64 engine_;
};

}  // namespace hf
