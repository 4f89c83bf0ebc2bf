// main() of the tests that boot local nodes (local_provider_test, local_eks_node_test): the
// test binary is also the node supervisor the provider starts (their options'
// supervisor_command is this binary with "node-supervisor").
#include <string>

#include <gtest/gtest.h>

#include "hyperfleet/provider/local_provider.h"

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "node-supervisor") {
    return hf::provider::RunNodeSupervisor(argv[2]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
