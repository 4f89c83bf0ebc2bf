// Runs node image recipe scripts: see recipe_runner.h.
#include "provider/recipe_runner.h"

#include <fstream>

#include "hyperfleet/common/line_splitter.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::provider::internal {
namespace {

constexpr std::string_view kStepMarker = "@@step ";

// Longer lines reach the log in pieces of this size (a recipe prints none that long).
constexpr size_t kMaxLineBytes = 1 << 20;

}  // namespace

StatusOr<RecipeRun> RunRecipeScript(const std::string& script, const std::vector<std::string>& args,
                                    const std::vector<std::string>& extra_env,
                                    const std::string& log_path,
                                    const std::function<void(std::string_view)>& log) {
  ProcessSpec spec;
  spec.program = "/bin/bash";
  spec.argv = {"bash", script};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = std::vector<std::string>{
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=/root",
      "LC_ALL=C",
      "DEBIAN_FRONTEND=noninteractive",
  };
  spec.env->insert(spec.env->end(), extra_env.begin(), extra_env.end());
  spec.cwd = "/";
  spec.out = Stdio::Pipe();
  spec.err = Stdio::Stdout();
  spec.umask = kRecipeUmask;  // the caller's (e.g. 077) would make the image unreadable to daemons

  std::ofstream log_file(log_path, std::ios::trunc);
  RecipeRun result;
  LineSplitter lines(kMaxLineBytes, [&](std::string line) {
    if (std::string_view(line).starts_with(kStepMarker)) {
      result.last_step = line.substr(kStepMarker.size());
    }
    log_file << line << '\n';
    if (log) log(line);
    result.tail.push_back(std::move(line));
    if (result.tail.size() > kRecipeTailLines) result.tail.pop_front();
  });
  RunOptions options;
  options.on_stdout = [&](std::string_view bytes) { lines.Feed(bytes); };
  HF_ASSIGN_OR_RETURN(RunResult run, RunProcess(spec, options));
  lines.Finish();
  result.exit_status = run.exit.exit_code;
  return result;
}

}  // namespace hf::provider::internal
