#include "hyperfleet/cli/command_error.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace hf::cli {

void ExitWithError(std::string_view command, const Status& status) {
  std::fprintf(stderr, "hyperfleet %s: %s\n", std::string(command).c_str(),
               std::string(status.message()).c_str());
  std::exit(1);
}

}  // namespace hf::cli
