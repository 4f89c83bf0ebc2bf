"""SlurmCluster: a private Slurm under one directory (our own munged, MariaDB and slurmdbd for
profile gov, slurmctld, one slurmd per node), started and stopped by pid, and the trace's
quota events replayed on it as sacctmgr calls."""
import os
import signal
import subprocess
import threading
import time

from .common import DAEMONS, job_cpus
from .slurm_conf import ClusterConfig


class SlurmCluster(ClusterConfig):
    """Our own munged + slurmctld + one slurmd per node under `workdir`, on our own ports.

    Every node is a stock slurmd on 127.0.0.1 with its own port (`node_port_base` + i),
    reporting the configured hardware (SlurmdParameters=config_overrides). Only processes
    this object started are ever signalled. Its configuration (slurm.conf, slurmdbd.conf,
    the caps per team and type) is ClusterConfig's.
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
