#pragma once
// Worker threads of an asynchronous owner (a provider's launch, terminate and reboot work):
// each runs one function and is joined once it has finished (at the next Spawn) or when
// the owner takes them all to join at shutdown. Not thread-safe: the owner calls it under
// its own lock, and joins what TakeAll() returned after releasing that lock.
#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <thread>

namespace hf {

class WorkerThreads {
 public:
  WorkerThreads() = default;
  WorkerThreads(WorkerThreads&&) = default;
  WorkerThreads& operator=(WorkerThreads&&) = default;
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;
  /// Joins every thread still held.
  ~WorkerThreads() { JoinAll(); }

  /// Joins the threads that have finished, then starts one running `fn`.
  void Spawn(std::function<void()> fn);
  /// Moves every thread out, finished or not (to join them without holding a lock).
  WorkerThreads TakeAll() {
    WorkerThreads out;
    out.workers_.swap(workers_);
    return out;
  }
  /// Joins every thread held (blocking until each has finished).
  void JoinAll();
  bool empty() const { return workers_.empty(); }

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::list<Worker> workers_;
};

}  // namespace hf
