#!/usr/bin/env python3
"""Replays a governance trace on a real Slurm 22.05 controller, for a ratio against our engine.

Design and results: bench/README.md ("Slurm side-by-side"). Outside CI, run as root. Needs Debian's slurmctld,
slurmd, slurm-client and munge (plus slurmdbd and mariadb-server for --profile gov), which it
does not install (see bench/README.md, "Slurm side-by-side").

What it does:
  1. `governance_trace_dump` writes the seeded trace (tier, seed) as JSONL and runs the same
     trace through our engine in virtual time (decisions per engine CPU-second, cycle
     latency, makespan, submit-to-first-admission waits), FairShare Disabled and Enabled.
  2. It starts its own munged (own key and socket), slurmctld (port 7817) and one stock
     slurmd per node on 127.0.0.1 (node i on port 27001 + i), with its own SLURM_CONF and
     state, spool and log directories under <workdir>/<profile>-<tier>. No other Slurm or
     munged on the machine is touched. Not FrontEnd mode as first planned: Debian's
     slurm-wlm-emulator binaries are FrontEnd builds linked against the distribution's
     non-FrontEnd libslurmfull, whose slurm.conf reader stops at `FrontendName` ("without
     Slurm being configured/built with the --enable-front-end option"). One slurmd per node
     costs ~7.5 MiB each, so tier S (200 nodes) fits and tier M (10,000) does not.
  3. The cluster is the trace's: one partition per instance type with the trace's node
     counts, CPUs and memory per node as the instance's. Accelerators are not a GRES: every
     trace job's vCPU and memory are its accelerator fraction of the node, so packing by vCPU
     is packing by accelerator.
  4. Profile `fifo` (Slurm-FIFO, no database): each trace submit becomes, at its
     time-compressed instant, `sbatch --wrap "sleep <runtime/compression>"` in its
     instance type's partition, whole-node gangs `-N <count> --exclusive`, sub-node jobs
     `-n 1 -c <vcpu> --mem=<MiB>`, priority = the job's priority-class weight (strict
     priority, FCFS within a class), time limit = its true runtime rounded up to whole
     minutes (helps backfill). Trace cancels become `scancel --state=PENDING`. Quotas,
     borrowing, fair share, preemption and the quota churn are not modelled.
     Profile `gov` (Slurm-Gov): its own MariaDB (own datadir, socket and port) and
     slurmdbd (own port), one account per team (fair share), a sub-account per (team,
     type) capped at nominal + borrow limit, one QOS per class (priority), and per (team,
     type) a guaranteed partition (partition QOS capped at nominal) and an opportunistic
     one (preempted by requeue) over the type's nodes: partition-priority preemption is
     reclaim. The daemons run under argv[0] "slurmctld" / "slurmd" (see
     SlurmCluster.start). Jobs above nominal + borrow limit are not submitted. The trace's
     quota events (upserts, Disabled, deletions) are replayed at their compressed instants
     as `sacctmgr modify` of the same caps and fair share (SlurmCluster.apply_quota); jobs
     left pending above their team's final caps are cancelled once the submissions end.
  5. Measures: `sdiag` every 10 s (main and backfill cycle times, queue length), slurmctld
     CPU seconds and RSS from /proc/<pid>/stat and status, per-job submit/start/end from
     jobcomp/filetxt (gov: also peak usage against every cap, from the same records); then
     prints the ratios against the engine on the same trace.

Always stops its daemons on exit (also on Ctrl-C / SIGTERM / SIGHUP): cancels its jobs, then
stops the slurmds, slurmctld (slurmdbd, MariaDB) and munged by the pids it started.

Usage: python3 bench/slurm_side_by_side.py --tier S --compression 1000
"""
import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

# Debian's stock (non-FrontEnd) daemons; see the module docstring for why not the emulator.
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


