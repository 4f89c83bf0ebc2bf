#pragma once
// `hyperfleet auto-resume`: the supervisor that the srun --auto-resume=1 SPANK plugin
// (src/slurm/spank/auto_resume_spank.c) execs inside a node; docs/slurm.md "Auto-resume".
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers `auto-resume [--window SECONDS] [--srun PATH] -- SRUN_ARGV...` on `app`.
/// It runs SRUN_ARGV (argv[0] kept, program --srun or argv[0] on PATH) with
/// HYPERFLEET_AUTO_RESUME_ACTIVE=1 and exits with the step's exit code (128 + signal when
/// killed). Before that: exit 1 with an "[Auto Resume] Error" line outside an allocation (no
/// SLURM_JOB_ID) or when slurm.conf's TaskPlugin is not task/none. After a failed step it
/// looks for up to --window seconds for a faulty node of the job (slurm/auto_resume.h);
/// when it finds one it requeues the whole job under its id (`scontrol requeue`) and waits to
/// be stopped by Slurm.
void AddAutoResumeCommand(CLI::App& app);

}  // namespace hf::cli
