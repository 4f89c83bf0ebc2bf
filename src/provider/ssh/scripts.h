#pragma once
// The shell scripts the ssh provider streams to a machine's `bash -s` (as root, or through
// `sudo -n`), rendered as pure text from typed inputs (docs/ssh-provider.md "Provisioning").
// Each script prints "@@step <name>" before each step, so a failure names the step it
// reached; every file it writes gets an explicit mode, whatever the login's umask.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hyperfleet/common/status.h"

namespace hf::provider::ssh_scripts {

/// Where a machine keeps what provisioning changed, so that cleanup can restore it: the
/// original hostname and munge key, and the node it serves.
inline constexpr char kMachineStateDir[] = "/var/lib/hyperfleet/machine";
/// Where the node binary lives on a machine (the agent unit's ExecStart).
inline constexpr char kNodeBinaryPath[] = "/opt/hyperfleet/bin/hyperfleet";
/// The marks around the cluster's block in a machine's /etc/hosts.
inline constexpr char kHostsBegin[] = "# BEGIN hyperfleet cluster nodes";
inline constexpr char kHostsEnd[] = "# END hyperfleet cluster nodes";

/// The Debian packages a machine needs, from data/node-image/packages.txt: every name up to
/// the section of the normal binary's runtime libraries (the comment line starting
/// "# Runtime libraries"), which the portable node binary does not need.
std::vector<std::string> MachinePackages(const std::string& packages_txt);

/// `s` single-quoted for a POSIX shell.
std::string ShellQuote(const std::string& s);

/// The remote command that runs `script` as root with stdin left to the caller:
/// "bash -c '<script>'", through "sudo -n" when `user` is not root.
std::string RootCommand(const std::string& user, const std::string& script);

/// The remote command that runs a script on stdin as root: "bash -s" for root, else
/// "sudo -n bash -s".
std::string RootShell(const std::string& user);

/// What the base script needs: the packages and the files of data/node-image that
/// ami-layer.sh reads (path relative to data/node-image, bytes).
struct BaseInputs {
  std::vector<std::string> packages;
  std::vector<std::pair<std::string, std::string>> recipe;
};

/// The part every node and hot spare shares (steps "record", "packages", "fuse",
/// "ami-layer"): records the original hostname and munge key once, installs only the missing
/// packages with the machine's apt (no service starts meanwhile: a policy-rc.d for the
/// install only) -- `packages` plus the machine-only sshfs of the default /fsx --, makes
/// /dev/fuse when missing (modprobe, else mknod; only a warning when it cannot be opened),
/// and runs ami-layer.sh in its machine mode (R=/) from a temporary copy of the recipe.
std::string RenderBaseScript(const BaseInputs& in);

/// The command that installs the node binary from stdin and checks it (step "binary"):
/// written beside kNodeBinaryPath, its SHA-256 compared with `sha256_hex`, then renamed over
/// it; exit status 3 and nothing replaced when the sum differs.
std::string RenderBinaryInstallScript(const std::string& sha256_hex);

/// One line of the cluster's /etc/hosts block.
struct HostsEntry {
  std::string ip;
  std::string hostname;  ///< ip-a-b-c-d
};

/// The block between kHostsBegin and kHostsEnd: "<ip> <hostname>.<region>.compute.internal
/// <hostname>" per entry, sorted by address.
std::string RenderHostsBlock(std::vector<HostsEntry> entries, const std::string& region);

/// Shell text that replaces the marked block of /etc/hosts with `block` (or removes it when
/// `block` is empty), keeping every other line.
std::string RenderHostsUpdate(const std::string& block);

/// The AMI facts a machine gets when it has no NVIDIA driver of its own (ami_facts.h): the
/// apt record and source, and the stand-in module for its kernel.
struct AmiFactsFiles {
  std::string packages;        ///< the Packages file (RenderAptPackages)
  std::string source;          ///< the sources.list.d line (RenderAptSource)
  std::string kernel_release;  ///< the machine's `uname -r`
  std::string module;          ///< the stand-in nvidia.ko; empty when the machine has a driver
};

/// What makes a provisioned machine one node of a cluster.
struct IdentityInputs {
  std::string instance_id;
  std::string cluster_id;
  std::string hostname;           ///< ip-a-b-c-d of the machine's address
  std::string agent_env;          ///< /etc/hyperfleet/agent.env, written 0600
  std::string munge_key;          ///< the cluster's key, bytes
  std::string hosts_block;        ///< RenderHostsBlock of the cluster's nodes
  std::string bundle_dir;         ///< /tmp/<bucket>/<prefix>/ (cleanup removes it); may be empty
  std::optional<AmiFactsFiles> ami_facts;
};

/// Step "identity": the node contract directories, agent.env, the munge key (owned by munge,
/// 0400), the hostname, the hosts block, the AMI facts, and the node it serves recorded in
/// kMachineStateDir; then munge restarts and the agent unit is enabled and (re)started.
std::string RenderIdentityScript(const IdentityInputs& in);

/// Step "cleanup": stops and disables the agent and Slurm's daemons, removes Hyperfleet's and
/// HyperPod's units, /etc/hyperfleet, the node binary, /opt/ml/config, the lifecycle bundle
/// recorded at identity time, the hosts block, and 169.254.169.254/32 from lo when a killed
/// agent left it (nothing answers there); restores the recorded hostname and munge key
/// (a fresh random key when the machine had none). What lifecycle scripts installed stays.
/// Prints "@@clean" at its end.
std::string RenderCleanupScript();

/// A spare's (or returning machine's) health check: prints "boot_id=", "binary_sha256=" and
/// "disk_free_kib=" (of /) lines.
std::string RenderCheckScript();

/// Facts of a machine read over ssh.
struct MachineFacts {
  std::string boot_id;
  long long btime = 0;          ///< /proc/stat btime (seconds since the epoch)
  /// When its init (PID 1) started, seconds since the epoch: the boot time that also moves
  /// when the "machine" is a container (whose btime is its host's); 0 when unknown.
  long long init_start = 0;
  std::string kernel_release;
  std::string machine;          ///< uname -m
  std::string nvidia_version;   ///< its driver, or empty
  std::string binary_sha256;    ///< of kNodeBinaryPath, or empty
  long long disk_free_kib = -1;
};

/// Prints the MachineFacts as key=value lines.
std::string RenderProbeScript();

/// Parses RenderProbeScript's (or RenderCheckScript's) output. InvalidArgument when boot_id
/// is missing.
StatusOr<MachineFacts> ParseMachineFacts(const std::string& out);

/// The step a script reached: the name after its last "@@step " line ("" if none).
std::string LastStep(const std::string& out);

/// The hostname a node on a machine at `ip` gets: `requested` (InstanceSpec::hostname, the
/// replaced node's name, so that Slurm keeps the node: NodeName stays, NodeAddr moves) when
/// it is a valid host label of [a-z0-9-] (at most 63, not starting or ending with '-'), else
/// "ip-a-b-c-d" of `ip`.
std::string KeptHostname(std::string_view requested, std::string_view ip);

}  // namespace hf::provider::ssh_scripts
