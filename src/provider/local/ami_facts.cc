// AMI facts of a local node: see ami_facts.h and docs/nodes.md "AMI facts".
#include "provider/local/ami_facts.h"

#include <elf.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"
#include "provider/local/sys.h"

namespace hf::provider::local {
namespace {

namespace fs = std::filesystem;

// Where NVIDIA's installer puts the module (a DKMS build would use updates/dkms/).
constexpr std::string_view kModuleDir = "kernel/drivers/video";

bool IsDriverVersion(std::string_view s) {
  // digits and dots, starting with a digit: 595.91.07, 550.163.01
  if (s.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return s.find('.') != std::string_view::npos;
}

template <class Ehdr, class Shdr>
std::string ElfWithModinfo(std::string_view modinfo, int elf_machine, unsigned char elf_class) {
  // Layout: header, .modinfo, .shstrtab, section headers (aligned); no code, no symbols.
  const std::string_view shstrtab("\0.modinfo\0.shstrtab\0", 20);
  const size_t modinfo_off = sizeof(Ehdr);
  const size_t shstrtab_off = modinfo_off + modinfo.size();
  size_t shoff = shstrtab_off + shstrtab.size();
  shoff = (shoff + alignof(Shdr) - 1) / alignof(Shdr) * alignof(Shdr);

  Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = elf_class;
  eh.e_ident[EI_DATA] = std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
  eh.e_type = ET_REL;
  eh.e_machine = static_cast<decltype(eh.e_machine)>(elf_machine);
  eh.e_version = EV_CURRENT;
  eh.e_shoff = shoff;
  eh.e_ehsize = sizeof(Ehdr);
  eh.e_shentsize = sizeof(Shdr);
  eh.e_shnum = 3;
  eh.e_shstrndx = 2;

  Shdr sh[3]{};
  sh[1].sh_name = 1;  // ".modinfo"
  sh[1].sh_type = SHT_PROGBITS;
  sh[1].sh_flags = SHF_ALLOC;
  sh[1].sh_offset = modinfo_off;
  sh[1].sh_size = modinfo.size();
  sh[1].sh_addralign = 1;
  sh[2].sh_name = 10;  // ".shstrtab"
  sh[2].sh_type = SHT_STRTAB;
  sh[2].sh_offset = shstrtab_off;
  sh[2].sh_size = shstrtab.size();
  sh[2].sh_addralign = 1;

  std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
  out.append(modinfo);
  out.append(shstrtab);
  out.resize(shoff, '\0');
  out.append(reinterpret_cast<const char*>(sh), sizeof sh);
  return out;
}

// EM_* of the running binary (read from its own ELF header), which nodes share with the host.
int HostElfMachine() {
  // e_machine sits at the same offset in 32- and 64-bit headers.
  char header[sizeof(Elf64_Ehdr)] = {};
  std::ifstream exe("/proc/self/exe", std::ios::binary);
  uint16_t machine = EM_NONE;
  if (exe.read(header, sizeof header)) {
    std::memcpy(&machine, header + offsetof(Elf64_Ehdr, e_machine), sizeof machine);
  }
  return machine;
}

// The host path of directory `dir` of the node root `root`, created (0755) when missing. The
// node may have made a component a symlink: one that leads out of its root is refused rather
// than followed.
StatusOr<std::string> DirectoryIn(const std::string& root, const std::string& dir) {
  std::error_code ec;
  const fs::path real_root = fs::weakly_canonical(root, ec);
  const fs::path real = fs::weakly_canonical(root + dir, ec);
  if (ec || !absl::StartsWith(real.string(), real_root.string() + "/")) {
    return absl::InternalError(absl::StrCat("refusing to write ", dir, " of ", root,
                                            ": it leads out of the node's root"));
  }
  HF_RETURN_IF_ERROR(MakeDirs(real.string(), 0755));
  return real.string();
}

// Writes `path` of the node root `root` (0644, parents 0755).
Status WriteIn(const std::string& root, const std::string& path, std::string_view data) {
  const fs::path p(path);
  HF_ASSIGN_OR_RETURN(std::string dir, DirectoryIn(root, p.parent_path().string()));
  return WriteFileAtomically(dir + "/" + p.filename().string(), data, 0644);
}

}  // namespace

std::string DriverMajor(std::string_view version) {
  return std::string(version.substr(0, version.find('.')));
}

std::string ParseDriverVersion(std::string_view text) {
  for (absl::string_view word :
       absl::StrSplit(absl::string_view(text.data(), text.size()), absl::ByAnyChar(" \t\n"),
                      absl::SkipEmpty())) {
    if (IsDriverVersion(std::string_view(word.data(), word.size()))) return std::string(word);
  }
  return "";
}

std::string DpkgArchitecture(std::string_view machine) {
  if (machine == "x86_64") return "amd64";
  if (machine == "aarch64") return "arm64";
  return "";
}

std::string RenderStandInModule(std::string_view version, std::string_view kernel_release,
                                int elf_machine) {
  // The fields of the real module that scripts read (modinfo -F version nvidia) or that say
  // what it is; each entry ends with a NUL, as the kernel's MODULE_INFO does.
  std::string modinfo;
  for (const std::string& field : {
           absl::StrCat("version=", std::string(version)),
           std::string("license=Dual MIT/GPL"),
           std::string("description=NVIDIA driver facts of a Hyperfleet node (no code; cannot be "
                       "loaded)"),
           std::string("depends="),
           std::string("name=nvidia"),
           absl::StrCat("vermagic=", std::string(kernel_release), " SMP mod_unload modversions "),
       }) {
    modinfo.append(field);
    modinfo.push_back('\0');
  }
  if constexpr (sizeof(void*) == 8) {
    return ElfWithModinfo<Elf64_Ehdr, Elf64_Shdr>(modinfo, elf_machine, ELFCLASS64);
  } else {
    return ElfWithModinfo<Elf32_Ehdr, Elf32_Shdr>(modinfo, elf_machine, ELFCLASS32);
  }
}

std::string RenderAptPackages(std::string_view version, std::string_view architecture) {
  const std::string major = DriverMajor(version);
  const std::string full = absl::StrCat(std::string(version), std::string(kDriverPackageRevision));
  // Provides as NVIDIA's libnvidia-compute-<major> declares them (libcuda, NVML). No
  // Filename: there is no package file; installing the record fails as any missing one does.
  return absl::StrCat(
      "Package: libnvidia-compute-", major, "\n",
      "Source: nvidia-graphics-drivers-", major, "\n",
      "Version: ", full, "\n",
      "Architecture: ", std::string(architecture), "\n",
      "Maintainer: NVIDIA Corporation <cudatools@nvidia.com>\n",
      "Priority: optional\n",
      "Section: libs\n",
      "Provides: libcuda.so.1 (= ", full, "), libcuda1 (= ", full, "), libnvidia-compute, ",
      "libnvidia-ml.so.1 (= ", full, "), libnvidia-ml1 (= ", full, ")\n",
      "Description: NVIDIA libcompute package\n",
      " The record of the NVIDIA driver ", std::string(version), " that this node's AMI carries\n",
      " (Hyperfleet: a record only, no package file).\n",
      "\n");
}

std::string RenderAptSource() {
  return absl::StrCat(
      "# The NVIDIA driver's package record (Hyperfleet AMI facts, docs/nodes.md).\n",
      "deb [trusted=yes] file:", std::string(kAmiAptDir), " ./\n");
}

NodeStorage StorageOf(long nvme_gb, bool secondary_ebs) {
  return NodeStorage{nvme_gb > 0, secondary_ebs};
}

std::vector<NodeBind> NodeBinds(const NodeStorage& storage, const DriverFacts& driver,
                                std::string_view node_dir, std::string_view kernel_release) {
  std::vector<NodeBind> binds;
  if (storage.instance_store) {
    binds.push_back({absl::StrCat(std::string(node_dir), "/volumes/nvme"), "/opt/dlami/nvme", false});
  }
  if (storage.secondary_ebs) {
    binds.push_back(
        {absl::StrCat(std::string(node_dir), "/volumes/sagemaker"), "/opt/sagemaker", false});
  }
  if (driver.from_host && !kernel_release.empty()) {
    const std::string modules = absl::StrCat("/lib/modules/", std::string(kernel_release));
    binds.push_back({modules, modules, true});
  }
  return binds;
}

nlohmann::json BindsToJson(const std::vector<NodeBind>& binds) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& b : binds) {
    out.push_back({{"source", b.source}, {"target", b.target}, {"read_only", b.read_only}});
  }
  return out;
}

