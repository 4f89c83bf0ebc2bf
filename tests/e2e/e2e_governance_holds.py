"""Task governance's holds on real Slurm (docs/governance.md "On Slurm"):
job_submit.lua's hold is the user's own in Slurm 22.05, so the control plane makes it an
administrator's hold, marked in the job's AdminComment, that the job's user cannot release;
job_submit.lua also refuses the user's release before that (only root and SlurmUser, the
agent, may release a marked held job), and refuses array and heterogeneous jobs of governed
accounts, and a user's change of the size of a released job that waits for nodes; a pending
`-N 1-2` job counts as 2 nodes; a deleted quota's held jobs go back to
Slurm's own scheduling. Two ml.c5.xlarge workers, one team (Slurm account team-a) with Count=1
and no borrowing, so a 2-node job of the team never fits and stays held. Needs root and the
node image; skipped otherwise."""

import json
import subprocess

from harness import main, wait_until
from e2e_slurm import SlurmClusterFixture

NAME = "gov-holds-e2e"
WORKER_TYPE = "ml.c5.xlarge"
USER = "hfuser"


class GovernanceHoldsTest(SlurmClusterFixture):
    cluster_name = NAME
    server_args = ["--heartbeat-interval", "1"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        arn = cls.describe(NAME)["ClusterArn"]
        cls.aws("sagemaker", "create-cluster-scheduler-config", "--name", "policy",
                "--cluster-arn", arn, "--scheduler-config",
                json.dumps({"PriorityClasses": [{"Name": "training", "Weight": 70}],
                            "FairShare": "Enabled"}))
        cls.quota_id = cls.aws(
            "sagemaker", "create-compute-quota", "--name", "team-a-quota", "--cluster-arn", arn,
            "--compute-quota-config", json.dumps({
                "ComputeQuotaResources": [{"InstanceType": WORKER_TYPE, "Count": 1}],
                "ResourceSharingConfig": {"Strategy": "DontLend"}}),
            "--compute-quota-target",
            json.dumps({"TeamName": "team-a", "FairShareWeight": 0}))["ComputeQuotaId"]

    @classmethod
    def create(cls, name, groups, prefix="base", **extra):
        groups = [(g, WORKER_TYPE if g == "workers" else t, 2 if g == "workers" else n)
                  for g, t, n in groups]
        return super().create(name, groups, prefix=prefix, **extra)

    def job(self, job):
        """scontrol's view of `job`: {JobState, Reason, AdminComment, ...}."""
        out = self.on_controller(f"scontrol show job {job} -o")
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def as_user(self, command):
        """Runs `command` on the controller as USER, in /tmp: the CompletedProcess."""
        return self.run_on(self.cluster_id, "controller", self.controller(),
                           f"cd /tmp && runuser -u {USER} -- {command}")

    def sbatch(self, args):
        """Submits `sleep 600` as USER with `args`; returns the job id."""
        r = self.as_user(f"sbatch --parsable --account=team-a -p workers -o /dev/null {args} "
                         f"--wrap 'sleep 600'")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout.strip().split(";")[0]

    def wait_job(self, job, what, check):
        return wait_until(lambda: (v := self.job(job)) and check(v) and v, timeout=60,
                          interval=0.5, what=f"job {job} {what}")

    def test_1_the_users_hold_becomes_an_administrators(self):
        wait_until(lambda: self.on_controller(
            "cat /opt/slurm/etc/hyperfleet-governed-accounts 2>/dev/null || true").split()
            == ["team-a"], timeout=30, interval=0.5, what="governed accounts")
        wait_until(lambda: "team-a" in self.on_controller(
            "sacctmgr -n -P show account format=account").split(), timeout=30, interval=0.5,
            what="account team-a in slurmdbd")
        # A user other than root: root and SlurmUser may release any hold.
        self.on_controller(f"id {USER} >/dev/null 2>&1 || useradd -M {USER}; "
                           f"sacctmgr -i add user {USER} account=team-a >/dev/null 2>&1 || true")
        job = self.on_controller(
            f"cd /tmp && runuser -u {USER} -- sbatch --parsable --account=team-a -p workers "
            f"-N2 -o /dev/null --wrap 'sleep 600'"
        ).strip().split(";")[0]
        v = self.wait_job(job, "held by an administrator, marked",
                          lambda v: v["JobState"] == "PENDING" and v["Reason"] == "JobHeldAdmin"
                          and v.get("AdminComment") == "hyperfleet-held")
        self.assertEqual(v["Priority"], "0")
        r = self.run_on(self.cluster_id, "controller", self.controller(),
                        f"runuser -u {USER} -- scontrol release {job}")
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.job(job)["Reason"], "JobHeldAdmin")
        type(self).held = job

    def test_2_the_user_cannot_release_before_the_control_plane_looks(self):
        # The release follows sbatch at once, long before the control plane's first look
        # (1-2 s): job_submit.lua's slurm_job_modify refuses it. Slurm 22.05 allowed it (the
        # hold is the user's) and the 2-node job ran unadmitted.
        r = self.as_user("sh -c 'j=$(sbatch --parsable --account=team-a -p workers -N2 "
                         "-o /dev/null --wrap \"sleep 600\") || exit 9; echo \"$j\"; "
                         "scontrol release \"$j\"'")
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotEqual(r.returncode, 9, r.stdout + r.stderr)
        job = r.stdout.strip().split(";")[0]
        self.assertIn("Job is in held state, pending scheduler release", r.stderr)
        self.wait_job(job, "held by an administrator, marked",
                      lambda v: v["JobState"] == "PENDING" and v["Reason"] == "JobHeldAdmin"
                      and v.get("AdminComment") == "hyperfleet-held")
        log = self.on_controller("grep -c 'hyperfleet: uid [0-9]* may not release job' "
                                 "/var/log/slurm/slurmctld.log || true")
        self.assertGreaterEqual(int(log.strip() or 0), 1)
        self.on_controller(f"scancel {job}")

    def test_3_the_agents_release_still_works(self):
        # A 1-node job fits the quota: the agent releases it as root and Slurm starts it.
        job = self.sbatch("-N1")
        v = self.wait_job(job, "admitted and running", lambda v: v["JobState"] == "RUNNING")
        self.assertIn(v.get("AdminComment"), ("hyperfleet-governed", "hyperfleet-held"))
        self.on_controller(f"scancel {job}")

    def test_4_arrays_and_heterogeneous_jobs_are_refused(self):
        r = self.as_user("sbatch --account=team-a -p workers --array=0-1 -o /dev/null "
                         "--wrap 'sleep 1'")
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("hyperfleet: job arrays are not supported for governed account team-a; "
                      "submit one job per task", r.stderr)
        self.on_controller(
            "printf '%s\\n' '#!/bin/sh' '#SBATCH --account=team-a -p workers -N1' "
            "'#SBATCH hetjob' '#SBATCH --account=team-a -p workers -N1' 'sleep 1' "
            "> /tmp/het.sbatch && chmod 644 /tmp/het.sbatch")
        r = self.as_user("sbatch -o /dev/null /tmp/het.sbatch")
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("hyperfleet: heterogeneous jobs are not supported for governed account "
                      "team-a", r.stderr)
        # Other accounts' arrays pass.
        r = self.on_controller("sbatch --parsable -p workers --array=0-1 -o /dev/null "
                               "--wrap 'sleep 1'")
        self.on_controller(f"scancel {r.strip().split(';')[0]}")

    def test_5_a_node_range_counts_its_maximum(self):
        # -N 1-2 waits showing 1 node, but Slurm would start it on both workers: the engine
        # takes 2 (more than the team's 1), and the job stays held.
        job = self.sbatch("-N 1-2")
        self.wait_job(job, "held by an administrator, marked",
                      lambda v: v["JobState"] == "PENDING" and v["Reason"] == "JobHeldAdmin"
                      and v.get("AdminComment") == "hyperfleet-held")
        text = self.why(job)
        self.assertIn(f"instances of {WORKER_TYPE}: request 2, nominal 1", text)
        self.assertEqual(self.job(job)["JobState"], "PENDING")
        self.on_controller(f"scancel {job}")

    def test_6_an_admitted_job_keeps_what_it_was_admitted_as(self):
        # Both workers taken whole by an ungoverned job: the team's 1-node job is admitted and
        # released, but waits for nodes. Its user may not make it larger meanwhile (it could
        # start before the control plane's next look); other fields may change.
        busy = self.on_controller("sbatch --parsable -p workers -N2 --exclusive -o /dev/null "
                                  "--wrap 'sleep 600'").strip().split(";")[0]
        try:
            self.wait_job(busy, "running on both workers", lambda v: v["JobState"] == "RUNNING")
            job = self.sbatch("-N1")
            seen = []
            try:
                self.wait_job(job, "released, waiting for nodes",
                              lambda v: seen.append(v) or (
                                  v["JobState"] == "PENDING" and v["Priority"] != "0"
                                  and v["Reason"] not in ("JobHeldAdmin", "JobHeldUser")))
            except AssertionError:
                last = seen[-1] if seen else {}
                self.fail(f"job {job}: {last.get('JobState')} {last.get('Reason')} "
                          f"priority {last.get('Priority')}")
            # Slurm 22.05 itself lets a user move a pending job to another partition (here
            # dev, every node); a larger node count it refuses too, after job_submit.lua.
            for change in ("Partition=dev", "NumNodes=2"):
                r = self.as_user(f"scontrol update JobId={job} {change}")
                self.assertNotEqual(r.returncode, 0, change + ": " + r.stdout + r.stderr)
                self.assertIn("Access/permission denied", r.stderr, change)
            v = self.job(job)
            self.assertEqual((v["Partition"], v["NumNodes"]), ("workers", "1-1"))
            r = self.as_user(f"scontrol update JobId={job} Comment=still-1-node")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            log = self.on_controller("grep -c 'hyperfleet: uid [0-9]* may not change' "
                                     "/var/log/slurm/slurmctld.log || true")
            self.assertGreaterEqual(int(log.strip() or 0), 1)
            self.on_controller(f"scancel {job}")
        finally:
            self.on_controller(f"scancel {busy}")

    def test_9_a_deleted_quotas_held_jobs_are_released(self):
        job = self.held
        self.aws("sagemaker", "delete-compute-quota", "--compute-quota-id", self.quota_id)
        # Two workers: Slurm alone starts the 2-node job now.
        v = self.wait_job(job, "released and running", lambda v: v["JobState"] == "RUNNING")
        self.assertEqual(v.get("AdminComment"), "hyperfleet-released")
        wait_until(lambda: not self.on_controller(
            "cat /opt/slurm/etc/hyperfleet-governed-accounts 2>/dev/null || true").split(),
            timeout=30, interval=0.5, what="no governed account")
        self.on_controller(f"scancel {job}")


if __name__ == "__main__":
    main()
