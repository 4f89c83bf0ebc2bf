#!/usr/bin/env python3
"""Data-parallel training through a shared directory: the Slurm quick start's example job.

Every task (one per `srun` rank) trains the same 2-layer MLP on a synthetic, seeded dataset.
Each step the ranks split the global minibatch, write their gradient sums to files under
--run-dir, read back every rank's file in rank order and apply the same Adam update, so all
ranks hold bit-identical weights. Rank 0 checkpoints atomically; a relaunched job resumes from
the checkpoint and ends with the same weights as an undisturbed run (same world size).

Rank and world size: --rank/--world-size, else SLURM_PROCID/SLURM_NTASKS, else RANK/WORLD_SIZE.
Exit status: 0 passed, 1 loss not below --threshold or an error (e.g. a rank that does not
show up within --sync-timeout), 75 after --stop-after-step.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import time
import uuid

# One BLAS thread per rank: the ranks share the node's CPUs, and a fixed thread count keeps
# every rank's arithmetic the same from run to run.
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")
import numpy as np  # noqa: E402

PARAMS = ("w1", "b1", "w2", "b2")
# Settings that define the trajectory: a checkpoint written under other values is refused.
TRAJECTORY = ("seed", "samples", "features", "classes", "hidden", "batch_size", "lr")


class SyncTimeout(RuntimeError):
    """A rank did not show up (or publish a file) within --sync-timeout seconds."""


def parse_args(argv):
    """Command line (argv, None for sys.argv) and Slurm/launcher environment -> settings."""
    env = os.environ
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rank", type=int, default=int(env.get("SLURM_PROCID", env.get("RANK", 0))))
    p.add_argument("--world-size", type=int,
                   default=int(env.get("SLURM_NTASKS", env.get("WORLD_SIZE", 1))))
    job = env.get("SLURM_JOB_NAME") or env.get("SLURM_JOB_ID") or "local"
    p.add_argument("--run-dir", default=os.path.join("/fsx/train", job))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=256, help="global minibatch (all ranks)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--threshold", type=float, default=0.05, help="final loss must be below it")
    p.add_argument("--sync-timeout", type=float, default=120.0,
                   help="seconds to wait for the other ranks at any one point")
    p.add_argument("--stop-after-step", type=int, default=None,
                   help="exit 75 once this step is done and checkpointed (tests)")
    p.add_argument("--min-step-seconds", type=float, default=0.0,
                   help="make each step last at least this long (tests that need a job still "
                        "running on a fast machine); the result does not change")
    a = p.parse_args(argv)
    if not 0 <= a.rank < a.world_size:
        p.error(f"rank {a.rank} is not in [0, {a.world_size})")
    if a.batch_size < a.world_size or a.batch_size > a.samples:
        p.error("--batch-size must be at least --world-size and at most --samples")
    return a


def write_atomic(path, write, sync=False):
    """Writes `path` through write(file) to a temporary name, then renames it into place, so
    readers (and a later run after a SIGKILL) see either the old file or the whole new one."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path, obj, sync=False):
    """write_atomic() of obj as JSON."""
    write_atomic(path, lambda f: f.write(json.dumps(obj, sort_keys=True).encode()), sync)


def read_json(path):
    """The JSON object in path, or None when there is no such file."""
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        return None


def wait_for(what, ready, timeout):
    """Polls ready() (a value or None) until it returns a value; SyncTimeout after `timeout` s
    with a message built by what()."""
    deadline, pause = time.monotonic() + timeout, 0.0005
    while True:
        value = ready()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise SyncTimeout(f"timed out after {timeout:g} s waiting for {what()}")
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def make_data(a):
    """The synthetic task: which of `classes` Gaussian clusters (unit variance, seeded random
    centres) a point came from. Returns X (samples, features) float64 and y (samples,) ints."""
    rng = np.random.default_rng([a.seed, 0])
    centres = 0.7 * rng.standard_normal((a.classes, a.features))
    y = rng.integers(0, a.classes, a.samples)
    return centres[y] + rng.standard_normal((a.samples, a.features)), y


