// Node image: the content key, the cache lookup and pruning, the recipe's package list against
// the binary's real runtime libraries, and (root, image built) the built image's contract.
#include "hyperfleet/provider/node_image.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_join.h"
#include "provider/recipe_runner.h"

namespace hf::provider {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `sh -c cmd`; returns {exit status, stdout+stderr}.
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hf-node-image-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Package names of packages.txt, parsed as build.sh does.
std::set<std::string> ListedPackages() {
  std::set<std::string> names;
  for (const auto& [path, content] : NodeImageRecipe()) {
    if (path != "packages.txt") continue;
    std::istringstream lines(content);
    for (std::string line; std::getline(lines, line);) {
      line = line.substr(0, line.find('#'));
      std::istringstream words(line);
      for (std::string w; words >> w;) names.insert(w);
    }
  }
  return names;
}

TEST(NodeImageKey, PinnedFormat) {
  // sha256("a.txt\0" "1\0" "x" "suite\0" "bookworm")[:16], computed independently.
  EXPECT_EQ(NodeImageKeyOf({{"a.txt", "x"}}, "bookworm"), "b9b29e98d0825a3c");
}

TEST(NodeImageKey, StableHexAndMatchesEmbeddedRecipe) {
  std::string key = NodeImageKey();
  EXPECT_THAT(key, ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(key, NodeImageKeyOf(NodeImageRecipe(), kNodeImageSuite));
  EXPECT_EQ(key, NodeImageKey());
}

TEST(NodeImageKey, ChangesWhenAnyRecipeFileChanges) {
  const std::vector<RecipeFile> recipe = NodeImageRecipe();
  const std::string base = NodeImageKeyOf(recipe, kNodeImageSuite);
  ASSERT_GE(recipe.size(), 4u);
  for (size_t i = 0; i < recipe.size(); ++i) {
    auto changed = recipe;
    changed[i].second += "\n";
    EXPECT_NE(NodeImageKeyOf(changed, kNodeImageSuite), base) << recipe[i].first;
    auto renamed = recipe;
    renamed[i].first += ".orig";
    EXPECT_NE(NodeImageKeyOf(renamed, kNodeImageSuite), base) << recipe[i].first;
  }
  auto added = recipe;
  added.emplace_back("units/extra.service", "");
  EXPECT_NE(NodeImageKeyOf(added, kNodeImageSuite), base);
  auto removed = recipe;
  removed.pop_back();
  EXPECT_NE(NodeImageKeyOf(removed, kNodeImageSuite), base);
  EXPECT_NE(NodeImageKeyOf(recipe, "trixie"), base);
}

TEST(NodeImageKey, IndependentOfOrderButNotOfFraming) {
  EXPECT_EQ(NodeImageKeyOf({{"a", "1"}, {"b", "2"}}, "s"),
            NodeImageKeyOf({{"b", "2"}, {"a", "1"}}, "s"));
  EXPECT_NE(NodeImageKeyOf({{"a", "bc"}}, "s"), NodeImageKeyOf({{"ab", "c"}}, "s"));
  EXPECT_NE(NodeImageKeyOf({{"a", "1"}, {"b", ""}}, "s"), NodeImageKeyOf({{"a", "1b"}}, "s"));
}

TEST(EksNodeImageKey, DiffersFromTheBaseAndFollowsEveryInput) {
  const std::vector<RecipeFile> base = NodeImageRecipe(), eks = EksNodeImageRecipe();
  const std::vector<RecipeFile> shas = {{"kubelet", "aa"}, {"kube-proxy", "bb"}};
  const std::string key = EksNodeImageKeyOf(base, eks, shas, kNodeImageSuite);
  EXPECT_THAT(key, ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_NE(key, NodeImageKey());
  EXPECT_NE(key, EksNodeImageKeyOf(base, eks, {{"kubelet", "aa"}, {"kube-proxy", "bc"}},
                                   kNodeImageSuite));
  EXPECT_NE(key, EksNodeImageKeyOf(base, eks, {{"kubelet", "ab"}, {"kube-proxy", "bb"}},
                                   kNodeImageSuite));
  for (size_t i = 0; i < eks.size(); ++i) {
    auto changed = eks;
    changed[i].second += "\n";
    EXPECT_NE(EksNodeImageKeyOf(base, changed, shas, kNodeImageSuite), key) << eks[i].first;
  }
  auto changed_base = base;
  changed_base[0].second += "\n";
  EXPECT_NE(EksNodeImageKeyOf(changed_base, eks, shas, kNodeImageSuite), key);
  EXPECT_NE(EksNodeImageKeyOf(base, eks, shas, "trixie"), key);
}

TEST(EksNodeImageKey, HashesTheKubernetesBinariesItShips) {
  char tmpl[] = "/tmp/hf-eks-key-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  NodeImageOptions options{"", "", nullptr};
  options.variant = NodeImageVariant::kEks;
  options.kubernetes_bin = dir;
  // No binaries: the error says where and how to get them.
  auto missing = NodeImageKeyFor(options);
  ASSERT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()),
              ::testing::AllOf(HasSubstr(dir + "/kubelet"), HasSubstr("scripts/kubernetes")));
  std::ofstream(dir + "/kubelet") << "abc";
  std::ofstream(dir + "/kube-proxy") << "";
  // sha256("abc") and sha256(""), computed independently.
  const std::vector<RecipeFile> shas = {
      {"kubelet", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"kube-proxy", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}};
  auto key = NodeImageKeyFor(options);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, EksNodeImageKeyOf(NodeImageRecipe(), EksNodeImageRecipe(), shas,
                                    kNodeImageSuite));
  std::ofstream(dir + "/kube-proxy") << "x";
  EXPECT_NE(*NodeImageKeyFor(options), *key);
  options.variant = NodeImageVariant::kSlurm;
  EXPECT_EQ(*NodeImageKeyFor(options), NodeImageKey());
  // Find names the EKS build command.
  options.variant = NodeImageVariant::kEks;
  options.image_dir = dir + "/images";
  auto found = FindNodeImage(options);
  ASSERT_TRUE(absl::IsNotFound(found.status())) << found.status();
  EXPECT_THAT(std::string(found.status().message()), HasSubstr("hyperfleet image build --eks"));
  fs::remove_all(dir);
}

