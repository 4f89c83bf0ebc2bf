"""The node image does not depend on its builder's umask or locale (issue 15): built by
`hyperfleet image build` under umask 077 and LANG=de_DE.UTF-8 (as under scripts/quickstart,
whose umask 077 once left /opt/slurm-* at 0700 and slurmctld unable to read job_submit.lua),
the paths that nodes' daemons and users read keep the modes a build under umask 022 gives.

One image build costs minutes and the Debian mirror, so this checks the suite's own image
when its image.env says it was built that way (scripts/setup --test builds it so), and builds
one into a temporary image dir otherwise. Needs root; skipped without debootstrap or the mirror
when a build is needed."""

import os
import shutil
import stat
import subprocess
import tempfile
import unittest
import urllib.request

from harness import BINARY, main

IMAGE_DIR = os.environ.get("HYPERFLEET_IMAGE_DIR", "/var/lib/hyperfleet/images")
MIRROR = "http://deb.debian.org/debian"

# Directories an image may keep from others (Debian's packages make them so, under any umask).
PRIVATE_DIRS = {
    "/root", "/root/.ssh", "/etc/munge", "/etc/ssl/private", "/var/lib/munge", "/var/log/munge",
    "/var/cache/ldconfig", "/var/cache/private", "/var/lib/private", "/var/log/private",
    "/var/cache/apt/archives/partial", "/var/lib/apt/lists/partial",
    "/usr/lib/mysql/plugin/auth_pam_tool_dir",
}
PRIVATE_PREFIXES = ("/var/lib/mysql/",)

# Exact modes (and owners) of what the recipe makes and nodes read.
SLURM = "/opt/slurm-22.05.8"
EXPECTED = {
    "/opt": (0o755, "root"), "/opt/ml": (0o755, "root"), "/opt/ml/config": (0o755, "root"),
    "/opt/sagemaker_cluster": (0o755, "root"), "/opt/hyperfleet": (0o755, "root"),
    "/opt/hyperfleet/bin": (0o755, "root"), "/opt/hyperfleet/bin/hyperfleet": (0o755, "root"),
    "/etc/hyperfleet": (0o755, "root"),
    SLURM: (0o755, "root"), f"{SLURM}/bin": (0o755, "root"), f"{SLURM}/sbin": (0o755, "root"),
    f"{SLURM}/etc": (0o755, "root"), f"{SLURM}/etc/plugstack.conf.d": (0o755, "root"),
    f"{SLURM}/etc/plugstack.conf": (0o644, "root"), f"{SLURM}/etc/accounting.conf": (0o644, "root"),
    f"{SLURM}/etc/gres.conf": (0o644, "root"), f"{SLURM}/etc/cgroup.conf": (0o644, "root"),
    f"{SLURM}/etc/slurmdbd.conf.template": (0o644, "root"),
    "/var/spool/slurmd": (0o755, "slurm"), "/var/spool/slurmctld": (0o755, "slurm"),
    "/var/log/slurm": (0o755, "slurm"),
    "/etc/munge": (0o700, "munge"), "/etc/munge/munge.key": (0o600, "munge"),
    "/etc/profile.d/slurm.sh": (0o644, "root"), "/etc/apt/sources.list": (0o644, "root"),
    "/etc/hostname": (0o644, "root"), "/etc/hosts": (0o644, "root"),
    "/etc/resolv.conf": (0o644, "root"), "/etc/machine-id": (0o444, "root"),
    "/etc/sudoers.d/90-ubuntu": (0o440, "root"),
    "/etc/systemd/system/slurmd.service": (0o644, "root"),
    "/etc/systemd/system/hyperfleet-agent.service": (0o644, "root"),
    "/lib/systemd/system/dlami-nvme.service": (0o644, "root"),
}


def image_env(rootfs):
    env = {}
    try:
        with open(os.path.join(os.path.dirname(rootfs), "image.env")) as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                env[key] = value
    except OSError:
        pass
    return env


