// RunScript (src/agent/script_runner.cc) with a script another process still holds open for
// writing, as a child spawned by another agent thread does until its own exec.
#include "hyperfleet/agent/script_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hf::agent {
namespace {

TEST(ScriptRunnerTest, AScriptBrieflyOpenForWritingRunsOnceItIsClosed) {
  char tmpl[] = "/tmp/hf-script-runner-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string script = dir + "/on_create.sh";
  std::ofstream(script) << "#!/bin/sh\necho ran\n";
  chmod(script.c_str(), 0755);
  // The holder opens the script for writing, says so, and keeps it open for 100 ms.
  FILE* holder = popen(("exec 3>>'" + script + "'; echo ready; exec sleep 0.1").c_str(), "r");
  ASSERT_NE(holder, nullptr);
  char line[16] = {};
  ASSERT_NE(fgets(line, sizeof line, holder), nullptr);
  ASSERT_STREQ(line, "ready\n");

  ScriptSpec spec;
  spec.path = script;
  spec.working_directory = dir;
  spec.environment = {"PATH=/usr/bin:/bin"};
  std::vector<std::string> lines;
  SystemClock clock;
  const ScriptOutcome outcome =
      RunScript(spec, clock, [&](OutputLine l) { lines.push_back(l.text); }, nullptr);
  pclose(holder);
  EXPECT_EQ(outcome.kind, ScriptOutcome::Kind::kExited) << "spawn errno " << outcome.spawn_errno;
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(lines, std::vector<std::string>{"ran"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hf::agent
