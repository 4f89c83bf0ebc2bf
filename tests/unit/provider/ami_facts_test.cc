// AMI facts of a local node (src/provider/local/ami_facts.h): the driver facts' rendering (the
// stand-in module's ELF, the apt record), which mounts a node gets for its instance type and
// storage configs, and what WriteNodeAmiFacts writes whatever the umask.
#include "provider/local/ami_facts.h"

#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "hyperfleet/provider/provider.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::provider::local {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// The fields of one apt stanza ("Key: value"; continuation lines joined with "\n").
std::map<std::string, std::string> Stanza(const std::string& text) {
  std::map<std::string, std::string> fields;
  std::istringstream lines(text);
  std::string key;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) break;
    if (line[0] == ' ') {
      fields[key] += "\n" + line.substr(1);
      continue;
    }
    const size_t colon = line.find(": ");
    key = line.substr(0, colon);
    fields[key] = line.substr(colon + 2);
  }
  return fields;
}

// The bytes of the section named `name` of an ELF64 object, or nullopt.
std::optional<std::string> Section(const std::string& elf, const std::string& name) {
  Elf64_Ehdr eh;
  if (elf.size() < sizeof eh) return std::nullopt;
  std::memcpy(&eh, elf.data(), sizeof eh);
  auto shdr = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  };
  if (eh.e_shoff + eh.e_shnum * sizeof(Elf64_Shdr) > elf.size()) return std::nullopt;
  const Elf64_Shdr strtab = shdr(eh.e_shstrndx);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = shdr(i);
    if (name == elf.c_str() + strtab.sh_offset + sh.sh_name) {
      return elf.substr(sh.sh_offset, sh.sh_size);
    }
  }
  return std::nullopt;
}

TEST(DriverFacts, MajorAndVersionParsing) {
  EXPECT_EQ(DriverMajor("595.91.07"), "595");
  EXPECT_EQ(DriverMajor("535.183.01"), "535");
  EXPECT_EQ(DriverMajor(kStandInDriverVersion), "595");
  EXPECT_EQ(ParseDriverVersion("550.163.01\n"), "550.163.01");  // /sys/module/nvidia/version
  EXPECT_EQ(ParseDriverVersion(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 "
                "UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"),
            "535.183.01");
  EXPECT_EQ(ParseDriverVersion(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  595.91.07  Release Build"),
            "595.91.07");
  EXPECT_EQ(ParseDriverVersion(""), "");
  EXPECT_EQ(ParseDriverVersion("no version here 12\n"), "");
  EXPECT_EQ(DpkgArchitecture("x86_64"), "amd64");
  EXPECT_EQ(DpkgArchitecture("aarch64"), "arm64");
  EXPECT_EQ(DpkgArchitecture("riscv64"), "");
}

TEST(DriverFacts, StandInModuleIsARelocatableObjectWithModinfo) {
  if (sizeof(void*) != 8) GTEST_SKIP() << "checks the 64-bit layout";
  const std::string elf = RenderStandInModule("595.91.07", "6.1.0-test", EM_X86_64);
  ASSERT_GE(elf.size(), sizeof(Elf64_Ehdr));
  EXPECT_EQ(elf.substr(0, 4), std::string(ELFMAG, SELFMAG));
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  EXPECT_EQ(eh.e_ident[EI_CLASS], ELFCLASS64);
  EXPECT_EQ(eh.e_type, ET_REL);
  EXPECT_EQ(eh.e_machine, EM_X86_64);
  EXPECT_EQ(eh.e_shentsize, sizeof(Elf64_Shdr));
  auto modinfo = Section(elf, ".modinfo");
  ASSERT_TRUE(modinfo.has_value());
  // NUL-terminated key=value entries, as kmod reads them.
  std::vector<std::string> entries;
  for (size_t at = 0; at < modinfo->size();) {
    const size_t end = modinfo->find('\0', at);
    ASSERT_NE(end, std::string::npos) << "unterminated entry";
    entries.push_back(modinfo->substr(at, end - at));
    at = end + 1;
  }
  EXPECT_THAT(entries, ::testing::Contains("version=595.91.07"));
  EXPECT_THAT(entries, ::testing::Contains("name=nvidia"));
  EXPECT_THAT(entries, ::testing::Contains("vermagic=6.1.0-test SMP mod_unload modversions "));
  EXPECT_THAT(entries, ::testing::Contains(HasSubstr("license=")));
  EXPECT_THAT(entries, ::testing::Contains(HasSubstr("description=")));
  // No code: nothing to load.
  EXPECT_FALSE(Section(elf, ".text").has_value());
  EXPECT_FALSE(Section(elf, ".gnu.linkonce.this_module").has_value());
}

// kmod's own reader, when this host has it: `modinfo -F version FILE` on the stand-in.
TEST(DriverFacts, KmodModinfoReadsTheStandIn) {
  std::string modinfo;
  for (const char* p : {"/usr/sbin/modinfo", "/sbin/modinfo", "/usr/bin/modinfo"}) {
    if (::access(p, X_OK) == 0) modinfo = p;
  }
  if (modinfo.empty()) GTEST_SKIP() << "no modinfo (kmod) on this host; the e2e test runs the node's";
  char tmpl[] = "/tmp/hf-ami-ko-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string ko = std::string(tmpl) + "/nvidia.ko";
  ASSERT_TRUE(
      WriteFileAtomically(ko, RenderStandInModule("595.91.07", "6.1.0-test", EM_X86_64)).ok());
  auto r = RunCapture({modinfo, "-F", "version", ko});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit.exit_code, 0) << r->out;
  EXPECT_EQ(r->out, "595.91.07\n");
  fs::remove_all(tmpl);
}

