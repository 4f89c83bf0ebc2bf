// The ssh provider's scripts (scripts.h): pure text.
#include "provider/ssh/scripts.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/provider/local_provider.h"

namespace hf::provider::ssh_scripts {
namespace {

/// `s` in single quotes for the shell.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

/// Shell text writing `bytes` to `path` with `mode` (through base64: any bytes).
std::string WriteFileCmd(const std::string& path, const std::string& bytes, const std::string& mode) {
  std::string b64 = absl::Base64Escape(bytes);
  std::string wrapped;
  for (size_t i = 0; i < b64.size(); i += 76) absl::StrAppend(&wrapped, b64.substr(i, 76), "\n");
  return absl::StrCat("base64 -d > ", Quote(absl::StrCat(path, ".hf-new")), " <<'HF_B64'\n",
                      wrapped, "HF_B64\n", "chmod ", mode, " ", Quote(absl::StrCat(path, ".hf-new")),
                      "\nmv -f ", Quote(absl::StrCat(path, ".hf-new")), " ", Quote(path), "\n");
}

/// The link-local address HyperPod's IMDS answers at (the agent's ImdsServerOptions).
constexpr char kImdsAddress[] = "169.254.169.254";

constexpr char kPrologue[] =
    "set -euo pipefail\n"
    "umask 022\n"
    "export LC_ALL=C DEBIAN_FRONTEND=noninteractive "
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    "unset LANG LANGUAGE\n";

/// Packages a machine needs that a node image does not: the default /fsx runs sshfs (which
/// brings fuse3) on the machine (fsx_mount.h). Kept out of data/node-image/packages.txt,
/// whose text is part of the node image's cache key.
constexpr const char* kMachineOnlyPackages[] = {"sshfs"};

}  // namespace

std::vector<std::string> MachinePackages(const std::string& packages_txt) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(packages_txt, '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "# Runtime libraries")) break;
    line = line.substr(0, line.find('#'));
    for (absl::string_view name : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      out.emplace_back(name);
    }
  }
  return out;
}

std::string ShellQuote(const std::string& s) { return Quote(s); }

std::string RootCommand(const std::string& user, const std::string& script) {
  return absl::StrCat(user == "root" ? "" : "sudo -n ", "bash -c ", Quote(script));
}

std::string RootShell(const std::string& user) {
  return user == "root" ? "bash -s" : "sudo -n bash -s";
}

