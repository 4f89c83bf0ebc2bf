#pragma once
// `hyperfleet jobs`: task governance on Slurm from the user's side (docs/governance.md
// "On Slurm").
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers `hyperfleet jobs why <job> [--cluster-name NAME] [--output text|json]`: why
/// Slurm job <job> of a governed account is (not) running, as the control plane's admission
/// engine sees it (the quota arithmetic per resource and in instances of the job's type, the
/// jobs ahead, whether it can ever fit), through Hyperfleet.DescribeJobAdmission. Without
/// --cluster-name, the only cluster (an error names them when there are several). Exit 1 on
/// errors, with the AWS-style message.
void AddJobsCommand(CLI::App& app);

}  // namespace hf::cli
