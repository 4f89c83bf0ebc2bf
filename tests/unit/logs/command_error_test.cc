// ExitWithError (src/cli/command_error.cc): how every `hyperfleet` client subcommand gives up.
#include "hyperfleet/cli/command_error.h"

#include <gtest/gtest.h>

namespace hf::cli {
namespace {

TEST(ExitWithError, PrintsTheCommandAndTheMessageAndExitsWithOne) {
  EXPECT_EXIT(ExitWithError("logs tail", absl::NotFoundError("The specified log group does "
                                                             "not exist.")),
              testing::ExitedWithCode(1),
              "^hyperfleet logs tail: The specified log group does not exist.\n$");
}

}  // namespace
}  // namespace hf::cli
