#!/bin/sh
# What the Slurm controller's node agent reports for task governance every heartbeat (run by
# the agent as root with /bin/sh; its output is read by ParseSlurmJobs in
# include/hyperfleet/agent/slurm_jobs.h): every active job, a "#partitions" line, then each
# node's partitions.
# -O (not -o): only the long format has AdminComment. Width 0 prints a field whole. An
# AdminComment is free text (an operator's may hold '|' or a newline): the fields are
# separated by \037 and each job ends with \036 before squeue's newline, characters no
# Slurm name and no sensible comment holds, and the comment comes last.
s=$(printf '\037')
e=$(printf '\036')
squeue -h -a -O "JobArrayID:0$s,Account:0$s,QOS:0$s,Partition:0$s,NumNodes:0$s,MaxNodes:0$s,State:0$s,SubmitTime:0$s,Reason:0$s,admin_comment:0$e" &&
  echo '#partitions' && sinfo -h -N -o '%N|%R'
