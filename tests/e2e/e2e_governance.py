"""End-to-end: task governance (ClusterSchedulerConfig and ComputeQuota) through boto3 and the
aws CLI against a real Hyperfleet server: full CRUD, every class of bad input rejected with
the field named and nothing changed, TargetVersion conflicts, one policy per cluster and one
quota per team, quota beyond the cluster reported as an event, pagination, tags on the
governance ARNs, persistence across a restart, and the objects going with their cluster."""

import json
import os
import subprocess
import unittest

import boto3
import botocore.config
from botocore.exceptions import ClientError

import harness

os.environ.update(harness.aws_env())

WORKERS = ("workers", "ml.g5.8xlarge", 4)  # 1 GPU, 32 vCPU, 128 GiB each
CONTROLLER = ("controller", "ml.c5.xlarge", 1)
UNKNOWN_CLUSTER = f"arn:aws:sagemaker:{harness.REGION}:{harness.ACCOUNT}:cluster/aaaaaaaaaaaa"


def make_client(endpoint):
    # No client-side validation: the server must reject bad input by itself.
    return boto3.session.Session().client(
        "sagemaker", endpoint_url=endpoint, region_name=harness.REGION,
        aws_access_key_id=harness.ACCESS_KEY, aws_secret_access_key=harness.SECRET_KEY,
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"},
                                      parameter_validation=False))


def g5(count):
    return [{"InstanceType": "ml.g5.8xlarge", "Count": count}]


def quota_config(resources, **extra):
    return {"ComputeQuotaResources": resources, **extra}


def create_cluster(sm, name):
    arn = sm.create_cluster(**harness.cluster_spec(name, [CONTROLLER, WORKERS]))["ClusterArn"]
    harness.wait_until(lambda: sm.describe_cluster(ClusterName=name)["ClusterStatus"]
                       == "InService", timeout=60, what=f"{name} InService")
    return arn


class GovernanceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(boot_delay_ms=50).start()
        cls.sm = make_client(cls.server.endpoint)
        cls.arn = create_cluster(cls.sm, "gov-main")
        cls.arn2 = create_cluster(cls.sm, "gov-second")

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def assertError(self, ctx, code, *fragments):
        err = ctx.exception.response["Error"]
        self.assertEqual(err["Code"], code, err)
        self.assertEqual(ctx.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)
        for f in fragments:
            self.assertIn(f, err["Message"])
        return err["Message"]

    def snapshot(self):
        """Every governance object and every event of both clusters (to show nothing changed)."""
        policies = self.sm.list_cluster_scheduler_configs(MaxResults=100)
        quotas = self.sm.list_compute_quotas(MaxResults=100)
        events = [self.sm.list_cluster_events(ClusterName=n, MaxResults=100)["Events"]
                  for n in ("gov-main", "gov-second")]
        return (policies["ClusterSchedulerConfigSummaries"], quotas["ComputeQuotaSummaries"],
                events)

    def governance_events(self, cluster="gov-main"):
        pages = self.sm.get_paginator("list_cluster_events").paginate(ClusterName=cluster)
        return [e for p in pages for e in p["Events"]
                if "ClusterSchedulerConfig" in e.get("Description", "")
                or "ComputeQuota" in e.get("Description", "")
                or "Compute quotas" in e.get("Description", "")]

    def test_1_policy_crud_versions_and_events(self):
        sm = self.sm
        out = sm.create_cluster_scheduler_config(
            Name="policy", ClusterArn=self.arn, Description="priorities",
            SchedulerConfig={"PriorityClasses": [{"Name": "inference", "Weight": 90},
                                                 {"Name": "training", "Weight": 70}],
                             "FairShare": "Enabled"},
            Tags=[{"Key": "env", "Value": "test"}])
        pid = out["ClusterSchedulerConfigId"]
        self.assertRegex(pid, r"^[a-z0-9]{12}$")
        self.assertEqual(out["ClusterSchedulerConfigArn"],
                         f"arn:aws:sagemaker:{harness.REGION}:{harness.ACCOUNT}:"
                         f"cluster-scheduler-config/{pid}")
        d = sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=pid)
        self.assertEqual((d["Name"], d["Status"], d["ClusterSchedulerConfigVersion"],
                          d["ClusterArn"], d["Description"]),
                         ("policy", "Created", 1, self.arn, "priorities"))
        self.assertEqual(d["StatusDetails"], {"PriorityClasses": "Created", "FairShare": "Created"})
        self.assertEqual(d["CreationTime"].tzinfo is not None, True)

        # Second policy on the same cluster: the existing one is named.
        with self.assertRaises(ClientError) as ctx:
            sm.create_cluster_scheduler_config(Name="other", ClusterArn=self.arn,
                                               SchedulerConfig={})
        self.assertError(ctx, "ConflictException", pid, "policy")

        u = sm.update_cluster_scheduler_config(ClusterSchedulerConfigId=pid, TargetVersion=1,
                                               SchedulerConfig={"FairShare": "Disabled"})
        self.assertEqual(u["ClusterSchedulerConfigVersion"], 2)
        with self.assertRaises(ClientError) as ctx:
            sm.update_cluster_scheduler_config(ClusterSchedulerConfigId=pid, TargetVersion=1,
                                               Description="stale")
        self.assertError(ctx, "ConflictException", "TargetVersion 1", "version 2")
        d = sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=pid)
        self.assertEqual((d["Status"], d["ClusterSchedulerConfigVersion"]), ("Updated", 2))
        self.assertEqual(d["SchedulerConfig"], {"FairShare": "Disabled"})
        self.assertEqual(d["Description"], "priorities")
        old = sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=pid,
                                                   ClusterSchedulerConfigVersion=1)
        self.assertEqual(len(old["SchedulerConfig"]["PriorityClasses"]), 2)

        sm.delete_cluster_scheduler_config(ClusterSchedulerConfigId=pid)
        with self.assertRaises(sm.exceptions.ResourceNotFound):
            sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=pid)
        texts = [e["Description"] for e in self.governance_events() if pid in e["Description"]]
        self.assertEqual(len(texts), 6, texts)
        for fragment in ("creation started", "created, version 1", "update started, version 2",
                         "updated to version 2", "deletion started", "deleted"):
            self.assertTrue(any(fragment in t for t in texts), (fragment, texts))
        # Now a new one may take its place.
        pid2 = sm.create_cluster_scheduler_config(Name="policy", ClusterArn=self.arn,
                                                  SchedulerConfig={})["ClusterSchedulerConfigId"]
        self.assertEqual(sm.describe_cluster_scheduler_config(
            ClusterSchedulerConfigId=pid2)["SchedulerConfig"], {"FairShare": "Enabled"})
        sm.delete_cluster_scheduler_config(ClusterSchedulerConfigId=pid2)

    def test_2_quota_crud_uniqueness_and_excess(self):
        sm = self.sm
        qa = sm.create_compute_quota(
            Name="team-a-quota", ClusterArn=self.arn, ComputeQuotaConfig=quota_config(
                g5(2), ResourceSharingConfig={"Strategy": "LendAndBorrow", "BorrowLimit": 50},
                PreemptTeamTasks="LowerPriority"),
            ComputeQuotaTarget={"TeamName": "team-a", "FairShareWeight": 10})
        qid = qa["ComputeQuotaId"]
        self.assertTrue(qa["ComputeQuotaArn"].endswith(f":compute-quota/{qid}"))
        d = sm.describe_compute_quota(ComputeQuotaId=qid)
        self.assertEqual((d["Status"], d["ComputeQuotaVersion"], d["ActivationState"]),
                         ("Created", 1, "Enabled"))
        self.assertEqual(d["ComputeQuotaTarget"], {"TeamName": "team-a", "FairShareWeight": 10})
        with self.assertRaises(ClientError) as ctx:
            sm.create_compute_quota(Name="again", ClusterArn=self.arn,
                                    ComputeQuotaConfig=quota_config(g5(1)),
                                    ComputeQuotaTarget={"TeamName": "team-a"})
        self.assertError(ctx, "ConflictException", "team-a", qid)
        # Same team on another cluster is fine.
        other = sm.create_compute_quota(Name="team-a-quota", ClusterArn=self.arn2,
                                        ComputeQuotaConfig=quota_config(g5(1)),
                                        ComputeQuotaTarget={"TeamName": "team-a"})
        # Over the cluster (4 x g5.8xlarge): accepted, and said in a Warn event.
        qb = sm.create_compute_quota(
            Name="team-b-quota", ClusterArn=self.arn,
            ComputeQuotaConfig=quota_config([{"InstanceType": "ml.g5.8xlarge",
                                              "Accelerators": 3}]),
            ComputeQuotaTarget={"TeamName": "team-b"})["ComputeQuotaId"]
        warns = [e for e in self.governance_events() if e["EventLevel"] == "Warn"]
        self.assertEqual(len(warns), 1, warns)
        self.assertIn("ml.g5.8xlarge: 5 instances allocated (teams team-a, team-b), the cluster "
                      "has 4 (1 over)", warns[0]["Description"])
        u = sm.update_compute_quota(ComputeQuotaId=qb, TargetVersion=1,
                                    ComputeQuotaConfig=quota_config(g5(2)),
                                    ActivationState="Disabled")
        self.assertEqual(u["ComputeQuotaVersion"], 2)
        with self.assertRaises(ClientError) as ctx:
            sm.update_compute_quota(ComputeQuotaId=qb, TargetVersion=1, Description="x")
        self.assertError(ctx, "ConflictException", "TargetVersion")
        with self.assertRaises(ClientError) as ctx:
            sm.update_compute_quota(ComputeQuotaId=qb, TargetVersion=2,
                                    ComputeQuotaTarget={"TeamName": "team-z"})
        self.assertError(ctx, "ValidationException", "computeQuotaTarget.teamName")
        d = sm.describe_compute_quota(ComputeQuotaId=qb)
        self.assertEqual((d["Status"], d["ComputeQuotaVersion"], d["ActivationState"]),
                         ("Updated", 2, "Disabled"))
        for q in (qid, qb):
            sm.delete_compute_quota(ComputeQuotaId=q)
        sm.delete_compute_quota(ComputeQuotaId=other["ComputeQuotaId"])
        with self.assertRaises(sm.exceptions.ResourceNotFound):
            sm.describe_compute_quota(ComputeQuotaId=qid)

    def test_3_bad_input_is_rejected_with_the_field_named(self):
        sm = self.sm
        arn = self.arn
        ok_target = {"TeamName": "t"}
        policy_cases = [
            (dict(Name="bad_name!", SchedulerConfig={}), "name"),
            (dict(Name="p", SchedulerConfig={"PriorityClasses": [{"Name": "x", "Weight": 101}]}),
             "schedulerConfig.priorityClasses.1.member.weight"),
            (dict(Name="p", SchedulerConfig={"PriorityClasses": [
                {"Name": f"c{i}", "Weight": i} for i in range(11)]}),
             "schedulerConfig.priorityClasses"),
            (dict(Name="p", SchedulerConfig={"FairShare": "Maybe"}), "schedulerConfig.fairShare"),
            (dict(Name="p", SchedulerConfig={"PriorityClasses": [
                {"Name": "x", "Weight": 1}, {"Name": "x", "Weight": 2}]}),
             "schedulerConfig.priorityClasses.2.member.name"),
        ]
        quota_cases = [
            (dict(ComputeQuotaTarget={"TeamName": "Team_A"}), "computeQuotaTarget.teamName"),
            (dict(ComputeQuotaTarget={"TeamName": "t", "FairShareWeight": 200}),
             "computeQuotaTarget.fairShareWeight"),
            (dict(ComputeQuotaConfig=quota_config(g5(1), ResourceSharingConfig={
                "Strategy": "LendAndBorrow", "BorrowLimit": 10001})),
             "computeQuotaConfig.resourceSharingConfig.borrowLimit"),
            (dict(ComputeQuotaConfig=quota_config([{"InstanceType": "ml.nope", "Count": 1}])),
             "computeQuotaConfig.computeQuotaResources.1.member.instanceType"),
            (dict(ComputeQuotaConfig=quota_config(g5(1) + g5(2))),
             "computeQuotaConfig.computeQuotaResources.2.member.instanceType"),
            (dict(ComputeQuotaConfig=quota_config([{"InstanceType": "ml.g5.8xlarge", "Count": 1,
                                                    "VCpu": 4.0}])),
             "computeQuotaConfig.computeQuotaResources.1.member.vCpu"),
            (dict(ComputeQuotaConfig=quota_config([{"InstanceType": "ml.c5.xlarge",
                                                    "Accelerators": 1}])),
             "computeQuotaConfig.computeQuotaResources.1.member.accelerators"),
            (dict(ComputeQuotaConfig=quota_config(g5(1), ResourceSharingConfig={
                "Strategy": "DontLend", "BorrowLimit": 20})),
             "computeQuotaConfig.resourceSharingConfig.borrowLimit"),
            (dict(ComputeQuotaConfig=quota_config(g5(1), PreemptTeamTasks="Always")),
             "computeQuotaConfig.preemptTeamTasks"),
            (dict(ActivationState="Paused"), "activationState"),
            (dict(Description="\u0000"), "description"),
        ]
        before = self.snapshot()
        for args, field in policy_cases:
            with self.subTest(field=field):
                with self.assertRaises(ClientError) as ctx:
                    sm.create_cluster_scheduler_config(ClusterArn=arn, **args)
                self.assertError(ctx, "ValidationException", f"'{field}'")
        for args, field in quota_cases:
            request = dict(Name="q", ClusterArn=arn, ComputeQuotaConfig=quota_config(g5(1)),
                           ComputeQuotaTarget=ok_target)
            request.update(args)
            with self.subTest(field=field):
                with self.assertRaises(ClientError) as ctx:
                    sm.create_compute_quota(**request)
                self.assertError(ctx, "ValidationException", f"'{field}'")
        with self.assertRaises(ClientError) as ctx:
            sm.create_compute_quota(Name="q", ClusterArn="arn:aws:sagemaker:x",
                                    ComputeQuotaConfig={}, ComputeQuotaTarget=ok_target)
        self.assertError(ctx, "ValidationException", "'clusterArn'")
        with self.assertRaises(ClientError) as ctx:
            sm.create_compute_quota(Name="q", ClusterArn=UNKNOWN_CLUSTER,
                                    ComputeQuotaConfig={}, ComputeQuotaTarget=ok_target)
        self.assertError(ctx, "ResourceNotFound", UNKNOWN_CLUSTER)
        with self.assertRaises(ClientError) as ctx:
            sm.describe_compute_quota(ComputeQuotaId="aaaaaaaaaaaa")
        self.assertError(ctx, "ResourceNotFound", "aaaaaaaaaaaa")
        self.assertEqual(self.snapshot(), before)

    def test_4_pagination_filters_and_sort(self):
        sm = self.sm
        ids = [sm.create_compute_quota(Name=f"page-{i}", ClusterArn=self.arn2,
                                       ComputeQuotaConfig=quota_config([]),
                                       ComputeQuotaTarget={"TeamName": f"page-{i}"})
               ["ComputeQuotaId"] for i in range(5)]
        pages = list(sm.get_paginator("list_compute_quotas").paginate(
            ClusterArn=self.arn2, SortBy="Name", SortOrder="Ascending",
            PaginationConfig={"PageSize": 2}))
        self.assertEqual([len(p["ComputeQuotaSummaries"]) for p in pages], [2, 2, 1])
        names = [s["Name"] for p in pages for s in p["ComputeQuotaSummaries"]]
        self.assertEqual(names, [f"page-{i}" for i in range(5)])
        newest_first = sm.list_compute_quotas(ClusterArn=self.arn2)["ComputeQuotaSummaries"]
        self.assertEqual([s["ComputeQuotaId"] for s in newest_first], ids[::-1])
        self.assertEqual([s["Name"] for s in sm.list_compute_quotas(
            NameContains="page-3")["ComputeQuotaSummaries"]], ["page-3"])
        self.assertEqual(sm.list_compute_quotas(Status="Deleting")["ComputeQuotaSummaries"], [])
        for i in ids:
            sm.delete_compute_quota(ComputeQuotaId=i)

    def test_5_tags_on_governance_arns(self):
        # IaC tools call ListTags right after a create and on every read, and AddTags /
        # DeleteTags on update: the governance ARNs answer as cluster ARNs do.
        sm = self.sm
        policy = sm.create_cluster_scheduler_config(
            Name="tagged-policy", ClusterArn=self.arn2, SchedulerConfig={},
            Tags=[{"Key": "owner", "Value": "ml"}, {"Key": "tier", "Value": "gold"}])
        quota = sm.create_compute_quota(
            Name="tagged-quota", ClusterArn=self.arn2, ComputeQuotaConfig=quota_config(g5(1)),
            ComputeQuotaTarget={"TeamName": "tag-team"},
            Tags=[{"Key": "team", "Value": "tag-team"}])
        cases = [(policy["ClusterSchedulerConfigArn"], {"owner": "ml", "tier": "gold"}),
                 (quota["ComputeQuotaArn"], {"team": "tag-team"})]
        for arn, created in cases:
            with self.subTest(arn=arn):
                def listed():
                    pages = sm.get_paginator("list_tags").paginate(
                        ResourceArn=arn, PaginationConfig={"PageSize": 50})
                    return {t["Key"]: t["Value"] for p in pages for t in p["Tags"]}
                self.assertEqual(listed(), created)
                first = sorted(created)[0]
                out = sm.add_tags(ResourceArn=arn, Tags=[{"Key": "stack", "Value": "s1"},
                                                         {"Key": first, "Value": "changed"}])
                self.assertEqual(len(out["Tags"]), 2)
                self.assertEqual(listed(), dict(created, stack="s1", **{first: "changed"}))
                sm.delete_tags(ResourceArn=arn, TagKeys=["stack", first, "absent"])
                self.assertEqual(listed(), {k: v for k, v in created.items() if k != first})
                with self.assertRaises(ClientError) as ctx:
                    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "aws:cloudformation:stack-id",
                                                        "Value": "x"}])
                self.assertError(ctx, "ValidationException", "'tags.1.member.key'", "aws:")
                # 50 tags per resource: fill up, then one more is refused.
                sm.add_tags(ResourceArn=arn, Tags=[{"Key": f"k{i}", "Value": "v"}
                                                   for i in range(50 - len(listed()))])
                with self.assertRaises(ClientError) as ctx:
                    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "one-more", "Value": "v"}])
                self.assertError(ctx, "ValidationException", "at most 50 tags", arn)
                self.assertEqual(len(listed()), 50)
        sm.delete_cluster_scheduler_config(
            ClusterSchedulerConfigId=policy["ClusterSchedulerConfigId"])
        sm.delete_compute_quota(ComputeQuotaId=quota["ComputeQuotaId"])
        for arn, _ in cases:
            for call in (lambda: sm.list_tags(ResourceArn=arn),
                         lambda: sm.add_tags(ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}]),
                         lambda: sm.delete_tags(ResourceArn=arn, TagKeys=["owner"])):
                with self.assertRaises(ClientError) as ctx:
                    call()
                self.assertError(ctx, "ResourceNotFound", arn)
        other = f"arn:aws:sagemaker:{harness.REGION}:{harness.ACCOUNT}:training-job/my-job"
        with self.assertRaises(ClientError) as ctx:
            sm.list_tags(ResourceArn=other)
        self.assertError(ctx, "ResourceNotFound", other)