def init_state(a):
    """Step-0 training state: weights, Adam moments, the data-order RNG and data position."""
    rng = np.random.default_rng([a.seed, 1])
    params = {
        "w1": rng.standard_normal((a.features, a.hidden)) / np.sqrt(a.features),
        "b1": np.zeros(a.hidden),
        "w2": rng.standard_normal((a.hidden, a.classes)) / np.sqrt(a.hidden),
        "b2": np.zeros(a.classes),
    }
    order = np.random.default_rng([a.seed, 2])
    return {
        "step": 0, "epoch": 0, "offset": 0, "perm": order.permutation(a.samples), "order": order,
        "params": params,
        "m": {k: np.zeros_like(v) for k, v in params.items()},
        "v": {k: np.zeros_like(v) for k, v in params.items()},
    }


def loss_and_grads(params, x, y):
    """Summed (not averaged) softmax cross-entropy over the rows of x and its gradient for
    every parameter, packed into one flat float64 vector: the grads in PARAMS order, then the
    loss sum."""
    h = np.tanh(x @ params["w1"] + params["b1"])
    z = h @ params["w2"] + params["b2"]
    z -= z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = np.arange(len(y))
    dz = np.exp(logp)
    dz[rows, y] -= 1.0
    da = (dz @ params["w2"].T) * (1.0 - h * h)
    grads = [x.T @ da, da.sum(axis=0), h.T @ dz, dz.sum(axis=0)]
    return np.concatenate([g.ravel() for g in grads] + [[-logp[rows, y].sum()]])


def checkpoint_path(a):
    """The one checkpoint file of the run directory (replaced, never written in place)."""
    return os.path.join(a.run_dir, "checkpoint", "checkpoint.npz")


def save_checkpoint(a, st):
    """Rank 0 only: everything a resumed run needs to continue bit-identically."""
    arrays = {f"param_{k}": v for k, v in st["params"].items()}
    arrays.update({f"m_{k}": v for k, v in st["m"].items()})
    arrays.update({f"v_{k}": v for k, v in st["v"].items()})
    meta = {"step": st["step"], "epoch": st["epoch"], "offset": st["offset"],
            "order_rng": st["order"].bit_generator.state, "world_size": a.world_size,
            "config": {k: getattr(a, k) for k in TRAJECTORY}}
    write_atomic(checkpoint_path(a),
                 lambda f: np.savez(f, perm=st["perm"], meta=np.array(json.dumps(meta)), **arrays),
                 sync=True)


def load_checkpoint(a):
    """The saved training state, or None when there is no checkpoint; ValueError when it was
    written with different TRAJECTORY settings."""
    try:
        with np.load(checkpoint_path(a)) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        return None
    want = {k: getattr(a, k) for k in TRAJECTORY}
    if meta["config"] != want:
        raise ValueError(f"checkpoint {checkpoint_path(a)} was written with {meta['config']}, "
                         f"not {want}: use another --run-dir")
    if meta["world_size"] != a.world_size:
        print(f"note: checkpoint written by {meta['world_size']} ranks, now {a.world_size}: "
              "sums are grouped differently, so the last bits of the result will differ")
    order = np.random.default_rng()
    order.bit_generator.state = meta["order_rng"]
    return {"step": meta["step"], "epoch": meta["epoch"], "offset": meta["offset"],
            "perm": arrays["perm"], "order": order,
            **{g: {k: arrays[f"{p}_{k}"] for k in PARAMS}
               for g, p in (("params", "param"), ("m", "m"), ("v", "v"))}}


