#include "hyperfleet/common/file_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

namespace hf {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/hf-file-lock-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(FileLockTest, ASecondHolderWaitsUntilTheFirstIsGone) {
  const std::string path = TempDir() + "/.lock";
  auto first = FileLock::Acquire(path, 0600);
  ASSERT_TRUE(first.ok()) << first.status();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  std::promise<void> waiting;
  std::atomic<bool> acquired{false};
  std::thread second([&] {
    // Another open file description: excluded like another process would be.
    auto lock = FileLock::Acquire(path, 0600, [&] { waiting.set_value(); });
    ASSERT_TRUE(lock.ok()) << lock.status();
    acquired = true;
  });
  waiting.get_future().wait();  // on_wait ran: the first holder still has it
  EXPECT_FALSE(acquired);
  { FileLock gone = std::move(*first); }  // released here
  second.join();
  EXPECT_TRUE(acquired);
  unlink(path.c_str());
  rmdir(path.substr(0, path.rfind('/')).c_str());
}

TEST(FileLockTest, AMissingDirectoryIsAnErrorNamingThePath) {
  auto lock = FileLock::Acquire("/nonexistent-hf-dir/x.lock", 0600);
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(std::string(lock.status().message()).find("/nonexistent-hf-dir/x.lock"),
            std::string::npos);
}

}  // namespace
}  // namespace hf