TEST(EksNodeImageRecipe, IsApartFromTheBaseRecipe) {
  std::set<std::string> base, eks;
  for (const auto& [path, content] : NodeImageRecipe()) base.insert(path);
  for (const auto& [path, content] : EksNodeImageRecipe()) eks.insert(path);
  for (const char* p : {"eks-layer.sh", "eks/packages.txt", "eks/pause.c", "eks/config.toml",
                        "eks/cni.template", "eks/node/eks-prep.sh", "eks/node/import-images.sh",
                        "eks/units/kubelet.service", "eks/units/hyperfleet-eks-prep.service",
                        "eks/units/containerd-hyperfleet.conf"}) {
    EXPECT_TRUE(eks.count(p)) << p;
    EXPECT_FALSE(base.count(p)) << p;
  }
  EXPECT_TRUE(base.count("build.sh"));
  EXPECT_FALSE(eks.count("build.sh"));
  EXPECT_TRUE(IsEksRecipePath("eks/x"));
  EXPECT_FALSE(IsEksRecipePath("eks-layer.sh.orig"));
  EXPECT_FALSE(IsEksRecipePath("units/eks.service"));
}

TEST(NodeImageRecipe, HasTheBuildFilesAndPackages) {
  std::set<std::string> paths;
  for (const auto& [path, content] : NodeImageRecipe()) paths.insert(path);
  for (const char* p :
       {"build.sh", "ami-layer.sh", "packages.txt", "units/hyperfleet-agent.service",
        "units/slurmd.service", "units/slurmctld.service", "units/slurmdbd.service"}) {
    EXPECT_TRUE(paths.count(p)) << p;
  }
  std::set<std::string> pkgs = ListedPackages();
  for (const char* p : {"systemd", "systemd-sysv", "dbus", "sudo", "python3", "python3-numpy",
                        "munge", "slurmd", "slurmctld", "slurm-client", "slurmdbd",
                        "mariadb-server", "mariadb-client", "expect", "libcurl4"}) {
    EXPECT_TRUE(pkgs.count(p)) << p;
  }
}

