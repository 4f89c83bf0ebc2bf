"""`hyperfleet machines` through the real binary against real ssh machines (the test machines
of ssh_machines.py): registration probes the machine over ssh with its pinned host key; a
wrong host key, an unreachable machine, the same address twice and a GPU type on a machine
without GPUs are refused with a message that says why; the private key is kept owner-only
under the data dir, never returned by the API (checked on the wire with a SigV4 client) nor
logged, and removed with the machine."""

import json
import os
import stat
import subprocess
import unittest
import urllib.request

import harness
import ssh_machines
from harness import BINARY, aws_env


def signed_call(endpoint, operation, body):
    """One HyperfleetMachines call signed with botocore's SigV4 (the aws-style client);
    returns (HTTP status, parsed body)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    data = json.dumps(body).encode()
    req = AWSRequest(method="POST", url=endpoint + "/", data=data, headers={
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": f"HyperfleetMachines.{operation}"})
    SigV4Auth(Credentials(harness.ACCESS_KEY, harness.SECRET_KEY), "sagemaker",
              harness.REGION).add_auth(req)
    r = urllib.request.Request(endpoint + "/", data=data, headers=dict(req.headers.items()),
                               method="POST")
    try:
        with urllib.request.urlopen(r, timeout=120) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


@unittest.skipUnless(os.geteuid() == 0, "needs root (the ssh test machines)")
class Machines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = ssh_machines.Fleet(2, layer="bare").start()
        cls.server = harness.Server().start()
        cls.env = aws_env(cls.server.endpoint)
        with open(cls.fleet.key_path) as f:
            cls.key_text = f.read()
        # A piece of the key's body: it must never show up anywhere but the key file.
        cls.key_piece = cls.key_text.splitlines()[2][:32]

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        cls.fleet.close()

    def machines(self, *args, check=None):
        r = subprocess.run([BINARY, "machines", *args, "--endpoint-url", self.server.endpoint],
                           env=self.env, capture_output=True, text=True, timeout=180)
        if check is not None:
            self.assertEqual(r.returncode, check, r.stdout + r.stderr)
        for text in (r.stdout, r.stderr):
            self.assertNotIn(self.key_piece, text)
        return r

    def add(self, machine, *extra, host_key=None, check=None):
        return self.machines("add", machine.address, "--key", self.fleet.key_path,
                             "--host-key", host_key or machine.host_key_pub, *extra, check=check)

    def listed(self):
        return json.loads(self.machines("list", "--output", "json", check=0).stdout)["Machines"]

    def test_1_register_probes_and_keeps_the_key_owner_only(self):
        m = self.fleet.machines[0]
        r = self.add(m, "--instance-type", "ml.c5.large", "--output", "json", check=0)
        machine = json.loads(r.stdout)["Machine"]
        type(self).m0 = machine["MachineId"]
        self.assertRegex(machine["MachineId"], r"^m-[0-9a-f]{12}$")
        self.assertEqual(machine["Address"], m.address)
        self.assertEqual(machine["State"], "free")
        self.assertEqual(machine["Facts"]["OsId"], "debian")
        self.assertEqual(machine["Facts"]["OsVersion"], "12")
        self.assertGreaterEqual(machine["Facts"]["Cpus"], 1)
        self.assertGreater(machine["Facts"]["MemoryGiB"], 0)
        self.assertEqual(machine["Facts"]["Gpus"], 0)
        # Listed, with its facts; the text table too.
        self.assertEqual([x["MachineId"] for x in self.listed()], [self.m0])
        table = self.machines("list", check=0).stdout
        self.assertIn(self.m0, table)
        self.assertIn("free", table)
        # The key: 0600 in a 0700 directory, the only copy outside the client's file.
        d = os.path.join(self.server.data_dir, "machines")
        self.assertEqual(stat.S_IMODE(os.stat(d).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, self.m0)).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(d, self.m0, "key")).st_mode), 0o600)
        # Never on the wire, nor in the log.
        status, body = signed_call(self.server.endpoint, "DescribeMachine",
                                   {"MachineId": self.m0})
        self.assertEqual(status, 200, body)
        self.assertNotIn(self.key_piece, json.dumps(body))
        self.assertNotIn("PRIVATE KEY", json.dumps(body))
        with open(os.path.join(self.server.data_dir, "server.log")) as f:
            self.assertNotIn(self.key_piece, f.read())

    def test_2_the_same_machine_twice_is_a_conflict(self):
        r = self.add(self.fleet.machines[0], "--instance-type", "ml.c5.large", check=1)
        self.assertIn("ConflictException", r.stderr)
        self.assertIn("registered at", r.stderr)
        status, body = signed_call(self.server.endpoint, "RegisterMachine", {
            "Address": self.fleet.machines[0].address, "SshPrivateKey": self.key_text,
            "HostPublicKey": self.fleet.machines[0].host_key_pub,
            "InstanceType": "ml.c5.large"})
        self.assertEqual((status, body.get("__type")), (400, "ConflictException"), body)
        self.assertNotIn(self.key_piece, json.dumps(body))

    def test_3_wrong_host_key_refused(self):
        m1, m0 = self.fleet.machines[1], self.fleet.machines[0]
        r = self.add(m1, "--instance-type", "ml.c5.large", host_key=m0.host_key_pub, check=1)
        self.assertIn("ValidationException", r.stderr)
        self.assertIn("HostPublicKey does not match", r.stderr)
        self.assertEqual([x["MachineId"] for x in self.listed()], [self.m0])

    def test_4_gpu_type_without_gpus_refused_unless_overridden(self):
        m1 = self.fleet.machines[1]
        r = self.add(m1, "--instance-type", "ml.p5.48xlarge", check=1)
        self.assertIn("GPUs: the machine has 0 NVIDIA GPUs, ml.p5.48xlarge has 8 (H100)",
                      r.stderr)
        self.assertEqual(len(self.listed()), 1)
        # The host key from a file this time (as copied from the machine's /etc/ssh).
        host_key_file = os.path.join(self.server.data_dir, "m1_host_key.pub")
        with open(host_key_file, "w") as f:
            f.write(m1.host_key_pub + " root@m1\n")
        r = self.machines("add", m1.address, "--key", self.fleet.key_path, "--host-key-file",
                          host_key_file, "--instance-type", "ml.p5.48xlarge", "--override",
                          "--output", "json", check=0)
        machine = json.loads(r.stdout)["Machine"]
        type(self).m1 = machine["MachineId"]
        self.assertTrue(machine["OverrideChecks"])
        self.assertTrue(machine["Mismatches"][0].startswith("GPUs:"), machine["Mismatches"])
        self.assertIn("override", self.machines("list", check=0).stdout)

    def test_5_update_reaches_with_the_new_settings_first(self):
        m0, m1 = self.fleet.machines
        known_hosts = os.path.join(self.server.data_dir, "machines", self.m0, "known_hosts")
        with open(known_hosts) as f:
            before = f.read()
        r = self.machines("update", self.m0, "--host-key", m1.host_key_pub, check=1)
        self.assertIn("HostPublicKey does not match", r.stderr)
        with open(known_hosts) as f:
            self.assertEqual(f.read(), before)
        out = json.loads(self.machines("update", self.m0, "--key", self.fleet.key_path,
                                       "--host-key", m0.host_key_pub, "--output", "json",
                                       check=0).stdout)
        self.assertEqual(out["Machine"]["HostPublicKey"], m0.host_key_pub)

    def test_5b_drain_spares_and_return(self):
        out = json.loads(self.machines("drain", self.m1, "--output", "json", check=0).stdout)
        self.assertTrue(out["Machine"]["Drained"])
        self.assertFalse(json.loads(self.machines("undrain", self.m1, "--output", "json",
                                                  check=0).stdout)["Machine"]["Drained"])
        r = self.machines("return", self.m1, check=1)
        self.assertIn("not quarantined", r.stderr)
        self.machines("spares", "ml.c5.large", "2", check=0)
        targets = json.loads(self.machines("spares", "--output", "json", check=0).stdout)
        self.assertEqual(targets["SpareTargets"][0]["InstanceType"], "ml.c5.large")
        self.assertEqual(targets["SpareTargets"][0]["Count"], 2)
        self.assertEqual(targets["SpareTargets"][0]["Free"], 1)
        r = self.machines("spares", "ml.nope", "1", check=1)
        self.assertIn("InstanceType", r.stderr)

    def test_6_remove_takes_the_key(self):
        self.machines("remove", self.m1, check=0)
        self.assertFalse(os.path.exists(os.path.join(self.server.data_dir, "machines", self.m1)))
        r = self.machines("describe", self.m1, check=1)
        self.assertIn("not found", r.stderr)

    def test_7_unreachable_refused(self):
        m1 = self.fleet.machines[1]
        m1.kill()
        r = self.add(m1, "--instance-type", "ml.c5.large", check=1)
        self.assertIn("cannot reach", r.stderr)
        self.assertEqual([x["MachineId"] for x in self.listed()], [self.m0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
