"""What the side-by-side's modules share: Debian's Slurm programs, log lines, quantiles,
/proc readings and the size of a trace job on Slurm."""
import os
import shutil
import time

# Debian's stock (non-FrontEnd) daemons; see slurm_side_by_side.py's docstring for why not
# the emulator.
DAEMONS = {
    "slurmctld": "/usr/sbin/slurmctld-wlm",
    "slurmd": "/usr/sbin/slurmd-wlm",
    "slurmstepd": "/usr/sbin/slurmstepd-wlm",
}
CLIENTS = ["sbatch", "scancel", "squeue", "sinfo", "sdiag", "scontrol"]
SHORT = {"ml.p5.48xlarge": "p5", "ml.p4d.24xlarge": "p4d", "ml.trn1.32xlarge": "trn1",
         "ml.c5.24xlarge": "c5"}
CLK_TCK = os.sysconf("SC_CLK_TCK")
QUOTA_EVENTS = ("upsert_quota", "remove_quota")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def quantile(values, q):
    """The q-quantile (0..1) of values, nearest rank as the engine's Quantile; 0 if empty."""
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def dist(values):
    return {"n": len(values), "p50": quantile(values, .5), "p90": quantile(values, .9),
            "p99": quantile(values, .99), "max": quantile(values, 1.0)}


def check_prerequisites(profile):
    """Returns the list of missing programs (empty when everything is there)."""
    missing = [p for p in DAEMONS.values() if not os.access(p, os.X_OK)]
    extra = ["slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db", "mariadb"]
    missing += [c for c in CLIENTS + ["munged"] + (extra if profile == "gov" else [])
                if shutil.which(c) is None]
    return missing


def proc_cpu_s(pid):
    """utime + stime of a process (all threads), seconds; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except OSError:
        return None


def proc_rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def slurmds_cpu_s(slurm):
    """CPU seconds of all our slurmd processes together."""
    return sum(proc_cpu_s(p) or 0 for p in slurm.slurmd_pids())


def epoch(ts):
    if not ts or ts in ("Unknown", "None"):
        return None
    return time.mktime(time.strptime(ts, "%Y-%m-%dT%H:%M:%S"))


def job_cpus(job, cluster_types):
    """vCPUs one trace submit occupies on Slurm (whole nodes for gangs, as --exclusive)."""
    t = cluster_types[job["type"]]
    pp = job.get("per_pod")
    if pp:
        return min(max(1, pp["vcpu_milli"] // 1000), t["vcpus"])
    return job["count"] * t["vcpus"]