def rendezvous(a):
    """Brings all ranks together at start and returns (attempt id, training state).

    Files left by an earlier, killed attempt must not be mistaken for this one's: each
    follower writes hello-<rank> with a fresh nonce and only accepts a session.json from
    rank 0 that lists its nonce (rank 0 republishes when a hello changes); it acks with the
    attempt id. Rank 0 replaces the checkpoint only after every rank's gradients of a later
    step arrived, i.e. after every rank has loaded the checkpoint the session names."""
    rdv = os.path.join(a.run_dir, "rendezvous")
    os.makedirs(rdv, exist_ok=True)
    os.makedirs(os.path.dirname(checkpoint_path(a)), exist_ok=True)
    path = lambda name: os.path.join(rdv, name)  # noqa: E731
    others = range(1, a.world_size)
    if a.rank == 0:
        ckdir = os.path.dirname(checkpoint_path(a))
        for name in os.listdir(ckdir):  # half-written checkpoints of a killed rank 0
            if ".tmp" in name:
                os.remove(os.path.join(ckdir, name))
        st = load_checkpoint(a)
        start = st["step"] if st else 0
        attempt, published = uuid.uuid4().hex[:12], None
        nonce = lambda r: (read_json(path(f"hello-{r}.json")) or {}).get("nonce")  # noqa: E731
        absent = lambda: [r for r in others  # noqa: E731
                          if (read_json(path(f"ack-{r}.json")) or {}).get("attempt") != attempt]

        def all_acked():
            nonlocal published
            hellos = {str(r): nonce(r) for r in others}
            if None not in hellos.values() and hellos != published:
                write_json(path("session.json"),
                           {"attempt": attempt, "resume_step": start, "nonces": hellos})
                published = hellos
            return None if absent() else True
        wait_for(lambda: f"ranks {absent()} to join in {rdv}", all_acked, a.sync_timeout)
        # Everyone is in: what earlier attempts left behind is no longer read by anybody.
        allreduce = os.path.join(a.run_dir, "allreduce")
        for old in os.listdir(allreduce) if os.path.isdir(allreduce) else []:
            if old != attempt:
                shutil.rmtree(os.path.join(allreduce, old), ignore_errors=True)
    else:
        nonce = uuid.uuid4().hex
        write_json(path(f"hello-{a.rank}.json"), {"nonce": nonce})

        def session():
            s = read_json(path("session.json"))
            return s if s and s["nonces"].get(str(a.rank)) == nonce else None
        s = wait_for(lambda: f"rank 0 to start a session in {rdv}", session, a.sync_timeout)
        attempt, start = s["attempt"], s["resume_step"]
        write_json(path(f"ack-{a.rank}.json"), {"attempt": attempt})
        st = load_checkpoint(a) if start else None
        if start and (st is None or st["step"] != start):
            raise RuntimeError(f"rank 0 resumes from step {start}, but {checkpoint_path(a)} "
                               f"holds step {st and st['step']}")
    if st:
        print(f"rank {a.rank}: resumed from step {st['step']}", flush=True)
    return attempt, st or init_state(a)


def allreduce(a, attempt_dir, step, local):
    """Sum of every rank's `local` vector for this step, added in rank order so the result has
    the same bits however the ranks are timed. Each rank deletes its previous step's file once
    all files of this step exist (then every rank has finished reading the previous step)."""
    name = lambda r, s: os.path.join(attempt_dir, f"step{s:07d}-rank{r:04d}.npy")  # noqa: E731
    write_atomic(name(a.rank, step), lambda f: np.save(f, local))
    missing = lambda: [r for r in range(a.world_size)  # noqa: E731
                       if not os.path.exists(name(r, step))]
    wait_for(lambda: f"step {step} gradients from ranks {missing()} in {attempt_dir}",
             lambda: True if not missing() else None, a.sync_timeout)
    total = np.load(name(0, step))
    for r in range(1, a.world_size):
        total += np.load(name(r, step))
    if step > 1:
        try:
            os.remove(name(a.rank, step - 1))
        except FileNotFoundError:
            pass
    return total


