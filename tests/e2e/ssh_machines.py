"""Test machines for the ssh provider's tests (a test fixture, not a product path): bare Debian
machines with openssh-server, each booted by systemd-nspawn in its own network namespace on a
bridge of its fleet, with its own address, host key and machine-id, reached only through ssh.

    with ssh_machines.Fleet(3) as fleet:          # layer "site" by default
        m = fleet.machines[0]
        m.ssh("uname -a")                         # pinned host key, the fleet's client key
        m.known_hosts_line, m.host_key_pub, m.address, fleet.key_path, fleet.host_address
        m.kill(); m.start()                       # SIGKILL of its whole cgroup; boot again
        m.link_down(); m.link_up()                # a dead network: timeouts, not refusals

Image: two cached layers under /var/lib/hyperfleet/images/test-machine-<key>/, each keyed by
its recipe (machine-image/build.sh, sshd_config, and for `site` the packages) and built once
under a flock when missing: `bare` = debootstrap minbase + systemd, openssh-server, sudo,
sshfs; `site` = bare + data/node-image/packages.txt without its last section (the hyperfleet
binary's runtime libraries), daemons disabled, so that provisioning needs no downloads.

Network: fleet slot N (the first free one) owns bridge hfsmN with 10.250.N.1/24 (the host's
address, `host_address`) and machines 10.250.N.(10+i). Machines reach each other and that one
host address, nothing else (no route out, and an nftables table drops the rest).

Cleanup: close() (context manager, atexit, SIGTERM) removes every process, mount, netns,
link, nftables table, cgroup and file of the fleet; a fleet left by a killed run is removed
when the next fleet starts. Everything here needs root.
"""

import atexit
import concurrent.futures
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RECIPE = os.path.join(HERE, "machine-image")
NODE_PACKAGES = os.path.join(REPO, "data", "node-image", "packages.txt")
IMAGES = "/var/lib/hyperfleet/images"
STATE = "/var/lib/hyperfleet/test-machines"
SUITE = os.environ.get("SUITE", "bookworm")
MIRROR = os.environ.get("MIRROR", "http://deb.debian.org/debian")
# Programs run here get this environment, not the caller's PATH, locale or umask.
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
FIRST_HOST = 10  # machine i (from 1) has address .(FIRST_HOST + i)


def _run(argv, check=True, **kw):
    r = subprocess.run(argv, env=ENV, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
    return r


# ---------------------------------------------------------------------------------------------
# The image

def site_packages():
    """The Debian packages of the `site` layer: data/node-image/packages.txt without its last
    paragraph (the hyperfleet binary's runtime libraries, which the portable node binary does
    not need)."""
    with open(NODE_PACKAGES) as f:
        paragraphs = [p for p in re.split(r"\n[ \t]*\n", f.read()) if p.strip()]
    names = []
    for p in paragraphs[:-1]:
        for line in p.splitlines():
            names += line.split("#", 1)[0].split()
    return names


def _digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() + b"\0")
    return h.hexdigest()[:16]


def layer_key(layer):
    """The cache key of `layer` ("bare" or "site"): changes with its recipe."""
    recipe = []
    for name in sorted(os.listdir(RECIPE)):
        with open(os.path.join(RECIPE, name)) as f:
            recipe.append(f"{name}\n{f.read()}")
    bare = _digest("bare", SUITE, MIRROR, *recipe)
    if layer == "bare":
        return bare
    if layer == "site":
        return _digest("site", bare, *site_packages())
    raise ValueError(f"unknown layer {layer!r} (bare or site)")


def image_dir(layer):
    return os.path.join(IMAGES, f"test-machine-{layer_key(layer)}")


