"""The portable node binary, build/bin/hyperfleet-node, on a Debian root that lacks the build
host's libraries (the `bare` layer of the ssh test machines: debootstrap minbase with systemd
and sshd, without abseil, spdlog, fmt, pugixml or SQLite): it starts there and answers
`--version` and `agent --help`, and its agent talks to a real server's pinned TLS agent
endpoint, where the dynamic `hyperfleet` binary cannot even load. (Its glibc floor and NEEDED
list: ctest tools.check_node_binary.)"""

import os
import shutil
import subprocess
import tempfile
import unittest

import harness
import ssh_machines

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_BINARY = os.path.join(os.path.dirname(harness.BINARY), "hyperfleet-node")
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


@unittest.skipUnless(os.geteuid() == 0, "needs root (overlay mount, chroot)")
class BareDebianRootTest(unittest.TestCase):
    """Both binaries copied into an overlay over the bare root and run with chroot."""

    @classmethod
    def setUpClass(cls):
        lower = ssh_machines.bare_rootfs()
        cls.work = tempfile.mkdtemp(prefix="hf-it-node-binary-")
        os.chmod(cls.work, 0o755)
        cls.root = os.path.join(cls.work, "merged")
        for d in ("upper", "work", "merged"):
            os.mkdir(os.path.join(cls.work, d))
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={cls.work}/upper,workdir={cls.work}/work",
                        cls.root], env=ENV, check=True)
        bindir = os.path.join(cls.root, "opt", "hyperfleet", "bin")
        os.makedirs(bindir, exist_ok=True)
        shutil.copy(NODE_BINARY, os.path.join(bindir, "hyperfleet-node"))
        shutil.copy(harness.BINARY, os.path.join(bindir, "hyperfleet"))

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["umount", cls.root], env=ENV, check=False)
        shutil.rmtree(cls.work, ignore_errors=True)

    def chroot(self, *argv):
        return subprocess.run(["chroot", self.root, *argv], env=ENV, capture_output=True,
                              text=True, timeout=60, cwd="/")

    def test_the_root_lacks_the_build_hosts_libraries(self):
        libdir = os.path.join(self.root, "usr", "lib", "x86_64-linux-gnu")
        present = os.listdir(libdir)
        for prefix in ("libabsl_", "libspdlog", "libfmt", "libpugixml", "libsqlite3"):
            self.assertFalse([n for n in present if n.startswith(prefix)], prefix)

    def test_node_binary_runs_there(self):
        r = self.chroot("/opt/hyperfleet/bin/hyperfleet-node", "--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^hyperfleet-node \d+\.\d+\.\d+\n$")
        r = self.chroot("/opt/hyperfleet/bin/hyperfleet-node", "agent", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--env-file", r.stdout)
        r = self.chroot("/opt/hyperfleet/bin/hyperfleet-node", "auto-resume", "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--window", r.stdout)
        # The agent itself starts: a missing env file is its own error, not the loader's.
        r = self.chroot("/opt/hyperfleet/bin/hyperfleet-node", "agent", "--env-file",
                        "/nonexistent/agent.env")
        self.assertEqual(r.returncode, 1)
        self.assertIn("hyperfleet agent: ", r.stderr)
        self.assertIn("/nonexistent/agent.env", r.stderr)

    def agent_first_register_line(self, env_lines):
        """Runs the node binary's agent in the root with agent.env = `env_lines` until it logs
        its first registration attempt; returns that line."""
        env_file = os.path.join(self.root, "etc", "hyperfleet", "agent.env")
        os.makedirs(os.path.dirname(env_file), exist_ok=True)
        with open(env_file, "w") as f:
            f.write("".join(line + "\n" for line in env_lines))
        p = subprocess.Popen(["chroot", self.root, "/opt/hyperfleet/bin/hyperfleet-node", "agent"],
                             env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, cwd="/")
        try:
            seen = []
            for line in p.stderr:  # ends when the agent exits
                seen.append(line)
                if "register with" in line:
                    return line
            self.fail("the agent exited before registering:\n" + "".join(seen))
        finally:
            p.terminate()
            p.wait(timeout=30)
            p.stderr.close()

    def test_node_agent_reaches_a_tls_endpoint_pinned(self):
        # Static OpenSSL and the Beast client in a root without the build host's libraries:
        # the pinned endpoint answers (the made-up node's token is refused by the server: an
        # HTTP answer over TLS); a wrong pin is refused by the agent before anything is sent.
        with harness.Server(extra_args=("--agent-listen", "127.0.0.1:0")) as server:
            base = [f"HF_AGENT_URL={server.agent_endpoint}", "HF_INSTANCE_ID=i-0123456789abcdef0",
                    "HF_AGENT_TOKEN=" + "0" * 64]
            line = self.agent_first_register_line(
                base + [f"HF_AGENT_CERT_SHA256={server.agent_cert_sha256}"])
            self.assertIn("wrong token for instance i-0123456789abcdef0", line)
            wrong = "f" * 64
            line = self.agent_first_register_line(base + [f"HF_AGENT_CERT_SHA256={wrong}"])
            self.assertIn(f"does not match the pinned {wrong}", line)
            self.assertIn(server.agent_cert_sha256, line)

    def test_dynamic_binary_does_not_load_there(self):
        r = self.chroot("/opt/hyperfleet/bin/hyperfleet", "agent", "--help")
        self.assertEqual(r.returncode, 127, r.stdout + r.stderr)
        self.assertIn("error while loading shared libraries", r.stderr)


if __name__ == "__main__":
    harness.main()