// The agent is this very binary run inside the node, so packages.txt must bring every shared
// library it links directly (NEEDED); their own dependencies come with the packages. The C
// library and libgcc come with every Debian system.
TEST(NodeImageRecipe, ListsTheRuntimeLibrariesOfTheBinary) {
  const std::string binary = HF_HYPERFLEET_BINARY;
  if (!fs::exists(binary)) GTEST_SKIP() << binary << " is not built";
  if (Shell("command -v dpkg && command -v readelf").first != 0)
    GTEST_SKIP() << "needs dpkg, readelf";
  auto [rc, ldd] = Shell("ldd " + binary);
  ASSERT_EQ(rc, 0) << ldd;
  auto [rrc, dynamic] = Shell("readelf -d " + binary);
  ASSERT_EQ(rrc, 0) << dynamic;
  std::set<std::string> pkgs = ListedPackages();
  std::regex needed_re(R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  int checked = 0;
  for (std::sregex_iterator it(dynamic.begin(), dynamic.end(), needed_re), end; it != end; ++it) {
    std::string soname = (*it)[1];
    std::smatch where;
    std::regex path_re("\\s" + std::regex_replace(soname, std::regex(R"([.+])"), R"(\$&)") +
                       R"( => (/\S+) )");
    ASSERT_TRUE(std::regex_search(ldd, where, path_re)) << soname << " not resolved:\n" << ldd;
    std::string path = where[1];
    // dpkg knows a file by the path its package ships, /lib or /usr/lib (merged /usr).
    auto [src, owner] = Shell("{ dpkg -S " + path + " || dpkg -S \"$(readlink -f " + path +
                              ")\"; } 2>/dev/null | head -1");
    ASSERT_FALSE(owner.empty()) << path << ": no package owns it";
    std::string pkg = owner.substr(0, owner.find(':'));
    ++checked;
    if (pkg == "libc6" || pkg == "libgcc-s1") continue;
    EXPECT_TRUE(pkgs.count(pkg)) << soname << " comes from " << pkg << ", not in packages.txt";
  }
  EXPECT_GT(checked, 3);
}

TEST(NodeImageCache, FindReportsHowToBuild) {
  TempDir dir;
  auto image = FindNodeImage({dir.path(), "", nullptr});
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("hyperfleet image build"));
  EXPECT_THAT(std::string(image.status().message()), HasSubstr("scripts/setup"));
}

TEST(NodeImageCache, EnsureUsesABuiltImageWithoutBuilding) {
  TempDir dir;
  fs::create_directories(fs::path(dir.path()) / NodeImageKey() / "rootfs");
  int lines = 0;
  auto image = EnsureNodeImage({dir.path(), "", [&](std::string_view) { ++lines; }});
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->key, NodeImageKey());
  EXPECT_EQ(image->rootfs, dir.path() + "/" + NodeImageKey() + "/rootfs");
  EXPECT_EQ(lines, 0);
  auto found = FindNodeImage({dir.path(), "", nullptr});
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->rootfs, image->rootfs);
}

TEST(NodeImageCache, PruneRemovesOnlyOtherKeys) {
  TempDir dir;
  fs::path root(dir.path());
  fs::create_directories(root / NodeImageKey() / "rootfs/etc");
  fs::create_directories(root / "0123456789abcdef" / "rootfs/etc");
  fs::create_directories(root / "not-a-key");
  auto removed = PruneNodeImages({dir.path(), "", nullptr});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, ::testing::ElementsAre("0123456789abcdef"));
  EXPECT_TRUE(fs::exists(root / NodeImageKey() / "rootfs/etc"));
  EXPECT_FALSE(fs::exists(root / "0123456789abcdef"));
  EXPECT_TRUE(fs::exists(root / "not-a-key"));
}

