"""The ssh provider's default /fsx and the agent's IMDS on real ssh test machines
(tests/e2e/ssh_machines.py, `site` layer: Debian minbase with sshd, sshfs and a node's
packages, /dev/fuse).

/fsx: fsx_test's FsxMachines test (tests/unit/provider/fsx_test.cc) runs FsxMount over the
real hf_ssh client against two machines: both mount the same export from this host (sshfs
in passive mode over the control plane's own ssh connection, sftp-server in a bubblewrap
sandbox here), a file written on one is read on the other and here, the node reaches nothing
of this host's outside the export (the second machine is reached as a user with sudo, not
root), sshfs killed on a machine, the control plane's ssh
process killed and a dead network link (taken down here when the test asks) are each
followed by a new mount, and cleanup leaves nothing mounted. It prints the mount time, a
64 MiB dd, and the times to notice the dead link and to mount again.

IMDS: the node binary's agent with HF_IMDS=serve in agent.env answers HyperPod's paths at
169.254.169.254 on a machine that has no metadata service, with a token and 401 without, and
removes the address from lo when it stops (skipped until build/bin/hyperfleet-node exists)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import harness  # noqa: F401  (sets up sys.path and the environment like the other tests)
import ssh_machines

BIN_DIR = os.path.dirname(os.environ.get("HYPERFLEET_BIN", os.path.join(
    ssh_machines.REPO, "build", "bin", "hyperfleet")))
FSX_TEST = os.path.join(BIN_DIR, "fsx_test")
NODE_BIN = os.path.join(BIN_DIR, "hyperfleet-node")


@unittest.skipUnless(os.geteuid() == 0, "needs root (test machines, FUSE)")
class FsxAndImdsOnMachines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ssh_machines.ensure_image("site")  # bare (sshd, sshfs) + a node's packages (curl)
        cls.fleet = ssh_machines.Fleet(2).start()
        cls.tmp = tempfile.mkdtemp(prefix="hf-it-fsx-")
        os.chmod(cls.tmp, 0o700)

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @unittest.skipUnless(os.path.exists(FSX_TEST), "fsx_test is not built")
    def test_two_machines_share_the_export(self):
        export = os.path.join(self.tmp, "export")
        with open(os.path.join(self.tmp, "host-secret"), "w") as f:
            f.write("secret\n")
        # The second machine is reached as an operator's user with sudo, not as root.
        self.fleet.machines[1].add_login_user("ops")
        spec = {"export_dir": export, "machines": [
            {"name": m.name, "address": m.address, "identity_file": self.fleet.key_path,
             "known_hosts_file": m.known_hosts_file, "user": "ops" if i == 1 else "root"}
            for i, m in enumerate(self.fleet.machines)]}
        spec_path = os.path.join(self.tmp, "machines.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C",
               "HF_FSX_MACHINES": spec_path, "HF_FSX_LINK_CONTROL": "1"}
        by_name = {m.name: m for m in self.fleet.machines}
        p = subprocess.Popen([FSX_TEST, "--gtest_filter=FsxMachines.*"], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        out = []
        try:
            for line in p.stdout:  # the test asks for the dead link and its end
                out.append(line)
                if line.startswith("FSX-LINK-DOWN "):
                    by_name[line.split()[1]].link_down()
                    p.stdin.write("down\n")
                    p.stdin.flush()
                elif line.startswith("FSX-LINK-UP "):
                    by_name[line.split()[1]].link_up()
                    p.stdin.write("up\n")
                    p.stdin.flush()
            p.wait(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdin.close()
            p.stdout.close()
            for m in self.fleet.machines:
                m.link_up()
        stdout = "".join(out)
        sys.stderr.write("".join(l for l in out if "FSX-FIGURE" in l or "MB/s" in l))
        self.assertEqual(p.returncode, 0, stdout[-6000:])
        self.assertIn("[  PASSED  ] 1 test", stdout)
        self.assertNotIn("SKIPPED", stdout)
        self.assertIn("re-mount after the link came back", stdout)
        # Nothing of the host's outside the export was written or read there.
        self.assertEqual(sorted(os.listdir(export)), ["a.txt"])
        for m in self.fleet.machines:
            out = m.ssh("grep -c ' /fsx ' /proc/mounts", check=False).stdout.strip()
            self.assertEqual(out, "0", m.name)

    @unittest.skipUnless(os.path.exists(NODE_BIN), "build/bin/hyperfleet-node is not built")
    def test_agent_serves_imds_where_there_is_none(self):
        m = self.fleet.machines[0]
        with open(NODE_BIN, "rb") as f:
            r = subprocess.run(m.ssh_argv("cat > /usr/local/bin/hyperfleet-node && "
                                          "chmod 755 /usr/local/bin/hyperfleet-node"),
                               stdin=f, capture_output=True, env=ssh_machines.ENV, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        # No metadata service on the machine: nothing answers (what provisioning probes).
        probe = m.ssh("curl -sm1 -o /dev/null http://169.254.169.254/; echo $?", check=False)
        self.assertNotEqual(probe.stdout.strip(), "0", probe.stdout)
        env = "\n".join([
            "HF_AGENT_URL=http://127.0.0.1:9", "HF_INSTANCE_ID=i-0fsx0test0imds01",
            "HF_AGENT_TOKEN=t", "HF_IMDS=serve", "HF_IMDS_INSTANCE_TYPE=ml.c5.large",
            f"HF_IMDS_LOCAL_IPV4={m.address}", "HF_IMDS_HOSTNAME=ip-" + m.address.replace(".", "-"),
            "HF_IMDS_REGION=us-west-2", ""])
        r = m.ssh("mkdir -p /etc/hyperfleet && cat > /etc/hyperfleet/agent.env && "
                  "systemd-run --unit=hf-imds-test -p KillMode=mixed "
                  "/usr/local/bin/hyperfleet-node agent",
                  input=env, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        script = ("for i in $(seq 100); do curl -s -o /dev/null http://169.254.169.254/ && break; "
                  "sleep 0.1; done; "
                  "T=$(curl -s -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "
                  "http://169.254.169.254/latest/api/token); "
                  "for p in instance-id instance-type local-ipv4 placement/availability-zone; do "
                  "curl -s -H \"X-aws-ec2-metadata-token: $T\" "
                  "http://169.254.169.254/latest/meta-data/$p; echo; done; "
                  "curl -s -o /dev/null -w '%{http_code}\\n' "
                  "http://169.254.169.254/latest/meta-data/instance-id")
        r = m.ssh(script, check=False)
        self.assertEqual(r.stdout, f"i-0fsx0test0imds01\nc5.large\n{m.address}\nus-west-2a\n401\n",
                         r.stderr)
        self.assertIn("169.254.169.254/32", m.ssh("ip -o -4 addr show dev lo").stdout)
        m.ssh("systemctl stop hf-imds-test", check=False)
        self.assertNotIn("169.254.169.254", m.ssh("ip -o -4 addr show dev lo").stdout,
                         m.ssh("journalctl -u hf-imds-test --no-pager | tail -20").stdout)


if __name__ == "__main__":
    unittest.main()
