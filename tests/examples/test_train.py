#!/usr/bin/env python3
"""Tests examples/training/train.py without Slurm: ranks are local subprocesses that share a
temporary run directory, as Slurm tasks share /fsx.

The job needs numpy; its ranks run under the first of this python3 and Debian's /usr/bin/python3
that has it (scripts/setup --test installs python3-numpy), and the tests fail when neither does.
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                     "training", "train.py")
STEPS = 80           # enough for the loss to pass the default threshold; <1 s with 2 ranks
PROC_TIMEOUT = 60    # seconds any one launch may take before the test gives up on it


def numpy_python():
    """A python3 that can import numpy, or None."""
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", "import numpy"], capture_output=True).returncode == 0:
            return py
    return None


PY = numpy_python()


def read_result(run_dir):
    """The run's result.json, or None when there is none."""
    try:
        with open(os.path.join(run_dir, "result.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


class Run:
    """One launch of the job: `world_size` rank processes in one run directory."""

    def __init__(self, run_dir, world_size, *args, ranks=None, rank_args=None):
        self.run_dir = run_dir
        self.procs = {}
        for r in (range(world_size) if ranks is None else ranks):
            cmd = [PY, TRAIN, "--rank", str(r), "--world-size", str(world_size),
                   "--run-dir", run_dir, "--steps", str(STEPS), *args,
                   *((rank_args or {}).get(r, []))]
            self.procs[r] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True)

    def wait(self, timeout=PROC_TIMEOUT):
        """{rank: (returncode, stdout, stderr)}; kills everything when one is too slow."""
        out = {}
        try:
            for r, p in self.procs.items():
                o, e = p.communicate(timeout=timeout)
                out[r] = (p.returncode, o, e)
        finally:
            self.kill()
        return out

    def kill(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()


class TrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if PY is None:
            raise RuntimeError("no python3 with numpy (Debian: python3-numpy); "
                               "run scripts/setup --test")
        cls.tmp = tempfile.mkdtemp(prefix="hf-train-test-")
        # The undisturbed two-rank run every other two-rank run must reproduce bit for bit.
        cls.reference_dir = os.path.join(cls.tmp, "reference")
        run = Run(cls.reference_dir, 2)
        cls.reference_out = run.wait()
        cls.reference = read_result(cls.reference_dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def new_dir(self, name):
        return os.path.join(self.tmp, name)

    def assertPassed(self, out, world_size):
        for r, (rc, o, e) in out.items():
            self.assertEqual(rc, 0, f"rank {r} failed:\n{o}\n{e}")
        text = out[0][1]
        self.assertIn(f"training: {world_size} ranks", text)
        m = re.search(r"^final loss ([0-9.]+) \(threshold ([0-9.]+)\): PASS$", text, re.M)
        self.assertIsNotNone(m, text)
        sha = re.search(r"^weights sha256 ([0-9a-f]{64})$", text, re.M)
        self.assertIsNotNone(sha, text)
        return sha.group(1)

    def reference_sha(self):
        """The undisturbed run's weights checksum; fails the test when that run did not pass."""
        self.assertIsNotNone(self.reference, "the reference run wrote no result.json:\n%s"
                             % self.reference_out)
        return self.reference["weights_sha256"]

    def test_run_passes_and_writes_result(self):
        sha = self.assertPassed(self.reference_out, 2)
        res = self.reference
        self.assertIsNotNone(res, "no result.json")
        self.assertEqual(res["weights_sha256"], sha)
        self.assertTrue(res["passed"])
        self.assertLess(res["loss"], res["threshold"])
        self.assertEqual((res["steps"], res["world_size"], res["resumed_from"]), (STEPS, 2, None))
        self.assertIn(f"step 20/{STEPS} loss", self.reference_out[0][1])
        # The finished run leaves no exchange files behind.
        self.assertEqual(os.listdir(os.path.join(self.reference_dir, "allreduce")), [])

    def test_second_run_is_bit_identical(self):
        run = Run(self.new_dir("second"), 2)
        self.assertEqual(self.assertPassed(run.wait(), 2), self.reference_sha())

    def test_stop_and_resume_is_bit_identical(self):
        # 32 steps of 256 are one epoch of 8192: resuming there also draws a new data order.
        for k in (7, 32):
            with self.subTest(stop_after=k):
                d = self.new_dir(f"stop{k}")
                out = Run(d, 2, "--stop-after-step", str(k)).wait()
                for r, (rc, o, e) in out.items():
                    self.assertEqual(rc, 75, f"rank {r}:\n{o}\n{e}")
                self.assertFalse(os.path.exists(os.path.join(d, "result.json")))
                out = Run(d, 2).wait()
                sha = self.assertPassed(out, 2)
                for r in out:
                    self.assertIn(f"rank {r}: resumed from step {k}", out[r][1])
                self.assertEqual(sha, self.reference_sha())
                self.assertEqual(read_result(d)["resumed_from"], k)

    def test_sigkill_at_a_random_moment_then_resume(self):
        seed = random.randrange(1 << 30)
        rnd = random.Random(seed)
        d = self.new_dir("killed")
        run = Run(d, 2, "--log-every", "1")
        checkpoint = os.path.join(d, "checkpoint", "checkpoint.npz")
        deadline = time.monotonic() + PROC_TIMEOUT
        while not os.path.exists(checkpoint):
            self.assertLess(time.monotonic(), deadline, "no checkpoint appeared")
            self.assertIsNone(run.procs[0].poll(), "rank 0 ended before its first checkpoint")
            time.sleep(0.005)
        kill_at = rnd.randrange(11, STEPS // 2)
        for line in run.procs[0].stdout:  # rank 0's progress, one line per step
            if line.startswith(f"step {kill_at}/"):
                break
        order = list(run.procs.values())
        rnd.shuffle(order)
        for p in order:
            self.assertIsNone(p.poll(), f"a rank ended before the kill (seed {seed})")
            p.send_signal(signal.SIGKILL)
        run.wait()
        out = Run(d, 2).wait()
        sha = self.assertPassed(out, 2)
        m = re.search(r"^rank 0: resumed from step (\d+)$", out[0][1], re.M)
        self.assertIsNotNone(m, out[0][1])
        resumed = int(m.group(1))
        self.assertTrue(10 <= resumed <= STEPS and resumed % 10 == 0,
                        f"resumed from {resumed}, killed after step {kill_at} (seed {seed})")
        self.assertEqual(sha, self.reference_sha(), f"seed {seed}")

    def test_world_size_one(self):
        out = Run(self.new_dir("single"), 1).wait()
        self.assertPassed(out, 1)
        self.assertEqual(read_result(self.new_dir("single"))["world_size"], 1)

    def test_missing_rank_fails_clearly_before_the_deadline(self):
        timeout = 3
        start = time.monotonic()
        cases = {
            # rank 1 never starts: rank 0 gives up at the rendezvous
            "no rank 1": (Run(self.new_dir("no1"), 2, "--sync-timeout", str(timeout), ranks=[0]),
                          0, "waiting for ranks [1] to join"),
            # rank 0 never starts: rank 1 gives up waiting for its session
            "no rank 0": (Run(self.new_dir("no0"), 2, "--sync-timeout", str(timeout), ranks=[1]),
                          1, "waiting for rank 0 to start a session"),
            # rank 1 vanishes after step 5: rank 0 gives up waiting for its step-6 gradients
            "rank 1 vanishes": (Run(self.new_dir("gone1"), 2, "--sync-timeout", str(timeout),
                                    rank_args={1: ["--stop-after-step", "5"]}),
                                0, "waiting for step 6 gradients from ranks [1]"),
        }
        for name, (run, rank, message) in cases.items():
            with self.subTest(name):
                out = run.wait(timeout=timeout + 20)
                rc, o, e = out[rank]
                self.assertEqual(rc, 1, f"{o}\n{e}")
                self.assertIn(f"rank {rank} of 2: error: timed out after {timeout} s " + message,
                              e)
        self.assertLess(time.monotonic() - start, timeout + 15)


if __name__ == "__main__":
    unittest.main(verbosity=2)