TEST(NodeImageCache, PruneKeepsTheEksImageOfTheKubernetesBinaries) {
  TempDir dir;
  fs::path root(dir.path());
  fs::create_directories(root / "bin");
  std::ofstream(root / "bin/kubelet") << "kubelet";
  std::ofstream(root / "bin/kube-proxy") << "kube-proxy";
  NodeImageOptions options{dir.path() + "/images", "", nullptr};
  options.kubernetes_bin = dir.path() + "/bin";
  options.variant = NodeImageVariant::kEks;
  const std::string eks_key = *NodeImageKeyFor(options);
  fs::create_directories(root / "images" / eks_key / "rootfs/etc");
  fs::create_directories(root / "images" / NodeImageKey() / "rootfs/etc");
  fs::create_directories(root / "images/0123456789abcdef/rootfs/etc");
  EXPECT_TRUE(FindNodeImage(options).ok());
  auto removed = PruneNodeImages(options);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, ::testing::ElementsAre("0123456789abcdef"));
  EXPECT_TRUE(fs::exists(root / "images" / eks_key));
  EXPECT_TRUE(fs::exists(root / "images" / NodeImageKey()));
  // Other binaries: that EKS image is another key's, and goes.
  std::ofstream(root / "bin/kubelet") << "newer";
  removed = PruneNodeImages(options);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, ::testing::ElementsAre(eks_key));
}

// The recipe runs under umask 022 and LC_ALL=C whatever its caller's: with the caller's
// umask 077 the image's /opt/slurm-* came out 0700 and slurmctld could not read
// job_submit.lua. (tests/e2e/e2e_image_modes.py checks a whole build under umask 077.)
TEST(RecipeRunner, FixedUmaskLocaleAndDirectory) {
  TempDir dir;
  const std::string script = dir.path() + "/probe.sh";
  std::ofstream(script) << "umask\necho \"LC_ALL=$LC_ALL LANG=${LANG-unset} PWD=$PWD\"\n"
                           "mkdir \"$1/d\" && touch \"$1/f\" && stat -c '%a %n' \"$1/d\" \"$1/f\"\n"
                           "echo \"@@step probed\"\n";
  const mode_t old = ::umask(077);
  const char* lang = std::getenv("LANG");
  const std::string saved_lang = lang ? lang : "";
  ::setenv("LANG", "de_DE.UTF-8", 1);
  std::vector<std::string> lines;
  auto run = internal::RunRecipeScript(script, {dir.path()}, {"EXTRA=1"}, dir.path() + "/log",
                                       [&](std::string_view l) { lines.emplace_back(l); });
  ::umask(old);
  if (lang) ::setenv("LANG", saved_lang.c_str(), 1); else ::unsetenv("LANG");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_status, 0);
  EXPECT_EQ(run->last_step, "probed");
  EXPECT_THAT(lines, ::testing::ElementsAre("0022", "LC_ALL=C LANG=unset PWD=/",
                                            "755 " + dir.path() + "/d", "644 " + dir.path() + "/f",
                                            "@@step probed"));
  EXPECT_EQ(ReadAll(dir.path() + "/log"), absl::StrJoin(lines, "\n") + "\n");
}

// The recipe scripts fix the umask themselves too, for a run by hand (their usage lines).
TEST(NodeImageRecipe, ScriptsFixTheirUmask) {
  for (const auto& [path, content] : NodeImageRecipe()) {
    if (path != "build.sh" && path != "ami-layer.sh" && path != "eks-layer.sh") continue;
    EXPECT_THAT(content, HasSubstr("\numask 022\n")) << path;
  }
}

// --- The built image (root only; skipped when the image is not built) -----------------------

