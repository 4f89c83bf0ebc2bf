"""Bad input and faults of your own machines (issue 18, docs/ssh-provider.md), on real sshd
test machines (tests/e2e/ssh_machines.py) and `hyperfleet server --provider ssh`: a wrong
host key at registration (refused, nothing run on the machine), an unreachable machine
(refused, naming it), a machine registered twice (refused), a CreateCluster with too few
machines (HyperPod's capacity behaviour as the provider reports it), removal of a machine in
use (refused), and ssh dropped in the middle of a node's provisioning (retried, then the
node fails with a message naming the step; with the link back the cluster is deleted cleanly
and the machine is clean and free). Tests in name order on one fleet. Needs root; skipped
otherwise."""

import os
import time

from e2e_ssh_fleet import TYPE, SshFleetFixture
from harness import main, wait_until

ON_CREATE = "#!/bin/bash\necho \"lifecycle ran on $(hostname)\"\n"
# Stands in for dpkg-query on a machine (first on the provisioning scripts' PATH): says that
# provisioning has reached the machine's package check, then holds it until released.
HOLD = ("#!/bin/sh\n: > /run/hf-test-provisioning\n"
        "cat /run/hf-test-hold > /dev/null\nexec /usr/bin/dpkg-query \"$@\"\n")


class SshFaultsTest(SshFleetFixture):
    fleet_size = 3
    cluster_name = "ssh-faults-e2e"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.write(os.path.join(cls.server.data_dir, "s3", "lcs-bucket", "trivial",
                               "on_create.sh"), ON_CREATE)

    # -- helpers ------------------------------------------------------------------------

    def accepted_logins(self, m):
        """How many ssh logins machine `m`'s sshd accepted so far (its journal), this one
        included."""
        r = m.ssh("journalctl -q --no-pager -u ssh.service | grep -c 'Accepted publickey'; "
                  "true", check=True)
        return int(r.stdout.strip() or 0)

    def refused(self, *args):
        """Runs `hyperfleet <args>`, which must fail; returns its stderr and stdout."""
        r = self.hf(*args, check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        return r.stderr + r.stdout

    def create_one(self, name, count=1, prefix="trivial"):
        arn = self.create(name, [("workers", TYPE, count)], prefix=prefix)["ClusterArn"]
        return arn.rsplit("/", 1)[1]

    def delete(self, name):
        self.aws("sagemaker", "delete-cluster", "--cluster-name", name)
        wait_until(lambda: name not in self.cluster_names(), timeout=300, interval=1,
                   what=f"{name} deleted")

    # -- tests (one fleet, in name order) -----------------------------------------------

    def test_1_a_wrong_host_key_is_refused_and_nothing_runs_on_the_machine(self):
        m, other = self.fleet.machines[0], self.fleet.machines[1]
        logins = self.accepted_logins(m)
        err = self.refused(*self.add_args(m, host_key=other.host_key_pub))
        self.assertRegex(err, r"(?i)host key", err)
        self.assertIn(m.address, err)
        # Only our own count's login since: the registration never logged in.
        self.assertEqual(self.accepted_logins(m), logins + 1)
        self.assertIsNone(self.machine_of(m))
        r = m.ssh("test ! -e /var/lib/hyperfleet", check=False)
        self.assertEqual(r.returncode, 0, "the machine was changed")

    def test_2_an_unreachable_machine_is_refused_with_a_clear_message(self):
        m = self.fleet.machines[1]
        m.link_down()
        try:
            t0 = time.monotonic()
            err = self.refused(*self.add_args(m))
            print(f"unreachable machine refused after {time.monotonic() - t0:.1f} s: "
                  f"{err.strip()}")
            self.assertIn(m.address, err)
            self.assertRegex(err, r"(?i)unreachable|timed out|timeout|not reach|connect", err)
        finally:
            m.link_up()
        self.assertIsNone(self.machine_of(m))

    def test_3_a_machine_registered_twice_is_refused(self):
        m = self.fleet.machines[0]
        first = self.register(m)
        err = self.refused(*self.add_args(m))
        self.assertRegex(err, r"(?i)conflict|already", err)
        self.assertIn(first, err + " ".join(r["MachineId"] for r in self.machines()))
        self.assertEqual([r["MachineId"] for r in self.machines()], [first])

    def test_4_too_few_machines_for_a_cluster_is_capacity_short_as_on_hyperpod(self):
        # One machine of the type is registered (test 3), the cluster asks for two.
        name = "ssh-short"
        self.create_one(name, count=2)

        def settled():
            nodes = self.nodes(name)
            c = self.describe(name)
            if c["ClusterStatus"] == "Failed":
                return c, nodes
            short = [n for n in self.node_details(name)
                     if "capacity" in n["InstanceStatus"].get("Message", "").lower()]
            return (c, short) if short else None
        c, nodes = wait_until(settled, timeout=300, interval=1,
                              what="the capacity shortfall reported")
        print(f"too few machines: cluster {c['ClusterStatus']}: "
              f"{c.get('FailureMessage', '')}; nodes: "
              + "; ".join(f"{n.get('InstanceStatus', {}).get('Status')} "
                          f"{n.get('InstanceStatus', {}).get('Message', '')}" for n in nodes))
        text = c.get("FailureMessage", "") + " ".join(
            n.get("InstanceStatus", {}).get("Message", "") for n in nodes)
        self.assertRegex(text, r"Insufficient capacity for ml\.c5\.large", text)
        self.delete(name)
        wait_until(lambda: [r["State"] for r in self.machines()] == ["free"], timeout=300,
                   interval=1, what="the machine free again")

    def test_5_a_machine_in_use_cannot_be_removed(self):
        name = "ssh-in-use"
        self.create_one(name)
        c = self.wait_status(name, ["InService", "Failed"], timeout=600)
        self.assertEqual(c["ClusterStatus"], "InService", c.get("FailureMessage"))
        (record,) = self.machines()
        self.assertEqual(record["State"], "in-use", record)
        err = self.refused("machines", "remove", record["MachineId"])
        self.assertRegex(err, r"(?i)in use|ResourceInUse", err)
        self.assertEqual([r["MachineId"] for r in self.machines()], [record["MachineId"]])
        self.delete(name)
        wait_until(lambda: [r["State"] for r in self.machines()] == ["free"], timeout=300,
                   interval=1, what="the machine free again")
        self.assert_clean(self.fleet.machines[0])
        # Free now: it may go.
        self.hf("machines", "remove", record["MachineId"])
        self.assertEqual(self.machines(), [])

    def test_6_ssh_dropped_mid_provisioning_fails_the_node_naming_the_step(self):
        m = self.fleet.machines[2]
        self.register(m)
        m.ssh("mkfifo -m 600 /run/hf-test-hold && cat > /usr/local/sbin/dpkg-query && "
              "chmod 755 /usr/local/sbin/dpkg-query", check=True, input=HOLD)
        name = "ssh-dropped"
        self.create_one(name)
        wait_until(lambda: m.ssh("test -e /run/hf-test-provisioning").returncode == 0,
                   timeout=120, interval=0.5, what="provisioning to reach the machine")
        m.link_down()
        t0 = time.monotonic()
        try:
            def failed():
                for n in self.node_details(name):
                    if n["InstanceStatus"]["Status"] == "Failure":
                        return n
                c = self.describe(name)
                return c if c["ClusterStatus"] == "Failed" else None
            seen = wait_until(failed, timeout=300, interval=1,
                              what="the node failed after the dropped ssh")
        finally:
            # The held step dies with the connection; nothing holds a retry any more.
            os.unlink(os.path.join(m.root, "usr", "local", "sbin", "dpkg-query"))
            m.link_up()
        message = seen.get("InstanceStatus", {}).get("Message", "") or \
            seen.get("FailureMessage", "")
        print(f"dropped ssh: Failure after {time.monotonic() - t0:.1f} s: {message}")
        self.assertRegex(message, r"step \w+", message)
        self.assertIn(m.address, message)
        self.assertRegex(message, r"ssh failed [2-9] times", "the step was not retried")
        # With the link back the cluster goes cleanly. A machine the provider could not clean
        # while the link was down is quarantined with the reason; an operator returns it.
        self.delete(name)
        record = wait_until(lambda: (r := self.machine_of(m)) and
                            r["State"] in ("free", "quarantined") and r,
                            timeout=300, interval=1, what="the machine released")
        print(f"after the deletion the machine is {record['State']}"
              f" ({record.get('StateReason', '')})")
        if record["State"] == "quarantined":
            self.hf("machines", "return", record["MachineId"])
        wait_until(lambda: [r["State"] for r in self.machines()] == ["free"], timeout=300,
                   interval=1, what="the machine free again")
        self.assert_clean(m)


if __name__ == "__main__":
    main()