class CliGovernanceTest(unittest.TestCase):
    """The aws CLI: CRUD and errors on the same operations (exit codes, --cli-input-json)."""

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(boot_delay_ms=50).start()
        cls.arn = create_cluster(make_client(cls.server.endpoint), "gov-cli")
        cls.env = harness.aws_env()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def aws(self, *args, ok=True):
        r = subprocess.run(["aws", "sagemaker", *args, "--endpoint-url", self.server.endpoint,
                            "--output", "json"], capture_output=True, text=True, timeout=120,
                           env=self.env)
        if ok:
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout) if r.stdout.strip() else {}
        self.assertNotEqual(r.returncode, 0, r.stdout)
        return r.stderr

    def test_cli_crud_and_errors(self):
        out = self.aws("create-cluster-scheduler-config", "--name", "cli-policy",
                       "--cluster-arn", self.arn, "--scheduler-config",
                       json.dumps({"PriorityClasses": [{"Name": "training", "Weight": 70}]}))
        pid = out["ClusterSchedulerConfigId"]
        d = self.aws("describe-cluster-scheduler-config", "--cluster-scheduler-config-id", pid)
        self.assertEqual((d["Status"], d["ClusterSchedulerConfigVersion"]), ("Created", 1))
        err = self.aws("update-cluster-scheduler-config", "--cluster-scheduler-config-id", pid,
                       "--target-version", "5", "--description", "x", ok=False)
        self.assertIn("(ConflictException)", err)
        self.assertEqual(self.aws("update-cluster-scheduler-config",
                                  "--cluster-scheduler-config-id", pid, "--target-version", "1",
                                  "--description", "x")["ClusterSchedulerConfigVersion"], 2)
        request = {"Name": "cli-quota", "ClusterArn": self.arn,
                   "ComputeQuotaConfig": {"ComputeQuotaResources": g5(1)},
                   "ComputeQuotaTarget": {"TeamName": "cli-team"}}
        qid = self.aws("create-compute-quota", "--cli-input-json",
                       json.dumps(request))["ComputeQuotaId"]
        err = self.aws("create-compute-quota", "--cli-input-json", json.dumps(request), ok=False)
        self.assertIn("(ConflictException)", err)
        self.assertIn(qid, err)
        bad = dict(request, ComputeQuotaTarget={"TeamName": "Bad_Team"})
        err = self.aws("create-compute-quota", "--cli-input-json", json.dumps(bad), ok=False)
        self.assertIn("(ValidationException)", err)
        self.assertIn("computeQuotaTarget.teamName", err)
        listed = self.aws("list-compute-quotas", "--cluster-arn", self.arn)
        self.assertEqual([s["ComputeQuotaId"] for s in listed["ComputeQuotaSummaries"]], [qid])
        listed = self.aws("list-cluster-scheduler-configs", "--cluster-arn", self.arn)
        self.assertEqual([s["ClusterSchedulerConfigId"]
                          for s in listed["ClusterSchedulerConfigSummaries"]], [pid])
        self.aws("delete-compute-quota", "--compute-quota-id", qid)
        err = self.aws("describe-compute-quota", "--compute-quota-id", qid, ok=False)
        self.assertIn("(ResourceNotFound)", err)

    def test_cli_tags(self):
        arn = create_cluster(make_client(self.server.endpoint), "gov-cli-tags")
        policy = self.aws("create-cluster-scheduler-config", "--name", "tagged",
                          "--cluster-arn", arn, "--scheduler-config", "{}",
                          "--tags", "Key=env,Value=cli")["ClusterSchedulerConfigArn"]
        quota = self.aws("create-compute-quota", "--name", "tagged", "--cluster-arn", arn,
                         "--compute-quota-config", json.dumps({"ComputeQuotaResources": g5(1)}),
                         "--compute-quota-target", "TeamName=cli-tags",
                         "--tags", "Key=env,Value=cli")["ComputeQuotaArn"]
        for resource in (policy, quota):
            self.assertEqual(self.aws("list-tags", "--resource-arn", resource)["Tags"],
                             [{"Key": "env", "Value": "cli"}])
            self.aws("add-tags", "--resource-arn", resource, "--tags", "Key=a,Value=1")
            self.assertEqual(self.aws("list-tags", "--resource-arn", resource)["Tags"],
                             [{"Key": "a", "Value": "1"}, {"Key": "env", "Value": "cli"}])
            self.aws("delete-tags", "--resource-arn", resource, "--tag-keys", "env")
            self.assertEqual(self.aws("list-tags", "--resource-arn", resource)["Tags"],
                             [{"Key": "a", "Value": "1"}])
        self.aws("delete-cluster-scheduler-config", "--cluster-scheduler-config-id",
                 policy.rsplit("/", 1)[1])
        self.aws("delete-compute-quota", "--compute-quota-id", quota.rsplit("/", 1)[1])
        for resource in (policy, quota):
            err = self.aws("list-tags", "--resource-arn", resource, ok=False)
            self.assertIn("(ResourceNotFound)", err)
            self.assertIn(resource, err)