class SlurmCluster:
    """Our own munged + slurmctld + one slurmd per node under `workdir`, on our own ports.

    Every node is a stock slurmd on 127.0.0.1 with its own port (`node_port_base` + i),
    reporting the configured hardware (SlurmdParameters=config_overrides). Only processes
    this object started are ever signalled.
    """

    def __init__(self, workdir, cluster, ctld_port, slurmd_port, node_port_base, sched_params,
                 profile="fifo", quotas=(), compression=1.0, db_port=7819, dbd_port=7820):
        self.profile = profile
        self.quotas = list(quotas)
        self.compression = compression
        self.db_port, self.dbd_port = db_port, dbd_port
        self.dir = workdir
        self.cluster = cluster
        self.ctld_port = ctld_port
        self.slurmd_port = slurmd_port
        self.node_port_base = node_port_base
        self.sched_params = sched_params
        self.conf = os.path.join(workdir, "slurm.conf")
        self.jobcomp = os.path.join(workdir, "jobcomp.txt")
        self.munge_sock = os.path.join(workdir, "munge", "munge.sock")
        self.procs = {}  # name -> Popen
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.nodes = []  # (node name, port)
        self.limits = self.gov_limits() if profile == "gov" else {}
        # Gov: what is enforced now. A team whose quota is Disabled or deleted keeps its
        # accounts and partitions (self.limits, so its jobs still queue) with every cap 0.
        self.active = {q["team"]: q.get("active", True) for q in self.quotas}
        self.fairshare = {q["team"]: max(1, q["fair_share_weight"]) for q in self.quotas}
        self.caps = {}     # QOS or sub-account name -> vCPU cap in force
        self.cap_log = {}  # the same names -> [(wall time, cap)], from the setup on
        self.quota_lock = threading.Lock()
        for (team, _t), lim in self.limits.items():
            for name, cap in self.effective_caps(lim, self.active[team]).items():
                self.caps[name] = cap
                self.cap_log[name] = [(0.0, cap)]

    @staticmethod
    def effective_caps(lim, active):
        """{QOS or sub-account name: vCPU cap} of one gov_limits() entry; all 0 when the
        team's quota is not active (Disabled or deleted): it then admits nothing."""
        return {v[0]: (v[1] if active else 0) for v in lim.values()}

    def gov_limits(self):
        """{(team, instance type): {"account": (name, vCPU cap), "g": (partition, vCPU cap),
        "o": (partition, vCPU cap), the latter absent when the team cannot borrow}}.

        Slurm-Gov's quotas, per team and instance type: a sub-account of the team capped at
        nominal + borrow limit (BorrowLimit % of nominal, or the absolute limit when lower;
        0 unless LendAndBorrow); a guaranteed partition capped at the nominal quota and,
        when the borrow limit is above 0, an opportunistic one capped at nominal + borrow
        limit, so that a job of up to nominal + borrow limit can run, preemptably. Caps are
        vCPU, which stands for the accelerator share (see write_config). The partitions'
        QOS have the partition's name.
        """
        out = {}
        for q in self.quotas:
            out.update(self.quota_limits(q))
        return out

    def quota_limits(self, q):
        """gov_limits() of one team's quota (a trace "quota" or "upsert_quota" record)."""
        types = {t["name"]: t for t in self.cluster["types"]}
        out = {}
        team = q["team"]
        for res in q["resources"]:
            t = types[res["instance_type"]]
            short = SHORT.get(t["name"], t["name"].split(".")[1])
            nodes = res.get("count")
            if nodes is None:
                nodes = res.get("accelerators", 0) / max(1, t["accelerators"])
            nominal = int(nodes * t["vcpus"])
            borrow = 0
            if q["strategy"] == "LendAndBorrow":
                borrow = nominal * q["borrow_limit_percent"] // 100
                for a in q.get("absolute_borrow_limits", []):
                    if a["instance_type"] == t["name"] and a.get("count") is not None:
                        borrow = min(borrow, int(a["count"] * t["vcpus"]))
            if nominal + borrow <= 0:
                continue
            lim = {"account": (f"{team}-{short}", nominal + borrow)}
            if nominal > 0:
                lim["g"] = (f"{short}-g-{team}", nominal)
            if borrow > 0:
                lim["o"] = (f"{short}-o-{team}", nominal + borrow)
            out[(team, t["name"])] = lim
        return out

    # --- configuration -------------------------------------------------------------------
    def node_sets(self):
        """[(partition, [node names], type dict)] for the trace's instance types."""
        sets = []
        for t in self.cluster["types"]:
            short = SHORT.get(t["name"], t["name"].split(".")[1])
            n = int(t["instances"])
            sets.append((short, [f"{short}-{i:05d}" for i in range(1, n + 1)], t))
        return sets

    def write_config(self):
        d = self.dir
        for sub in ("state", "spool", "log", "munge"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        os.chmod(d, 0o755)
        os.chmod(os.path.join(d, "munge"), 0o755)
        lines = [
            "# Generated by bench/slurm_side_by_side.py; private instance, own ports and dirs.",
            "ClusterName=hfsbs",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_sock}",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/spool/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=error",
            "SlurmdParameters=config_overrides",
            f"PlugStackConfig={d}/plugstack.conf",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp}",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "SchedulerType=sched/backfill",
            f"SchedulerParameters={self.sched_params}",
            "MaxJobCount=2000000",
            "MinJobAge=2",
            "ReturnToService=2",
            "SlurmdTimeout=300",
            "SlurmctldTimeout=300",
            "MessageTimeout=30",
            "KillWait=2",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "MailProg=/bin/true",
            "TreeWidth=65533",
        ]
        if self.profile == "gov":
            # Half-life scaled like the trace (7 days of trace time).
            half_life_min = max(1, round(7 * 24 * 60 / self.compression))
            lines += [
                "AccountingStorageType=accounting_storage/slurmdbd",
                "AccountingStorageHost=localhost",
                f"AccountingStoragePort={self.dbd_port}",
                # The munge socket for slurmdbd connections (ours, not the default).
                f"AccountingStoragePass={self.munge_sock}",
                "AccountingStorageEnforce=associations,limits,qos",
                "PriorityType=priority/multifactor",
                "PriorityWeightQOS=100000",
                "PriorityWeightFairshare=10000",
                "PriorityWeightAge=0",
                "PriorityWeightJobSize=0",
                "PriorityWeightPartition=0",
                f"PriorityDecayHalfLife=0-00:{half_life_min:02d}:00" if half_life_min < 60
                else f"PriorityDecayHalfLife={half_life_min // 60}:{half_life_min % 60:02d}:00",
                "PreemptType=preempt/partition_prio",
                "PreemptMode=REQUEUE",
                "JobRequeue=1",
            ]
        else:
            lines += ["AccountingStorageType=accounting_storage/none",
                      "PriorityType=priority/basic"]
        # Accelerators are not a GRES: a trace job's vCPU and memory are its accelerator
        # fraction of the node, so packing by vCPU is exactly packing by accelerator, and
        # count-only GRES on NodeName lines does not register with slurmds run with -N
        # (slurmd finds no Gres for its node and reports 0).
        self.nodes = []
        for short, names, t in self.node_sets():
            mem = int(t["memory_gib"] * 1024)
            for name in names:
                port = self.node_port_base + len(self.nodes)
                self.nodes.append((name, port))
                lines.append(f"NodeName={name} NodeAddr=127.0.0.1 Port={port} "
                             f"CPUs={t['vcpus']} RealMemory={mem} State=UNKNOWN")
        ranges = {t["name"]: f"{short}-[{1:05d}-{len(names):05d}]"
                  for short, names, t in self.node_sets()}
        if self.profile == "gov":
            # Per (team, type): a guaranteed partition (PriorityTier 2, not preemptable)
            # whose partition QOS caps the team at its nominal quota, and an opportunistic
            # one (PriorityTier 1, requeued), both over all the type's nodes and open to the
            # team's sub-account for the type only (caps in gov_limits). Guaranteed work
            # then preempts borrowed work (reclaim). Not
            # per-(account, partition) associations with one guaranteed and one
            # opportunistic partition per type (the first plan): 22.05 rejects multi-partition jobs
            # when associations name a partition ("Multiple partition job request not
            # supported when a partition is set in the association").
            for (team, tname), lim in sorted(self.limits.items()):
                for tier in ("g", "o"):
                    if tier not in lim:
                        continue
                    part = lim[tier][0]
                    lines.append(
                        f"PartitionName={part} Nodes={ranges[tname]} MaxTime=UNLIMITED "
                        f"State=UP AllowAccounts={lim['account'][0]} QOS={part} "
                        + ("PriorityTier=2 PreemptMode=OFF" if tier == "g"
                           else "PriorityTier=1 PreemptMode=REQUEUE"))
        else:
            for i, (short, _names, t) in enumerate(self.node_sets()):
                lines.append(f"PartitionName={short} Nodes={ranges[t['name']]} "
                             "MaxTime=UNLIMITED State=UP" + (" Default=YES" if i == 0 else ""))
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        open(os.path.join(d, "plugstack.conf"), "w").close()
        if self.profile == "gov":
            dbd = os.path.join(d, "slurmdbd.conf")
            with open(dbd, "w") as f:
                f.write("\n".join([
                    "AuthType=auth/munge", f"AuthInfo=socket={self.munge_sock}",
                    "DbdHost=localhost", f"DbdPort={self.dbd_port}", "SlurmUser=root",
                    f"PidFile={d}/slurmdbd.pid", f"LogFile={d}/log/slurmdbd.log",
                    "DebugLevel=info", "StorageType=accounting_storage/mysql",
                    "StorageHost=127.0.0.1", f"StoragePort={self.db_port}",
                    "StorageUser=root", "StorageLoc=hfsbs_acct"]) + "\n")
            os.chmod(dbd, 0o600)

    # --- daemons ---------------------------------------------------------------------------
    def _spawn(self, name, argv, executable=None):
        """Starts argv in its own session; `executable`, when given, runs under argv[0]."""
        out = open(os.path.join(self.dir, "log", f"{name}.stdout"), "w")
        self.procs[name] = subprocess.Popen(argv, executable=executable, stdout=out,
                                            stderr=subprocess.STDOUT, env=self.env,
                                            start_new_session=True)
        out.close()
        return self.procs[name]

    def start(self, timeout=120):
        d = self.dir
        key = os.path.join(d, "munge", "munge.key")
        if not os.path.exists(key):
            with open(key, "wb") as f:
                f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", ["munged", "-F", "--force", f"--socket={self.munge_sock}",
                               f"--key-file={key}", f"--pid-file={d}/munge/munged.pid",
                               f"--log-file={d}/log/munged.log",
                               f"--seed-file={d}/munge/munged.seed", "--num-threads=4"])
        self._wait(lambda: os.path.exists(self.munge_sock), timeout, "munged socket")
        if self.profile == "gov":
            self._start_accounting(timeout)
        # argv[0] must be "slurmctld" / "slurmd": Slurm decides which daemon it runs in by
        # argv[0]'s basename (running_in_slurmctld()), and under "slurmctld-wlm" the
        # slurmdbd plugin never keeps its agent connection, so the first accounting message
        # (the flush of a fresh state directory) dereferences NULL (SIGSEGV in
        # slurm_persist_msg_pack ← acct_storage_p_flush_jobs_on_cluster).
        self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-f", self.conf],
                    executable=DAEMONS["slurmctld"])

        def ctld_up():
            r = self.run(["scontrol", "ping"], check=False)
            return r.returncode == 0 and "UP" in r.stdout
        self._wait(ctld_up, timeout, "slurmctld ping")
        for name, _port in self.nodes:
            os.makedirs(os.path.join(d, "spool", name), exist_ok=True)
            self._spawn(f"slurmd:{name}", ["slurmd", "-D", "-c", "-f", self.conf,
                                           "-N", name, "-d", DAEMONS["slurmstepd"]],
                        executable=DAEMONS["slurmd"])
            time.sleep(0.01)

        def nodes_ready():
            r = self.run(["sinfo", "-h", "-o", "%T %D"], check=False)
            states = [line.split() for line in r.stdout.split("\n") if line.strip()]
            return bool(states) and all(s[0] == "idle" for s in states)
        self._wait(nodes_ready, timeout, "all nodes idle")

    def _start_accounting(self, timeout):
        """Our own MariaDB (TCP 127.0.0.1:db_port and a socket in our directory, its own
        datadir, no grant tables) and slurmdbd (DbdPort dbd_port), then one account per team
        (fairshare = FairShareWeight), one QOS per priority class (priority = class weight)
        and one partition QOS per partition of gov_limits() (GrpTRES cpu = its cap). All of
        it exists before slurmctld starts, which resolves the partitions' QOS at start."""
        d = self.dir
        db = os.path.join(d, "db")
        r = subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={db}",
                            "--user=root", "--auth-root-authentication-method=normal"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("mariadb-install-db: " + r.stderr[-500:])
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={db}", "--user=root",
                                 f"--socket={d}/mysql.sock", f"--port={self.db_port}",
                                 "--bind-address=127.0.0.1", f"--pid-file={d}/mysql.pid",
                                 f"--log-error={d}/log/mariadb.log", "--skip-grant-tables",
                                 "--innodb-buffer-pool-size=256M",
                                 "--innodb-lock-wait-timeout=900"])

        def db_up():
            return subprocess.run(["mariadb", "--no-defaults", f"--socket={d}/mysql.sock",
                                   "-e", "select 1"], capture_output=True).returncode == 0
        self._wait(db_up, timeout, "mariadb")
        self._spawn("slurmdbd", ["slurmdbd", "-D"])

        def dbd_up():
            return self.run(["sacctmgr", "-n", "list", "cluster"], check=False).returncode == 0
        self._wait(dbd_up, timeout, "slurmdbd")
        cmds = [["add", "cluster", "hfsbs"]]
        classes = self.cluster["priority_classes"]
        for c in classes:
            cmds.append(["add", "qos", c["name"], f"priority={c['weight']}"])
        for lim in self.limits.values():
            for tier in ("g", "o"):
                if tier in lim:
                    part = lim[tier][0]
                    cmds.append(["add", "qos", part, f"grptres=cpu={self.caps[part]}"])
        qos = ",".join(["normal"] + [c["name"] for c in classes])
        for q in self.quotas:
            cmds.append(["add", "account", q["team"], "cluster=hfsbs",
                         f"fairshare={self.fairshare[q['team']]}"])
        for (team, _t), lim in sorted(self.limits.items()):
            acct = lim["account"][0]
            cmds.append(["add", "account", acct, f"parent={team}", "cluster=hfsbs",
                         "fairshare=1", f"grptres=cpu={self.caps[acct]}"])
            cmds.append(["add", "user", "root", f"account={acct}", "cluster=hfsbs",
                         f"qos={qos}", "defaultqos=normal"])
        for c in cmds:
            r = self.run(["sacctmgr", "-i"] + c, check=False)
            if r.returncode != 0 and "Nothing new added" not in r.stdout + r.stderr:
                raise RuntimeError(f"sacctmgr {' '.join(c)}: {r.stdout} {r.stderr}")

    def apply_quota(self, ev):
        """Replays one trace quota event (kind "upsert_quota" or "remove_quota") on Slurm-Gov.

        The same limits as the setup makes for the team (quota_limits), as `sacctmgr -i
        modify` of what changed: the partition QOS' and sub-accounts' GrpTRES=cpu (grouped,
        one call per kind and value) and the team account's fairshare. A Disabled or
        deleted quota sets all of the team's caps to 0; its partitions and accounts stay, so
        its queued jobs wait and it can come back. Partitions or sub-accounts the setup did
        not create (a new team or instance type, a borrow limit from 0) are not created:
        they are returned in "skipped". Returns {"calls": sacctmgr calls, "skipped": [...]}.
        Raises RuntimeError when a sacctmgr call fails. Call from one thread at a time."""
        team = ev["team"]
        if ev["kind"] == "remove_quota":
            new = {k: v for k, v in self.limits.items() if k[0] == team}
            active, fs = False, self.fairshare.get(team)
        else:
            new = self.quota_limits(ev)
            active, fs = ev.get("active", True), max(1, ev["fair_share_weight"])
        target, kind = {}, {}
        skipped = [name for key, lim in new.items() for tier, (name, _c) in lim.items()
                   if tier not in self.limits.get(key, {})]
        for key in [k for k in self.limits if k[0] == team]:
            old, lim = self.limits[key], new.get(key, {})
            for tier, (name, _cap) in old.items():
                kind[name] = "account" if tier == "account" else "qos"
                target[name] = lim[tier][1] if active and tier in lim else 0
            # Amounts as if active (sbatch_argv routes by them); a part gone from the quota
            # keeps its name with amount 0.
            self.limits[key] = {tier: (name, lim[tier][1] if tier in lim else 0)
                                for tier, (name, _c) in old.items()}
        groups = {}
        for name, cap in target.items():
            if self.caps.get(name) != cap:
                groups.setdefault((kind[name], cap), []).append(name)
        cmds = []
        for (k, cap), names in sorted(groups.items()):
            cmds.append(["modify", k, "where", "name=" + ",".join(sorted(names))]
                        + (["cluster=hfsbs"] if k == "account" else [])
                        + ["set", f"grptres=cpu={cap}"])
        if fs is not None and team in self.fairshare and fs != self.fairshare[team]:
            cmds.append(["modify", "account", "where", f"name={team}", "cluster=hfsbs", "set",
                         f"fairshare={fs}"])
        for c in cmds:
            r = self.run(["sacctmgr", "-i"] + c, check=False)
            if r.returncode != 0 and "Nothing modified" not in r.stdout + r.stderr:
                raise RuntimeError(f"sacctmgr {' '.join(c)}: {r.stdout} {r.stderr}")
        now = time.time()
        with self.quota_lock:
            for name, cap in target.items():
                if self.caps.get(name) != cap:
                    self.caps[name] = cap
                    self.cap_log[name].append((now, cap))
        if team in self.active:
            self.active[team] = active
        if fs is not None and team in self.fairshare:
            self.fairshare[team] = fs
        return {"calls": len(cmds), "skipped": skipped}

    def runnable(self, job, cluster_types):
        """Whether a trace submit fits the caps in force now (gov): some partition of its
        team and type and the team's sub-account for the type can hold it."""
        lim = self.limits.get((job["team"], job["type"]))
        if not lim:
            return False
        need = job_cpus(job, cluster_types)
        with self.quota_lock:
            return self.caps.get(lim["account"][0], 0) >= need and any(
                self.caps.get(lim[t][0], 0) >= need for t in ("g", "o") if t in lim)

    def _wait(self, cond, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}); see {self.dir}/log/")
            if cond():
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out waiting for {what}; see {self.dir}/log/")

    def run(self, argv, check=True, timeout=60):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
        return r

    def pid(self, name):
        p = self.procs.get(name)
        return p.pid if p and p.poll() is None else None

    def slurmd_pids(self):
        return [p.pid for n, p in self.procs.items() if n.startswith("slurmd:") and p.poll() is None]

    def stop(self):
        """Cancels all jobs, then stops the slurmds, slurmctld and munged (ours, by pid)."""
        if self.pid("slurmctld"):
            try:
                self.run(["scancel", "--full", "-u", "root"], check=False, timeout=30)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    r = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout=10)
                    if r.returncode != 0 or not r.stdout.strip():
                        break
                    time.sleep(0.5)
            except (subprocess.TimeoutExpired, OSError):
                pass
        order = ([n for n in self.procs if n.startswith("slurmd:")]
                 + ["slurmctld", "slurmdbd", "mariadbd", "munged"])
        for name in order:
            p = self.procs.get(name)
            if p is not None and p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for name in order:
            p = self.procs.get(name)
            if p is None:
                continue
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=5)
        # Batch steps daemonise out of their slurmd's session: end any stepd left whose
        # configuration is ours (its environment names our SLURM_CONF), by pid.
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if os.readlink(f"/proc/{pid}/exe") != DAEMONS["slurmstepd"]:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read()
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read()
                if self.conf.encode() in env or self.dir.encode() in cmd:
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        # Batch scripts whose stepd is gone (their own process group), by pid.
        spool = os.path.join(self.dir, "spool").encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read().split(b"\0")[-2:][0].startswith(spool):
                        os.killpg(int(pid), signal.SIGKILL)
            except (OSError, IndexError):
                pass


