"""Task governance on real Slurm (docs/governance.md "On Slurm"): HyperPod's worked
scenarios (docs/governance.md "HyperPod's worked scenarios") on a local cluster of 4 workers with the
example lifecycle scripts, HyperPod's 4 x ml.g5.8xlarge (1 GPU each): local nodes have no
GPU, so Slurm counts emulated ones (gres.conf's /dev/nvidia0 is a link to /dev/null there;
docs/slurm.md), and every job asks for one per node (--gres=gpu:1). Teams A and B
(Slurm accounts team-a, team-b) each have Accelerators=2, LendAndBorrow, BorrowLimit=50,
PreemptTeamTasks=LowerPriority; classes inference 90, experimentation 80, training 70,
fine-tuning 50, FairShare Enabled. Jobs of governed accounts are held at submission by
job_submit.lua, released when the admission engine admits them, requeued and held when
preempted; `hyperfleet jobs why` prints the quota arithmetic. Needs root and the node image;
skipped otherwise."""

import json
import os
import subprocess
import time

from harness import BINARY, aws_env, main, wait_until
from e2e_slurm import SlurmClusterFixture

NAME = "gov-slurm-e2e"
WORKER_TYPE = "ml.g5.8xlarge"  # 1 NVIDIA GPU, emulated


class GovernanceSlurmTest(SlurmClusterFixture):
    cluster_name = NAME
    server_args = ["--heartbeat-interval", "1"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()  # the example cluster, with the workers of create() below
        arn = cls.describe(NAME)["ClusterArn"]
        classes = [{"Name": n, "Weight": w} for n, w in
                   (("inference", 90), ("experimentation", 80), ("training", 70),
                    ("fine-tuning", 50))]
        cls.aws("sagemaker", "create-cluster-scheduler-config", "--name", "policy",
                "--cluster-arn", arn, "--scheduler-config",
                json.dumps({"PriorityClasses": classes, "FairShare": "Enabled"}))
        for team in ("team-a", "team-b"):
            cls.aws("sagemaker", "create-compute-quota", "--name", f"{team}-quota",
                    "--cluster-arn", arn, "--compute-quota-config", json.dumps({
                        "ComputeQuotaResources": [{"InstanceType": WORKER_TYPE,
                                                   "Accelerators": 2}],
                        "ResourceSharingConfig": {"Strategy": "LendAndBorrow",
                                                  "BorrowLimit": 50},
                        "PreemptTeamTasks": "LowerPriority"}),
                    "--compute-quota-target",
                    json.dumps({"TeamName": team, "FairShareWeight": 0}))

    @classmethod
    def create(cls, name, groups, prefix="base", **extra):
        # Four GPU workers instead of the example's 2 x c5.4xlarge.
        groups = [(g, WORKER_TYPE if g == "workers" else t, 4 if g == "workers" else n)
                  for g, t, n in groups]
        return super().create(name, groups, prefix=prefix, **extra)

    # -- helpers ------------------------------------------------------------------------

    def job(self, job):
        """scontrol's view of `job`: {JobState, Reason, Restarts, NumNodes, ...}."""
        out = self.on_controller(f"scontrol show job {job} -o")
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def submit(self, team, qos, nodes):
        out = self.on_controller(
            f"sbatch --parsable --account={team} --qos={qos} -p workers -N{nodes} "
            f"--gres=gpu:1 -o /dev/null --wrap 'sleep 600'")
        return out.strip().split(";")[0]

    def running_nodes(self):
        """{job: nodes} of the running jobs; checks Slurm never runs more than 4 nodes."""
        out = self.on_controller("squeue -h -t RUNNING,CONFIGURING -o '%i|%a|%D'")
        jobs = {}
        for line in out.split():
            job, _, nodes = line.split("|")
            jobs[job] = int(nodes)
        self.assertLessEqual(sum(jobs.values()), 4, jobs)
        return jobs

    def wait_states(self, want, timeout=60):
        """Waits until every job of `want` ({job: "RUNNING"|"HELD"}) is so; HELD is pending
        with a hold reason. Returns the jobs' scontrol views."""
        def check():
            self.running_nodes()
            views = {j: self.job(j) for j in want}
            for j, state in want.items():
                v = views[j]
                if state == "RUNNING" and v["JobState"] != "RUNNING":
                    return None
                # JobHeldUser (job_submit.lua), "job_requeued_in_held_state" (requeuehold)
                if state == "HELD" and not (v["JobState"] == "PENDING" and
                                            "held" in v.get("Reason", "").lower()):
                    return None
            return views
        return wait_until(check, timeout=timeout, interval=0.5, what=f"jobs {want}")

    def cancel_all(self):
        self.on_controller("squeue -h -o %i | xargs -r scancel")
        wait_until(lambda: not self.on_controller("squeue -h -o %i").split(), timeout=60,
                   interval=0.5, what="every job gone")

    # -- tests (one cluster, in name order) ---------------------------------------------

    def test_0_accounts_and_qos_reach_slurm(self):
        wait_until(lambda: self.on_controller(
            "cat /opt/slurm/etc/hyperfleet-governed-accounts 2>/dev/null || true").split()
            == ["team-a", "team-b"], timeout=30, interval=0.5, what="governed accounts")
        # The example enables accounting: the QOS and accounts exist in slurmdbd.
        qos = wait_until(lambda: "training-priority" in (
            q := self.on_controller("sacctmgr -n -P show qos format=name")) and q,
            timeout=30, interval=0.5, what="QOS in slurmdbd")
        for c in ("inference", "experimentation", "fine-tuning"):
            self.assertIn(f"{c}-priority", qos.split())
        accounts = self.on_controller("sacctmgr -n -P show account format=account").split()
        self.assertIn("team-a", accounts)
        # The GPU workers registered with their emulated GPU (not drained as INVALID_REG).
        rows = self.on_controller("sinfo -N -h -p workers -o '%N|%T|%G'").split()
        self.assertEqual(len(rows), 4, rows)
        for row in rows:
            self.assertEqual(row.split("|")[1:], ["idle", "gpu:1"], rows)
        # A job of an account without quota is not governed: it runs at once, with its GPU.
        out = self.on_controller(
            "srun -N1 -p workers --gres=gpu:1 printenv SLURM_STEP_GPUS CUDA_VISIBLE_DEVICES")
        self.assertEqual(out.split(), ["0", "0"])

    def test_1_borrow(self):
        # A's 3-instance job runs: 2 nominal + 1 borrowed of B's idle quota (limit 50% of 2).
        t0 = time.monotonic()
        a = self.submit("team-a", "training-priority", 3)
        v = self.wait_states({a: "RUNNING"})[a]
        print(f"held at submission, admitted and running after {time.monotonic() - t0:.1f} s")
        self.assertEqual(v["NumNodes"], "3")
        log = self.on_controller("grep -c 'hyperfleet: job of governed account team-a held' "
                                 "/var/log/slurm/slurmctld.log")
        self.assertGreaterEqual(int(log.strip()), 1)
        self.assertIn("Admitted", self.why(a))
        # Its 4th would exceed the borrow limit: a second A job waits, held.
        a2 = self.submit("team-a", "training-priority", 1)
        self.wait_states({a2: "HELD", a: "RUNNING"})
        text = self.why_once_reported(a2)
        self.assertIn(f"instances of {WORKER_TYPE}: request 1, nominal 2, in use 3, "
                      f"borrow limit 1, may borrow now 0", text)
        self.on_controller(f"scancel {a2}")
        type(self).a = a

    def test_2_reclaim(self):
        a = self.a
        b = self.submit("team-b", "fine-tuning-priority", 2)
        views = self.wait_states({b: "RUNNING", a: "HELD"})
        # A's job was requeued (not cancelled), and waits held for its quota.
        self.assertGreaterEqual(int(views[a]["Restarts"]), 1, views[a])
        text = self.why(a)
        self.assertIn("Waiting", text)
        self.assertIn(f"instances of {WORKER_TYPE}: request 3, nominal 2, in use 0, "
                      f"borrow limit 1, may borrow now 0, idle in the cluster 0", text)
        # Slurm runs it no more while B holds its nominal quota.
        self.assertNotIn(a, self.running_nodes())
        type(self).b = b

    def test_3_intra_team_priority_preemption(self):
        a, b = self.a, self.b
        # B's experimentation job (80) preempts B's own fine-tuning job (50): borrowing 2
        # would exceed B's limit of 1.
        b2 = self.submit("team-b", "experimentation-priority", 2)
        views = self.wait_states({b2: "RUNNING", b: "HELD", a: "HELD"})
        self.assertGreaterEqual(int(views[b]["Restarts"]), 1, views[b])
        text = self.why(b)
        self.assertIn("Waiting", text)
        self.assertIn("ahead of it", text)
        self.cancel_all()

    def test_4_equal_priority_reclaim(self):
        # Same class for both: the lender still takes back its nominal quota.
        a = self.submit("team-a", "training-priority", 3)
        self.wait_states({a: "RUNNING"})
        b = self.submit("team-b", "training-priority", 2)
        views = self.wait_states({b: "RUNNING", a: "HELD"})
        self.assertGreaterEqual(int(views[a]["Restarts"]), 1, views[a])
        # B's job ends: A's job runs again (same job id, requeued).
        self.on_controller(f"scancel {b}")
        self.wait_states({a: "RUNNING"})
        self.cancel_all()

    def test_6_a_restarted_control_plane_rebuilds_the_engine_from_slurm(self):
        # Nothing about jobs is stored: after a crash the running jobs count as admitted,
        # the held one stays held until quota frees up.
        a = self.submit("team-a", "training-priority", 2)
        b = self.submit("team-b", "training-priority", 2)
        self.wait_states({a: "RUNNING", b: "RUNNING"})
        a2 = self.submit("team-a", "training-priority", 1)
        self.wait_states({a2: "HELD"})
        self.server.kill9()
        self.server.start()
        type(self).env = aws_env(self.server.endpoint)
        # The new engine has seen Slurm's report once `jobs why` knows the job.
        text = wait_until(lambda: subprocess.run(
            [BINARY, "jobs", "why", a2, "--cluster-name", NAME, "--endpoint-url",
             self.server.endpoint], env=self.env, capture_output=True, text=True,
            timeout=60).stdout, timeout=60, interval=0.5, what="the engine rebuilt")
        self.assertIn("Waiting", text)
        self.assertIn("Admitted", self.why(a))
        self.assertIn("Admitted", self.why(b))
        # Observed over 3 heartbeats: nothing is released or requeued.
        until = time.monotonic() + 3
        while time.monotonic() < until:
            self.wait_states({a: "RUNNING", b: "RUNNING", a2: "HELD"}, timeout=1)
        # B's job ends: A may borrow B's idle quota, so its held job runs.
        self.on_controller(f"scancel {b}")
        self.wait_states({a: "RUNNING", a2: "RUNNING"})
        self.cancel_all()

    def test_5_why_for_an_unknown_job_says_so(self):
        r = subprocess.run([BINARY, "jobs", "why", "999999", "--cluster-name", NAME,
                            "--endpoint-url", self.server.endpoint],
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a governed job", r.stderr)


if __name__ == "__main__":
    main()