TEST(DriverFacts, AptRecordIsWhatMockGpuDriverDebLooksFor) {
  const std::string text = RenderAptPackages("595.91.07", "amd64");
  auto f = Stanza(text);
  EXPECT_EQ(f["Package"], "libnvidia-compute-595");
  EXPECT_EQ(f["Version"], "595.91.07-0ubuntu1");
  EXPECT_EQ(f["Architecture"], "amd64");
  EXPECT_THAT(f["Provides"], HasSubstr("libcuda.so.1 (= 595.91.07-0ubuntu1)"));
  EXPECT_THAT(f["Provides"], HasSubstr("libnvidia-ml.so.1 (= 595.91.07-0ubuntu1)"));
  EXPECT_FALSE(f.count("Depends")) << "nothing it could depend on exists";
  EXPECT_FALSE(f.count("Pre-Depends"));
  EXPECT_FALSE(f.count("Status")) << "available, not installed";
  EXPECT_THAT(f["Description"], Not(IsEmpty()));
  EXPECT_EQ(text.substr(text.size() - 2), "\n\n");  // a complete stanza
  // The major follows the version.
  EXPECT_EQ(Stanza(RenderAptPackages("535.183.01", "arm64"))["Package"], "libnvidia-compute-535");
  EXPECT_EQ(RenderAptSource().substr(RenderAptSource().find("deb ")),
            "deb [trusted=yes] file:/var/lib/hyperfleet-ami/apt ./\n");
}

