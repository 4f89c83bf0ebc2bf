// The controller's slurm.conf reload: SlurmReloadArguments, and the embedded
// data/slurm/reload-slurmctld.sh run on /bin/sh against fake systemctl and scontrol.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hyperfleet/agent/agent.h"

namespace hf::agent {
namespace {

constexpr char kBefore[] =
    "SlurmctldHost=c1(10.0.0.1)\nNodeName=w1 CPUs=4\nNodeName=w2 CPUs=4\nNodeName=w3 CPUs=4\n";
constexpr char kAfter[] = "SlurmctldHost=c1(10.0.0.1)\nNodeName=w2 CPUs=4\n";

TEST(SlurmReloadArguments, NamesTheModeThenTheNodesThatLeft) {
  EXPECT_EQ(SlurmReloadArguments(SlurmReload::kRestart, kBefore, kAfter),
            (std::vector<std::string>{"restart", "w1", "w3"}));
  EXPECT_EQ(SlurmReloadArguments(SlurmReload::kReconfigure, kAfter, kAfter),
            (std::vector<std::string>{"reconfigure"}));
  EXPECT_EQ(SlurmReloadArguments(SlurmReload::kRestart, "", kAfter),
            (std::vector<std::string>{"restart"}));
}

// Runs the program as the agent does (sh -c PROGRAM sh ARGS...) with fake
// systemctl/scontrol on PATH; returns "exit=<status>" then their calls, one per line.
// `enabled`/`active`: what `systemctl is-enabled/is-active slurmctld` answer.
std::string RunReload(const std::vector<std::string>& args, bool enabled, bool active) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("hf-reload-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string calls = (dir / "calls").string();
  {
    std::ofstream systemctl(dir / "systemctl");
    systemctl << "#!/bin/sh\necho \"systemctl $*\" >> " << calls << "\n"
              << "case \"$1\" in is-enabled) exit " << (enabled ? 0 : 1)
              << ";; is-active) exit " << (active ? 0 : 3) << ";; esac\n";
    std::ofstream scontrol(dir / "scontrol");
    scontrol << "#!/bin/sh\necho \"scontrol $*\" >> " << calls << "\n";
    std::ofstream program(dir / "program");
    program << SlurmReloadProgram();
  }
  for (const char* f : {"systemctl", "scontrol"}) {
    std::filesystem::permissions(dir / f, std::filesystem::perms::owner_all);
  }
  std::string cmd = "PATH=" + dir.string() + ":/usr/bin:/bin sh -c \"$(cat " +
                    (dir / "program").string() + ")\" sh";
  for (const auto& a : args) cmd += " '" + a + "'";
  const int status = std::system(cmd.c_str());
  std::ifstream in(calls);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  return "exit=" + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "\n" + out;
}

TEST(SlurmReloadProgram, RestartSetsRemovedNodesDownFirstThenReconfigures) {
  EXPECT_EQ(RunReload(SlurmReloadArguments(SlurmReload::kRestart, kBefore, kAfter), true, true),
            "exit=0\n"
            "systemctl is-enabled --quiet slurmctld\n"
            "systemctl is-active --quiet slurmctld\n"
            "systemctl is-active --quiet slurmctld\n"
            "scontrol update NodeName=w1,w3 State=DOWN Reason=removed from the cluster\n"
            "systemctl restart slurmctld\n"
            "scontrol ping\n"
            "scontrol reconfigure\n");
}

TEST(SlurmReloadProgram, ReconfigureOnlyReconfiguresALiveController) {
  EXPECT_EQ(RunReload({"reconfigure"}, true, true),
            "exit=0\n"
            "systemctl is-enabled --quiet slurmctld\n"
            "systemctl is-active --quiet slurmctld\n"
            "scontrol reconfigure\n");
}

TEST(SlurmReloadProgram, ADeadControllerIsStartedAgainAndRemovedNodesWaitForIt) {
  EXPECT_EQ(RunReload({"reconfigure", "w1"}, true, false),
            "exit=0\n"
            "systemctl is-enabled --quiet slurmctld\n"
            "systemctl is-active --quiet slurmctld\n"
            "systemctl is-active --quiet slurmctld\n"
            "systemctl restart slurmctld\n"
            "scontrol ping\n"
            "scontrol reconfigure\n");
}

TEST(SlurmReloadProgram, DoesNothingWhereTheLifecycleScriptsSetNoSlurmctldUp) {
  EXPECT_EQ(RunReload({"restart", "w1"}, false, false),
            "exit=0\nsystemctl is-enabled --quiet slurmctld\n");
}

}  // namespace
}  // namespace hf::agent
