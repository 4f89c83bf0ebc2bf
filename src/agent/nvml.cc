#include "hyperfleet/agent/nvml.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

namespace hf::agent {
namespace {

// NVML's C ABI, written from NVIDIA's public API reference. Enums are passed as int (C
// enums are int-sized on every Linux ABI NVIDIA supports); handles are opaque pointers.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
constexpr int NVML_TEMPERATURE_GPU = 0;                 // nvmlTemperatureSensors_t
constexpr int NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1;  // nvmlTemperatureThresholds_t
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;   // nvmlMemoryErrorType_t
constexpr int NVML_VOLATILE_ECC = 0;                    // nvmlEccCounterType_t
constexpr int NVML_FEATURE_ENABLED = 1;                 // nvmlEnableState_t

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using GetCountFn = nvmlReturn_t (*)(unsigned*);
using GetHandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using GetTemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using GetThresholdFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using GetReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using GetEccFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
using GetPendingFn = nvmlReturn_t (*)(nvmlDevice_t, int*);
using GetRemappedFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

struct Nvml::Api {
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  GetCountFn get_count = nullptr;
  GetHandleFn get_handle = nullptr;
  // Optional: a missing one only skips its query (older drivers lack row remapping).
  GetTemperatureFn get_temperature = nullptr;
  GetThresholdFn get_threshold = nullptr;
  GetReasonsFn get_reasons = nullptr;
  GetEccFn get_ecc = nullptr;
  GetPendingFn get_retired_pending = nullptr;
  GetRemappedFn get_remapped = nullptr;

  std::string Error(nvmlReturn_t rc) const {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    return (text != nullptr ? std::string(text) : std::string("NVML error")) + " (" +
           std::to_string(rc) + ")";
  }
};

std::string Nvml::DefaultLibrary() {
  const char* env = std::getenv("HF_NVML_LIBRARY");
  if (env != nullptr && env[0] != '\0') return env;
  return "libnvidia-ml.so.1";
}

StatusOr<std::unique_ptr<Nvml>> Nvml::Open(const std::string& library) {
  const std::string path = library.empty() ? DefaultLibrary() : library;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError("cannot load " + path + ": " + (why ? why : "unknown error"));
  }
  auto api = std::make_unique<Api>();
  api->init = Symbol<InitFn>(handle, "nvmlInit_v2");
  api->shutdown = Symbol<ShutdownFn>(handle, "nvmlShutdown");
  api->error_string = Symbol<ErrorStringFn>(handle, "nvmlErrorString");
  api->get_count = Symbol<GetCountFn>(handle, "nvmlDeviceGetCount_v2");
  api->get_handle = Symbol<GetHandleFn>(handle, "nvmlDeviceGetHandleByIndex_v2");
  api->get_temperature = Symbol<GetTemperatureFn>(handle, "nvmlDeviceGetTemperature");
  api->get_threshold = Symbol<GetThresholdFn>(handle, "nvmlDeviceGetTemperatureThreshold");
  // Renamed "clock event reasons" in newer drivers; the old name stays exported.
  api->get_reasons = Symbol<GetReasonsFn>(handle, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api->get_reasons == nullptr) {
    api->get_reasons = Symbol<GetReasonsFn>(handle, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  api->get_ecc = Symbol<GetEccFn>(handle, "nvmlDeviceGetTotalEccErrors");
  api->get_retired_pending = Symbol<GetPendingFn>(handle, "nvmlDeviceGetRetiredPagesPendingStatus");
  api->get_remapped = Symbol<GetRemappedFn>(handle, "nvmlDeviceGetRemappedRows");

  const char* missing = nullptr;
  if (api->init == nullptr) missing = "nvmlInit_v2";
  else if (api->shutdown == nullptr) missing = "nvmlShutdown";
  else if (api->get_count == nullptr) missing = "nvmlDeviceGetCount_v2";
  else if (api->get_handle == nullptr) missing = "nvmlDeviceGetHandleByIndex_v2";
  if (missing != nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(path + " lacks " + missing);
  }
  const nvmlReturn_t rc = api->init();
  if (rc != NVML_SUCCESS) {
    const std::string why = api->Error(rc);
    dlclose(handle);
    return absl::FailedPreconditionError("nvmlInit_v2 failed: " + why);
  }
  return std::unique_ptr<Nvml>(new Nvml(path, handle, std::move(api)));
}

Nvml::Nvml(std::string library, void* handle, std::unique_ptr<Api> api)
    : library_(std::move(library)), handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(handle_);
}

GpuSnapshot Nvml::Query() {
  GpuSnapshot snapshot;
  unsigned count = 0;
  if (const nvmlReturn_t rc = api_->get_count(&count); rc != NVML_SUCCESS) {
    snapshot.error = "nvmlDeviceGetCount_v2: " + api_->Error(rc);
    return snapshot;
  }
  snapshot.count = count;
  for (unsigned i = 0; i < count; ++i) {
    GpuStatus gpu;
    gpu.index = i;
    nvmlDevice_t device = nullptr;
    if (const nvmlReturn_t rc = api_->get_handle(i, &device); rc != NVML_SUCCESS) {
      gpu.lost = true;
      gpu.errors.push_back("handle: " + api_->Error(rc));
      snapshot.gpus.push_back(std::move(gpu));
      continue;
    }
    // Runs one query; NOT_SUPPORTED is silent, GPU_IS_LOST marks the GPU lost.
    auto ok = [&](const char* what, nvmlReturn_t rc) {
      if (rc == NVML_SUCCESS) return true;
      if (rc == NVML_ERROR_GPU_IS_LOST) gpu.lost = true;
      if (rc != NVML_ERROR_NOT_SUPPORTED) gpu.errors.push_back(std::string(what) + ": " + api_->Error(rc));
      return false;
    };
    unsigned value = 0;
    if (api_->get_temperature != nullptr &&
        ok("temperature", api_->get_temperature(device, NVML_TEMPERATURE_GPU, &value))) {
      gpu.temperature_c = value;
    }
    if (api_->get_threshold != nullptr &&
        ok("slowdown threshold",
           api_->get_threshold(device, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &value))) {
      gpu.slowdown_c = value;
    }
    unsigned long long wide = 0;
    if (api_->get_reasons != nullptr && ok("clock event reasons", api_->get_reasons(device, &wide))) {
      gpu.throttle_reasons = wide;
    }
    if (api_->get_ecc != nullptr &&
        ok("ECC", api_->get_ecc(device, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC,
                                &wide))) {
      gpu.ecc_uncorrected = wide;
    }
    int state = 0;
    if (api_->get_retired_pending != nullptr &&
        ok("retired pages", api_->get_retired_pending(device, &state))) {
      gpu.retired_pages_pending = state == NVML_FEATURE_ENABLED;
    }
    unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    if (api_->get_remapped != nullptr &&
        ok("row remapping",
           api_->get_remapped(device, &corrected, &uncorrected, &pending, &failed))) {
      gpu.remap_pending = pending != 0;
      gpu.remap_failed = failed != 0;
    }
    snapshot.gpus.push_back(std::move(gpu));
  }
  return snapshot;
}

}  // namespace hf::agent
