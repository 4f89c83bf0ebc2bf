"""Node recovery under trouble (docs/resiliency.md), on real nodes and real Slurm:
- a replacement whose lifecycle scripts fail is reported, retried with backoff (10 s, then
  20 s) and, once the scripts succeed again, the node is Running and idle in Slurm: it is
  never silently lost;
- a recovery survives a control-plane restart in the middle of it (SIGTERM, and SIGKILL as a
  crash would): the node ends Running with exactly one replacement, no node process of the
  old instance is left, and Slurm has the node idle.
A user makes replacements fail the way they could on HyperPod: by uploading a file next to
the lifecycle scripts that on_create.sh looks for. Needs root and the node image; skipped
otherwise."""

import datetime
import os
import re
import signal
import subprocess
import time

import boto3
import botocore.config

from harness import ACCESS_KEY, MODELS, REGION, SECRET_KEY, local_node_pids, main, wait_until
from e2e_slurm import SlurmClusterFixture

# Prepended to the example on_create.sh in the bucket: fails while the flag file exists.
FAIL_GUARD = """\
if [ -e "$(dirname "$0")/fail-replacements" ]; then
  echo "fail-replacements is in the bundle: failing on purpose" >&2
  exit 1
fi
"""


def event_time(event):
    """An event's EventTime (a datetime from boto3) as epoch seconds."""
    return event["EventTime"].timestamp()


