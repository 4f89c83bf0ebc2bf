#!/usr/bin/env python3
"""Unit tests of bench/slurm_side_by_side.py's quota-event replay, without Slurm.

SlurmCluster.run is replaced by a recorder, so the tests check which sacctmgr calls a trace
quota event becomes, the caps in force afterwards, and quota_check against changing caps.
Run: python3 -m unittest tests/bench/test_slurm_side_by_side_quota.py
"""
import os
import sys
import time
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import slurm_side_by_side as sbs  # noqa: E402

CLUSTER = {"types": [{"name": "ml.p5.48xlarge", "vcpus": 192, "memory_gib": 2048,
                      "accelerators": 8, "instances": 10},
                     {"name": "ml.c5.24xlarge", "vcpus": 96, "memory_gib": 192,
                      "accelerators": 0, "instances": 4}],
           "priority_classes": [{"name": "training", "weight": 100}]}


def quota(team, p5, strategy="LendAndBorrow", borrow=50, fs=10, active=True, kind="quota"):
    return {"kind": kind, "team": team, "strategy": strategy, "borrow_limit_percent": borrow,
            "fair_share_weight": fs, "active": active, "absolute_borrow_limits": [],
            "resources": [{"instance_type": "ml.p5.48xlarge", "count": p5}]}


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, argv, check=True, timeout=60):
        self.calls.append(argv)
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")


def cluster(*quotas):
    c = sbs.SlurmCluster("/nonexistent", CLUSTER, 1, 2, 3, "", profile="gov", quotas=quotas)
    c.run = Recorder()
    return c


class ApplyQuotaTest(unittest.TestCase):
    def test_initial_caps(self):
        c = cluster(quota("a", 2), quota("b", 1, strategy="Lend", active=False))
        self.assertEqual(c.caps, {"a-p5": 576, "p5-g-a": 384, "p5-o-a": 576,
                                  "b-p5": 0, "p5-g-b": 0})

    def test_upsert_changes_only_what_changed_grouped_by_value(self):
        c = cluster(quota("a", 2), quota("b", 2))
        res = c.apply_quota(quota("a", 4, kind="upsert_quota"))
        # Team b untouched; a's three caps have two values, but accounts and QOS are
        # separate calls.
        self.assertEqual(res, {"calls": 3, "skipped": []})
        self.assertEqual(c.run.calls, [
            ["sacctmgr", "-i", "modify", "account", "where", "name=a-p5", "cluster=hfsbs",
             "set", "grptres=cpu=1152"],
            ["sacctmgr", "-i", "modify", "qos", "where", "name=p5-g-a", "set",
             "grptres=cpu=768"],
            ["sacctmgr", "-i", "modify", "qos", "where", "name=p5-o-a", "set",
             "grptres=cpu=1152"]])
        self.assertEqual(c.caps["p5-o-a"], 1152)
        self.assertEqual(c.caps["p5-g-b"], 384)
        self.assertEqual(c.limits[("a", "ml.p5.48xlarge")]["g"], ("p5-g-a", 768))

    def test_same_quota_again_makes_no_call(self):
        c = cluster(quota("a", 2))
        self.assertEqual(c.apply_quota(quota("a", 2, kind="upsert_quota"))["calls"], 0)
        self.assertEqual(c.run.calls, [])

    def test_fairshare_only(self):
        c = cluster(quota("a", 2, fs=10))
        c.apply_quota(quota("a", 2, fs=0, kind="upsert_quota"))
        self.assertEqual(c.run.calls, [["sacctmgr", "-i", "modify", "account", "where",
                                        "name=a", "cluster=hfsbs", "set", "fairshare=1"]])

    def test_remove_then_recreate(self):
        c = cluster(quota("a", 2))
        t0 = time.time()
        c.apply_quota({"kind": "remove_quota", "team": "a", "t_ms": 1})
        self.assertEqual({n: c.caps[n] for n in ("a-p5", "p5-g-a", "p5-o-a")},
                         {"a-p5": 0, "p5-g-a": 0, "p5-o-a": 0})
        # One QOS call for both partitions (same value), one for the sub-account.
        self.assertEqual(len(c.run.calls), 2)
        self.assertIn("name=p5-g-a,p5-o-a", c.run.calls[1])
        # Jobs still route by the quota's amounts, and queue; they do not fit the caps.
        self.assertIsNotNone(sbs.sbatch_argv(
            {"id": 1, "team": "a", "type": "ml.p5.48xlarge", "count": 1, "runtime_ms": 60000,
             "class": "training"}, 1.0, {t["name"]: t for t in CLUSTER["types"]}, "gov",
            c.limits))
        job = {"team": "a", "type": "ml.p5.48xlarge", "count": 1}
        self.assertFalse(c.runnable(job, {t["name"]: t for t in CLUSTER["types"]}))
        c.apply_quota(quota("a", 2, kind="upsert_quota"))
        self.assertEqual(c.caps["p5-g-a"], 384)
        self.assertTrue(c.runnable(job, {t["name"]: t for t in CLUSTER["types"]}))
        log = c.cap_log["p5-g-a"]
        self.assertEqual([cap for _t, cap in log], [384, 0, 384])
        self.assertGreaterEqual(log[1][0], t0)

    def test_new_parts_are_skipped(self):
        c = cluster(quota("a", 2, strategy="Lend"))
        res = c.apply_quota(quota("a", 2, kind="upsert_quota"))
        self.assertEqual(res["skipped"], ["p5-o-a"])
        self.assertNotIn("p5-o-a", c.caps)

    def test_failed_call_raises(self):
        c = cluster(quota("a", 2))
        c.run = lambda argv, check=True, timeout=60: types.SimpleNamespace(
            returncode=1, stdout="", stderr="boom")
        with self.assertRaises(RuntimeError):
            c.apply_quota(quota("a", 3, kind="upsert_quota"))


