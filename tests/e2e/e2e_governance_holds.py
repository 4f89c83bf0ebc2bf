"""Task governance's holds on real Slurm (issue 6 leftovers 1 and 2, docs/governance.md "On
Slurm"): job_submit.lua's hold is the user's own in Slurm 22.05, so the control plane makes it
an administrator's hold, marked in the job's AdminComment, that the job's user cannot release;
a deleted quota's held jobs go back to Slurm's own scheduling. Two ml.c5.xlarge workers, one
team (Slurm account team-a) with Count=1 and no borrowing, so a 2-node job of the team never
fits and stays held. Needs root and the node image; skipped otherwise."""

import json

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

    def test_2_a_deleted_quotas_held_jobs_are_released(self):
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
