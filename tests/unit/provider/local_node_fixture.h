#pragma once
// What the tests that boot local nodes share (local_provider_test, local_eks_node_test): a
// command run inside a node, and a fixture owning a scratch data dir whose nodes it
// terminates afterwards.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "hyperfleet/common/subprocess.h"
#include "hyperfleet/provider/local_provider.h"
#include "provider/local/sys.h"

namespace hf::provider {

/// How a command inside a node ended: its exit code and merged output (-1 and the error
/// when it could not be started).
struct NodeCommand {
  int exit_code = -1;
  std::string output;
};

/// Runs `argv` inside the node whose init is `init`, in all its namespaces (nsenter -a).
inline NodeCommand InNode(int init, const std::vector<std::string>& argv) {
  std::vector<std::string> full = {"nsenter", "-t", std::to_string(init), "-a", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  auto r = RunCapture(full);
  return r.ok() ? NodeCommand{r->exit.exit_code, r->out}
                : NodeCommand{-1, std::string(r.status().message())};
}

/// Runs the /bin/sh `script` inside the node whose init is `init`.
inline NodeCommand InNodeSh(int init, const std::string& script) {
  return InNode(init, {"/bin/sh", "-c", script});
}

/// A LocalProvider test on a fresh data dir under /var/tmp (a real filesystem, for the
/// overlay uppers). A test that failed half-way leaves nodes running (they outlive their
/// provider by design): TearDown adopts and terminates them, so nothing leaks into later
/// tests, then removes the data dir.
class LocalNodeTest : public ::testing::Test {
 protected:
  /// `cluster_id`: the cluster the tests launch their nodes in (TearDown waits for it to
  /// empty).
  explicit LocalNodeTest(std::string cluster_id) : cluster_id_(std::move(cluster_id)) {}

  /// Makes the data dir (`/var/tmp/<prefix>-XXXXXX`) and sets the options both kinds of
  /// test share: data_dir, an agent answering 200, this binary's node-supervisor, a 15 s stop.
  void MakeDataDir(const std::string& prefix) {
    std::string tmpl = "/var/tmp/" + prefix + "-XXXXXX";
    data_dir_ = mkdtemp(tmpl.data());
    options_.data_dir = data_dir_;
    options_.agent_handler = [](http::HttpRequest&&) {
      return http::HttpResponse{200, {}, "agent\n"};
    };
    options_.supervisor_command = {std::filesystem::canonical("/proc/self/exe").string(),
                                   "node-supervisor"};
    options_.stop_timeout_seconds = 15;
  }

  void TearDown() override {
    namespace fs = std::filesystem;
    using namespace std::chrono_literals;
    if (data_dir_.empty()) return;
    std::error_code ec;
    if (fs::exists(data_dir_ + "/local/nodes") && !fs::is_empty(data_dir_ + "/local/nodes", ec)) {
      auto p = LocalProvider::Create(options_);
      if (p.ok()) {
        for (const auto& entry : fs::directory_iterator(data_dir_ + "/local/nodes", ec)) {
          (void)(*p)->terminate(entry.path().filename().string());
        }
        EXPECT_TRUE(local::WaitFor([&] { return (*p)->list(cluster_id_)->empty(); }, 90s));
      }
    }
    fs::remove_all(data_dir_, ec);
  }

  const std::string cluster_id_;
  std::string data_dir_;
  LocalProvider::Options options_;
};

}  // namespace hf::provider