std::string RenderBaseScript(const BaseInputs& in) {
  std::string s(kPrologue);
  absl::StrAppend(&s, "S=", kMachineStateDir, "\n",
                  "echo '@@step record'\n"
                  "install -d -m 700 \"$S\"\n"
                  "if [ ! -e \"$S/hostname\" ]; then\n"
                  "  { cat /etc/hostname 2>/dev/null || hostname; } > \"$S/hostname.new\"\n"
                  "  mv \"$S/hostname.new\" \"$S/hostname\"\n"
                  "fi\n"
                  "if [ ! -e \"$S/munge.recorded\" ]; then\n"
                  "  if [ -s /etc/munge/munge.key ]; then cp -p /etc/munge/munge.key \"$S/munge.key\"; fi\n"
                  "  : > \"$S/munge.recorded\"\n"
                  "fi\n");
  absl::StrAppend(&s, "echo '@@step packages'\n", "want=(");
  std::vector<std::string> want = in.packages;
  for (const char* p : kMachineOnlyPackages) {
    if (std::find(want.begin(), want.end(), p) == want.end()) want.emplace_back(p);
  }
  for (const auto& p : want) absl::StrAppend(&s, " ", Quote(p));
  absl::StrAppend(
      &s, " )\nmissing=()\n"
          "for p in \"${want[@]}\"; do\n"
          "  dpkg-query -W -f='${Status}\\n' \"$p\" 2>/dev/null | grep -q '^install ok installed$' ||"
          " missing+=(\"$p\")\n"
          "done\n"
          "if [ ${#missing[@]} -gt 0 ]; then\n"
          "  echo \"installing: ${missing[*]}\"\n"
          // No daemon starts while its package is configured (the AMI layer decides what
          // runs); only a policy-rc.d of ours is removed again.
          "  own_policy=0\n"
          "  if [ ! -e /usr/sbin/policy-rc.d ]; then\n"
          "    printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; own_policy=1\n"
          "  fi\n"
          "  trap '[ $own_policy = 1 ] && rm -f /usr/sbin/policy-rc.d' EXIT\n"
          "  apt-get update -q\n"
          "  apt-get install -y -q --no-install-recommends \"${missing[@]}\"\n"
          "  printf '%s\\n' \"${missing[@]}\" >> \"$S/installed-packages\"\n"
          "  [ $own_policy = 1 ] && rm -f /usr/sbin/policy-rc.d\n"
          "  trap - EXIT\n"
          "fi\n");
  // sshfs needs /dev/fuse: loaded as a module where the kernel has it so, made by hand where
  // the kernel has it built in but /dev is not devtmpfs. When neither works (a container
  // not given the device) provisioning goes on: a machine with its own /fsx, or lifecycle
  // scripts that mount FSx, does not need it; Hyperfleet's default /fsx then fails its step
  // "fsx" with sshfs's message.
  absl::StrAppend(
      &s, "echo '@@step fuse'\n",
      "if [ ! -c /dev/fuse ]; then\n"
      "  modprobe fuse 2>/dev/null || true\n"
      "  [ -c /dev/fuse ] || mknod -m 666 /dev/fuse c 10 229 2>/dev/null || true\n"
      "fi\n"
      "if ! ( : <>/dev/fuse ) 2>/dev/null; then\n"
      "  echo 'warning: /dev/fuse cannot be opened (no fuse in this kernel, or a container "
      "without the device): the default /fsx (sshfs) cannot mount on this machine' >&2\n"
      "fi\n");
  absl::StrAppend(&s, "echo '@@step ami-layer'\n",
                  "D=$(mktemp -d /tmp/hyperfleet-recipe.XXXXXX)\n"
                  "trap 'rm -rf \"$D\"' EXIT\n");
  std::vector<std::string> dirs;
  for (const auto& [path, bytes] : in.recipe) {
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) dirs.push_back(path.substr(0, slash));
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  for (const auto& d : dirs) absl::StrAppend(&s, "install -d -m 755 \"$D\"/", Quote(d), "\n");
  for (const auto& [path, bytes] : in.recipe) {
    std::string b64 = absl::Base64Escape(bytes);
    absl::StrAppend(&s, "base64 -d > \"$D\"/", Quote(path), " <<'HF_B64'\n");
    for (size_t i = 0; i < b64.size(); i += 76) absl::StrAppend(&s, b64.substr(i, 76), "\n");
    absl::StrAppend(&s, "HF_B64\n");
  }
  absl::StrAppend(&s, "bash \"$D/ami-layer.sh\" /\n", "echo '@@base-ok'\n");
  return s;
}

std::string RenderBinaryInstallScript(const std::string& sha256_hex) {
  const std::string path(kNodeBinaryPath);
  return absl::StrCat(
      kPrologue, "echo '@@step binary'\n", "install -d -m 755 ", Quote(path.substr(0, path.rfind('/'))),
      "\n", "cat > ", Quote(path + ".hf-new"), "\n", "sum=$(sha256sum ", Quote(path + ".hf-new"),
      " | cut -d' ' -f1)\n", "if [ \"$sum\" != ", Quote(sha256_hex), " ]; then\n",
      "  rm -f ", Quote(path + ".hf-new"), "\n",
      "  echo \"node binary checksum mismatch: got $sum\" >&2; exit 3\n", "fi\n", "chmod 755 ",
      Quote(path + ".hf-new"), "\n", "mv -f ", Quote(path + ".hf-new"), " ", Quote(path), "\n",
      "echo '@@binary-ok'\n");
}

std::string RenderHostsBlock(std::vector<HostsEntry> entries, const std::string& region) {
  auto key = [](const std::string& ip) {
    unsigned long long k = 0;
    for (absl::string_view part : absl::StrSplit(ip, '.')) {
      unsigned v = 0;
      (void)absl::SimpleAtoi(part, &v);
      k = k * 256 + v;
    }
    return k;
  };
  std::sort(entries.begin(), entries.end(),
            [&](const HostsEntry& a, const HostsEntry& b) { return key(a.ip) < key(b.ip); });
  std::string out;
  for (const auto& e : entries) {
    absl::StrAppend(&out, e.ip, " ", e.hostname, ".", region, ".compute.internal ", e.hostname,
                    "\n");
  }
  return out;
}