def ensure_image(layer="site"):
    """Builds `layer` (and `bare` below `site`) when missing; parallel callers build once.
    Returns its directory, which holds image.env (key, build_seconds) and `rootfs` (bare) or
    `upper` (site: an overlay upper directory over bare's rootfs). Raises RuntimeError with
    the end of the build log when the build fails."""
    if layer == "site":
        ensure_image("bare")
    d = image_dir(layer)
    if os.path.exists(os.path.join(d, "image.env")):
        return d
    os.makedirs(IMAGES, exist_ok=True)
    with open(d + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(d, "image.env")):
            return d
        tmp = d + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)  # a build that died: its mounts died with it
        os.makedirs(tmp)
        os.chmod(tmp, 0o755)
        if layer == "bare":
            argv = ["bash", os.path.join(RECIPE, "build.sh"), "bare", os.path.join(tmp, "rootfs")]
        else:
            argv = ["bash", os.path.join(RECIPE, "build.sh"), "site", os.path.join(tmp, "upper"),
                    os.path.join(image_dir("bare"), "rootfs"), *site_packages()]
        started = time.monotonic()
        log_path = os.path.join(tmp, "build.log")
        with open(log_path, "w") as log:
            rc = subprocess.run(argv, env={**ENV, "SUITE": SUITE, "MIRROR": MIRROR},
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd="/").returncode
        if rc != 0:
            with open(log_path) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"building the {layer} test-machine image failed ({rc}):\n{tail}")
        seconds = time.monotonic() - started
        with open(os.path.join(tmp, "image.env"), "w") as f:
            f.write(f"key={layer_key(layer)}\nlayer={layer}\nsuite={SUITE}\nmirror={MIRROR}\n"
                    f"build_seconds={seconds:.0f}\n")
        os.rename(tmp, d)
    return d


def bare_rootfs():
    """The root filesystem of the `bare` layer (built when missing): Debian minbase with
    systemd and sshd, none of the build host's libraries. Read-only to callers."""
    return os.path.join(ensure_image("bare"), "rootfs")


def lower_dirs(layer):
    """The overlay lowerdir= value a machine of `layer` mounts."""
    bare = os.path.join(ensure_image("bare"), "rootfs")
    if layer == "bare":
        return bare
    return os.path.join(ensure_image("site"), "upper") + ":" + bare


# ---------------------------------------------------------------------------------------------
# Host resources of a fleet slot (names derived from the slot, so that a stale one is found)

def _cgroup_roots():
    """cgroup hierarchies a machine joins: the unified one, name=systemd and memory (v1)."""
    roots = []
    with open("/proc/self/mounts") as f:
        for line in f:
            _, mp, fstype, opts = line.split()[:4]
            if not mp.startswith("/sys/fs/cgroup"):
                continue
            if fstype == "cgroup2" or (fstype == "cgroup" and (
                    "name=systemd" in opts.split(",") or "memory" in opts.split(","))):
                roots.append(mp)
    return roots


def _cgroup_pids(path):
    pids = set()
    for d, _, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids.update(int(p) for p in f.read().split())
            except OSError:
                pass
    return pids


def _kill_cgroups(rel, timeout=10.0):
    """SIGKILLs every process in cgroup `rel` (under each hierarchy) until none is left.
    Returns True when they are all gone."""
    roots = _cgroup_roots()
    for root in roots:
        try:  # cgroup v2: the kernel kills the whole tree at once
            with open(os.path.join(root, rel, "cgroup.kill"), "w") as f:
                f.write("1")
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        pids = set()
        for root in roots:
            pids |= _cgroup_pids(os.path.join(root, rel))
        pids.discard(os.getpid())
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if not pids:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _rmdir_tree(path):
    if not os.path.isdir(path):
        return
    for d, dirs, _ in os.walk(path, topdown=False):
        for name in dirs:
            try:
                os.rmdir(os.path.join(d, name))
            except OSError:
                pass
    try:
        os.rmdir(path)
    except OSError:
        pass


def _mounts_under(prefix):
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == prefix or mp.startswith(prefix + "/"):
                points.append(mp)
    return sorted(points, key=len, reverse=True)


def _links():
    return [line.split(":")[1].strip().split("@")[0]
            for line in _run(["ip", "-o", "link", "show"]).stdout.splitlines()]