class RecoveryTest(SlurmClusterFixture):
    cluster_name = "recovery-e2e"
    server_args = ["--heartbeat-interval", "1"]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # boto3 in process: polled far faster than the aws CLI, so a restart can land while
        # a replacement is still in progress.
        os.environ["AWS_DATA_PATH"] = MODELS
        cls.sm = boto3.session.Session().client(
            "sagemaker", endpoint_url=cls.server.endpoint, region_name=REGION,
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}))
        cls.prefix = os.path.join(cls.server.data_dir, "s3", "lcs-bucket", "slurm")
        # The bundle is read when a node fetches it: later nodes get the guarded script.
        script = os.path.join(cls.prefix, "on_create.sh")
        with open(script) as f:
            lines = f.read().split("\n", 1)
        with open(script, "w") as f:
            f.write(lines[0] + "\n" + FAIL_GUARD + lines[1])

    # -- helpers ------------------------------------------------------------------------

    def flag(self, on):
        path = os.path.join(self.prefix, "fail-replacements")
        if on:
            with open(path, "w") as f:
                f.write("set by the test\n")
        elif os.path.exists(path):
            os.unlink(path)

    def events(self, since=None):
        """The cluster's events (at or after `since`, epoch seconds), oldest first."""
        args = {"ClusterName": self.cluster_name, "SortOrder": "Ascending", "MaxResults": 100}
        if since is not None:
            args["EventTimeAfter"] = datetime.datetime.fromtimestamp(since - 1,
                                                                     datetime.timezone.utc)
        out = []
        while True:
            page = self.sm.list_cluster_events(**args)
            out += page.get("Events", [])
            if not page.get("NextToken"):
                return out
            args["NextToken"] = page["NextToken"]

    def event_about(self, pattern, since):
        """The first event at or after `since` (epoch seconds) whose description matches the
        regular expression `pattern`, and the match."""
        for e in self.events(since):
            m = re.search(pattern, e.get("Description", ""), re.S)
            if m:
                return e, m
        return None

    def by_logical(self, logical):
        """The node summaries of NodeLogicalId `logical`."""
        nodes = self.sm.list_cluster_nodes(ClusterName=self.cluster_name)["ClusterNodeSummaries"]
        return [n for n in nodes if n.get("NodeLogicalId") == logical]

    def first_worker(self):
        """(instance id, NodeLogicalId, Slurm node name) of the first Running worker."""
        nodes = self.sm.list_cluster_nodes(ClusterName=self.cluster_name)["ClusterNodeSummaries"]
        n = sorted((n for n in nodes if n["InstanceGroupName"] == "workers"
                    and n["InstanceStatus"]["Status"] == "Running"),
                   key=lambda n: n["PrivateDnsHostname"])[0]
        return n["InstanceId"], n["NodeLogicalId"], n["PrivateDnsHostname"].split(".")[0]

    def node_pids(self, iid):
        return local_node_pids(self.server.data_dir, iid)

    def kill_node(self, iid):
        for pid in self.node_pids(iid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def node_processes(self):
        """Instance ids named by this server's node processes (nspawn, supervisors)."""
        local = os.path.join(self.server.data_dir, "local")
        out = subprocess.run(["pgrep", "-fa", local], capture_output=True, text=True).stdout
        return set(re.findall(r"i-[0-9a-f]{17}", out))

    def wait_healthy(self, logical, host, timeout=180):
        """Waits until NodeLogicalId `logical` has one record, Running, and Slurm node `host`
        is idle; returns its instance id."""
        def running():
            recs = self.by_logical(logical)
            return (len(recs) == 1 and recs[0]["InstanceStatus"]["Status"] == "Running"
                    and recs[0]["InstanceId"])
        iid = wait_until(running, timeout=timeout, interval=0.5,
                         what=f"{logical} Running with one record")
        wait_until(lambda: self.sinfo().get((host, "dev"), ("",))[0] == "idle", timeout=90,
                   interval=0.5, what=f"{host} idle in Slurm")
        return iid

    def check_no_leftovers(self):
        """Every node process and node directory belongs to a current instance."""
        current = {n["InstanceId"] for n in self.nodes(self.cluster_name)}
        self.assertEqual(len(current), 3, current)
        wait_until(lambda: self.node_processes() <= current, timeout=60, interval=0.5,
                   what=f"node processes only of {current} (have {self.node_processes()})")
        nodes_dir = os.path.join(self.server.data_dir, "local", "nodes")
        wait_until(lambda: set(os.listdir(nodes_dir)) == current, timeout=60, interval=0.5,
                   what=f"node directories only of {current}")
        nspawn = subprocess.run(["pgrep", "-fa", "systemd-nspawn"], capture_output=True,
                                text=True).stdout
        ours = [line for line in nspawn.splitlines() if self.server.data_dir in line]
        self.assertLessEqual(len(ours), 3, ours)

    def restart_server(self, how):
        port = self.server.port
        if how == "kill":
            self.server.kill9()
        else:
            self.server.stop()
        self.server.start(port=port)

    def kill_and_wait_replaced(self, iid, t0):
        """Kills worker `iid`'s sandbox; returns the id of the replacement chosen for it."""
        self.kill_node(iid)
        _, m = wait_until(lambda: self.event_about(
            rf"Replacing instance {iid} with (i-[0-9a-f]+)", t0), timeout=30, interval=0.2,
            what="the dead worker replaced")
        return m.group(1)

    # -- tests (one cluster, in name order) ---------------------------------------------

    def test_1_a_failing_replacement_is_reported_and_retried_until_it_succeeds(self):
        iid, logical, host = self.first_worker()
        self.flag(True)
        t0 = time.time()
        try:
            first = self.kill_and_wait_replaced(iid, t0)
            failed1, _ = wait_until(lambda: self.event_about(
                rf"Replacement instance {first} failed \(attempt 1\): .* It is replaced again "
                r"in 10 s\.", t0), timeout=120, interval=0.5, what="the first replacement failed")
            # Reported: the failed replacement is Failure with a message, the Slurm node down.
            rec = [d for d in self.by_logical(logical) if d["InstanceId"] == first]
            if rec:  # it may already be replaced again
                self.assertIn(rec[0]["InstanceStatus"]["Status"], ("Failure", "ShuttingDown"),
                              rec)
            retry, m = wait_until(lambda: self.event_about(
                rf"Replacing instance {first} with (i-[0-9a-f]+).*retrying a failed replacement",
                t0), timeout=40, interval=0.5, what="the failed replacement retried")
            second = m.group(1)
            waited = event_time(retry) - event_time(failed1)
            print(f"first retry after {waited:.1f} s")
            self.assertGreaterEqual(waited, 9.5)
            self.assertLess(waited, 20)
            failed2, _ = wait_until(lambda: self.event_about(
                rf"Replacement instance {second} failed \(attempt 2\): .* It is replaced again "
                r"in 20 s\.", t0), timeout=120, interval=0.5, what="the second attempt failed")
            self.assertNotEqual(self.sinfo().get((host, "dev"), ("",))[0], "idle")
        finally:
            self.flag(False)
        final = self.wait_healthy(logical, host, timeout=240)
        third, _ = self.event_about(rf"Replacing instance {second} with {final}", t0)
        waited = event_time(third) - event_time(failed2)
        print(f"second retry after {waited:.1f} s; healthy after {time.time() - t0:.1f} s")
        self.assertGreaterEqual(waited, 19.5)
        self.assertNotIn(final, (iid, first, second))
        self.check_no_leftovers()

    def test_1b_a_failed_replacement_can_be_replaced_at_once_through_the_api(self):
        # As a HyperPod user would: BatchReplaceClusterNodes on the node in Failure.
        iid, logical, host = self.first_worker()
        self.flag(True)
        t0 = time.time()
        try:
            failed = self.kill_and_wait_replaced(iid, t0)
            wait_until(lambda: [n for n in self.by_logical(logical) if n["InstanceId"] == failed
                                and n["InstanceStatus"]["Status"] == "Failure"],
                       timeout=120, interval=0.2, what="the replacement in Failure")
        finally:
            self.flag(False)
        out = self.sm.batch_replace_cluster_nodes(ClusterName=self.cluster_name,
                                                  NodeIds=[failed])
        self.assertEqual(out.get("Successful"), [failed], out)
        final = self.wait_healthy(logical, host)
        print(f"failed replacement replaced through the API; healthy after "
              f"{time.time() - t0:.1f} s")
        descriptions = [e.get("Description", "") for e in self.events(t0)]
        self.assertTrue(any(d.startswith(f"Replacing instance {failed} with {final} ")
                            and "requested by BatchReplaceClusterNodes" in d
                            for d in descriptions), descriptions)
        self.assertFalse([d for d in descriptions if "retrying a failed replacement" in d],
                         descriptions)
        self.check_no_leftovers()

    def recover_across_a_restart(self, how, wait_for_lifecycle):
        iid, logical, host = self.first_worker()
        t0 = time.time()
        self.kill_node(iid)
        _, m = wait_until(lambda: self.event_about(
            rf"Replacing instance {iid} with (i-[0-9a-f]+)", t0), timeout=30, interval=0.2,
            what="the dead worker replaced")
        new = m.group(1)
        if wait_for_lifecycle:
            # Deeper in: the replacement booted and runs its lifecycle scripts.
            wait_until(lambda: self.event_about(
                rf"lifecycle script execution for EC2InstanceId {new} has Started", t0),
                timeout=60, interval=0.2, what="the replacement's lifecycle scripts started")
        self.assertNotIn(new, [d["InstanceId"] for d in self.by_logical(logical)
                               if d["InstanceStatus"]["Status"] == "Running"],
                         "the restart must land while the replacement is in progress")
        t_restart = time.time()
        self.restart_server(how)
        print(f"control plane restarted ({how}) in {time.time() - t_restart:.1f} s, "
              f"{t_restart - t0:.1f} s into the recovery")
        final = self.wait_healthy(logical, host)
        print(f"node healthy {time.time() - t0:.1f} s after the fault")
        # Exactly one replacement: the instance id changed once, to the one first chosen.
        self.assertEqual(final, new)
        descriptions = [e.get("Description", "") for e in self.events()
                        if event_time(e) >= t0 - 1]
        self.assertEqual(sum(1 for d in descriptions if d.startswith(f"Replacing instance {iid} ")),
                         1, descriptions)
        self.assertFalse([d for d in descriptions if d.startswith(f"Replacing instance {new} ")],
                         descriptions)
        self.assertTrue(any(d.startswith(f"Dead on instance {iid}") for d in descriptions),
                        descriptions)
        self.assertTrue(any(d == f"Instance {new} is running in group workers"
                            for d in descriptions), descriptions)
        self.assertTrue(any(d == f"Instance {iid} terminated" for d in descriptions),
                        descriptions)
        self.assertFalse(self.node_pids(iid), "the dead node's processes are gone")
        self.check_no_leftovers()
        # The cluster works: both workers run a step.
        self.assertEqual(len(self.on_controller("srun -N2 hostname").split()), 2)

    def test_2_a_recovery_survives_a_control_plane_stop_in_the_middle(self):
        self.recover_across_a_restart("term", wait_for_lifecycle=False)

    def test_3_a_recovery_survives_a_control_plane_crash_in_the_middle(self):
        self.recover_across_a_restart("kill", wait_for_lifecycle=True)

    def test_4_a_rebooted_controller_starts_slurmdbd_before_slurmctld(self):
        ctl = self.controller()
        self.assertIn("slurmdbd.service",
                      self.on_controller("systemctl show -p After --value slurmctld"))
        self.on_controller("touch /run/boot-marker")
        t0 = time.time()
        out = self.aws("sagemaker", "batch-reboot-cluster-nodes", "--cluster-name",
                       self.cluster_name, "--node-ids", ctl)
        self.assertEqual(out.get("Successful"), [ctl], out)

        def back():
            d = self.aws("sagemaker", "describe-cluster-node", "--cluster-name",
                         self.cluster_name, "--node-id", ctl)["NodeDetails"]
            return (d["InstanceStatus"]["Status"] == "Running" and
                    self.run_on(self.cluster_id, "controller", ctl,
                                "test ! -e /run/boot-marker && scontrol ping").returncode == 0)
        wait_until(back, timeout=120, interval=0.5, what="the controller rebooted, slurmctld up")
        print(f"controller back after {time.time() - t0:.1f} s")

        def started(unit, prop):
            return int(self.on_controller(f"systemctl show -p {prop} --value {unit}").strip())
        dbd = started("slurmdbd", "ExecMainStartTimestampMonotonic")
        ctld = started("slurmctld", "ExecMainStartTimestampMonotonic")
        self.assertGreater(dbd, 0)
        self.assertLess(dbd, ctld, "slurmdbd started before slurmctld")
        # slurmctld registered with accounting: a job shows up in sacct.
        wait_until(lambda: all(s == "idle" for s, _, _ in self.sinfo().values()), timeout=90,
                   interval=0.5, what="the workers idle again")
        job = self.on_controller("sbatch --parsable --wait -N1 --wrap true").strip().split(";")[0]
        state = wait_until(
            lambda: self.on_controller(f"sacct -j {job} -n -X -P -o State").strip() or None,
            timeout=30, interval=0.5, what="sacct to know the job")
        self.assertEqual(state, "COMPLETED")


if __name__ == "__main__":
    main()