class BuiltImage : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    const char* dir = std::getenv("HF_IMAGE_DIR");
    auto image = FindNodeImage({dir ? dir : "", "", nullptr});
    if (!image.ok()) GTEST_SKIP() << image.status().message();
    root_ = image->rootfs;
  }
  fs::path In(const std::string& p) const { return fs::path(root_ + p); }
  std::string Link(const std::string& p) const {
    std::error_code ec;
    return fs::read_symlink(In(p), ec).string();
  }
  bool Enabled(const std::string& unit) const {
    return fs::is_symlink(In("/etc/systemd/system/multi-user.target.wants/" + unit));
  }
  // uid of a user from the image's /etc/passwd, or -1.
  long Uid(const std::string& user) const {
    std::istringstream lines(ReadAll(In("/etc/passwd")));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(user + ":", 0) == 0) {
        std::istringstream f(line);
        std::string name, pw, uid;
        std::getline(f, name, ':');
        std::getline(f, pw, ':');
        std::getline(f, uid, ':');
        return std::stol(uid);
      }
    }
    return -1;
  }
  std::string root_;
};

TEST_F(BuiltImage, SlurmLayout) {
  EXPECT_EQ(Link("/opt/slurm"), "slurm-22.05.8");
  EXPECT_EQ(Link("/etc/slurm"), "/opt/slurm/etc");
  const std::string etc = "/opt/slurm-22.05.8/etc";
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(In(etc))));
  EXPECT_TRUE(fs::is_regular_file(In(etc + "/accounting.conf")));
  EXPECT_EQ(fs::file_size(In(etc + "/accounting.conf")), 0u);
  for (const char* f : {"gres.conf", "cgroup.conf", "plugstack.conf"}) {
    EXPECT_TRUE(fs::is_regular_file(In(etc + "/" + f))) << f;
  }
  EXPECT_TRUE(fs::is_directory(In(etc + "/plugstack.conf.d")));
  std::string tmpl = ReadAll(In(etc + "/slurmdbd.conf.template"));
  EXPECT_THAT(tmpl, HasSubstr("${SLURM_DB_USER}"));
  EXPECT_THAT(tmpl, HasSubstr("${SLURM_DB_PASSWORD}"));
  for (const char* b : {"sbin/slurmd", "sbin/slurmctld", "sbin/slurmdbd", "sbin/slurmstepd",
                        "bin/sinfo", "bin/sbatch", "bin/srun", "bin/scontrol", "bin/sacctmgr"}) {
    std::string target = Link(std::string("/opt/slurm-22.05.8/") + b);
    EXPECT_FALSE(target.empty()) << b;
    // Resolved inside the image: Debian's links go through /etc/alternatives (absolute).
    EXPECT_EQ(Shell("chroot " + root_ + " /usr/bin/test -f " + target + " -a -x " + target).first,
              0)
        << b << " -> " << target;
  }
  EXPECT_THAT(ReadAll(In("/etc/profile.d/slurm.sh")), HasSubstr("/opt/slurm/bin:/opt/slurm/sbin"));
  long slurm = Uid("slurm");
  ASSERT_GT(slurm, 0);
  for (const char* d : {"/var/spool/slurmd", "/var/spool/slurmctld", "/var/log/slurm"}) {
    struct stat st {};
    ASSERT_EQ(::stat(In(d).c_str(), &st), 0) << d;
    EXPECT_EQ(static_cast<long>(st.st_uid), slurm) << d;
  }
}

