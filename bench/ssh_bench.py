#!/usr/bin/env python3
"""Benchmark of the ssh provider (issue 18) on real sshd test machines
(tests/e2e/ssh_machines.py, layer `site`: Debian with the node's packages, nothing of
Hyperfleet) and `hyperfleet server --provider ssh`, all on this host. Prints figures; asserts
no timing.

  1. provisioning, 1 machine: CreateCluster of one ml.c5.large node with a trivial lifecycle
     script; seconds from CreateCluster to the node Running (provisioning over ssh: AMI layer,
     node binary, identity, agent start, lifecycle script) and to InService;
  2. provisioning, 10 machines in parallel: the same with 10 nodes; each node's seconds to
     Running (median, max) and the cluster's to InService;
  3. replacement without a hot spare: a 1-node cluster with one more free machine; the node's
     machine is SIGKILLed (its whole sandbox); seconds to the replacement Running (dead-node
     detection + full provisioning of the free machine);
  4. replacement with a hot spare: the same with the free machine kept as a ready spare
     (detection + identity + lifecycle script only).
Every phase uses machines that no earlier phase touched. Needs root.

Usage: bench/ssh_bench.py [--parallel 10] [--runs 1] [--binary build/bin/hyperfleet]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parallel", type=int, default=10, help="machines provisioned at once")
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "build", "bin", "hyperfleet"),
                    help="the hyperfleet binary (hyperfleet-node beside it is copied to nodes)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("ssh_bench needs root (test machines)")
    os.environ["HYPERFLEET_BIN"] = os.path.abspath(args.binary)
    import harness  # noqa: E402  (reads HYPERFLEET_BIN)
    import e2e_chaos  # noqa: E402
    import e2e_ssh_fleet  # noqa: E402
    from harness import wait_until  # noqa: E402

    class Bench(e2e_ssh_fleet.SshFleetFixture):
        fleet_size = 1 + args.parallel + 2 + 2
        cluster_name = "ssh-bench"

    TYPE = e2e_ssh_fleet.TYPE
    started = time.monotonic()
    Bench.setUpClass()
    print(f"fleet of {Bench.fleet_size} site machines booted in "
          f"{Bench.timings['fleet boot']:.1f} s; server {harness.BINARY}", flush=True)
    machines = list(Bench.fleet.machines)
    Bench.write(os.path.join(Bench.server.data_dir, "s3", "lcs-bucket", "trivial",
                             "on_create.sh"), "#!/bin/bash\necho ok\n")
    B = Bench  # classmethods only: the fixture's helpers without a test case

    def running_times(name, count, t0, timeout=1800):
        """{instance id: seconds from t0 to Running} once `count` nodes are Running."""
        seen = {}

        def poll():
            for n in B.nodes(name):
                if n["InstanceStatus"]["Status"] == "Running" and n["InstanceId"] not in seen:
                    seen[n["InstanceId"]] = time.monotonic() - t0
                if n["InstanceStatus"]["Status"] in ("Failure", "ShuttingDown", "Terminated"):
                    raise SystemExit(f"{name}: node {n['InstanceId']} "
                                     f"{n['InstanceStatus']}")
            return len(seen) >= count
        wait_until(poll, timeout=timeout, interval=0.25, what=f"{count} nodes of {name} Running")
        return seen

    def provision(name, group_machines):
        for m in group_machines:
            B.register(m)
        t0 = time.monotonic()
        B.create(name, [("workers", TYPE, len(group_machines))], prefix="trivial")
        times = running_times(name, len(group_machines), t0)
        c = B.wait_status(name, ["InService", "Failed"], timeout=600)
        in_service = time.monotonic() - t0
        if c["ClusterStatus"] != "InService":
            raise SystemExit(f"{name}: {c.get('FailureMessage')}")
        return sorted(times.values()), in_service

    def delete_and_forget(name, group_machines):
        B.aws("sagemaker", "delete-cluster", "--cluster-name", name)
        wait_until(lambda: name not in B.cluster_names(), timeout=600, interval=1,
                   what=f"{name} deleted")
        addresses = {m.address for m in group_machines}
        for r in B.machines():
            if r["Address"] in addresses:
                wait_until(lambda: B.machine_of(B.fleet_machine(r["Address"]))["State"]
                           in ("free", "quarantined"), timeout=600, interval=1,
                           what=f"{r['MachineId']} released")
                B.hf("machines", "remove", r["MachineId"])

    def replacement(name, node_machine, other, spare):
        """Seconds from the SIGKILL of the node's machine to its replacement Running."""
        B.register(node_machine)
        B.create(name, [("workers", TYPE, 1)], prefix="trivial")
        c = B.wait_status(name, ["InService", "Failed"], timeout=600)
        if c["ClusterStatus"] != "InService":
            raise SystemExit(f"{name}: {c.get('FailureMessage')}")
        B.register(other)
        if spare:
            B.hf("machines", "spares", TYPE, "1")
            wait_until(lambda: any(s["Ready"] == 1 for s in B.spares()
                                   if s["InstanceType"] == TYPE),
                       timeout=900, interval=1, what="the hot spare ready")
        (old,) = [n["InstanceId"] for n in B.nodes(name)]
        t0, wall0 = time.monotonic(), time.time()
        node_machine.kill()

        def replaced():
            return [n for n in B.nodes(name) if n["InstanceId"] != old
                    and n["InstanceStatus"]["Status"] == "Running"]
        wait_until(replaced, timeout=1800, interval=0.25, what=f"{name}: the replacement")
        seconds = time.monotonic() - t0
        # Detection: the controller's "Replacing instance <old>" event (its own timestamp).
        events = B.aws("sagemaker", "list-cluster-events", "--cluster-name", name,
                       "--max-results", "100")["Events"]
        detected = min((e2e_chaos.parse_time(e["EventTime"]) for e in events
                        if e.get("Description", "").startswith(f"Replacing instance {old}")),
                       default=float("nan")) - wall0
        if spare:
            B.hf("machines", "spares", TYPE, "0")
        delete_and_forget(name, [node_machine, other])
        return seconds, detected

    try:
        times, in_service = provision("bench-one", machines[:1])
        print(f"provisioning 1 machine: Running after {times[0]:.1f} s, "
              f"InService after {in_service:.1f} s", flush=True)
        delete_and_forget("bench-one", machines[:1])

        group = machines[1:1 + args.parallel]
        times, in_service = provision("bench-many", group)
        print(f"provisioning {len(group)} machines in parallel: Running after median "
              f"{statistics.median(times):.1f} s, max {times[-1]:.1f} s (first "
              f"{times[0]:.1f} s), InService after {in_service:.1f} s", flush=True)
        delete_and_forget("bench-many", group)

        rest = machines[1 + args.parallel:]
        for label, machines_pair, spare in (("without", rest[0:2], False),
                                            ("with", rest[2:4], True)):
            seconds, detected = replacement(f"bench-{label}-spare", *machines_pair, spare=spare)
            print(f"replacement {label} a hot spare: kill -> replacement Running "
                  f"{seconds:.1f} s (detected after {detected:.1f} s, then "
                  f"{seconds - detected:.1f} s to Running)", flush=True)
    finally:
        Bench.tearDownClass()
    print(f"total {time.monotonic() - started:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