def _teardown_slot(n):
    """Removes everything fleet slot `n` may have created on this host."""
    machine = re.compile(rf"^hfsm{n}-\d+$")
    _kill_cgroups(f"hfsm/{n}")
    for mp in _mounts_under(os.path.join(STATE, str(n))):
        if _run(["umount", mp], check=False).returncode != 0:
            _run(["umount", "-l", mp], check=False)
    if os.path.isdir("/run/netns"):
        for name in os.listdir("/run/netns"):
            if machine.match(name):
                _run(["ip", "netns", "delete", name], check=False)
    veth = re.compile(rf"^hfsm{n}v\d+$")
    for link in _links():
        if link == f"hfsm{n}" or veth.match(link):
            _run(["ip", "link", "delete", link], check=False)
    _run(["nft", "delete", "table", "inet", f"hfsm{n}"], check=False)
    with _cgroup_lock():
        for root in _cgroup_roots():
            _rmdir_tree(os.path.join(root, "hfsm", str(n)))
            try:
                os.rmdir(os.path.join(root, "hfsm"))  # only when no other fleet has machines
            except OSError:
                pass
    for d in ("/run/systemd/nspawn/propagate", "/run/systemd/nspawn/unix-export"):
        if os.path.isdir(d):
            for name in os.listdir(d):
                if machine.match(name):
                    shutil.rmtree(os.path.join(d, name), ignore_errors=True)
    state = os.path.join(STATE, str(n))
    if os.path.isdir(state):  # nspawn's lock files of machines that were killed
        for name in os.listdir(state):
            try:
                with open(os.path.join(state, name, "nspawn-lock")) as f:
                    os.unlink(f.read().strip())
            except OSError:
                pass
    if not _mounts_under(state):  # never delete through a mount that would not go
        shutil.rmtree(state, ignore_errors=True)