TEST(NodeStorage, MountsFollowTheInstanceTypeAndStorageConfigs) {
  const DriverFacts stand_in{"595.91.07", false};
  const DriverFacts host{"550.163.01", true};
  const std::string dir = "/d/nodes/i-1";
  struct Case {
    long nvme_gb;
    bool secondary_ebs;
    DriverFacts driver;
    std::vector<NodeBind> want;
  };
  const std::vector<Case> cases = {
      {0, false, stand_in, {}},  // ml.c5.xlarge, no storage configs
      {30400, false, stand_in, {{"/d/nodes/i-1/volumes/nvme", "/opt/dlami/nvme", false}}},
      {0, true, stand_in, {{"/d/nodes/i-1/volumes/sagemaker", "/opt/sagemaker", false}}},
      {3800, true, stand_in,
       {{"/d/nodes/i-1/volumes/nvme", "/opt/dlami/nvme", false},
        {"/d/nodes/i-1/volumes/sagemaker", "/opt/sagemaker", false}}},
      {0, false, host, {{"/lib/modules/6.1.0-x", "/lib/modules/6.1.0-x", true}}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(NodeBinds(StorageOf(c.nvme_gb, c.secondary_ebs), c.driver, dir, "6.1.0-x"), c.want)
        << c.nvme_gb << " " << c.secondary_ebs << " " << c.driver.from_host;
  }
}

TEST(NodeStorage, BindsSurviveNodeJson) {
  const std::vector<NodeBind> binds = {{"/a/volumes/nvme", "/opt/dlami/nvme", false},
                                       {"/lib/modules/x", "/lib/modules/x", true}};
  EXPECT_EQ(BindsFromJson(BindsToJson(binds)), binds);
  EXPECT_THAT(BindsFromJson(nlohmann::json()), IsEmpty());
  EXPECT_THAT(BindsFromJson(nlohmann::json::parse(
                  R"([{"source": "/s"}, {"source": "", "target": "/t"},
                      {"source": "/s", "target": "relative"}, 7,
                      {"source": "/s", "target": "/t"}])")),
              ElementsAre(NodeBind{"/s", "/t", false}));
}

TEST(NodeStorage, SecondaryEbsVolumeFromInstanceStorageConfigs) {
  auto has = [](const char* text) { return HasSecondaryEbsVolume(nlohmann::json::parse(text)); };
  EXPECT_FALSE(HasSecondaryEbsVolume(nlohmann::json()));
  EXPECT_FALSE(has("[]"));
  EXPECT_TRUE(has(R"([{"EbsVolumeConfig": {"VolumeSizeInGB": 100}}])"));
  EXPECT_TRUE(has(R"([{"EbsVolumeConfig": {"VolumeSizeInGB": 100, "RootVolume": false}}])"));
  EXPECT_TRUE(has(R"([{"EbsVolumeConfig": {}}])"));
  EXPECT_FALSE(has(R"([{"EbsVolumeConfig": {"VolumeSizeInGB": 200, "RootVolume": true}}])"));
  EXPECT_FALSE(has(R"([{"FsxLustreConfig": {"DnsName": "fs", "MountName": "m"}}])"));
  EXPECT_TRUE(has(R"([{"EbsVolumeConfig": {"VolumeSizeInGB": 200, "RootVolume": true}},
                      {"EbsVolumeConfig": {"VolumeSizeInGB": 500}}])"));
}

// The apt part needs no root: facts from a (pretend) host driver write no module. Under umask
// 077 everything must still be readable by every user of the node.
TEST(WriteNodeAmiFacts, AptSourceAndVolumesWhateverTheUmask) {
  char tmpl[] = "/tmp/hf-ami-facts-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = std::string(tmpl) + "/merged";
  const std::string volume = std::string(tmpl) + "/volumes/nvme";
  const mode_t old = ::umask(077);
  Status st = WriteNodeAmiFacts(root, {"550.163.01", true}, "6.1.0-x",
                                {{volume, "/opt/dlami/nvme", false},
                                 {"/lib/modules/6.1.0-x", "/lib/modules/6.1.0-x", true}});
  ::umask(old);
  ASSERT_TRUE(st.ok()) << st;
  auto mode = [](const std::string& p) {
    struct stat s {};
    return ::stat(p.c_str(), &s) == 0 ? static_cast<int>(s.st_mode & 07777) : -1;
  };
  EXPECT_EQ(mode(volume), 0755);
  for (const char* d : {"/var", "/var/lib", "/var/lib/hyperfleet-ami", "/var/lib/hyperfleet-ami/apt",
                        "/etc/apt/sources.list.d", "/var/lib/apt/lists"}) {
    EXPECT_EQ(mode(root + d), 0755) << d;
  }
  const std::string list = root + "/var/lib/apt/lists/_var_lib_hyperfleet-ami_apt_._Packages";
  for (const std::string& f : {root + "/var/lib/hyperfleet-ami/apt/Packages",
                              root + "/etc/apt/sources.list.d/hyperfleet-ami.list", list}) {
    EXPECT_EQ(mode(f), 0644) << f;
  }
  auto packages = ReadFile(root + "/var/lib/hyperfleet-ami/apt/Packages");
  ASSERT_TRUE(packages.ok());
  EXPECT_EQ(Stanza(*packages)["Package"], "libnvidia-compute-550");
  EXPECT_EQ(ReadFile(list).value_or(""), *packages);
  EXPECT_FALSE(fs::exists(root + "/lib/modules")) << "the host's modules are bound instead";
  EXPECT_FALSE(fs::exists("/lib/modules/6.1.0-x")) << "the host's tree is never written";
  fs::remove_all(tmpl);
}

// A node's root may hold symlinks its scripts made: one leading out of it is not followed.
TEST(WriteNodeAmiFacts, RefusesSymlinksOutOfTheNode) {
  char tmpl[] = "/tmp/hf-ami-escape-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = std::string(tmpl) + "/merged";
  const std::string outside = std::string(tmpl) + "/host-dir";
  fs::create_directories(root + "/var/lib");
  fs::create_directories(outside);
  fs::create_symlink(outside, root + "/var/lib/hyperfleet-ami");
  Status st = WriteNodeAmiFacts(root, {"550.163.01", true}, "6.1.0-x", {});
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("leads out of the node's root"));
  EXPECT_TRUE(fs::is_empty(outside));
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace hf::provider::local
