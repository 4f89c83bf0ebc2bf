// MakeDirs: the directories it creates get exactly the mode asked for, whatever the
// umask; existing ones keep theirs.
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

namespace hf {
namespace {

int ModeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

TEST(MakeDirs, CreatedDirectoriesGetTheModeWhateverTheUmask) {
  char tmpl[] = "/tmp/hf-paths-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  ::chmod(base.c_str(), 0711);
  const mode_t old = ::umask(077);
  Status wide = MakeDirs(base + "/a/b/c", 0755);
  Status narrow = MakeDirs(base + "/p/q");
  Status again = MakeDirs(base + "/a/b", 0700);  // exists: left alone
  ::umask(old);
  ASSERT_TRUE(wide.ok()) << wide;
  ASSERT_TRUE(narrow.ok()) << narrow;
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_EQ(ModeOf(base), 0711);
  EXPECT_EQ(ModeOf(base + "/a"), 0755);
  EXPECT_EQ(ModeOf(base + "/a/b"), 0755);
  EXPECT_EQ(ModeOf(base + "/a/b/c"), 0755);
  EXPECT_EQ(ModeOf(base + "/p"), 0700);
  EXPECT_EQ(ModeOf(base + "/p/q"), 0700);
  EXPECT_FALSE(MakeDirs("").ok());
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace hf
