"""Jobs that resume by themselves (docs/resiliency.md) on a real Slurm fleet: `srun --auto-resume=1`
(Hyperfleet's SPANK plugin and `hyperfleet auto-resume`) requeues a job whose step failed on a
node marked faulty, under the same job id; a step that fails for no node fault just fails;
srun outside an allocation and sbatch are refused; a requeued job starts again within seconds
(AuthInfo=cred_expire). The control plane's own marking is not used: the test marks the node
as the control plane would (`state=fail reason="Hyperfleet: ..."`) and returns it to service.
Needs root and the node image (scripts/setup builds it); skipped otherwise."""

import json
import os
import shutil
import subprocess
import time
import unittest

from harness import Server, aws_env, main, wait_until
from e2e_nodes import BINARY, IMAGE_DIR, NodeFixture, image_built

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAME = "auto-resume-e2e"


class AutoResumeTest(NodeFixture):
    """One cluster for the class: the example spec (controller x1, workers x2) with the example
    lifecycle scripts."""

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("real nodes need root")
        if not image_built():
            raise unittest.SkipTest(f"no node image under {IMAGE_DIR} (run scripts/setup)")
        if not os.path.exists(os.path.join(os.path.dirname(os.path.realpath(BINARY)),
                                           "hyperfleet_auto_resume.so")):
            raise unittest.SkipTest("this build has no auto-resume plugin (libslurm-dev)")
        cls.server = Server(provider="local",
                            extra_args=["--heartbeat-interval", "2", "--image-dir", IMAGE_DIR])
        shutil.copytree(os.path.join(REPO, "examples", "lifecycle"),
                        os.path.join(cls.server.data_dir, "s3", "lcs-bucket", "slurm"))
        cls.server.start()
        cls.env = aws_env(cls.server.endpoint)
        with open(os.path.join(REPO, "examples", "cluster-spec.json")) as f:
            spec = json.load(f)
        groups = [(g["InstanceGroupName"], g["InstanceType"], g["InstanceCount"])
                  for g in spec["InstanceGroups"]]
        cls.cluster_id = cls.create(NAME, groups, prefix="slurm")["ClusterArn"].rsplit("/", 1)[1]
        c = cls.wait_status(NAME, ["InService", "Failed"], timeout=300)
        if c["ClusterStatus"] != "InService":
            raise AssertionError(f"cluster {NAME} is {c['ClusterStatus']}: "
                                 f"{c.get('FailureMessage')}")
        cls.fsx = os.path.join(cls.server.data_dir, "local", "clusters", cls.cluster_id, "fsx")
        os.makedirs(os.path.join(cls.fsx, "ar"), exist_ok=True)
        cls.controller_id = next(n["InstanceId"] for n in cls.nodes(NAME)
                                 if n["InstanceGroupName"] == "controller")

    # -- helpers ------------------------------------------------------------------------

    def on_controller(self, command, check=True):
        """Runs `command` on the controller; returns the CompletedProcess (with check, fails
        the test on a non-zero exit)."""
        r = self.run_on(self.cluster_id, "controller", self.controller_id, command)
        if check:
            self.assertEqual(r.returncode, 0, f"{command!r}: {r.stdout}{r.stderr}")
        return r

    def job(self, job_id):
        """`scontrol show job -o` as {field: value} (values without spaces only)."""
        out = self.on_controller(f"scontrol show job -o {job_id}").stdout
        return dict(t.split("=", 1) for t in out.split() if "=" in t)

    def submit(self, script):
        """Writes `script` to /fsx/ar/ and submits it; returns the job id."""
        name = f"job-{time.monotonic_ns()}.sbatch"
        self.write(os.path.join(self.fsx, "ar", name), script)
        out = self.on_controller(f"sbatch --parsable /fsx/ar/{name}").stdout
        return out.strip().split(";")[0]

    def output(self, job_id):
        path = os.path.join(self.fsx, "ar", f"out-{job_id}")
        if not os.path.exists(path):
            return ""
        with open(path) as f:
            return f.read()

    # -- tests (one cluster, in name order) ---------------------------------------------

    def test_1_srun_and_sbatch_outside_what_auto_resume_supports_are_refused(self):
        # srun knows the option (the plugin is loaded through plugstack.conf.d)...
        self.assertIn("--auto-resume", self.on_controller("srun --help").stdout)
        # ...but needs an allocation to resume.
        r = self.on_controller("srun --auto-resume=1 -N1 true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("needs an existing allocation", r.stdout + r.stderr)
        # sbatch is not offered the option, as on HyperPod.
        r = self.on_controller("sbatch --auto-resume=1 --wrap true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("auto-resume", r.stdout + r.stderr)
        # A bad value is refused.
        r = self.on_controller("salloc -N1 srun --auto-resume=yes true", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("takes 1 (on) or 0 (off)", r.stdout + r.stderr)

    def test_2_a_step_failing_without_a_node_fault_fails_with_its_code(self):
        job = self.submit(
            "#!/bin/bash\n#SBATCH -N1 -o /fsx/ar/out-%j\n"
            "export HYPERFLEET_AUTO_RESUME_WINDOW=3\n"
            "start=$(date +%s)\n"
            "srun --auto-resume=1 bash -c 'exit 7'\n"
            "echo \"rc=$? after $(( $(date +%s) - start )) s\"\n")
        wait_until(lambda: self.job(job).get("JobState") == "COMPLETED", timeout=60,
                   interval=0.5, what=f"job {job} to complete")
        out = self.output(job)
        self.assertIn("rc=7 after", out)
        self.assertIn("[Auto Resume] Info: JobID", out)
        self.assertIn("no faulty node found within 3 s; the step fails with exit code 7", out)
        waited = int(out.split("rc=7 after ")[1].split()[0])
        self.assertGreaterEqual(waited, 3, out)
        self.assertEqual(self.job(job).get("Restarts"), "0")

    def test_3_a_step_failing_on_a_faulty_node_requeues_the_job_which_then_finishes(self):
        # Rank 1 waits for the test to mark its node faulty, then fails; after the requeue
        # (SLURM_RESTART_COUNT 1) every rank succeeds.
        job = self.submit(
            "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -o /fsx/ar/out-%j --open-mode=append\n"
            "echo \"start restart=${SLURM_RESTART_COUNT:-0}\"\n"
            "export HYPERFLEET_AUTO_RESUME_WINDOW=30\n"
            "srun --auto-resume=1 bash -c '"
            "if [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ] && [ \"$SLURM_PROCID\" = 1 ]; then "
            "hostname -s > /fsx/ar/failing-$SLURM_JOB_ID.tmp && "
            "mv /fsx/ar/failing-$SLURM_JOB_ID.tmp /fsx/ar/failing-$SLURM_JOB_ID; "
            "while [ ! -e /fsx/ar/go-$SLURM_JOB_ID ]; do sleep 0.1; done; exit 3; fi; "
            "echo rank $SLURM_PROCID ok'\n"
            "echo \"done rc=$? restart=${SLURM_RESTART_COUNT:-0}\"\n")
        failing = os.path.join(self.fsx, "ar", f"failing-{job}")
        wait_until(lambda: os.path.exists(failing), timeout=60, interval=0.2,
                   what="rank 1 to start")
        with open(failing) as f:
            node = f.read().strip()
        # What the control plane does on a fault: the node FAILs (its job keeps running).
        self.on_controller(f"scontrol update nodename={node} state=fail "
                           f"reason='Hyperfleet: e2e test fault'")
        self.write(os.path.join(self.fsx, "ar", f"go-{job}"), "")
        wait_until(lambda: self.job(job).get("Restarts") == "1", timeout=60, interval=0.2,
                   what=f"job {job} requeued by auto-resume")
        requeued = time.monotonic()
        # The node is replaced and back in service (what the control plane does next).
        wait_until(lambda: "fail" in self.on_controller(
            f"sinfo -h -N -n {node} -o %T").stdout.split()[0], timeout=30, interval=0.2,
            what=f"{node} fail once the job left it")
        self.on_controller(f"scontrol update nodename={node} state=resume")
        wait_until(lambda: self.job(job).get("JobState") == "COMPLETED", timeout=90,
                   interval=0.5, what=f"job {job} to finish after its requeue")
        print(f"\nauto-resume: node back in service to job {job} completed: "
              f"{time.monotonic() - requeued:.1f} s after the requeue", flush=True)
        out = self.output(job)
        self.assertIn("start restart=0", out)
        self.assertIn("start restart=1", out)
        self.assertIn(f"[Auto Resume] Info: JobID {job}: faulty node(s): {node} is", out)
        self.assertIn("Hyperfleet: e2e test fault", out)
        self.assertIn(f"[Auto Resume] Info: JobID {job} requeued", out)
        # The first run stopped at the requeue: only the second one got to its end.
        self.assertEqual(out.count("done rc="), 1, out)
        self.assertIn("done rc=0 restart=1", out)
        self.assertEqual(sorted(l for l in out.splitlines() if l.startswith("rank ")),
                         ["rank 0 ok", "rank 0 ok", "rank 1 ok"], out)
        self.assertEqual(self.job(job).get("JobId"), job)

    def test_4_a_requeued_job_starts_again_within_seconds(self):
        job = self.submit(
            "#!/bin/bash\n#SBATCH -N1 --requeue -o /fsx/ar/out-%j --open-mode=append\n"
            "echo \"running restart=${SLURM_RESTART_COUNT:-0}\"\n"
            "while [ ! -e /fsx/ar/stop-$SLURM_JOB_ID ]; do sleep 0.2; done\n")
        wait_until(lambda: "running restart=0" in self.output(job), timeout=60, interval=0.2,
                   what=f"job {job} running")
        start = time.monotonic()
        self.on_controller(f"scontrol requeue {job}")
        wait_until(lambda: "running restart=1" in self.output(job), timeout=150, interval=0.2,
                   what=f"job {job} running again after its requeue")
        took = time.monotonic() - start
        print(f"\nsbatch --requeue: scontrol requeue to the job running again: {took:.1f} s",
              flush=True)
        self.write(os.path.join(self.fsx, "ar", f"stop-{job}"), "")
        wait_until(lambda: self.job(job).get("JobState") == "COMPLETED", timeout=60,
                   interval=0.5, what=f"job {job} to finish")
        # Slurm 22.05's defaults (cred_expire 120 s, sched_interval 60 s) would hold it for two
        # minutes or more.
        self.assertLess(took, 15)


if __name__ == "__main__":
    main()
