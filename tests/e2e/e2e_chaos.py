"""Chaos on a Slurm fleet (docs/resiliency.md). During the example training job,
in turn: a worker's whole sandbox is SIGKILLed (dead node), a worker is frozen (hung node),
slurmd is killed on a worker, and a user sets a worker state=down reason="Action:Replace".
Each time the job ends with exactly the result of an undisturbed run, no Slurm node is left
down or drained, every node is Running again, and the cluster's events say what was seen
and done. Needs root and the node image; skipped otherwise."""

import json
import os
import signal
import time

from harness import local_node_pids, main, wait_until
from e2e_slurm import SlurmClusterFixture, reference_result

# Long enough that a fault lands mid-run on a loaded 2-core machine; short enough for CI.
STEPS = 1200


def parse_time(value):
    """An EventTime from the aws CLI (epoch seconds, or ISO 8601) as epoch seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    from datetime import datetime
    return datetime.fromisoformat(value).timestamp()


class ChaosTest(SlurmClusterFixture):
    cluster_name = "chaos-e2e"
    server_args = ["--heartbeat-interval", "1"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.reference = reference_result("--steps", str(STEPS))

    # -- helpers ------------------------------------------------------------------------

    def workers(self):
        """{hostname: instance id} of the Running workers."""
        return {d["PrivateDnsHostname"].split(".")[0]: d["InstanceId"]
                for d in self.node_details(self.cluster_name)
                if d["InstanceGroupName"] == "workers"
                and d["InstanceStatus"]["Status"] == "Running"}

    def node_pids(self, iid):
        return local_node_pids(self.server.data_dir, iid)

    def signal_node(self, iid, sig):
        for pid in self.node_pids(iid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def start_training(self, run):
        """Submits the training job into run directory /fsx/train/<run>; returns its job id
        once its first checkpoint is written."""
        self.copy_training_job()
        # At least STEPS x 30 ms (36 s): the fault (a freeze is found after 10 s) must land
        # while the job runs even on a fast, quiet machine.
        out = self.on_controller(f"RUN_DIR=/fsx/train/{run} sbatch --parsable "
                                 f"/fsx/train/train.sbatch --steps {STEPS} "
                                 f"--min-step-seconds 0.03")
        job = out.strip().split(";")[0]
        checkpoint = os.path.join(self.fsx, "train", run, "checkpoint", "checkpoint.npz")
        wait_until(lambda: os.path.exists(checkpoint), timeout=180, interval=0.2,
                   what=f"job {job} to write its first checkpoint")
        return job

    def finish(self, job, run, requeued):
        """Waits for `job` to complete; checks its result against the undisturbed run, that
        it was (or was not) requeued and resumed from a checkpoint, and that every worker is
        idle in Slurm and Running in the API again."""
        # scontrol, not sacct: a requeued job's accounting record says NODE_FAIL until it
        # runs again. NODE_FAIL is not final here, since the job is requeued.
        def job_state():
            out = self.on_controller(f"scontrol show job {job} -o")
            fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
            return fields.get("JobState", "")
        state = wait_until(
            lambda: (s := job_state()) in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                           "OUT_OF_MEMORY", "DEADLINE") and s,
            timeout=420, interval=1, what=f"job {job} to end")
        with open(os.path.join(self.fsx, "train", f"hyperfleet-train-{job}.out")) as f:
            output = f.read()
        self.assertEqual(state, "COMPLETED", output)
        with open(os.path.join(self.fsx, "train", run, "result.json")) as f:
            result = json.load(f)
        self.assertTrue(result["passed"], output)
        self.assertEqual(result["weights_sha256"], self.reference["weights_sha256"], output)
        if requeued:
            self.assertIn("resumed from step", output)
            restarts = self.on_controller(f"scontrol show job {job} -o")
            self.assertRegex(restarts, r"Restarts=[1-9]", restarts)
        wait_until(lambda: len(self.workers()) == 2, timeout=120, interval=0.5,
                   what="both workers Running")

        def all_idle():
            rows = self.sinfo()
            return rows and all(state == "idle" for state, _, _ in rows.values()) and rows
        rows = wait_until(all_idle, timeout=120, interval=0.5, what="every Slurm node idle")
        self.assertEqual({n for n, _ in rows}, set(self.workers()), rows)
        for d in self.node_details(self.cluster_name):
            self.assertEqual(d["InstanceStatus"]["Status"], "Running", d)
        return output

    def events(self):
        return self.aws("sagemaker", "list-cluster-events", "--cluster-name",
                        self.cluster_name, "--max-results", "100",
                        "--sort-order", "Descending")["Events"]

    def event_about(self, text, since):
        """The first event after `since` (epoch seconds) whose description has `text`."""
        for e in reversed(self.events()):
            if text in e.get("Description", "") and parse_time(e["EventTime"]) >= since - 1:
                return e
        return None

    # -- faults (one cluster, in name order) --------------------------------------------

    def test_1_a_killed_worker_sandbox_is_replaced_and_the_job_resumes(self):
        job = self.start_training("killed")
        host, iid = sorted(self.workers().items())[0]
        t0 = time.time()
        self.signal_node(iid, signal.SIGKILL)
        seen = wait_until(lambda: self.event_about(f"Dead on instance {iid}", t0), timeout=30,
                          interval=0.2, what="the dead node detected")
        print(f"dead node detected after {parse_time(seen['EventTime']) - t0:.1f} s")
        self.assertIn("Replacing it", seen["Description"])
        self.finish(job, "killed", requeued=True)
        self.assertNotIn(iid, self.workers().values())
        self.assertIn(host, self.workers(), "the replacement has the same name")

    def test_2_a_frozen_worker_is_replaced_as_hung_and_the_job_resumes(self):
        job = self.start_training("frozen")
        host, iid = sorted(self.workers().items())[-1]
        t0 = time.time()
        # Stop every process of the node; repeat so that none forked in between escapes.
        for _ in range(3):
            self.signal_node(iid, signal.SIGSTOP)
        seen = wait_until(lambda: self.event_about(f"Unresponsive on instance {iid}", t0),
                          timeout=40, interval=0.5, what="the hung node detected")
        print(f"hung node detected after {parse_time(seen['EventTime']) - t0:.1f} s")
        self.assertIn("No heartbeat from the node agent", seen["Description"])
        self.finish(job, "frozen", requeued=True)
        self.assertNotIn(iid, self.workers().values())
        self.assertFalse(self.node_pids(iid), "the frozen node's processes are gone")

    def test_3_a_killed_slurmd_is_restarted_by_the_agent_and_the_job_goes_on(self):
        job = self.start_training("slurmd")
        host, iid = sorted(self.workers().items())[0]
        t0 = time.time()
        r = self.run_on(self.cluster_id, "workers", iid, "pkill -9 -x slurmd")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        seen = wait_until(lambda: self.event_about(f"Instance {iid}: slurmd was", t0),
                          timeout=60, interval=0.5, what="the agent to restart slurmd")
        self.assertIn("restarted by the agent", seen["Description"])
        print(f"slurmd restarted after {parse_time(seen['EventTime']) - t0:.1f} s")
        self.finish(job, "slurmd", requeued=False)
        self.assertIn(iid, self.workers().values(), "not replaced: the agent fixed it")

    def test_4_action_replace_from_slurm_replaces_the_node_and_the_job_resumes(self):
        job = self.start_training("action-replace")
        host, iid = sorted(self.workers().items())[-1]
        t0 = time.time()
        self.on_controller(f'scontrol update nodename={host} state=down reason="Action:Replace"')
        seen = wait_until(lambda: self.event_about(f"Requested on instance {iid}", t0),
                          timeout=30, interval=0.2, what="the Slurm request acted on")
        print(f"Action:Replace acted on after {parse_time(seen['EventTime']) - t0:.1f} s")
        self.assertIn('reason "Action:Replace"', seen["Description"])
        self.finish(job, "action-replace", requeued=True)
        self.assertNotIn(iid, self.workers().values())
        self.assertIn(host, self.workers())


if __name__ == "__main__":
    main()
