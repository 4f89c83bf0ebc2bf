#pragma once
// NVIDIA's management library (NVML), loaded at run time: the agent has no build or package
// dependency on NVIDIA. On a node without the driver the library is simply absent and the
// GPU checks report "nvml: not present". The few entry points used are declared by us from
// NVIDIA's public NVML API reference (nvml.h of the driver's development package); see
// src/agent/nvml.cc.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::agent {

/// What one GPU reported. A member is nullopt when the GPU or driver does not support the
/// query (NVML_ERROR_NOT_SUPPORTED) or the query failed (then `errors` says why).
struct GpuStatus {
  unsigned index = 0;  ///< NVML's device index
  /// The device handle could not be obtained or the GPU answered NVML_ERROR_GPU_IS_LOST.
  bool lost = false;
  std::optional<unsigned> temperature_c;  ///< core temperature, °C
  std::optional<unsigned> slowdown_c;     ///< the GPU's own slowdown threshold, °C
  /// Clock event ("throttle") reason bits, nvmlClocksThrottleReason* (see kThrottle*).
  std::optional<uint64_t> throttle_reasons;
  /// Uncorrectable ECC errors since the driver loaded (volatile counter).
  std::optional<uint64_t> ecc_uncorrected;
  /// Pages retired for double-bit/repeated errors but not yet retired (pre-A100 GPUs); a GPU
  /// reset (reboot) applies them.
  std::optional<bool> retired_pages_pending;
  /// Row remapping (A100 and later): a remap waits for a GPU reset / a remap failed (the GPU
  /// has no spare rows left).
  std::optional<bool> remap_pending;
  std::optional<bool> remap_failed;
  std::vector<std::string> errors;  ///< "temperature: <nvmlErrorString>" per failed query
};

/// Clock event reason bits (NVML's nvmlClocksThrottleReason* / nvmlClocksEventReason*).
inline constexpr uint64_t kThrottleSwThermal = 0x20;   ///< driver slows for temperature
inline constexpr uint64_t kThrottleHwSlowdown = 0x08;  ///< hardware slowdown (thermal/power)
inline constexpr uint64_t kThrottleHwThermal = 0x40;   ///< hardware thermal slowdown
inline constexpr uint64_t kThrottleHwPowerBrake = 0x80;  ///< external power brake asserted

/// One query of every GPU.
struct GpuSnapshot {
  unsigned count = 0;  ///< nvmlDeviceGetCount_v2
  std::vector<GpuStatus> gpus;
  std::string error;   ///< non-empty when the count itself could not be read
};

/// A loaded and initialised NVML. Not thread-safe: one caller at a time.
class Nvml {
 public:
  /// The library to load: $HF_NVML_LIBRARY when set and non-empty (tests point it at a fake),
  /// else "libnvidia-ml.so.1" (the driver's runtime soname, found by the dynamic loader).
  static std::string DefaultLibrary();

  /// dlopen()s `library` (empty: DefaultLibrary()), resolves the entry points and calls
  /// nvmlInit_v2. Errors: NotFound when the library cannot be loaded (no NVIDIA driver:
  /// the normal case on CPU nodes), FailedPrecondition when a required symbol is missing
  /// or nvmlInit_v2 fails (message carries NVML's error text, e.g. "Driver Not Loaded").
  static StatusOr<std::unique_ptr<Nvml>> Open(const std::string& library = "");

  /// nvmlShutdown and dlclose.
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  /// Queries every GPU (temperature, slowdown threshold, clock event reasons, volatile
  /// uncorrectable ECC count, retired pages pending, row remapping). Never fails as a whole:
  /// per-query failures are recorded in the snapshot.
  GpuSnapshot Query();

  /// The path it was loaded from (as given to dlopen).
  const std::string& library() const { return library_; }

 private:
  struct Api;
  Nvml(std::string library, void* handle, std::unique_ptr<Api> api);

  std::string library_;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

}  // namespace hf::agent