def train_step(a, st, x, y, attempt_dir):
    """One data-parallel Adam step; returns the global minibatch's mean loss."""
    if st["offset"] + a.batch_size > a.samples:  # next epoch: a new order; the tail is dropped
        st["epoch"], st["offset"] = st["epoch"] + 1, 0
        st["perm"] = st["order"].permutation(a.samples)
    batch = st["perm"][st["offset"]:st["offset"] + a.batch_size]
    st["offset"] += a.batch_size
    st["step"] += 1
    mine = np.array_split(batch, a.world_size)[a.rank]
    total = allreduce(a, attempt_dir, st["step"], loss_and_grads(st["params"], x[mine], y[mine]))
    b1, b2, eps, t, at = 0.9, 0.999, 1e-8, st["step"], 0
    for k in PARAMS:
        p = st["params"][k]
        g = total[at:at + p.size].reshape(p.shape) / a.batch_size
        at += p.size
        st["m"][k] = b1 * st["m"][k] + (1 - b1) * g
        st["v"][k] = b2 * st["v"][k] + (1 - b2) * g * g
        p -= a.lr * (st["m"][k] / (1 - b1 ** t)) / (np.sqrt(st["v"][k] / (1 - b2 ** t)) + eps)
    return total[-1] / a.batch_size


def run(a):
    """Trains this rank to --steps (or --stop-after-step); returns the exit status."""
    t0 = time.monotonic()
    x, y = make_data(a)
    if a.rank == 0:
        os.makedirs(a.run_dir, exist_ok=True)
        try:  # a result from before this attempt would be misleading until the new one is in
            os.remove(os.path.join(a.run_dir, "result.json"))
        except FileNotFoundError:
            pass
    attempt, st = rendezvous(a)
    resumed_from = st["step"] or None
    attempt_dir = os.path.join(a.run_dir, "allreduce", attempt)
    os.makedirs(attempt_dir, exist_ok=True)
    if a.rank == 0:
        print(f"training: {a.world_size} ranks, {a.steps} steps of {a.batch_size} samples, "
              f"run dir {a.run_dir}", flush=True)
    while st["step"] < a.steps:
        step_started = time.monotonic()
        loss = train_step(a, st, x, y, attempt_dir)
        if a.min_step_seconds > 0:
            time.sleep(max(0.0, a.min_step_seconds - (time.monotonic() - step_started)))
        step = st["step"]
        stop = step == a.stop_after_step
        if a.rank == 0:
            if step % a.log_every == 0 or step == a.steps:
                print(f"step {step}/{a.steps} loss {loss:.4f} epoch {st['epoch']}", flush=True)
            if step % a.checkpoint_every == 0 or step == a.steps or stop:
                save_checkpoint(a, st)
        if stop:
            print(f"rank {a.rank}: stopping after step {step} (--stop-after-step)", flush=True)
            return 75
    # Last barrier: once every rank is done reading, rank 0 removes this attempt's files.
    write_json(os.path.join(attempt_dir, f"done-{a.rank}.json"), {})
    if a.rank != 0:
        return 0
    done = lambda r: os.path.exists(os.path.join(attempt_dir, f"done-{r}.json"))  # noqa: E731
    wait_for(lambda: f"ranks {[r for r in range(a.world_size) if not done(r)]} to finish",
             lambda: True if all(map(done, range(a.world_size))) else None, a.sync_timeout)
    shutil.rmtree(attempt_dir, ignore_errors=True)
    loss = float(loss_and_grads(st["params"], x, y)[-1] / a.samples)
    digest = hashlib.sha256()
    for k in PARAMS:
        digest.update(np.ascontiguousarray(st["params"][k], dtype="<f8").tobytes())
    passed = loss < a.threshold
    result = {"loss": loss, "threshold": a.threshold, "passed": passed,
              "weights_sha256": digest.hexdigest(), "steps": st["step"],
              "world_size": a.world_size, "resumed_from": resumed_from}
    write_json(os.path.join(a.run_dir, "result.json"), result, sync=True)
    print(f"final loss {loss:.4f} (threshold {a.threshold:g}): {'PASS' if passed else 'FAIL'}")
    print(f"weights sha256 {result['weights_sha256']}")
    print(f"took {time.monotonic() - t0:.1f} s", flush=True)
    return 0 if passed else 1


def main(argv=None):
    """Entry point: the exit status (see the module docstring)."""
    a = parse_args(argv)
    try:
        return run(a)
    except (SyncTimeout, ValueError, RuntimeError) as e:
        print(f"train.py: rank {a.rank} of {a.world_size}: error: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