class SdiagSampler(threading.Thread):
    """Runs `sdiag` every `period` s; keeps the parsed samples."""

    def __init__(self, slurm, period=10.0):
        super().__init__(daemon=True)
        self.slurm, self.period = slurm, period
        self.samples = []
        self.stop_event = threading.Event()

    @staticmethod
    def parse(text):
        out, section = {}, "general"
        for line in text.split("\n"):
            if line.startswith("Main schedule statistics"):
                section = "main"
            elif line.startswith("Backfilling stats"):
                section = "bf"
            elif line.startswith("Remote Procedure Call") or line.startswith("Latency"):
                section = "rpc"
            m = re.match(r"\s*([A-Za-z][A-Za-z /()]*?):\s+(\d+)\s*$", line)
            if m and section != "rpc":
                out[f"{section}.{m.group(1).strip()}"] = int(m.group(2))
        return out

    def sample(self):
        r = self.slurm.run(["sdiag"], check=False, timeout=30)
        if r.returncode == 0:
            s = self.parse(r.stdout)
            s["t"] = time.time()
            ctld = self.slurm.pid("slurmctld")
            s["ctld_cpu_s"] = proc_cpu_s(ctld) if ctld else None
            s["ctld_rss_mib"] = proc_rss_mib(ctld) if ctld else None
            s["slurmd_rss_mib"] = sum(proc_rss_mib(p) or 0 for p in self.slurm.slurmd_pids())
            self.samples.append(s)

    def run(self):
        while not self.stop_event.wait(self.period):
            try:
                self.sample()
            except Exception as e:  # a slow sdiag must not end the run
                log(f"sdiag failed: {e}")


