// WriteFileAtomically, ReadFile and MakeDirs on a real file system, under hostile umasks.
#include "hyperfleet/common/fs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace hf {
namespace {

int ModeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hf-fs-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// Sets the umask for one scope.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

TEST_F(FsTest, WriteGetsExactlyTheModeWhateverTheUmask) {
  const std::string wide = dir_ + "/wide", narrow = dir_ + "/narrow";
  {
    Umask mask(077);
    ASSERT_TRUE(WriteFileAtomically(wide, "w", 0644).ok());
  }
  {
    Umask mask(0);
    ASSERT_TRUE(WriteFileAtomically(narrow, "n", 0600).ok());
  }
  EXPECT_EQ(ModeOf(wide), 0644);
  EXPECT_EQ(ModeOf(narrow), 0600);
  EXPECT_EQ(ModeOf(dir_ + "/default"), -1);
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/default", "d").ok());
  EXPECT_EQ(ModeOf(dir_ + "/default"), 0644);
}

TEST_F(FsTest, WriteReplacesAndReadsBackBytes) {
  const std::string path = dir_ + "/f";
  const std::string bytes("a\0b\n\xff", 5);
  ASSERT_TRUE(WriteFileAtomically(path, "old content that is longer").ok());
  ASSERT_TRUE(WriteFileAtomically(path, bytes, 0600).ok());
  EXPECT_EQ(ReadFile(path).value(), bytes);
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(ReadFile(path).value(), "");
  EXPECT_EQ(Entries(dir_), std::vector<std::string>{"f"});  // no temporary file left
}

TEST_F(FsTest, FailedWriteLeavesNothingBehind) {
  const Status missing_dir = WriteFileAtomically(dir_ + "/no/such/dir/f", "x");
  EXPECT_TRUE(absl::IsInternal(missing_dir)) << missing_dir;
  EXPECT_NE(missing_dir.message().find(dir_ + "/no/such/dir/f"), std::string::npos);
  // A directory in the way: the rename fails after the temporary file was written.
  ASSERT_EQ(::mkdir((dir_ + "/d").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir_ + "/d/sub").c_str(), 0700), 0);
  const Status onto_dir = WriteFileAtomically(dir_ + "/d/sub", "x");
  EXPECT_TRUE(absl::IsInternal(onto_dir)) << onto_dir;
  EXPECT_EQ(Entries(dir_ + "/d"), std::vector<std::string>{"sub"});
}

TEST_F(FsTest, ConcurrentWritersOfOnePathLeaveOneWholeVersion) {
  const std::string path = dir_ + "/shared";
  std::vector<std::thread> threads;
  std::vector<Status> results(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20 && results[t].ok(); ++i) {
        results[t] = WriteFileAtomically(path, std::string(4096, static_cast<char>('a' + t)));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r;
  const std::string text = ReadFile(path).value();
  ASSERT_EQ(text.size(), 4096u);
  EXPECT_EQ(text, std::string(4096, text[0]));
  EXPECT_EQ(Entries(dir_), std::vector<std::string>{"shared"});
}

TEST_F(FsTest, ReadFileErrors) {
  const auto missing = ReadFile(dir_ + "/missing");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find(dir_ + "/missing"), std::string::npos);
  EXPECT_TRUE(absl::IsInternal(ReadFile(dir_).status()));  // a directory
}

TEST_F(FsTest, ReadFileReadsProcFilesOfUnknownSize) {
  const auto status = ReadFile("/proc/self/status");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_NE(status->find("Umask:"), std::string::npos);
}

TEST_F(FsTest, MakeDirsGivesCreatedDirectoriesTheModeWhateverTheUmask) {
  ::chmod(dir_.c_str(), 0711);
  Status wide, narrow, again, trailing;
  {
    Umask mask(077);
    wide = MakeDirs(dir_ + "/a/b/c", 0755);
    narrow = MakeDirs(dir_ + "/p/q");
    again = MakeDirs(dir_ + "/a/b", 0700);  // exists: left alone
    trailing = MakeDirs(dir_ + "/t/", 0750);
  }
  ASSERT_TRUE(wide.ok()) << wide;
  ASSERT_TRUE(narrow.ok()) << narrow;
  ASSERT_TRUE(again.ok()) << again;
  ASSERT_TRUE(trailing.ok()) << trailing;
  EXPECT_EQ(ModeOf(dir_), 0711);
  EXPECT_EQ(ModeOf(dir_ + "/a"), 0755);
  EXPECT_EQ(ModeOf(dir_ + "/a/b"), 0755);
  EXPECT_EQ(ModeOf(dir_ + "/a/b/c"), 0755);
  EXPECT_EQ(ModeOf(dir_ + "/p"), 0700);
  EXPECT_EQ(ModeOf(dir_ + "/p/q"), 0700);
  EXPECT_EQ(ModeOf(dir_ + "/t"), 0750);
}

TEST_F(FsTest, MakeDirsErrors) {
  EXPECT_TRUE(absl::IsInvalidArgument(MakeDirs("")));
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/file", "x").ok());
  const Status file = MakeDirs(dir_ + "/file");
  EXPECT_TRUE(absl::IsInternal(file));
  EXPECT_EQ(file.message(), dir_ + "/file is not a directory");
  EXPECT_TRUE(absl::IsInternal(MakeDirs(dir_ + "/file/below")));
}

}  // namespace
}  // namespace hf