std::string RenderHostsUpdate(const std::string& block) {
  std::string s = absl::StrCat(
      "awk -v b=", Quote(kHostsBegin), " -v e=", Quote(kHostsEnd),
      " '$0==b{skip=1;next} $0==e{skip=0;next} !skip' /etc/hosts > /etc/hosts.hf-new\n");
  if (!block.empty()) {
    absl::StrAppend(&s, "{ echo ", Quote(kHostsBegin), "; printf '%s' ", Quote(block), "; echo ",
                    Quote(kHostsEnd), "; } >> /etc/hosts.hf-new\n");
  }
  absl::StrAppend(&s, "chmod 644 /etc/hosts.hf-new\n",
                  // cat, not mv: /etc/hosts may be a bind mount (containers).
                  "cat /etc/hosts.hf-new > /etc/hosts && rm -f /etc/hosts.hf-new\n");
  return s;
}

std::string RenderIdentityScript(const IdentityInputs& in) {
  std::string s(kPrologue);
  absl::StrAppend(&s, "S=", kMachineStateDir, "\n", "echo '@@step identity'\n",
                  "install -d -m 755 /etc/hyperfleet /opt/ml /opt/ml/config /opt/sagemaker_cluster "
                  "/fsx /opt/hyperfleet /opt/hyperfleet/bin\n",
                  "install -d -m 700 \"$S\"\n");
  absl::StrAppend(&s, WriteFileCmd(absl::StrCat(kMachineStateDir, "/node"),
                                   absl::StrCat("instance_id=", in.instance_id, "\ncluster_id=",
                                                in.cluster_id, "\nbundle_dir=", in.bundle_dir,
                                                "\n"),
                                   "600"));
  absl::StrAppend(&s, WriteFileCmd("/etc/hyperfleet/agent.env", in.agent_env, "600"));
  absl::StrAppend(&s, "install -d -m 700 /etc/munge\n",
                  WriteFileCmd("/etc/munge/munge.key", in.munge_key, "400"),
                  "chown munge:munge /etc/munge /etc/munge/munge.key\n");
  absl::StrAppend(&s, "printf '%s\\n' ", Quote(in.hostname), " > /etc/hostname\n",
                  "hostname ", Quote(in.hostname), "\n");
  absl::StrAppend(&s, RenderHostsUpdate(in.hosts_block));
  if (in.ami_facts) {
    const AmiFactsFiles& f = *in.ami_facts;
    absl::StrAppend(&s, "install -d -m 755 /var/lib/hyperfleet-ami /var/lib/hyperfleet-ami/apt\n",
                    WriteFileCmd("/var/lib/hyperfleet-ami/apt/Packages", f.packages, "644"),
                    WriteFileCmd("/etc/apt/sources.list.d/hyperfleet-ami.list", f.source, "644"),
                    WriteFileCmd("/var/lib/apt/lists/_var_lib_hyperfleet-ami_apt_._Packages",
                                 f.packages, "644"));
    if (!f.module.empty() && !f.kernel_release.empty()) {
      const std::string dir =
          absl::StrCat("/lib/modules/", f.kernel_release, "/kernel/drivers/video");
      absl::StrAppend(&s, "install -d -m 755 ", Quote(dir), "\n",
                      WriteFileCmd(dir + "/nvidia.ko", f.module, "644"),
                      "depmod ", Quote(f.kernel_release), "\n");
    }
  }
  absl::StrAppend(&s, "systemctl daemon-reload\n",
                  "systemctl restart munge.service\n",
                  "systemctl enable hyperfleet-agent.service\n",
                  "systemctl restart hyperfleet-agent.service\n", "echo '@@identity-ok'\n");
  return s;
}