def rec(part, start, end, cpus):
    fmt = "%Y-%m-%dT%H:%M:%S"
    return {"Partition": part, "NodeCnt": "1", "ProcCnt": str(cpus),
            "StartTime": time.strftime(fmt, time.localtime(start)),
            "EndTime": time.strftime(fmt, time.localtime(end))}


class QuotaCheckTest(unittest.TestCase):
    def setUp(self):
        self.c = cluster(quota("a", 2, strategy="Lend"))  # p5-g-a 384, a-p5 384
        self.t = float(int(time.time()) - 1000)

    def check(self, records):
        return sbs.quota_check({"j": records}, self.c.limits, self.c.cap_log)

    def test_start_above_cap_counts(self):
        q = self.check([rec("p5-g-a", self.t, self.t + 100, 192),
                        rec("p5-g-a", self.t + 10, self.t + 100, 192),
                        rec("p5-g-a", self.t + 20, self.t + 100, 192)])
        self.assertEqual(q["starts_over_cap"], 1)
        self.assertEqual(q["teams_over_cap"], 1)

    def test_lowered_cap_counts_later_starts_only(self):
        self.c.cap_log["p5-g-a"].append((self.t + 50, 192))
        self.c.cap_log["a-p5"].append((self.t + 50, 192))
        # Two runs from before the decrease stay above the new cap: no excess; a third
        # start while above it is one, as is a start after the decrease that fits only
        # the old cap.
        q = self.check([rec("p5-g-a", self.t, self.t + 200, 192),
                        rec("p5-g-a", self.t + 10, self.t + 100, 192),
                        rec("p5-g-a", self.t + 150, self.t + 200, 192)])
        self.assertEqual(q["starts_over_cap"], 1)
        q = self.check([rec("p5-g-a", self.t, self.t + 40, 192),
                        rec("p5-g-a", self.t + 10, self.t + 40, 192)])
        self.assertEqual(q["starts_over_cap"], 0)

    def test_raised_cap_allows(self):
        self.c.cap_log["p5-g-a"].append((self.t + 5, 768))
        self.c.cap_log["a-p5"].append((self.t + 5, 768))
        q = self.check([rec("p5-g-a", self.t + 10, self.t + 100, 384),
                        rec("p5-g-a", self.t + 20, self.t + 100, 384)])
        self.assertEqual(q["starts_over_cap"], 0)
        self.assertEqual(q["worst"][0][1:], (768, 768))

    def test_cap_in_window(self):
        log = [(0.0, 10), (100.0, 5), (200.0, 20)]
        self.assertEqual(sbs.cap_in_window(log, 50, 60), 10)
        self.assertEqual(sbs.cap_in_window(log, 99, 101), 10)
        self.assertEqual(sbs.cap_in_window(log, 120, 130), 5)
        self.assertEqual(sbs.cap_in_window(log, 150, 250), 20)


if __name__ == "__main__":
    unittest.main()
