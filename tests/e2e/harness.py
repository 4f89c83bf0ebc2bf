"""Shared harness of the integration and end-to-end tests: runs the real `hyperfleet server`
binary on a free loopback port with a private data directory, and waits on conditions with
deadlines (never on fixed sleeps)."""

import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("HYPERFLEET_BIN", os.path.join(REPO, "build", "bin", "hyperfleet"))
MODELS = os.path.join(REPO, "data", "aws-models")
ACCESS_KEY = "AKIAHYPERFLEETTEST01"
SECRET_KEY = "hyperfleet/test/secret/key/0123456789abcd"
REGION = "us-west-2"
ACCOUNT = "123456789012"


def kubernetes_bin():
    """The directory of the Kubernetes binaries scripts/kubernetes built (`scripts/kubernetes
    --path`). Without them the calling test is skipped, except under CI (CI set), where
    scripts/test has built them: there a missing build fails the test instead of hiding it."""
    r = subprocess.run([os.path.join(REPO, "scripts", "kubernetes"), "--path"],
                       capture_output=True, text=True)
    if r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip().splitlines()[-1]
    why = "Kubernetes is not built (scripts/kubernetes, or scripts/setup --eks)"
    if os.environ.get("CI"):
        raise AssertionError(why + ", under CI")
    raise unittest.SkipTest(why)


def wait_until(predicate, timeout=30.0, what="condition", interval=0.05):
    """Polls `predicate` until it returns a truthy value, which is returned; fails the test
    with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # the condition may not be checkable yet
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))


def mirror_addresses():
    """The IPv4 addresses of the Debian mirror (deb.debian.org), as /32s; none when it does
    not resolve (then local nodes reach only their resolvers)."""
    try:
        infos = socket.getaddrinfo("deb.debian.org", 80, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return ["192.0.2.1/32"]  # TEST-NET-1: routes nowhere; keeps the allow list non-empty
    return sorted({f"{info[4][0]}/32" for info in infos})


def agent_request(endpoint, cert_sha256, method, path, body=None, headers=None, timeout=30):
    """One request to a TLS agent endpoint (`hyperfleet server --agent-listen`) as an agent
    on a machine sends it: the server's certificate must have SHA-256 `cert_sha256` (pinned:
    no CA, no host name), checked after the handshake and before anything is sent, else
    ssl.SSLError. Returns (status, body bytes)."""
    host, port = endpoint.split("://", 1)[1].rsplit(":", 1)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the pin below is the check
    conn = http.client.HTTPSConnection(host.strip("[]"), int(port), timeout=timeout,
                                       context=context)
    try:
        conn.connect()
        seen = hashlib.sha256(conn.sock.getpeercert(binary_form=True)).hexdigest()
        if seen != cert_sha256:
            raise ssl.SSLError(f"agent endpoint certificate {seen} is not the pinned "
                               f"{cert_sha256}")
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class Server:
    """A control plane process. Use as a context manager or call start()/stop()."""

    def __init__(self, data_dir=None, boot_delay_ms=100, extra_args=(), provider="fake"):
        self.own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="hf-e2e-")
        self.boot_delay_ms = boot_delay_ms
        self.extra_args = ["--provider", provider, *extra_args]
        if provider == "local" and not any(a.startswith("--node-egress") for a in extra_args):
            # Test nodes reach nothing beyond this host but the Debian mirror.
            self.extra_args += ["--node-egress-allow", ",".join(mirror_addresses())]
        if provider == "local" and "--registry-port" not in extra_args:
            # No local registry unless a test asks for one on its own port: tests run two at a
            # time, and the default port would go to whichever server started first.
            self.extra_args += ["--registry-port", "0"]
        self.proc = None
        self.endpoint = None
        self.port = 0
        self.agent_endpoint = None  # with --agent-listen: https://HOST:PORT it is served on
        self.agent_url = None  # with --agent-listen: the URL machines are told
        self.agent_cert_sha256 = None  # with --agent-listen: its certificate's SHA-256

    def start(self, port=0):
        with open(os.path.join(self.data_dir, "server.log"), "ab") as log:
            self.proc = subprocess.Popen(
                [BINARY, "server", "--listen", f"127.0.0.1:{port}", "--data-dir", self.data_dir,
                 "--access-key-id", ACCESS_KEY, "--secret-access-key", SECRET_KEY,
                 "--fake-boot-delay-ms", str(self.boot_delay_ms), *self.extra_args],
                stdout=subprocess.PIPE, stderr=log, text=True)
        # The local provider may build its node image on first use (minutes).
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"server exited early (code {self.proc.poll()}); "
                                     f"see {self.data_dir}/server.log")
            if "agent endpoint on https://" in line:
                self.agent_endpoint = line.split(" on ", 1)[1].split()[0]
                self.agent_url = line.split(" for machines at ", 1)[1].split()[0]
                self.agent_cert_sha256 = line.split(" sha256 ", 1)[1].split(")")[0]
            if "listening on http://" in line:
                url = line.split("listening on ", 1)[1].split()[0]
                self.endpoint = url
                self.port = int(url.rsplit(":", 1)[1])
                # The server logs on stdout: read on into server.log, or a full pipe would
                # stop the server at its next log line.
                threading.Thread(target=self._drain, args=(self.proc.stdout,),
                                 daemon=True).start()
                return self
        raise AssertionError("server did not start within 900 s")

    def _drain(self, stdout):
        try:
            with open(os.path.join(self.data_dir, "server.log"), "a") as log:
                for line in stdout:
                    log.write(line)
                    log.flush()
        except (OSError, ValueError):
            pass  # closed by _release, or the data dir removed

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._release()

    def _release(self):
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        self.proc = None

    def kill9(self):
        """Kills the server with SIGKILL, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._release()

    def cleanup(self):
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