std::string RenderCleanupScript() {
  std::string s =
      "set -uo pipefail\n"
      "umask 022\n"
      "export LC_ALL=C PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
  absl::StrAppend(
      &s, "S=", kMachineStateDir, "\n", "echo '@@step cleanup'\n",
      "units='hyperfleet-agent.service slurmd.service slurmctld.service slurmdbd.service'\n",
      "systemctl disable --now $units >/dev/null 2>&1 || true\n",
      "for u in $units; do rm -f /etc/systemd/system/$u; done\n",
      "systemctl daemon-reload || true\n",
      // The agent's IMDS address on lo (imds_server.h): a killed agent leaves it behind. Kept
      // when something else answers there (the agent adds it only when nothing does).
      "if ip -4 -o addr show dev lo 2>/dev/null | grep -qF ' ", kImdsAddress, "/32 ' &&\n"
      "   ! timeout 2 bash -c ': </dev/tcp/", kImdsAddress, "/80' 2>/dev/null; then\n"
      "  ip addr del ", kImdsAddress, "/32 dev lo 2>/dev/null || true\n"
      "fi\n",
      "bundle_dir=$(sed -n 's/^bundle_dir=//p' \"$S/node\" 2>/dev/null || true)\n",
      // Only a directory under /tmp, named as the agent names it.
      "case \"$bundle_dir\" in /tmp/?*/*) rm -rf -- \"$bundle_dir\" ;; esac\n",
      "rm -rf /opt/ml/config /etc/hyperfleet /opt/hyperfleet\n",
      RenderHostsUpdate(""),
      "if [ -s \"$S/hostname\" ]; then\n"
      "  cat \"$S/hostname\" > /etc/hostname; hostname \"$(cat \"$S/hostname\")\" || true\n"
      "fi\n"
      "if [ -d /etc/munge ]; then\n"
      "  if [ -s \"$S/munge.key\" ]; then cp -p \"$S/munge.key\" /etc/munge/munge.key\n"
      "  else head -c 1024 /dev/urandom > /etc/munge/munge.key; chmod 400 /etc/munge/munge.key;"
      " chown munge:munge /etc/munge/munge.key 2>/dev/null || true; fi\n"
      "  systemctl try-restart munge.service || true\n"
      "fi\n"
      "rm -f \"$S/node\"\n"
      "echo '@@clean'\n");
  return s;
}

std::string RenderProbeScript() {
  return absl::StrCat(
      "export LC_ALL=C PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
      "echo boot_id=$(cat /proc/sys/kernel/random/boot_id)\n",
      "echo btime=$(awk '$1==\"btime\"{print $2}' /proc/stat)\n",
      // PID 1's start (clock ticks after btime; its name has no blanks: field 22).
      "t=$(awk '{print $22}' /proc/1/stat 2>/dev/null || true); hz=$(getconf CLK_TCK)\n",
      "b=$(awk '$1==\"btime\"{print $2}' /proc/stat)\n",
      "if [ -n \"$t\" ] && [ -n \"$hz\" ]; then echo init_start=$((b + t / hz)); fi\n",
      "echo kernel_release=$(uname -r)\n", "echo machine=$(uname -m)\n",
      "v=$(cat /sys/module/nvidia/version 2>/dev/null || true); echo nvidia_version=$v\n",
      "if [ -f ", kNodeBinaryPath, " ]; then echo binary_sha256=$(sha256sum ", kNodeBinaryPath,
      " | cut -d' ' -f1); fi\n",
      "echo disk_free_kib=$(df -Pk / | awk 'NR==2{print $4}')\n");
}

std::string RenderCheckScript() { return RenderProbeScript(); }

StatusOr<MachineFacts> ParseMachineFacts(const std::string& out) {
  MachineFacts f;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view k = line.substr(0, eq);
    const std::string v(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (k == "boot_id") f.boot_id = v;
    if (k == "btime") (void)absl::SimpleAtoi(v, &f.btime);
    if (k == "init_start") (void)absl::SimpleAtoi(v, &f.init_start);
    if (k == "kernel_release") f.kernel_release = v;
    if (k == "machine") f.machine = v;
    if (k == "nvidia_version") f.nvidia_version = v;
    if (k == "binary_sha256") f.binary_sha256 = v;
    if (k == "disk_free_kib") (void)absl::SimpleAtoi(v, &f.disk_free_kib);
  }
  if (f.boot_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the machine's facts lack boot_id: ", out));
  }
  return f;
}

std::string LastStep(const std::string& out) {
  std::string step;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StartsWith(line, "@@step ")) step = std::string(line.substr(7));
  }
  return step;
}

std::string KeptHostname(std::string_view requested, std::string_view ip) {
  const bool valid =
      !requested.empty() && requested.size() <= 63 && requested.front() != '-' &&
      requested.back() != '-' &&
      requested.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string_view::npos;
  return valid ? std::string(requested) : LocalNames::Hostname(ip);
}

}  // namespace hf::provider::ssh_scripts
