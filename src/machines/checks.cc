// Registration's pure decisions: see include/hyperfleet/machines/checks.h.
#include "hyperfleet/machines/checks.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/strings.h"

namespace hf::machines {
namespace {

// One decimal place, as people read memory sizes ("15.4").
std::string Gib(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.ends_with(".0")) s.resize(s.size() - 2);
  return s;
}

std::string Unquote(std::string_view v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
    v = v.substr(1, v.size() - 2);
  }
  return std::string(v);
}

}  // namespace

std::string_view ProbeCommand() {
  // LC_ALL=C: nproc and sed read the same on every machine. Each key on its own line.
  return R"sh(export LC_ALL=C
echo "cpus=$(nproc)"
sed -n 's/^MemTotal:[[:space:]]*\([0-9][0-9]*\) kB$/mem_kb=\1/p' /proc/meminfo
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L 2>/dev/null | sed -n 's/^GPU [0-9][0-9]*: \(.*\) (UUID:.*$/gpu=\1/p'
fi
n=0; for d in /proc/driver/nvidia/gpus/*; do [ -e "$d" ] && n=$((n+1)); done; echo "gpus=$n"
n=0; for d in /dev/neuron[0-9]*; do [ -e "$d" ] && n=$((n+1)); done; echo "neuron=$n"
sed -n 's/^ID=\(.*\)$/os_id=\1/p; s/^VERSION_ID=\(.*\)$/os_version=\1/p' /etc/os-release
echo "arch=$(uname -m)"
if [ "$(id -u)" = 0 ] || sudo -n true >/dev/null 2>&1; then echo sudo=yes; else echo sudo=no; fi
)sh";
}

StatusOr<Probe> ParseProbe(std::string_view output) {
  Probe p;
  bool have_cpus = false, have_mem = false, have_os = false, have_arch = false;
  int gpu_lines = 0, gpus_proc = 0;
  for (absl::string_view raw : absl::StrSplit(AbslView(output), '\n')) {
    const std::string_view line = StripAsciiWhitespace(StdView(raw));
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;  // a login banner or a shell's warning
    const std::string_view key = line.substr(0, eq);
    const std::string_view value = line.substr(eq + 1);
    auto number = [&](auto& out) -> Status {
      if (!absl::SimpleAtoi(AbslView(value), &out) || out < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("the machine's probe gave ", AbslView(key), "=", AbslView(value),
                         ", not a number"));
      }
      return absl::OkStatus();
    };
    if (key == "cpus") {
      HF_RETURN_IF_ERROR(number(p.facts.cpus));
      have_cpus = true;
    } else if (key == "mem_kb") {
      int64_t kb = 0;
      HF_RETURN_IF_ERROR(number(kb));
      p.facts.memory_gib = std::round(static_cast<double>(kb) / (1024.0 * 1024.0) * 100) / 100;
      have_mem = true;
    } else if (key == "gpu") {
      ++gpu_lines;
      if (p.facts.gpu_model.empty()) p.facts.gpu_model = std::string(value);
    } else if (key == "gpus") {
      HF_RETURN_IF_ERROR(number(gpus_proc));
    } else if (key == "neuron") {
      HF_RETURN_IF_ERROR(number(p.facts.neuron_devices));
    } else if (key == "os_id") {
      p.facts.os_id = Unquote(value);
      have_os = true;
    } else if (key == "os_version") {
      p.facts.os_version = Unquote(value);
    } else if (key == "arch") {
      p.facts.arch = std::string(value);
      have_arch = !value.empty();
    } else if (key == "sudo") {
      p.root_capable = value == "yes";
    }
  }
  p.facts.gpus = std::max(gpu_lines, gpus_proc);
  for (auto [have, name] : {std::pair{have_cpus, "cpus"}, std::pair{have_mem, "mem_kb"},
                            std::pair{have_os, "os_id"}, std::pair{have_arch, "arch"}}) {
    if (!have) {
      return absl::InvalidArgumentError(
          absl::StrCat("the machine's probe did not say ", name,
                       " (is /proc mounted, and /etc/os-release there?)"));
    }
  }
  return p;
}

std::vector<std::string> HardwareMismatches(const store::MachineFacts& facts,
                                            const model::InstanceTypeSpec& spec) {
  std::vector<std::string> out;
  using model::AcceleratorKind;
  const int nvidia = spec.accelerator_kind == AcceleratorKind::kNvidiaGpu ? spec.accelerator_count : 0;
  const int neuron = (spec.accelerator_kind == AcceleratorKind::kAwsTrainium ||
                      spec.accelerator_kind == AcceleratorKind::kAwsInferentia)
                         ? spec.accelerator_count
                         : 0;
  if (facts.gpus != nvidia) {
    out.push_back(absl::StrCat(
        "GPUs: the machine has ", facts.gpus, " NVIDIA GPU", facts.gpus == 1 ? "" : "s", ", ",
        spec.name, " has ", nvidia,
        nvidia > 0 ? absl::StrCat(" (", spec.accelerator_model, ")") : std::string()));
  }
  if (facts.neuron_devices != neuron) {
    out.push_back(absl::StrCat("Neuron devices: the machine has ", facts.neuron_devices, ", ",
                               spec.name, " has ", neuron));
  }
  if (facts.cpus < spec.vcpus) {
    out.push_back(absl::StrCat("CPUs: the machine has ", facts.cpus, ", ", spec.name, " has ",
                               spec.vcpus));
  }
  if (facts.memory_gib < spec.memory_gib * kMemoryTolerance) {
    out.push_back(absl::StrCat("memory: the machine has ", Gib(facts.memory_gib), " GiB, ",
                               spec.name, " has ", Gib(spec.memory_gib), " GiB (at least ",
                               Gib(spec.memory_gib * kMemoryTolerance), " GiB needed)"));
  }
  return out;
}

std::vector<std::string> OsMismatches(const store::MachineFacts& facts) {
  const bool ok = (facts.os_id == "debian" && facts.os_version == "12") ||
                  (facts.os_id == "ubuntu" &&
                   (facts.os_version == "22.04" || facts.os_version == "24.04"));
  if (ok) return {};
  return {absl::StrCat("OS: the machine runs ", facts.os_id.empty() ? "?" : facts.os_id, " ",
                       facts.os_version.empty() ? "?" : facts.os_version,
                       "; nodes run on Debian 12, Ubuntu 22.04 or Ubuntu 24.04")};
}

std::string ArchProblem(const store::MachineFacts& facts, std::string_view host_arch) {
  if (facts.arch == host_arch) return "";
  return absl::StrCat("architecture: the machine is ", facts.arch, ", the node binary is built for ",
                      AbslView(host_arch));
}

bool IsIpv4(std::string_view text) {
  if (text.empty() || text.size() > 15) return false;
  for (char c : text) {
    if (!(absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.')) return false;
  }
  return ParseIpv4(text).has_value();
}

Status CheckHost(std::string_view host, std::string_view field) {
  if (host.empty() || host.size() > 253 || host.front() == '-' || host.front() == '.') {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(field), " must be an IPv4 address or a host name"));
  }
  for (char c : host) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) {
      return absl::InvalidArgumentError(absl::StrCat(
          AbslView(field), " must be an IPv4 address or a host name (letters, digits, '.', '-')"));
    }
  }
  return absl::OkStatus();
}

Status CheckUser(std::string_view user, std::string_view field) {
  bool ok = !user.empty() && user.size() <= 32 &&
            (absl::ascii_islower(static_cast<unsigned char>(user.front())) || user.front() == '_');
  for (char c : user) {
    ok = ok && (absl::ascii_islower(static_cast<unsigned char>(c)) ||
                absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      AbslView(field), " must be a login name (1 to 32 of a-z 0-9 _ . -, starting with a letter or _)"));
}

Status CheckPrivateKey(std::string_view key, std::string_view field) {
  const std::string_view text = StripAsciiWhitespace(key);
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(AbslView(field), " ", AbslView(why)));
  };
  struct Kind {
    std::string_view begin, end;
  };
  static constexpr Kind kKinds[] = {
      {"-----BEGIN OPENSSH PRIVATE KEY-----", "-----END OPENSSH PRIVATE KEY-----"},
      {"-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"},
      {"-----BEGIN EC PRIVATE KEY-----", "-----END EC PRIVATE KEY-----"},
      {"-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----"},
  };
  if (text.starts_with("-----BEGIN ENCRYPTED PRIVATE KEY-----")) {
    return bad("is encrypted: give a key without a passphrase (ssh runs in batch mode)");
  }
  const Kind* kind = nullptr;
  for (const auto& k : kKinds) {
    if (text.starts_with(k.begin) && text.ends_with(k.end)) kind = &k;
  }
  if (kind == nullptr) return bad("must be an OpenSSH private key (the file ssh-keygen writes)");
  const std::string_view body =
      text.substr(kind->begin.size(), text.size() - kind->begin.size() - kind->end.size());
  if (body.find("ENCRYPTED") != std::string_view::npos) {
    return bad("is encrypted: give a key without a passphrase (ssh runs in batch mode)");
  }
  if (kind == &kKinds[0]) {
    // openssh-key-v1: magic, then the cipher name; "none" when there is no passphrase.
    std::string b64;
    for (char c : body) {
      if (!absl::ascii_isspace(static_cast<unsigned char>(c))) b64.push_back(c);
    }
    std::string blob;
    constexpr std::string_view kMagic("openssh-key-v1\0", 15);
    if (!absl::Base64Unescape(b64, &blob) || !std::string_view(blob).starts_with(kMagic) ||
        blob.size() < kMagic.size() + 4) {
      return bad("is not a readable OpenSSH private key");
    }
    const auto* p = reinterpret_cast<const unsigned char*>(blob.data() + kMagic.size());
    const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
    if (blob.size() < kMagic.size() + 4 + len) return bad("is not a readable OpenSSH private key");
    if (std::string_view(blob).substr(kMagic.size() + 4, len) != "none") {
      return bad("is encrypted: give a key without a passphrase (ssh runs in batch mode)");
    }
  }
  return absl::OkStatus();
}

}  // namespace hf::machines
