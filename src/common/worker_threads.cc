#include "hyperfleet/common/worker_threads.h"

#include <utility>

namespace hf {

void WorkerThreads::Spawn(std::function<void()> fn) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  workers_.push_back(Worker{std::thread([fn = std::move(fn), done] {
                              fn();
                              done->store(true);
                            }),
                            done});
}

void WorkerThreads::JoinAll() {
  for (auto& w : workers_) {
    if (w.thread.joinable()) w.thread.join();
  }
  workers_.clear();
}

}  // namespace hf
