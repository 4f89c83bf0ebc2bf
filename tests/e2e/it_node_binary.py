"""The portable node binary, build/bin/hyperfleet-node, on a Debian root that lacks the build
host's libraries (the `bare` layer of the ssh test machines: debootstrap minbase with systemd
and sshd, without abseil, spdlog, fmt, pugixml or SQLite): it starts there and answers
`--version` and `agent --help`, where the dynamic `hyperfleet` binary cannot even load. (Its
glibc floor and NEEDED list: ctest tools.check_node_binary.)"""

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

    def test_dynamic_binary_does_not_load_there(self):
        r = self.chroot("/opt/hyperfleet/bin/hyperfleet", "agent", "--help")
        self.assertEqual(r.returncode, 127, r.stdout + r.stderr)
        self.assertIn("error while loading shared libraries", r.stderr)


if __name__ == "__main__":
    harness.main()