std::vector<NodeBind> BindsFromJson(const nlohmann::json& j) {
  std::vector<NodeBind> binds;
  if (!j.is_array()) return binds;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("source") || !e["source"].is_string() ||
        !e.contains("target") || !e["target"].is_string()) {
      continue;
    }
    NodeBind b{e["source"].get<std::string>(), e["target"].get<std::string>(),
               e.value("read_only", false)};
    if (b.source.empty() || b.target.empty() || b.target[0] != '/') continue;
    binds.push_back(std::move(b));
  }
  return binds;
}

DriverFacts HostDriverFacts() {
  for (const char* path : {"/sys/module/nvidia/version", "/proc/driver/nvidia/version"}) {
    if (auto text = ReadFile(path); text.ok()) {
      if (std::string v = ParseDriverVersion(*text); !v.empty()) return {v, true};
    }
  }
  return {std::string(kStandInDriverVersion), false};
}

std::string HostKernelRelease() {
  struct utsname u {};
  return ::uname(&u) == 0 ? std::string(u.release) : std::string();
}

Status WriteNodeAmiFacts(const std::string& merged, const DriverFacts& driver,
                         const std::string& kernel_release, const std::vector<NodeBind>& binds) {
  // (systemd-nspawn makes the mount points in the node, 0755 whatever its caller's umask.)
  for (const auto& b : binds) {
    if (b.read_only) continue;  // the host's own tree
    HF_RETURN_IF_ERROR(MakeDirs(b.source, 0755));
    // A volume's root is 0755 like a fresh file system's, whoever made the directory.
    ::chmod(b.source.c_str(), 0755);
  }
  struct utsname u {};
  const std::string arch = ::uname(&u) == 0 ? DpkgArchitecture(u.machine) : "";
  if (!arch.empty()) {
    const std::string packages = RenderAptPackages(driver.version, arch);
    const std::string dir(kAmiAptDir);
    HF_RETURN_IF_ERROR(WriteIn(merged, dir + "/Packages", packages));
    HF_RETURN_IF_ERROR(WriteIn(merged, "/etc/apt/sources.list.d/hyperfleet-ami.list",
                               RenderAptSource()));
    // apt's copy of the index (named as apt names it for this URI), so that apt-cache knows
    // the record before the first `apt-get update`, which refreshes it from the source.
    std::string list = dir + "/./Packages";
    for (char& c : list) {
      if (c == '/') c = '_';
    }
    HF_RETURN_IF_ERROR(WriteIn(merged, "/var/lib/apt/lists/" + list, packages));
  }
  if (driver.from_host || kernel_release.empty()) return absl::OkStatus();
  const std::string modules = absl::StrCat("/lib/modules/", kernel_release);
  HF_RETURN_IF_ERROR(WriteIn(merged, absl::StrCat(modules, "/", std::string(kModuleDir), "/nvidia.ko"),
                             RenderStandInModule(driver.version, kernel_release,
                                                 HostElfMachine())));
  // modinfo finds a module by name through modules.dep.bin: the image's depmod writes it.
  // (umask 022: its index files must be readable by every user, whatever ours is.)
  HF_ASSIGN_OR_RETURN(auto depmod, RunCapture({"chroot", merged, "/bin/sh", "-c",
                                               "umask 022 && exec /sbin/depmod \"$0\"",
                                               kernel_release}));
  if (!depmod.ok()) {
    return absl::InternalError(absl::StrCat("depmod ", kernel_release, " in ", merged,
                                            " failed: ", depmod.out));
  }
  return absl::OkStatus();
}

}  // namespace hf::provider::local