class PersistenceTest(unittest.TestCase):
    """Governance objects survive a restart, and go when their cluster is deleted."""

    def test_restart_then_delete_cluster(self):
        server = harness.Server(boot_delay_ms=50).start()
        try:
            sm = make_client(server.endpoint)
            arn = create_cluster(sm, "gov-persist")
            pid = sm.create_cluster_scheduler_config(
                Name="p", ClusterArn=arn, SchedulerConfig={"FairShare": "Disabled"}
            )["ClusterSchedulerConfigId"]
            sm.update_cluster_scheduler_config(ClusterSchedulerConfigId=pid, TargetVersion=1,
                                               Description="v2")
            qid = sm.create_compute_quota(Name="q", ClusterArn=arn,
                                          ComputeQuotaConfig=quota_config(g5(1)),
                                          ComputeQuotaTarget={"TeamName": "t"})["ComputeQuotaId"]
            before = (sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=pid),
                      sm.describe_compute_quota(ComputeQuotaId=qid))
            server.stop()
            server.start()
            sm = make_client(server.endpoint)
            after = (sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=pid),
                     sm.describe_compute_quota(ComputeQuotaId=qid))
            for b, a in zip(before, after):
                b.pop("ResponseMetadata")
                a.pop("ResponseMetadata")
                self.assertEqual(a, b)
            self.assertEqual(after[0]["ClusterSchedulerConfigVersion"], 2)
            # Still one policy per cluster after the restart.
            with self.assertRaises(ClientError) as ctx:
                sm.create_cluster_scheduler_config(Name="p2", ClusterArn=arn, SchedulerConfig={})
            self.assertEqual(ctx.exception.response["Error"]["Code"], "ConflictException")

            sm.delete_cluster(ClusterName="gov-persist")

            def gone():
                try:
                    sm.describe_cluster(ClusterName="gov-persist")
                    return False
                except sm.exceptions.ResourceNotFound:
                    return True
            harness.wait_until(gone, timeout=60, what="gov-persist deleted")
            with self.assertRaises(sm.exceptions.ResourceNotFound):
                sm.describe_cluster_scheduler_config(ClusterSchedulerConfigId=pid)
            with self.assertRaises(sm.exceptions.ResourceNotFound):
                sm.describe_compute_quota(ComputeQuotaId=qid)
            self.assertEqual(sm.list_compute_quotas()["ComputeQuotaSummaries"], [])
        finally:
            server.cleanup()


if __name__ == "__main__":
    harness.main()