class _cgroup_lock:
    """Host-wide: creating a machine's cgroups and removing the shared parent exclude each
    other."""

    def __enter__(self):
        os.makedirs(STATE, mode=0o700, exist_ok=True)
        self.f = open(os.path.join(STATE, "cgroup.lock"), "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        self.f.close()


def _slot_in_use_by_others(n):
    if f"hfsm{n}" in _links():
        return True
    return f" 10.250.{n}." in _run(["ip", "-4", "-o", "addr", "show"]).stdout


def _clean_stale():
    """Removes the fleets of runs that were killed: slots with resources but a free lock."""
    slots = set()
    if os.path.isdir(STATE):
        slots |= {int(e) for e in os.listdir(STATE) if e.isdigit()}
    slots |= {int(m.group(1)) for l in _links() if (m := re.match(r"^hfsm(\d+)(v\d+)?$", l))}
    if os.path.isdir("/run/netns"):
        slots |= {int(m.group(1)) for e in os.listdir("/run/netns")
                  if (m := re.match(r"^hfsm(\d+)-\d+$", e))}
    for n in sorted(slots):
        with open(os.path.join(STATE, f"{n}.lock"), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live fleet
            _teardown_slot(n)


def _claim_slot():
    """Takes the first free fleet slot (1..254), after removing stale fleets. Returns (n, the
    open lock file, held until close)."""
    os.makedirs(STATE, mode=0o700, exist_ok=True)
    _clean_stale()
    for n in range(1, 255):
        lock = open(os.path.join(STATE, f"{n}.lock"), "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        if _slot_in_use_by_others(n):
            lock.close()
            continue
        return n, lock
    raise RuntimeError("no free test-machine fleet slot (10.250.1-254.0/24)")


def _firewall(n):
    """Machines reach each other and the host's bridge address; nothing else."""
    br = f"hfsm{n}"
    return f"""table inet {br} {{
\tchain forward {{
\t\ttype filter hook forward priority filter; policy accept;
\t\tiifname "{br}" oifname "{br}" accept
\t\tiifname "{br}" drop
\t\toifname "{br}" drop
\t}}
\tchain input {{
\t\ttype filter hook input priority filter; policy accept;
\t\tiifname "{br}" meta nfproto ipv6 drop
\t\tiifname "{br}" ip daddr != 10.250.{n}.1 drop
\t}}
}}
"""


# ---------------------------------------------------------------------------------------------
# Machines

class Machine:
    """One test machine of a Fleet. Its disk (an overlay upper directory) lives as long as the
    fleet: kill() then start() boots the same disk again."""

    def __init__(self, fleet, index):
        self.fleet = fleet
        self.index = index
        self.name = f"hfsm{fleet.slot}-{index}"  # also its hostname, nspawn machine and netns
        self.netns = self.name
        self.veth = f"hfsm{fleet.slot}v{index}"
        self.address = f"10.250.{fleet.slot}.{FIRST_HOST + index}"
        self.dir = os.path.join(fleet.dir, self.name)
        self.root = os.path.join(self.dir, "root")
        self.cgroup = f"hfsm/{fleet.slot}/{self.name}"
        self.known_hosts_file = os.path.join(self.dir, "known_hosts")
        self.host_key_pub = None  # "ssh-ed25519 AAAA..."
        self.known_hosts_line = None  # "<address> ssh-ed25519 AAAA..."
        self._supervisor = None

    # -- creation ----------------------------------------------------------------------------
    def _create(self):
        for d in ("upper", "work", "root"):
            os.makedirs(os.path.join(self.dir, d))
            os.chmod(os.path.join(self.dir, d), 0o755)  # the machine's "/": not the umask's
        _run(["mount", "-t", "overlay", "overlay", "-o",
              f"lowerdir={self.fleet.lower},upperdir={self.dir}/upper,workdir={self.dir}/work",
              self.root])
        key = os.path.join(self.dir, "ssh_host_ed25519_key")
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.name, "-f", key])
        with open(key + ".pub") as f:
            self.host_key_pub = " ".join(f.read().split()[:2])
        self.known_hosts_line = f"{self.address} {self.host_key_pub}"
        with open(self.known_hosts_file, "w") as f:
            f.write(self.known_hosts_line + "\n")
        etc = os.path.join(self.root, "etc")
        shutil.copyfile(key, os.path.join(etc, "ssh", "ssh_host_ed25519_key"))
        os.chmod(os.path.join(etc, "ssh", "ssh_host_ed25519_key"), 0o600)
        shutil.copyfile(key + ".pub", os.path.join(etc, "ssh", "ssh_host_ed25519_key.pub"))
        os.chmod(os.path.join(etc, "ssh", "ssh_host_ed25519_key.pub"), 0o644)
        self._write(os.path.join(etc, "hostname"), self.name + "\n", 0o644)
        self._write(os.path.join(etc, "machine-id"), uuid.uuid4().hex + "\n", 0o444)
        with open(os.path.join(etc, "hosts"), "a") as f:
            f.write(f"{self.address}\t{self.name}\n")
        ssh_dir = os.path.join(self.root, "root", ".ssh")
        os.makedirs(ssh_dir, mode=0o700, exist_ok=True)
        self._write(os.path.join(ssh_dir, "authorized_keys"), self.fleet.public_key + "\n", 0o600)
        br, ns = f"hfsm{self.fleet.slot}", self.netns
        _run(["ip", "netns", "add", ns])
        _run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0",
              "netns", ns])
        _run(["ip", "link", "set", self.veth, "master", br, "up"])
        _run(["ip", "-n", ns, "addr", "add", f"{self.address}/24", "dev", "eth0"])
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        with open(os.path.join(self.dir, "machine.json"), "w") as f:
            json.dump({"name": self.name, "root": self.root, "netns": self.netns,
                       "cgroup": self.cgroup, "fuse": os.path.exists("/dev/fuse")}, f)

    @staticmethod
    def _write(path, text, mode):
        if os.path.lexists(path):
            os.unlink(path)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, wait=True, timeout=60.0):
        """Boots the machine (on its existing disk) under a supervisor that boots it again
        after a reboot (systemd-nspawn exit 133); with `wait`, returns once ssh answers."""
        if self.running():
            raise RuntimeError(f"{self.name} is running")
        for d in ("/run/systemd/nspawn/propagate", "/run/systemd/nspawn/unix-export"):
            shutil.rmtree(os.path.join(d, self.name), ignore_errors=True)
        # The lock file nspawn keeps for this root (left behind when the machine is killed).
        st = os.stat(self.root)
        with open(os.path.join(self.dir, "nspawn-lock"), "w") as f:
            f.write(f"/run/systemd/nspawn/locks/inode-{st.st_dev}:{st.st_ino}\n")
        with _cgroup_lock():
            for root in _cgroup_roots():
                os.makedirs(os.path.join(root, self.cgroup), exist_ok=True)
        with open(os.path.join(self.dir, "console.log"), "ab") as log:
            self._supervisor = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "supervise", self.dir],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd="/",
                env=ENV, start_new_session=True)
        if wait:
            self.wait_ssh(timeout)
        return self

    def wait_ssh(self, timeout=60.0):
        """Returns once `ssh true` succeeds; AssertionError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self._supervisor is not None and self._supervisor.poll() is not None:
                raise AssertionError(f"{self.name}: its supervisor exited "
                                     f"({self._supervisor.returncode}); see {self.dir}/console.log")
            try:
                socket.create_connection((self.address, 22), timeout=1).close()
            except OSError as e:
                last = e
                time.sleep(0.02)
                continue
            r = self.ssh("true", timeout=10, connect_timeout=2)
            if r.returncode == 0:
                return
            last = r.stderr.strip()
            time.sleep(0.05)
        raise AssertionError(f"{self.name} ({self.address}) did not answer ssh within "
                             f"{timeout}s (last: {last}); see {self.dir}/console.log")

    def pids(self):
        """Host pids of every process of the machine (its supervisor, nspawn, its init and
        everything under it)."""
        pids = set()
        for root in _cgroup_roots():
            pids |= _cgroup_pids(os.path.join(root, self.cgroup))
        return pids

    def running(self):
        return bool(self.pids())

    def kill(self):
        """SIGKILL to every process of the machine's cgroup, as a power loss: its supervisor
        too, so nothing boots it again until start(). Returns when none is left."""
        if not _kill_cgroups(self.cgroup):
            raise RuntimeError(f"{self.name}: processes survived SIGKILL: {self.pids()}")
        if self._supervisor is not None:
            self._supervisor.wait()
            self._supervisor = None

    def poweroff(self, timeout=30.0):
        """A clean shutdown over ssh (`systemctl poweroff`); returns once no process of the
        machine is left. start() boots it again."""
        self.ssh("systemctl poweroff", timeout=timeout)
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not power off within {timeout}s")
            time.sleep(0.05)
        if self._supervisor is not None:
            self._supervisor.wait()
            self._supervisor = None

    def link_down(self):
        """Takes the machine's network link down: connections to it time out (also after the
        host's ARP entry would have expired: it is pinned, so the host keeps sending frames
        into the dead link rather than answering "No route to host")."""
        out = _run(["ip", "-n", self.netns, "-o", "link", "show", "eth0"]).stdout
        mac = out.split("link/ether ", 1)[1].split()[0]
        _run(["ip", "neigh", "replace", self.address, "lladdr", mac, "dev",
              f"hfsm{self.fleet.slot}", "nud", "permanent"])
        _run(["ip", "-n", self.netns, "link", "set", "eth0", "down"])

    def link_up(self):
        _run(["ip", "-n", self.netns, "link", "set", "eth0", "up"])
        _run(["ip", "neigh", "del", self.address, "dev", f"hfsm{self.fleet.slot}"], check=False)

    @property
    def reboot_count(self):
        """How many times the machine rebooted (systemd-nspawn exited 133) since the fleet
        started."""
        try:
            with open(os.path.join(self.dir, "reboots")) as f:
                return int(f.read().strip() or 0)
        except FileNotFoundError:
            return 0

    def boot_id(self):
        """The machine's /proc/sys/kernel/random/boot_id, read over ssh."""
        r = self.ssh("cat /proc/sys/kernel/random/boot_id", check=True)
        return r.stdout.strip()

    def memory_bytes(self):
        """Memory charged to the machine's cgroup (bytes), or None when not measurable."""
        for root in _cgroup_roots():
            for knob in ("memory.usage_in_bytes", "memory.current"):
                try:
                    with open(os.path.join(root, self.cgroup, knob)) as f:
                        return int(f.read())
                except (OSError, ValueError):
                    continue
        return None

    # -- ssh ---------------------------------------------------------------------------------
    def ssh_argv(self, command=None, known_hosts=None, connect_timeout=5, user="root"):
        """argv of the OpenSSH client to this machine: the fleet's key, BatchMode, host key
        pinned by a known_hosts file (this machine's own unless `known_hosts` is given)."""
        argv = ["ssh", "-F", "/dev/null", "-i", self.fleet.key_path,
                "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={known_hosts or self.known_hosts_file}",
                "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", f"ConnectTimeout={connect_timeout}", "-o", "LogLevel=ERROR",
                "-l", user, self.address]
        if command is not None:
            argv.append(command)
        return argv

    def add_login_user(self, name):
        """Creates user `name` (over ssh as root) who logs in with the fleet's key and has
        password-less sudo, as an operator's ssh user on a real server. Idempotent."""
        self.ssh(f"id -u {name} >/dev/null 2>&1 || useradd -m -s /bin/bash {name}; "
                 f"echo '{name} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/90-{name}; "
                 f"chmod 440 /etc/sudoers.d/90-{name}; "
                 f"install -d -m 700 -o {name} -g {name} ~{name}/.ssh; "
                 f"install -m 600 -o {name} -g {name} /root/.ssh/authorized_keys ~{name}/.ssh/",
                 check=True)

    def ssh(self, command, timeout=60, check=False, input=None, known_hosts=None,
            connect_timeout=5, user="root"):
        """Runs `command` (a shell line) on the machine as `user` (root by default); a
        CompletedProcess (text). Exit 255 is ssh's own failure (refused, timed out, host
        key)."""
        r = subprocess.run(self.ssh_argv(command, known_hosts, connect_timeout, user),
                           input=input, capture_output=True, text=True, timeout=timeout,
                           env=ENV, stdin=None if input is not None else subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"{self.name}: `{command}` exited {r.returncode}: "
                                 f"{r.stderr.strip()}")
        return r


