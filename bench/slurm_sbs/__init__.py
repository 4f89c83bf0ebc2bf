"""bench/slurm_side_by_side.py in pieces, one concern each (its docstring says what it does).

common     constants, log lines, quantiles, /proc readings, trace job sizes
slurm_conf slurm.conf and slurmdbd.conf of a run, and Slurm-Gov's caps per team and type
cluster    SlurmCluster: our own munged, MariaDB, slurmdbd, slurmctld and slurmds; quota events
workload   the trace: loading it, sbatch arguments, the time-compressed replay
measure    sdiag sampling, jobcomp records, the cap check and the run's figures
report     the printed comparison against the engine
"""