TEST_F(BuiltImage, UnitsAndWhatStartsAtBoot) {
  std::string ctld = ReadAll(In("/etc/systemd/system/slurmctld.service"));
  EXPECT_THAT(ctld, HasSubstr("ConditionPathExists=/opt/slurm/etc/slurm.conf"));
  std::string slurmd = ReadAll(In("/etc/systemd/system/slurmd.service"));
  EXPECT_THAT(slurmd, HasSubstr("ExecStartPre=-/usr/bin/rm -f /opt/slurm/etc/slurm.conf"));
  EXPECT_THAT(slurmd, HasSubstr("$SLURMD_OPTIONS"));
  std::regex var(R"(\$\{?[A-Za-z_][A-Za-z0-9_]*)");
  for (std::sregex_iterator it(slurmd.begin(), slurmd.end(), var), end; it != end; ++it) {
    EXPECT_EQ(it->str(), "$SLURMD_OPTIONS");
  }
  EXPECT_TRUE(fs::exists(In("/etc/systemd/system/slurmdbd.service")));
  std::string agent = ReadAll(In("/etc/systemd/system/hyperfleet-agent.service"));
  EXPECT_THAT(agent, HasSubstr("ExecStart=/opt/hyperfleet/bin/hyperfleet agent"));
  EXPECT_THAT(agent, HasSubstr("Restart=always"));

  EXPECT_TRUE(Enabled("munge.service"));
  EXPECT_TRUE(Enabled("hyperfleet-agent.service"));
  // The DLAMI's unit, where the DLAMI has it; active on every node (docs/nodes.md "Storage").
  std::string nvme = ReadAll(In("/lib/systemd/system/dlami-nvme.service"));
  EXPECT_THAT(nvme, HasSubstr("Type=oneshot"));
  EXPECT_THAT(nvme, HasSubstr("RemainAfterExit=yes"));
  EXPECT_TRUE(Enabled("dlami-nvme.service"));
  EXPECT_FALSE(fs::exists(In("/opt/dlami/nvme"))) << "only nodes with an instance store have it";
  for (const char* u :
       {"slurmd.service", "slurmctld.service", "slurmdbd.service", "mariadb.service"}) {
    EXPECT_FALSE(Enabled(u)) << u;
  }
  EXPECT_EQ(Link("/etc/systemd/system/console-getty.service"), "/dev/null");
  EXPECT_EQ(Link("/etc/systemd/system/apt-daily.timer"), "/dev/null");
  EXPECT_EQ(Link("/sbin/init").find("systemd") != std::string::npos ||
                Link("/usr/sbin/init").find("systemd") != std::string::npos,
            true);
}

TEST_F(BuiltImage, IdentityUsersAndHygiene) {
  EXPECT_EQ(Uid("ubuntu"), 1000);
  EXPECT_THAT(ReadAll(In("/etc/group")), HasSubstr("\nubuntu:x:1000:"));
  EXPECT_THAT(ReadAll(In("/etc/sudoers.d/90-ubuntu")), HasSubstr("ubuntu ALL=(ALL) NOPASSWD:ALL"));
  ASSERT_TRUE(fs::is_regular_file(In("/etc/machine-id")));
  EXPECT_EQ(fs::file_size(In("/etc/machine-id")), 0u);
  EXPECT_GT(fs::file_size(In("/etc/munge/munge.key")), 0u);
  EXPECT_TRUE(fs::is_directory(In("/opt/sagemaker_cluster")));
  EXPECT_FALSE(fs::exists(In("/usr/sbin/policy-rc.d")));
  for (const auto& e : fs::directory_iterator(In("/var/cache/apt/archives"))) {
    EXPECT_NE(e.path().extension(), ".deb") << e.path();
  }
}

// The agent is the host's binary bound into the node: every library it needs must resolve in
// the image, and it must run there.
TEST_F(BuiltImage, RunsTheHyperfleetBinary) {
  const std::string binary = HF_HYPERFLEET_BINARY;
  if (!fs::exists(binary)) GTEST_SKIP() << binary << " is not built";
  auto [rc, ldd] = Shell("ldd " + binary);
  ASSERT_EQ(rc, 0) << ldd;
  std::regex lib_re(R"(=> (/\S+) )");
  for (std::sregex_iterator it(ldd.begin(), ldd.end(), lib_re), end; it != end; ++it) {
    std::string path = (*it)[1];
    auto [found, out] = Shell("chroot " + root_ + " /usr/bin/test -e " + path);
    EXPECT_EQ(found, 0) << path << " missing in the image";
  }
  // A private mount namespace: the bind never shows outside this one command.
  auto [run, out] = Shell("unshare --mount --propagation private sh -c 'mount --bind " + binary +
                          " " + root_ + "/opt/hyperfleet/bin/hyperfleet && chroot " + root_ +
                          " /opt/hyperfleet/bin/hyperfleet --help'");
  EXPECT_EQ(run, 0) << out;
  EXPECT_THAT(out, HasSubstr("Hyperfleet"));
}

}  // namespace
}  // namespace hf::provider