def built_hostile(env):
    """Whether image.env says the build was asked under umask 077 and a locale other than C."""
    try:
        umask = int(env.get("caller_umask", ""), 8)
    except ValueError:
        return False
    locale = env.get("caller_locale", "")
    return umask & 0o077 == 0o077 and locale not in ("", "C", "POSIX") and \
        not locale.startswith("C.")


def mirror_reachable():
    try:
        with urllib.request.urlopen(f"{MIRROR}/dists/bookworm/Release", timeout=15) as r:
            return r.status == 200
    except OSError:
        return False


class ImageModesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("building and reading the node image needs root")
        cls.tmp = None
        r = subprocess.run([BINARY, "image", "path", "--image-dir", IMAGE_DIR],
                           capture_output=True, text=True)
        rootfs = r.stdout.strip()
        if r.returncode == 0 and built_hostile(image_env(rootfs)):
            cls.rootfs, cls.how = rootfs, f"the suite's image {rootfs}"
            return
        if not (shutil.which("debootstrap") or os.path.exists("/usr/sbin/debootstrap")):
            raise unittest.SkipTest("no debootstrap (scripts/setup installs it as root)")
        if not mirror_reachable():
            raise unittest.SkipTest(f"{MIRROR} is not reachable")
        cls.tmp = tempfile.mkdtemp(prefix="hf-image-modes-", dir="/var/tmp")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LC_")}
        env["LANG"] = "de_DE.UTF-8"
        build = subprocess.run([BINARY, "image", "build", "--image-dir", cls.tmp], env=env,
                               preexec_fn=lambda: os.umask(0o077), capture_output=True,
                               text=True, timeout=540)
        if build.returncode != 0:
            raise AssertionError(f"image build failed: {build.stderr[-3000:]}")
        cls.rootfs, cls.how = build.stdout.strip(), f"a fresh build in {cls.tmp}"

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "tmp", None):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, p):
        return self.rootfs + p

    def users(self):
        names = {}
        with open(self.path("/etc/passwd")) as f:
            for line in f:
                fields = line.split(":")
                names[int(fields[2])] = fields[0]
        return names

    def test_recorded_the_hostile_build(self):
        env = image_env(self.rootfs)
        self.assertTrue(built_hostile(env), f"{self.how}: {env}")

    def test_paths_daemons_read(self):
        users = self.users()
        got, want = {}, {}
        for p, (mode, owner) in EXPECTED.items():
            st = os.lstat(self.path(p))
            got[p] = (oct(stat.S_IMODE(st.st_mode)), users.get(st.st_uid))
            want[p] = (oct(mode), owner)
        self.assertEqual(got, want, self.how)
        # /etc/slurm is HyperPod's /opt/slurm/etc, through the /opt/slurm link.
        self.assertEqual(os.readlink(self.path("/etc/slurm")), "/opt/slurm/etc")
        self.assertEqual(os.readlink(self.path("/opt/slurm")), "slurm-22.05.8")

    def test_no_directory_closed_to_others(self):
        closed = []
        for top, dirs, _ in os.walk(self.rootfs):
            rel = top[len(self.rootfs):] or "/"
            if rel in ("/proc", "/sys", "/dev", "/run", "/tmp"):
                dirs[:] = []
                continue
            mode = stat.S_IMODE(os.lstat(top).st_mode)
            if mode & 0o001 == 0 and rel not in PRIVATE_DIRS and not rel.startswith(PRIVATE_PREFIXES):
                closed.append(f"{oct(mode)} {rel}")
        self.assertEqual(closed, [], self.how)

    def test_no_unreadable_file_in_usr_opt_and_units(self):
        unreadable = []
        for top in ("/usr", "/opt", "/etc/systemd", "/etc/profile.d", "/etc/apt"):
            for d, _, files in os.walk(self.path(top)):
                for name in files:
                    p = os.path.join(d, name)
                    st = os.lstat(p)
                    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o004 == 0:
                        unreadable.append(f"{oct(stat.S_IMODE(st.st_mode))} {p[len(self.rootfs):]}")
        self.assertEqual(unreadable, [], self.how)


if __name__ == "__main__":
    main()
