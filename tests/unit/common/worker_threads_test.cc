#include "hyperfleet/common/worker_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace hf {
namespace {

TEST(WorkerThreadsTest, JoinAllWaitsForEveryFunction) {
  std::atomic<int> ran{0};
  WorkerThreads workers;
  for (int i = 0; i < 8; ++i) workers.Spawn([&] { ran.fetch_add(1); });
  EXPECT_FALSE(workers.empty());
  workers.JoinAll();
  EXPECT_EQ(ran.load(), 8);
  EXPECT_TRUE(workers.empty());
}

TEST(WorkerThreadsTest, TakeAllMovesRunningThreadsOutAndSpawnReapsFinishedOnes) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  WorkerThreads workers;
  workers.Spawn([&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return release; });
  });
  WorkerThreads taken = workers.TakeAll();
  EXPECT_TRUE(workers.empty());
  EXPECT_FALSE(taken.empty());
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  taken.JoinAll();  // returns only once the blocked function has returned
  EXPECT_TRUE(taken.empty());
  std::atomic<bool> second{false};
  workers.Spawn([&] { second = true; });
  workers.JoinAll();
  EXPECT_TRUE(second.load());
}

}  // namespace
}  // namespace hf
