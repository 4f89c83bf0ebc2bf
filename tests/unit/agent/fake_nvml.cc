// A fake libnvidia-ml for tests: a shared library exporting the NVML entry points the agent
// uses (src/agent/nvml.cc), so the GPU health paths run on machines without a GPU. Load it
// through HF_NVML_LIBRARY or HealthMonitorOptions::nvml_library.
//
// Behaviour comes from the text file named by $HF_FAKE_NVML, read at each nvmlInit_v2;
// "key=value" lines, '#' comments; numbers in decimal or 0x hex:
//   init=<rc>                 nvmlInit_v2's return code (default 0, success)
//   count=<n>                 GPUs (default 8, at most 16)
//   gpu<i>.temperature=<°C>   default 40
//   gpu<i>.slowdown=<°C>      slowdown threshold, default 90
//   gpu<i>.throttle=<bits>    clock event reasons, default 0
//   gpu<i>.ecc_uncorrected=<n>
//   gpu<i>.ecc_rc=<rc>        return code of the ECC query (3: not supported)
//   gpu<i>.retired_pending=0|1, gpu<i>.remap_pending=0|1, gpu<i>.remap_failed=0|1
//   gpu<i>.lost=1             every query of the GPU answers NVML_ERROR_GPU_IS_LOST
// No file: 8 healthy GPUs.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kMaxGpus = 16;
constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kGpuIsLost = 15;

struct Gpu {
  unsigned long long temperature = 40, slowdown = 90, throttle = 0, ecc = 0;
  int ecc_rc = kSuccess;
  bool retired_pending = false, remap_pending = false, remap_failed = false, lost = false;
};

struct Config {
  int init_rc = kSuccess;
  unsigned count = 8;
  Gpu gpus[kMaxGpus];
};

Config g_config;
int g_active = 0;  // nvmlInit_v2 calls not yet matched by nvmlShutdown

void Load() {
  g_config = Config();
  const char* path = std::getenv("HF_FAKE_NVML");
  if (path == nullptr || path[0] == '\0') return;
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (line[0] == '#') continue;
    char* eq = std::strchr(line, '=');
    if (eq == nullptr) continue;
    *eq = '\0';
    const unsigned long long value = std::strtoull(eq + 1, nullptr, 0);
    const char* key = line;
    if (std::strcmp(key, "init") == 0) {
      g_config.init_rc = static_cast<int>(value);
    } else if (std::strcmp(key, "count") == 0) {
      g_config.count = value > kMaxGpus ? kMaxGpus : static_cast<unsigned>(value);
    } else if (std::strncmp(key, "gpu", 3) == 0) {
      char* dot = nullptr;
      const long index = std::strtol(key + 3, &dot, 10);
      if (dot == nullptr || *dot != '.' || index < 0 || index >= kMaxGpus) continue;
      Gpu& g = g_config.gpus[index];
      const char* field = dot + 1;
      if (std::strcmp(field, "temperature") == 0) g.temperature = value;
      else if (std::strcmp(field, "slowdown") == 0) g.slowdown = value;
      else if (std::strcmp(field, "throttle") == 0) g.throttle = value;
      else if (std::strcmp(field, "ecc_uncorrected") == 0) g.ecc = value;
      else if (std::strcmp(field, "ecc_rc") == 0) g.ecc_rc = static_cast<int>(value);
      else if (std::strcmp(field, "retired_pending") == 0) g.retired_pending = value != 0;
      else if (std::strcmp(field, "remap_pending") == 0) g.remap_pending = value != 0;
      else if (std::strcmp(field, "remap_failed") == 0) g.remap_failed = value != 0;
      else if (std::strcmp(field, "lost") == 0) g.lost = value != 0;
    }
  }
  std::fclose(f);
}

// A device handle is a pointer to its Gpu entry.
Gpu* FromHandle(void* device) {
  auto* g = static_cast<Gpu*>(device);
  if (g < g_config.gpus || g >= g_config.gpus + kMaxGpus) return nullptr;
  return g;
}

#define HF_FAKE_DEVICE(device)                    \
  if (g_active == 0) return kUninitialized;       \
  Gpu* g = FromHandle(device);                    \
  if (g == nullptr) return kInvalidArgument;      \
  if (g->lost) return kGpuIsLost;

}  // namespace

extern "C" {

int nvmlInit_v2() {
  Load();
  if (g_config.init_rc != kSuccess) return g_config.init_rc;
  ++g_active;
  return kSuccess;
}

int nvmlShutdown() {
  if (g_active == 0) return kUninitialized;
  --g_active;
  return kSuccess;
}

const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  if (g_active == 0) return kUninitialized;
  *count = g_config.count;
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (g_active == 0) return kUninitialized;
  if (index >= g_config.count) return kInvalidArgument;
  *device = &g_config.gpus[index];
  return kSuccess;
}

int nvmlDeviceGetTemperature(void* device, int sensor, unsigned* temp) {
  HF_FAKE_DEVICE(device);
  if (sensor != 0) return kInvalidArgument;  // NVML_TEMPERATURE_GPU
  *temp = static_cast<unsigned>(g->temperature);
  return kSuccess;
}

int nvmlDeviceGetTemperatureThreshold(void* device, int type, unsigned* temp) {
  HF_FAKE_DEVICE(device);
  if (type != 1) return 3;  // only NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
  *temp = static_cast<unsigned>(g->slowdown);
  return kSuccess;
}

// Only the old name: the agent's fallback from nvmlDeviceGetCurrentClocksEventReasons.
int nvmlDeviceGetCurrentClocksThrottleReasons(void* device, unsigned long long* reasons) {
  HF_FAKE_DEVICE(device);
  *reasons = g->throttle;
  return kSuccess;
}

int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  HF_FAKE_DEVICE(device);
  if (g->ecc_rc != kSuccess) return g->ecc_rc;
  // Only uncorrected (1) volatile (0) counts are faked.
  *count = (error_type == 1 && counter_type == 0) ? g->ecc : 0;
  return kSuccess;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* pending) {
  HF_FAKE_DEVICE(device);
  *pending = g->retired_pending ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetRemappedRows(void* device, unsigned* corrected, unsigned* uncorrected,
                              unsigned* pending, unsigned* failed) {
  HF_FAKE_DEVICE(device);
  *corrected = 0;
  *uncorrected = g->remap_pending ? 1 : 0;
  *pending = g->remap_pending ? 1 : 0;
  *failed = g->remap_failed ? 1 : 0;
  return kSuccess;
}

// Test hook: how many initialisations are open.
int hf_fake_nvml_active() { return g_active; }

}  // extern "C"