def local_node_pids(data_dir, iid):
    """Host pids of every process of local node `iid` (its cgroups) and of its supervisor
    and nspawn, for a server whose --data-dir is `data_dir`; empty once the node is gone."""
    with open(os.path.join(data_dir, "local", "fleet-id")) as f:
        fleet = f.read().strip()
    pids = set()
    for hierarchy in ("unified", "systemd"):
        root = f"/sys/fs/cgroup/{hierarchy}/hyperfleet/{fleet}/{iid}"
        for d, _, files in os.walk(root):
            if "cgroup.procs" in files:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids.update(int(p) for p in f.read().split())
    for name in ("supervisor.pid", "nspawn.pid"):
        try:
            with open(os.path.join(data_dir, "local", "nodes", iid, name)) as f:
                pids.add(int(f.read().strip()))
        except (OSError, ValueError):
            pass
    return pids


EKS_ROLE = f"arn:aws:iam::{ACCOUNT}:role/eks-cluster"
EKS_VPC = {"subnetIds": ["subnet-0a", "subnet-0b"], "securityGroupIds": ["sg-0a"]}


def gone(describe, not_found, **params):
    """Whether `describe(**params)` says the resource no longer exists."""
    try:
        describe(**params)
        return False
    except not_found:
        return True


class Kubectl:
    """kubectl of one EKS cluster of `server`, as a user runs it: a kubeconfig written by `aws
    eks update-kubeconfig` (its token from `aws eks get-token`, checked by the server's token
    webhook), or `kubeconfig` given (e.g. the control plane's admin.kubeconfig, which needs no
    server). Call with kubectl's arguments; AssertionError on failure unless check=False."""

    def __init__(self, server, bin_dir, cluster, kubeconfig=None):
        self.binary = os.path.join(bin_dir, "kubectl")
        self.env = aws_env(server.endpoint)
        self.kubeconfig = kubeconfig or os.path.join(server.data_dir, f"kubeconfig-{cluster}")
        if kubeconfig is None:
            subprocess.run(["aws", "eks", "update-kubeconfig", "--name", cluster,
                            "--kubeconfig", self.kubeconfig], env=self.env, check=True,
                           capture_output=True, timeout=60)

    def __call__(self, *args, check=True, timeout=120):
        r = subprocess.run([self.binary, "--kubeconfig", self.kubeconfig, *args], env=self.env,
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r

    def nodes(self):
        """{name: Node object} of every Node."""
        return {n["metadata"]["name"]: n
                for n in json.loads(self("get", "nodes", "-o", "json").stdout)["items"]}


def watch_events(stdout):
    """The events of `kubectl get KIND -w -o json --output-watch-events` read from its
    `stdout` (a pipe), as (arrival time.time(), type, object) until it ends; objects split
    across reads are put together first."""
    decoder, text = json.JSONDecoder(), ""
    while True:
        chunk = os.read(stdout.fileno(), 1 << 16)
        if not chunk:
            return
        now = time.time()
        text += chunk.decode(errors="replace")
        while True:
            text = text.lstrip()
            try:
                event, end = decoder.raw_decode(text)
            except ValueError:
                break  # an incomplete object: wait for more
            text = text[end:]
            yield now, event["type"], event["object"]


def node_ready(node):
    """Whether a Node object's Ready condition is True."""
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in node.get("status", {}).get("conditions", []))


def local_leftovers(data_dir):
    """What a local-provider server with data dir `data_dir` left on the host once everything
    is deleted and the server stopped: processes naming the dir (nodes, control planes),
    mounts under it, its fleet's network namespaces and nft table. [] when clean."""
    left = []
    r = subprocess.run(["pgrep", "-af", data_dir], capture_output=True, text=True)
    left += [f"process {line}" for line in r.stdout.splitlines() if line.strip()]
    with open("/proc/self/mountinfo") as f:
        left += [f"mount {line.split()[4]}" for line in f
                 if line.split()[4].startswith(data_dir)]
    try:
        with open(os.path.join(data_dir, "local", "fleet-id")) as f:
            fleet = f.read().strip()
    except OSError:
        return left
    if os.path.isdir("/run/netns"):
        left += [f"netns {ns}" for ns in os.listdir("/run/netns") if ns.startswith(f"hf-{fleet}-")]
    r = subprocess.run(["nft", "list", "table", "inet", f"hyperfleet-{fleet}"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        left.append(f"nft table inet hyperfleet-{fleet}:\n{r.stdout}")
    return left


def aws_env(endpoint=None):
    """Environment for AWS clients: our test key, region, and our model subset on
    AWS_DATA_PATH so that any aws CLI / botocore knows the HyperPod operations."""
    env = dict(os.environ)
    env.update({
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_PAGER": "",
        "AWS_DATA_PATH": MODELS,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
    })
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_SESSION_TOKEN", None)
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


def cluster_spec(name, groups=None, **extra):
    """A CreateCluster request: by default a controller group and a worker group."""
    if groups is None:
        groups = [("controller", "ml.c5.xlarge", 1), ("workers", "ml.c5.4xlarge", 2)]
    spec = {
        "ClusterName": name,
        "InstanceGroups": [{
            "InstanceGroupName": g,
            "InstanceType": t,
            "InstanceCount": n,
            "LifeCycleConfig": {"SourceS3Uri": "s3://hyperfleet-lc/scripts/",
                                "OnCreate": "on_create.sh"},
            "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/HyperPodRole",
            "ThreadsPerCore": 1,
        } for g, t, n in groups],
        "Orchestrator": {"Slurm": {"SlurmConfigStrategy": "Managed"}},
        "NodeRecovery": "Automatic",
    }
    spec.update(extra)
    return spec


def main():
    unittest.main(verbosity=2)