def parse_jobcomp(path):
    """{job name: [record dicts]} from a jobcomp/filetxt log (key=value per line)."""
    recs = {}
    if not os.path.exists(path):
        return recs
    with open(path) as f:
        for line in f:
            kv = dict(re.findall(r"(\w+)=(\S*)", line))
            if "Name" in kv:
                recs.setdefault(kv["Name"], []).append(kv)
    return recs


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


def sbatch_argv(job, compression, cluster_types, profile="fifo", limits=None):
    """sbatch arguments for one trace submit (see the module docstring).

    Profile gov: the team's partitions for the job's type whose cap can hold the job (from
    SlurmCluster.gov_limits); None when there is none, i.e. the job can never run under
    Slurm-Gov's limits (a job cannot span the guaranteed and opportunistic partitions)."""
    part = SHORT.get(job["type"], job["type"].split(".")[1])
    run_s = job["runtime_ms"] / 1000.0 / compression
    minutes = max(1, math.ceil((run_s + 5) / 60))
    argv = ["sbatch", "--parsable", "-J", f"j{job['id']}", "-o", "/dev/null",
            "-e", "/dev/null", f"--time={minutes}", "--chdir=/tmp"]
    if profile == "gov":
        # Starts in whichever partition can run it first; borrowed runs get requeued.
        need = job_cpus(job, cluster_types)
        lim = (limits or {}).get((job["team"], job["type"]), {})
        parts = [lim[k][0] for k in ("g", "o") if k in lim and lim[k][1] >= need]
        if not parts:
            return None
        argv += ["-p", ",".join(parts), f"--account={lim['account'][0]}",
                 f"--qos={job['class']}", "--requeue"]
    else:
        argv += ["-p", part, f"--priority={job['prio']}", "--no-requeue"]
    pp = job.get("per_pod")
    if pp:
        t = cluster_types[job["type"]]
        cpus = max(1, pp["vcpu_milli"] // 1000)
        # vCPU and memory are the accelerator fraction of the node (no GRES; see write_config).
        argv += ["-N", "1", "-n", "1", "-c", str(min(cpus, t["vcpus"])),
                 f"--mem={max(1, pp['memory_mib'])}"]
    else:
        argv += ["-N", str(job["count"]), "--exclusive"]
    argv += ["--wrap", f"sleep {run_s:.3f}"]
    return argv


def replay(slurm, trace, compression, workers, max_wall_s, profile="fifo"):
    """Submits the trace's jobs at their compressed times; returns submission figures."""
    cluster_types = {t["name"]: t for t in trace["cluster"]["types"]}
    prio = {c["name"]: c["weight"] for c in trace["cluster"]["priority_classes"]}
    jobs = {}            # trace id -> future of the Slurm job id (or None if rejected)
    lateness = []        # s between a submit's compressed instant and sbatch's return
    rejected = []
    over_cap = []        # gov: trace ids above every cap of their team (never submitted)
    lock = threading.Lock()
    qstats = {"applied": 0, "calls": 0, "failed": [], "skipped": set(), "apply_s": [],
              "lateness_s": []}
    # One thread: quota events apply in trace order, and never hold up the sbatch workers.
    qpool = concurrent.futures.ThreadPoolExecutor(max_workers=1)

    def apply_quota(ev, due):
        t = time.monotonic()
        try:
            res = slurm.apply_quota(ev)
        except Exception as e:  # counted, and the replay goes on
            with lock:
                qstats["failed"].append((ev["kind"], ev["team"], str(e)[:200]))
            return
        done = time.monotonic()
        with lock:
            qstats["applied"] += 1
            qstats["calls"] += res["calls"]
            qstats["skipped"].update(res["skipped"])
            qstats["apply_s"].append(done - t)
            qstats["lateness_s"].append(done - due)

    def quota(ev, due):
        qpool.submit(apply_quota, ev, due)

    def submit(job, due):
        argv = sbatch_argv(job, compression, cluster_types, profile, slurm.limits)
        if argv is None:
            with lock:
                over_cap.append(job["id"])
            return None
        r = slurm.run(argv, check=False, timeout=120)
        with lock:
            lateness.append(time.monotonic() - due)
            if r.returncode != 0:
                rejected.append((job["id"], r.stderr.strip()[:200]))
                return None
        return r.stdout.strip().split(";")[0]

    def cancel(fut):
        jid = fut.result()
        if jid:
            slurm.run(["scancel", "--state=PENDING", jid], check=False, timeout=60)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    t0 = time.monotonic()
    t0_wall = time.time()
    cancels = 0
    try:
        _submit_all(trace, pool, jobs, submit, cancel, t0, compression, max_wall_s, prio,
                    quota if profile == "gov" else None)
        cancels = sum(1 for ev in trace["events"] if ev["kind"] == "cancel" and ev["id"] in jobs)
    except BaseException:
        # Ctrl-C / SIGTERM: no more sbatch or sacctmgr after the daemons stop.
        pool.shutdown(wait=False, cancel_futures=True)
        qpool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    qpool.shutdown(wait=True)
    out = {"t0_wall": t0_wall, "submit_wall_s": time.monotonic() - t0,
           "submitted": sum(1 for f in jobs.values() if f.result()),
           "rejected": rejected, "over_cap": len(over_cap), "cancels": cancels,
           "lateness_s": dist(lateness)}
    if profile == "gov":
        out["quota_events"] = {
            "in_trace": sum(1 for ev in trace["events"] if ev["kind"] in QUOTA_EVENTS),
            "applied": qstats["applied"], "sacctmgr_calls": qstats["calls"],
            "failed": len(qstats["failed"]), "failed_examples": qstats["failed"][:5],
            "skipped_parts": sorted(qstats["skipped"]),
            "apply_s": dist(qstats["apply_s"]), "apply_s_total": sum(qstats["apply_s"]),
            "lateness_s": dist(qstats["lateness_s"])}
    return out


def _submit_all(trace, pool, jobs, submit, cancel, t0, compression, max_wall_s, prio,
                quota=None):
    """Queues each trace event on `pool` at its compressed instant; quota events go to
    `quota(event, due)` (skipped when it is None)."""
    for ev in trace["events"]:
        if ev["kind"] in QUOTA_EVENTS and quota is None:
            continue
        due = t0 + ev["t_ms"] / 1000.0 / compression
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        if time.monotonic() - t0 > max_wall_s:
            log("max wall time reached during submission; stopping the replay")
            break
        if ev["kind"] == "submit":
            ev["prio"] = prio.get(ev["class"], 0)
            jobs[ev["id"]] = pool.submit(submit, ev, due)
        elif ev["kind"] == "cancel" and ev["id"] in jobs:
            pool.submit(cancel, jobs[ev["id"]])
        elif ev["kind"] in QUOTA_EVENTS:
            quota(ev, due)


def load_trace(path):
    trace = {"events": [], "quotas": []}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            k = j["kind"]
            if k == "cluster":
                trace["cluster"] = j
            elif k == "quota":
                trace["quotas"].append(j)
            elif k in ("submit", "cancel") or k in QUOTA_EVENTS:
                trace["events"].append(j)
    return trace


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tier", default="S", choices=["S", "M"])
    ap.add_argument("--profile", default="fifo", choices=["fifo", "gov"],
                    help="fifo: Slurm-FIFO, no database; gov: Slurm-Gov (slurmdbd + MariaDB, "
                    "accounts, QOS, partition-priority preemption)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workloads", type=int, default=-1, help="override the tier's count")
    ap.add_argument("--nodes", type=int, default=-1, help="override the tier's node count")
    ap.add_argument("--teams", type=int, default=-1, help="override the tier's team count")
    ap.add_argument("--compression", type=float, default=0,
                    help="trace seconds per wall second (0: fit the trace into --target-wall)")
    ap.add_argument("--target-wall", type=float, default=600,
                    help="wall seconds of the submission phase when --compression is 0")
    ap.add_argument("--max-wall", type=float, default=1800, help="hard limit of the replay")
    ap.add_argument("--workers", type=int, default=4, help="concurrent sbatch processes")
    ap.add_argument("--build-dir", default="build-sbs")
    ap.add_argument("--workdir", default="/tmp/hf-slurm-sbs",
                    help="root of the run directories (<workdir>/<profile>-<tier>)")
    ap.add_argument("--db-port", type=int, default=7819, help="MariaDB (profile gov)")
    ap.add_argument("--dbd-port", type=int, default=7820, help="slurmdbd (profile gov)")
    ap.add_argument("--ctld-port", type=int, default=7817)
    ap.add_argument("--slurmd-port", type=int, default=7818)
    ap.add_argument("--node-port-base", type=int, default=27001,
                    help="slurmd of node i listens on this port + i")
    # The planned parameters plus per-partition depths: without them the main scheduler and a
    # 1 s backfill pass never reach the small partitions' jobs behind a long p5 backlog.
    ap.add_argument("--sched-params", default="defer,batch_sched_delay=0,"
                    "sched_min_interval=100000,default_queue_depth=1000,"
                    "partition_job_depth=250,bf_interval=1,bf_continue,bf_max_job_test=5000,"
                    "bf_max_job_part=500,max_rpc_cnt=64")
    ap.add_argument("--engine-check", type=int, default=None,
                    help="invariant checker in the engine run (default: on for S, off for M)")
    args = ap.parse_args()
    args.workdir = os.path.join(args.workdir, f"{args.profile}-{args.tier}")

    if args.nodes > 2000 or (args.nodes < 0 and args.tier == "M"):
        sys.exit("one slurmd per node (~7.5 MiB, one process each): use --nodes <= 2000")
    missing = check_prerequisites(args.profile)
    if missing:
        sys.exit("missing: " + ", ".join(missing) + "\ninstall: apt-get install slurmctld "
                 "slurmd slurm-client munge [slurmdbd mariadb-server] (see bench/README.md)")
    dump = os.path.join(args.build_dir, "bin", "governance_trace_dump")
    if not os.access(dump, os.X_OK):
        sys.exit(f"{dump} not found: ninja -C {args.build_dir} governance_trace_dump")
    pidfile = os.path.join(args.workdir, "slurmctld.pid")
    if os.path.exists(pidfile):
        try:
            with open(pidfile) as f:
                os.kill(int(f.read().strip()), 0)
            sys.exit(f"a slurmctld of {args.workdir} is still running (pid file {pidfile})")
        except (ValueError, ProcessLookupError):
            pass
    if os.path.exists(args.workdir):
        shutil.rmtree(args.workdir)
    os.makedirs(args.workdir)

    # 1. The trace and the engine's figures on it.
    trace_path = os.path.join(args.workdir, "trace.jsonl")
    engine_path = os.path.join(args.workdir, "engine.json")
    check = args.engine_check if args.engine_check is not None else int(args.tier == "S")
    cmd = [dump, "--tier", args.tier, "--seed", str(args.seed), "--out", trace_path,
           "--engine-out", engine_path, "--modes", "fcfs,fair", "--check", str(check)]
    for opt in ("workloads", "nodes", "teams"):
        if getattr(args, opt) >= 0:
            cmd += [f"--{opt}", str(getattr(args, opt))]
    log("engine: " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    trace = load_trace(trace_path)
    with open(engine_path) as f:
        engine = json.load(f)
    horizon_s = max(e["t_ms"] for e in trace["events"]) / 1000.0
    compression = args.compression or max(1.0, horizon_s / args.target_wall)
    log(f"trace: {sum(1 for e in trace['events'] if e['kind'] == 'submit')} submits over "
        f"{horizon_s / 3600:.1f} h; compression x{compression:.0f} "
        f"(submission ~{horizon_s / compression:.0f} s wall)")

    slurm = SlurmCluster(args.workdir, trace["cluster"], args.ctld_port, args.slurmd_port,
                         args.node_port_base, args.sched_params, args.profile,
                         trace["quotas"], compression, args.db_port, args.dbd_port)

    def on_signal(signum, _frame):
        raise SystemExit(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    result = {"tier": args.tier, "seed": args.seed, "compression": compression,
              "profile": args.profile, "workloads": args.workloads, "engine": engine}
    try:
        slurm.write_config()
        slurm.start()
        log(f"slurm up: {slurm.conf} (slurmctld pid {slurm.pid('slurmctld')}, "
            f"{len(slurm.slurmd_pids())} slurmd)")
        sampler = SdiagSampler(slurm)
        sampler.sample()
        ctld = slurm.pid("slurmctld")
        cpu0 = proc_cpu_s(ctld)
        slurmd_cpu0 = slurmds_cpu_s(slurm)
        sampler.start()
        db0 = {n: proc_cpu_s(slurm.pid(n)) or 0 for n in ("slurmdbd", "mariadbd")}
        sub = replay(slurm, trace, compression, args.workers, args.max_wall, args.profile)
        log(f"submitted {sub['submitted']} ({len(sub['rejected'])} rejected) in "
            f"{sub['submit_wall_s']:.0f} s; lateness p50 {sub['lateness_s']['p50']:.2f} s "
            f"p99 {sub['lateness_s']['p99']:.2f} s; draining")
        deadline = time.monotonic() - sub["submit_wall_s"] + args.max_wall
        drained = False
        never_fit = unrunnable = 0
        submits = {f"j{e['id']}": e for e in trace["events"] if e["kind"] == "submit"}
        types = {t["name"]: t for t in trace["cluster"]["types"]}
        while time.monotonic() < deadline:
            r = slurm.run(["squeue", "-h", "-o", "%i|%t|%r|%j"], check=False, timeout=60)
            if r.returncode == 0 and not r.stdout.strip():
                drained = True
                break
            # Gangs larger than their partition pend forever (Slurm's never-fit): end them.
            # Gov: so do jobs above their team's final caps (shrunk, Disabled or deleted).
            stuck, capped = [], []
            for f in (line.split("|") for line in r.stdout.split("\n")):
                if len(f) < 4 or f[1] != "PD":
                    continue
                if f[2] == "PartitionNodeLimit":
                    stuck.append(f[0])
                elif (args.profile == "gov" and f[3] in submits
                      and not slurm.runnable(submits[f[3]], types)):
                    capped.append(f[0])
            if stuck or capped:
                never_fit += len(stuck)
                unrunnable += len(capped)
                slurm.run(["scancel"] + stuck + capped, check=False, timeout=60)
            time.sleep(2)
        end_wall = time.time()
        time.sleep(1)  # MinJobAge, and the last jobcomp records
        sampler.stop_event.set()
        sampler.sample()
        ctld_cpu = proc_cpu_s(ctld) - cpu0
        slurmd_cpu = slurmds_cpu_s(slurm) - slurmd_cpu0
        db_cpu = {n: (proc_cpu_s(slurm.pid(n)) or 0) - db0[n] for n in db0 if slurm.pid(n)}
        result["slurm"] = analyse(slurm, trace, sub, sampler.samples, ctld_cpu, slurmd_cpu,
                                  compression, drained, end_wall)
        result["slurm"]["db_cpu_s"] = db_cpu
        result["slurm"]["never_fit_cancelled"] = never_fit
        if args.profile == "gov":
            result["slurm"]["above_final_caps_cancelled"] = unrunnable
    finally:
        slurm.stop()
    with open(os.path.join(args.workdir, "results.json"), "w") as f:
        json.dump(result, f, indent=2, default=str)
    report(result)


def cap_in_window(log, lo, hi):
    """The highest cap of a cap log ([(wall time, cap)], time-ordered, first at 0) in force
    at any time of [lo, hi]."""
    best = None
    for t, cap in log:
        if t <= lo:
            best = cap
        elif t <= hi:
            best = cap if best is None else max(best, cap)
    return best if best is not None else log[0][1]


def quota_check(recs, limits, cap_log, slack_s=2.0):
    """Over-admission against Slurm-Gov's caps, from jobcomp records (1 s resolution).

    For every partition and sub-account of `limits` (SlurmCluster.gov_limits; the
    sub-account is the (team, type) as a whole, cap nominal + borrow limit): the peak vCPUs
    of the runs that overlapped, and how many run starts took usage above the cap in force
    at the start. Caps come from `cap_log` (SlurmCluster.cap_log, keyed by QOS or
    sub-account name; quota events change them); near a change (± slack_s wall seconds,
    the records' resolution plus the change's own time) the higher cap counts. Usage above
    a lowered cap by runs that started before is not an excess (decreases never evict).
    Ends are applied before starts of the same second; runs that start and end within one
    second are left out. Returns {"starts_over_cap": n, "teams_over_cap": n,
    "worst": [(key, peak, cap in force at the peak)]}."""
    logs = {}
    part_key = {}
    for (team, tname), lim in limits.items():
        for tier in ("g", "o"):
            if tier in lim:
                logs[lim[tier][0]] = cap_log[lim[tier][0]]
                part_key[lim[tier][0]] = (team, tname)
        logs[(team, tname)] = cap_log[lim["account"][0]]
    events = {}
    for rs in recs.values():
        for r in rs:
            part = r.get("Partition")
            st, en = epoch(r.get("StartTime")), epoch(r.get("EndTime"))
            if part not in logs or r.get("NodeCnt", "0") == "0" or not st or not en or en <= st:
                continue
            cpus = int(r.get("ProcCnt", "0") or 0)
            for key in (part, part_key[part]):
                events.setdefault(key, []).extend([(en, 0, -cpus), (st, 1, cpus)])
    over, teams_over, worst = 0, 0, []
    for key, evs in events.items():
        use = peak = n = 0
        peak_cap = logs[key][0][1]
        for t, _kind, d in sorted(evs):
            use += d
            if d <= 0:
                continue
            cap = cap_in_window(logs[key], t - slack_s, t + 1 + slack_s)
            if use > cap:
                n += 1
            if use > peak:
                peak, peak_cap = use, cap
        if isinstance(key, str):
            over += n
        elif n:
            teams_over += 1
        worst.append((key if isinstance(key, str) else "/".join(key), peak, peak_cap))
    worst.sort(key=lambda w: w[1] / max(1, w[2]), reverse=True)
    return {"starts_over_cap": over, "teams_over_cap": teams_over, "worst": worst[:5]}


def analyse(slurm, trace, sub, samples, ctld_cpu, slurmd_cpu, compression, drained, end_wall):
    recs = parse_jobcomp(slurm.jobcomp)
    submits = {f"j{e['id']}": e for e in trace["events"] if e["kind"] == "submit"}
    waits, by_class, starts, ends = [], {}, [], []
    states = {}
    cancelled_pending = 0
    for name, rs in recs.items():
        e = submits.get(name)
        if e is None:
            continue
        for r in rs:
            states[r.get("JobState")] = states.get(r.get("JobState"), 0) + 1
        # A job cancelled while pending has a record with StartTime = the cancel and no nodes.
        ran = [r for r in rs if epoch(r.get("StartTime")) and r.get("NodeCnt", "0") != "0"]
        first = min(ran, key=lambda r: epoch(r["StartTime"]), default=None)
        if first is None:
            cancelled_pending += 1
            continue
        st, sb = epoch(first["StartTime"]), epoch(first.get("SubmitTime"))
        if st is None or sb is None or st <= 0:
            continue
        starts.append(st)
        w = (st - sb) * compression  # trace seconds
        waits.append(w)
        by_class.setdefault(e["class"], []).append(w)
        for r in ran:
            en = epoch(r.get("EndTime"))
            if en:
                ends.append(en)
    last = samples[-1] if samples else {}
    main_means = [s["main.Mean cycle"] for s in samples if "main.Mean cycle" in s]
    out = {
        "drained": drained,
        "submission": {k: v for k, v in sub.items() if k != "rejected"},
        "rejected": len(sub["rejected"]),
        "rejected_examples": sub["rejected"][:5],
        "jobs_started": len(starts),
        "cancelled_pending": cancelled_pending,
        "jobcomp_states": states,
        "ctld_cpu_s": ctld_cpu,
        "slurmd_cpu_s": slurmd_cpu,
        "ctld_rss_mib_max": max((s.get("ctld_rss_mib") or 0) for s in samples) if samples else 0,
        "slurmd_rss_mib_max": max((s.get("slurmd_rss_mib") or 0) for s in samples)
        if samples else 0,
        "started_per_ctld_cpu_s": len(starts) / ctld_cpu if ctld_cpu else 0,
        "wall_s": end_wall - sub["t0_wall"],
        "started_per_wall_s": len(starts) / (end_wall - sub["t0_wall"]),
        "makespan_s": ((max(ends) - sub["t0_wall"]) * compression) if ends else 0,
        "wait_s": dist(waits),
        "wait_s_by_class": {c: dist(v) for c, v in by_class.items()},
        "sdiag_main": {"mean_cycle_us": last.get("main.Mean cycle"),
                       "max_cycle_us": last.get("main.Max cycle"),
                       "total_cycles": last.get("main.Total cycles"),
                       "mean_of_sampled_means_us": sum(main_means) / len(main_means)
                       if main_means else None,
                       "max_last_queue_length": max((s.get("main.Last queue length") or 0)
                                                    for s in samples) if samples else 0},
        "sdiag_backfill": {"mean_cycle_us": last.get("bf.Mean cycle"),
                           "max_cycle_us": last.get("bf.Max cycle"),
                           "total_cycles": last.get("bf.Total cycles"),
                           "total_backfilled": last.get(
                               "bf.Total backfilled jobs (since last slurm start)")},
        "sdiag_samples": len(samples),
    }
    if slurm.limits:
        out["quota"] = quota_check(recs, slurm.limits, slurm.cap_log)
        out["over_cap_not_submitted"] = sub.get("over_cap", 0)
        out["preempted_runs"] = states.get("PREEMPTED", 0) + states.get("REQUEUED", 0)
    return out


def report(res):
    s = res.get("slurm")
    gov = res["profile"] == "gov"
    e = res["engine"]["fair" if gov else "fcfs"]
    print()
    print(f"=== {'Slurm-Gov' if gov else 'Slurm-FIFO'} vs engine (FairShare "
          f"{'Enabled' if gov else 'Disabled'}), tier {res['tier']} seed {res['seed']}"
          f"{' workloads ' + str(res['workloads']) if res['workloads'] >= 0 else ''}, "
          f"compression x{res['compression']:.0f} ===")
    if not s:
        print("no Slurm figures (the run failed; see the log above)")
        return
    print(f"Slurm: {s['jobs_started']} jobs started, {s['rejected']} rejected at submit, "
          f"drained={s['drained']}, wall {s['wall_s']:.0f} s, slurmctld CPU "
          f"{s['ctld_cpu_s']:.1f} s (all slurmds {s['slurmd_cpu_s']:.1f} s"
          + "".join(f", {k} {v:.1f} s" for k, v in s.get("db_cpu_s", {}).items())
          + "), slurmctld RSS max "
          f"{s['ctld_rss_mib_max']:.0f} MiB, slurmd RSS max {s['slurmd_rss_mib_max']:.0f} MiB")
    print(f"       started/wall-s {s['started_per_wall_s']:.1f}, started/slurmctld-CPU-s "
          f"{s['started_per_ctld_cpu_s']:.1f}; main sched cycle mean "
          f"{s['sdiag_main']['mean_cycle_us']} us max {s['sdiag_main']['max_cycle_us']} us "
          f"({s['sdiag_main']['total_cycles']} cycles); backfill cycle mean "
          f"{s['sdiag_backfill']['mean_cycle_us']} us max {s['sdiag_backfill']['max_cycle_us']}"
          f" us, {s['sdiag_backfill']['total_backfilled']} backfilled")
    print(f"Engine: {e['started_jobs']} jobs started ({e['admissions']} admissions, "
          f"{e['preemptions']} preemptions, {e['never_fits']} never-fit), "
          f"{e['decisions_per_cpu_s']:.0f} decisions/CPU-s, {e['admissions_per_cpu_s']:.0f} "
          f"admissions/CPU-s; cycle p50 {e['cycle_us']['p50']:.1f} p99 {e['cycle_us']['p99']:.1f}"
          f" max {e['cycle_us']['max']:.1f} us")
    r1 = e["decisions_per_cpu_s"] / s["started_per_ctld_cpu_s"] if s["started_per_ctld_cpu_s"] else 0
    r2 = e["admissions_per_cpu_s"] / s["started_per_ctld_cpu_s"] if s["started_per_ctld_cpu_s"] else 0
    print(f"ratio engine decisions/CPU-s : Slurm starts/slurmctld-CPU-s = {r1:.0f}x "
          f"(admissions only: {r2:.0f}x)")
    mc = s["sdiag_main"]["mean_cycle_us"] or 0
    xc = s["sdiag_main"]["max_cycle_us"] or 0
    print(f"engine p99 cycle {e['cycle_us']['p99']:.0f} us vs Slurm main cycle mean {mc} us "
          f"/ max {xc} us; backfill mean {s['sdiag_backfill']['mean_cycle_us']} us")
    print(f"makespan (trace s): engine {e['makespan_s']:.0f}, Slurm {s['makespan_s']:.0f} "
          f"(ratio {s['makespan_s'] / e['makespan_s']:.2f})" if e["makespan_s"] else "")
    print("wait (trace s)      n       p50       p90       p99       max")
    for name, d in (("engine", e["wait_s"]), ("Slurm", s["wait_s"])):
        print(f"  {name:<10} {d['n']:>7} {d['p50']:>9.0f} {d['p90']:>9.0f} {d['p99']:>9.0f} "
              f"{d['max']:>9.0f}")
    for c in sorted(set(e["wait_s_by_class"]) | set(s["wait_s_by_class"])):
        de, ds = e["wait_s_by_class"].get(c, {}), s["wait_s_by_class"].get(c, {})
        print(f"  {c:<16} p50 engine {de.get('p50', 0):>8.0f} Slurm {ds.get('p50', 0):>8.0f}"
              f"   p99 engine {de.get('p99', 0):>8.0f} Slurm {ds.get('p99', 0):>8.0f}")
    print(f"       job records by state: {s['jobcomp_states']}; {s['cancelled_pending']} "
          f"cancelled while pending, {s.get('never_fit_cancelled', 0)} of them larger than "
          "their partition (PartitionNodeLimit, cancelled by the driver)")
    if gov:
        q = s.get("quota", {})
        print(f"quotas: Slurm {q.get('starts_over_cap')} run starts above their partition's "
              f"GrpTRES cap, {q.get('teams_over_cap')} (team, type) above nominal + borrow; "
              f"{s.get('preempted_runs', 0)} runs preempted (requeued); "
              f"{s.get('over_cap_not_submitted', 0)} jobs above every cap of their team not "
              f"submitted; engine invariant violations {e.get('violations')}, "
              f"{e['preemptions']} preemptions, {e['never_fits']} never-fit")
        print(f"       highest peak/cap: {q.get('worst')}")
        qe = s["submission"].get("quota_events", {})
        if qe:
            print(f"quota events: {qe['applied']} of {qe['in_trace']} applied "
                  f"({qe['failed']} failed, {qe['sacctmgr_calls']} sacctmgr calls, "
                  f"{qe['apply_s_total']:.1f} s in all); per event p50 "
                  f"{qe['apply_s']['p50']:.2f} s max {qe['apply_s']['max']:.2f} s; done after "
                  f"its instant p50 {qe['lateness_s']['p50']:.2f} s p99 "
                  f"{qe['lateness_s']['p99']:.2f} s; parts not created: "
                  f"{qe['skipped_parts'] or 'none'}; "
                  f"{s.get('above_final_caps_cancelled', 0)} jobs pending above their "
                  "team's final caps cancelled by the driver")
        print("Semantic gaps: Slurm cannot keep DontLend teams' idle nodes from other teams "
              "(only per-team reservations could); borrowing is capped per team "
              "(nominal x BorrowLimit %), not by the lendable idle pool of the cohort, and "
              "Lend-only teams' lending limits have no counterpart; a job above nominal runs "
              "only in the opportunistic partition, and a job that starts there while its "
              "team is under nominal is preemptable all the same; jobs above nominal + "
              "borrow are not submitted (the engine's never-fit); partition_prio "
              "does reclaim only, so in-team priority preemption and fair-share preemption "
              "are absent; QOS priority + fair-share factor order the queue instead of "
              "per-team queues; Slurm places and backfills with the true runtime as --time; "
              "caps are vCPU standing for the instance share; 1 s time resolution "
              "(= compression trace-seconds); quota events are replayed as cap changes, "
              "but a Disabled or deleted team's running jobs keep running unpreemptable "
              "in its guaranteed partition (the engine makes them reclaimable borrowers).")
        return
    print("Semantic gaps: Slurm-FIFO has no quotas, borrowing, fair share or preemption (the "
          "engine enforces nominal quotas + borrow limits, so it admits less at once); Slurm "
          "places jobs on nodes and backfills with reservations using the true runtime "
          "(given as --time), the engine admits at quota level only; Slurm times have 1 s "
          "resolution (= compression trace-seconds), the engine ticks every 1 trace-second; "
          "gangs larger than their partition pend forever on Slurm (cancelled by the "
          "driver), larger than the team's cap only (never-fit for the engine) run on "
          "Slurm; quota churn is not replayed.")


if __name__ == "__main__":
    main()