# ---------------------------------------------------------------------------------------------
# Fleets

_open_fleets = set()
_open_lock = threading.Lock()


@atexit.register
def _close_all():
    for fleet in list(_open_fleets):
        fleet.close()


class Fleet:
    """`n` test machines of `layer` ("site" or "bare") on bridge hfsm<slot>, subnet
    10.250.<slot>.0/24; a context manager. `slot` (1..254) or `subnet` ("10.250.<slot>.0/24")
    picks it (or `bridge`, "hfsm<slot>"); by default the first free one. `timeout`: seconds
    a machine may take to answer ssh after it is started."""

    def __init__(self, n, layer="site", slot=None, subnet=None, bridge=None, boot=True,
                 timeout=120.0):
        if bridge is not None:  # names derive from the slot: how a stale fleet is found
            m = re.fullmatch(r"hfsm(\d+)", bridge)
            if not m or not 1 <= int(m.group(1)) <= 254:
                raise ValueError(f"bridge {bridge!r}: must be hfsmN with N in 1..254")
            slot = int(m.group(1))
        if subnet is not None:
            m = re.fullmatch(r"10\.250\.(\d+)\.0/24", subnet)
            if not m or not 1 <= int(m.group(1)) <= 254:
                raise ValueError(f"subnet {subnet!r}: must be 10.250.N.0/24 with N in 1..254")
            slot = int(m.group(1))
        self.n = n
        self.layer = layer
        self.requested_slot = slot
        self.boot = boot
        self.timeout = timeout
        self.machines = []
        self.slot = None
        self._lock = None

    def start(self):
        self.lower = lower_dirs(self.layer)  # builds the image when missing
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # runs atexit's cleanup
        if self.requested_slot is None:
            self.slot, self._lock = _claim_slot()
        else:
            self.slot = self.requested_slot
            os.makedirs(STATE, mode=0o700, exist_ok=True)
            lock = open(os.path.join(STATE, f"{self.slot}.lock"), "a")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                raise RuntimeError(f"test-machine slot {self.slot} is used by a running fleet")
            _teardown_slot(self.slot)  # a stale fleet's
            if _slot_in_use_by_others(self.slot):
                lock.close()
                raise RuntimeError(f"10.250.{self.slot}.0/24 or hfsm{self.slot} is in use on "
                                   "this host")
            self._lock = lock
        with _open_lock:
            _open_fleets.add(self)
        try:
            self.bridge = f"hfsm{self.slot}"
            self.host_address = f"10.250.{self.slot}.1"
            self.subnet = f"10.250.{self.slot}.0/24"
            self.dir = os.path.join(STATE, str(self.slot))
            os.makedirs(self.dir, mode=0o700)
            self.key_path = os.path.join(self.dir, "client_key")
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hyperfleet-test",
                  "-f", self.key_path])
            with open(self.key_path + ".pub") as f:
                self.public_key = f.read().strip()
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            with open(f"/proc/sys/net/ipv6/conf/{self.bridge}/disable_ipv6", "w") as f:
                f.write("1")  # machines reach the host over IPv4 only
            _run(["ip", "addr", "add", f"{self.host_address}/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
            _run(["nft", "-f", "-"], input=_firewall(self.slot))
            for _ in range(self.n):
                self.add(boot=False)
            if self.boot:
                self.boot_all(self.machines)
        except BaseException:
            self.close()
            raise
        return self

    def add(self, boot=True):
        """Creates one more machine (booted unless `boot` is False)."""
        m = Machine(self, len(self.machines) + 1)
        self.machines.append(m)
        m._create()
        if boot:
            m.start(timeout=self.timeout)
        return m

    def boot_all(self, machines):
        """Boots `machines` at once and waits until each answers ssh."""
        for m in machines:
            m.start(wait=False)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(machines))) as pool:
            for f in [pool.submit(m.wait_ssh, self.timeout) for m in machines]:
                f.result()

    def close(self):
        """Removes everything of the fleet; safe to call twice."""
        if self.slot is None or self._lock is None:
            return
        for m in self.machines:
            if m._supervisor is not None:
                _kill_cgroups(m.cgroup)
                m._supervisor.wait()
                m._supervisor = None
        _teardown_slot(self.slot)
        self._lock.close()
        self._lock = None
        with _open_lock:
            _open_fleets.discard(self)

    def __enter__(self):
        return self if self._lock is not None else self.start()  # start() may come first

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------------------------
# The supervisor (a process per machine, in the machine's cgroups)

def _supervise(machine_dir):
    with open(os.path.join(machine_dir, "machine.json")) as f:
        m = json.load(f)
    # Its own cgroup in every hierarchy nspawn uses, before nspawn starts: on a hybrid host
    # nspawn nests the payload under its own v2 cgroup, and machines sharing one collide.
    for root in _cgroup_roots():
        path = os.path.join(root, m["cgroup"])  # made by Machine.start()
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    argv = ["systemd-nspawn", "--boot", "--register=no", "--keep-unit", "--quiet",
            "-D", m["root"], f"--machine={m['name']}", f"--hostname={m['name']}",
            f"--network-namespace-path=/run/netns/{m['netns']}", "--resolv-conf=off",
            "--timezone=off", "--link-journal=no", "--console=read-only",
            # Root of a real machine configures its own network (IMDS address, routes);
            # this one only its own namespace.
            "--capability=CAP_NET_ADMIN"]
    if m["fuse"]:
        argv.append("--bind=/dev/fuse")
    try:  # counted across kill() and start() too
        with open(os.path.join(machine_dir, "reboots")) as f:
            reboots = int(f.read().strip() or 0)
    except FileNotFoundError:
        reboots = 0
    while True:
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL,
                            env={**ENV, "SYSTEMD_NSPAWN_TMPFS_TMP": "0"}).returncode
        if rc != 133:
            print(f"supervisor: systemd-nspawn exited {rc}", flush=True)
            return 0 if rc == 0 else 1
        reboots += 1
        with open(os.path.join(machine_dir, "reboots.tmp"), "w") as f:
            f.write(f"{reboots}\n")
        os.rename(os.path.join(machine_dir, "reboots.tmp"), os.path.join(machine_dir, "reboots"))
        print("supervisor: the machine rebooted; booting it again", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "supervise":
        os.umask(0o022)
        sys.exit(_supervise(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "image":
        print(ensure_image(sys.argv[2]))
        sys.exit(0)
    print("usage: ssh_machines.py image bare|site | supervise MACHINE_DIR", file=sys.stderr)
    sys.exit(2)
