// End-to-end: the AWS SDK for JavaScript v3 (@aws-sdk/client-sagemaker) drives a Hyperfleet
// server through every implemented HyperPod operation, with the SDK's paginators and modeled
// exception classes. Starts its own server(s) with private temp data dirs.
//
//   cd tests/clients/js && npm ci && HYPERFLEET_BIN=.../bin/hyperfleet node e2e_js_sdk.mjs
//
// Prints one line per test and a final "N passed, M failed"; exits non-zero on any failure.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, openSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..", "..", "..");
const BINARY = process.env.HYPERFLEET_BIN || join(REPO, "build", "bin", "hyperfleet");
const ACCESS_KEY = "AKIAHYPERFLEETTEST01";
const SECRET_KEY = "hyperfleet/test/secret/key/0123456789abcd";
const REGION = "us-west-2";
const ACCOUNT = "123456789012";
const UNKNOWN_NODE = "i-0123456789abcdef0";

let sdk;
try {
  sdk = await import("@aws-sdk/client-sagemaker");
} catch (e) {
  console.error(`cannot load @aws-sdk/client-sagemaker (${e.message}); run 'npm ci' in ${HERE}`);
  process.exit(1);
}
const {
  SageMakerClient, CreateClusterCommand, DescribeClusterCommand, ListClustersCommand,
  UpdateClusterCommand, DeleteClusterCommand, ListClusterNodesCommand,
  DescribeClusterNodeCommand, BatchDeleteClusterNodesCommand, ListClusterEventsCommand,
  DescribeClusterEventCommand, AddTagsCommand, ListTagsCommand, DeleteTagsCommand,
  paginateListClusters, paginateListClusterNodes, paginateListClusterEvents, paginateListTags,
  ResourceNotFound, ResourceInUse, ConflictException, SageMakerServiceException,
} = sdk;

// ---- harness ---------------------------------------------------------------------------------

/** Polls `predicate` until it returns a truthy value (returned); throws after `timeoutMs`. */
async function waitUntil(predicate, what, timeoutMs = 30000, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  while (Date.now() < deadline) {
    try {
      const value = await predicate();
      if (value) return value;
    } catch (e) {
      lastError = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` +
                  (lastError ? ` (last error: ${lastError.message})` : ""));
}

/** Starts `hyperfleet server` on a free port with a private data dir. */
async function startServer(bootDelayMs) {
  const dataDir = mkdtempSync(join(tmpdir(), "hf-js-"));
  const log = openSync(join(dataDir, "server.log"), "a");
  const proc = spawn(BINARY, [
    "server", "--listen", "127.0.0.1:0", "--data-dir", dataDir,
    "--access-key-id", ACCESS_KEY, "--secret-access-key", SECRET_KEY,
    "--provider", "fake", "--fake-boot-delay-ms", String(bootDelayMs),
  ], { stdio: ["ignore", "pipe", log] });
  closeSync(log);
  const lines = createInterface({ input: proc.stdout });
  const endpoint = await new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start within 30 s")), 30000);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited early (code ${code}); see ${dataDir}/server.log`));
    });
    lines.on("line", (line) => {
      const m = line.match(/listening on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolvePromise(m[1]);
      }
    });
  });
  proc.stdout.resume();
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 20000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  proc.removeAllListeners("exit");
  return { endpoint, stop };
}

function makeClient(endpoint) {
  return new SageMakerClient({
    region: REGION, endpoint, maxAttempts: 1,
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY },
  });
}

function groupSpec(name, type, count) {
  return {
    InstanceGroupName: name, InstanceType: type, InstanceCount: count,
    LifeCycleConfig: { SourceS3Uri: "s3://hyperfleet-lc/scripts/", OnCreate: "on_create.sh" },
    ExecutionRole: `arn:aws:iam::${ACCOUNT}:role/HyperPodRole`, ThreadsPerCore: 1,
  };
}
const CONTROLLER = groupSpec("controller", "ml.c5.xlarge", 1);
const workers = (n) => groupSpec("workers", "ml.c5.4xlarge", n);

function clusterSpec(name, extra = {}) {
  return {
    ClusterName: name, InstanceGroups: [CONTROLLER, workers(2)],
    Orchestrator: { Slurm: { SlurmConfigStrategy: "Managed" } }, NodeRecovery: "Automatic",
    ...extra,
  };
}

const group = (d, name) => d.InstanceGroups.find((g) => g.InstanceGroupName === name);

/** Awaits `promise`, which must reject; returns the error. */
async function rejects(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  throw new assert.AssertionError({ message: "expected the call to fail, but it succeeded" });
}

function assertClientError(e, name) {
  assert.equal(e.name, name, `${e.name}: ${e.message}`);
  assert.ok(e instanceof SageMakerServiceException, `${e.name} is not a SageMakerServiceException`);
  assert.equal(e.$fault, "client");
  assert.equal(e.$metadata.httpStatusCode, 400);
  assert.ok(e.$metadata.requestId, "no request id");
}

// ---- tests -------------------------------------------------------------------------------------

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

let server, sm;
const arns = {};

async function waitStatus(name, status = "InService", extra = () => true) {
  return waitUntil(async () => {
    const d = await sm.send(new DescribeClusterCommand({ ClusterName: name }));
    return d.ClusterStatus === status && extra(d) ? d : null;
  }, `${name} to be ${status}`);
}

test("create and describe (CreationTime is a Date)", async () => {
  const out = await sm.send(new CreateClusterCommand(
    clusterSpec("js-main", { Tags: [{ Key: "env", Value: "dev" }] })));
  assert.match(out.ClusterArn, /^arn:aws:sagemaker:us-west-2:\d{12}:cluster\/[a-z0-9]{12}$/);
  arns["js-main"] = out.ClusterArn;
  const d = await waitStatus("js-main");
  assert.equal(d.ClusterArn, out.ClusterArn);
  assert.ok(d.CreationTime instanceof Date, `CreationTime is ${typeof d.CreationTime}`);
  assert.ok(Math.abs(Date.now() - d.CreationTime.getTime()) < 600000);
  assert.deepEqual(
    d.InstanceGroups.map((g) => [g.InstanceGroupName, g.CurrentCount, g.TargetCount]),
    [["controller", 1, 1], ["workers", 2, 2]]);
  assert.deepEqual(d.Orchestrator, { Slurm: { SlurmConfigStrategy: "Managed" } });
  assert.ok(d.$metadata.requestId);
});

test("paginateListClusters with pageSize", async () => {
  for (const n of ["js-p1", "js-p2", "js-p3", "js-p4"]) {
    arns[n] = (await sm.send(new CreateClusterCommand(clusterSpec(n)))).ClusterArn;
  }
  const names = [];
  let pages = 0;
  for await (const page of paginateListClusters({ client: sm, pageSize: 2 }, {})) {
    pages++;
    assert.ok(page.ClusterSummaries.length <= 2);
    for (const c of page.ClusterSummaries) {
      assert.ok(c.CreationTime instanceof Date);
      names.push(c.ClusterName);
    }
  }
  assert.equal(pages, 3);
  assert.deepEqual([...names].sort(), ["js-main", "js-p1", "js-p2", "js-p3", "js-p4"]);
  const filtered = await sm.send(new ListClustersCommand({
    NameContains: "p", SortBy: "NAME", SortOrder: "Descending" }));
  assert.deepEqual(filtered.ClusterSummaries.map((c) => c.ClusterName),
                   ["js-p4", "js-p3", "js-p2", "js-p1"]);
  const none = await sm.send(new ListClustersCommand({
    CreationTimeAfter: new Date(Date.now() + 3600000) }));
  assert.deepEqual(none.ClusterSummaries, []);
});

test("list and describe cluster nodes", async () => {
  const nodes = [];
  for await (const page of paginateListClusterNodes({ client: sm, pageSize: 1 },
                                                    { ClusterName: "js-main" })) {
    assert.ok(page.ClusterNodeSummaries.length <= 1);
    nodes.push(...page.ClusterNodeSummaries);
  }
  assert.equal(nodes.length, 3);
  assert.equal(new Set(nodes.map((n) => n.InstanceId)).size, 3);
  assert.ok(nodes[0].LaunchTime instanceof Date);
  const node = nodes.find((n) => n.InstanceGroupName === "workers");
  const d = await sm.send(new DescribeClusterNodeCommand({
    ClusterName: "js-main", NodeId: node.InstanceId }));
  assert.equal(d.NodeDetails.InstanceId, node.InstanceId);
  assert.equal(d.NodeDetails.InstanceStatus.Status, "Running");
  assert.equal(d.NodeDetails.InstanceType, "ml.c5.4xlarge");
  const e = await rejects(sm.send(new DescribeClusterNodeCommand({
    ClusterName: "js-main", NodeId: UNKNOWN_NODE })));
  assert.ok(e instanceof ResourceNotFound, `got ${e.name}: ${e.message}`);
  assertClientError(e, "ResourceNotFound");
});

test("update scales a group; declarative replace is enforced; events", async () => {
  const e = await rejects(sm.send(new UpdateClusterCommand({
    ClusterName: "js-main", InstanceGroups: [CONTROLLER] })));
  assertClientError(e, "ValidationException");
  assert.match(e.message, /'workers'/);

  await waitStatus("js-p1");
  await sm.send(new UpdateClusterCommand({
    ClusterName: "js-p1", InstanceGroups: [CONTROLLER, workers(3)] }));
  const d = await waitStatus("js-p1", "InService", (d) => group(d, "workers").CurrentCount === 3);
  assert.equal(group(d, "workers").TargetCount, 3);
  const listed = await sm.send(new ListClusterNodesCommand({
    ClusterName: "js-p1", InstanceGroupNameContains: "workers" }));
  assert.equal(listed.ClusterNodeSummaries.length, 3);

  const events = [];
  for await (const page of paginateListClusterEvents({ client: sm, pageSize: 2 },
                                                     { ClusterName: "js-p1" })) {
    assert.ok(page.Events.length <= 2);
    events.push(...page.Events);
  }
  assert.equal(new Set(events.map((ev) => ev.EventId)).size, events.length);
  assert.ok(events[0].EventTime instanceof Date);
  const texts = events.map((ev) => ev.Description);
  for (const wanted of ["Cluster js-p1 creation started", "workers scaling from 2 to 3",
                        "Cluster js-p1 is InService"]) {
    assert.ok(texts.some((t) => t.includes(wanted)), `no "${wanted}" in ${JSON.stringify(texts)}`);
  }
  const groupEvents = (await sm.send(new ListClusterEventsCommand({
    ClusterName: "js-p1", ResourceType: "InstanceGroup", MaxResults: 100 }))).Events;
  assert.ok(groupEvents.length > 0);
  assert.deepEqual([...new Set(groupEvents.map((ev) => ev.ResourceType))], ["InstanceGroup"]);
  const scaling = groupEvents.find((ev) => ev.Description.includes("scaling from 2 to 3"));
  const detail = await sm.send(new DescribeClusterEventCommand({
    ClusterName: "js-p1", EventId: scaling.EventId }));
  assert.equal(detail.EventDetails.EventId, scaling.EventId);
  assert.deepEqual(detail.EventDetails.EventDetails.EventMetadata.InstanceGroupScaling,
                   { InstanceCount: 2, TargetCount: 3 });
});

test("tags: add, list (paginator), delete", async () => {
  const arn = arns["js-main"];
  const added = await sm.send(new AddTagsCommand({
    ResourceArn: arn, Tags: [{ Key: "team", Value: "ml" }, { Key: "cost", Value: "42" }] }));
  assert.equal(added.Tags.length, 2);
  const tags = [];
  for await (const page of paginateListTags({ client: sm, pageSize: 50 }, { ResourceArn: arn })) {
    tags.push(...page.Tags);
  }
  assert.deepEqual(Object.fromEntries(tags.map((t) => [t.Key, t.Value])),
                   { env: "dev", team: "ml", cost: "42" });
  await sm.send(new DeleteTagsCommand({ ResourceArn: arn, TagKeys: ["team", "cost"] }));
  const left = await sm.send(new ListTagsCommand({ ResourceArn: arn }));
  assert.deepEqual(left.Tags, [{ Key: "env", Value: "dev" }]);
});

test("batch delete cluster nodes", async () => {
  await waitStatus("js-p2");
  const listed = await sm.send(new ListClusterNodesCommand({
    ClusterName: "js-p2", InstanceGroupNameContains: "workers" }));
  const victim = listed.ClusterNodeSummaries[0].InstanceId;
  const out = await sm.send(new BatchDeleteClusterNodesCommand({
    ClusterName: "js-p2", NodeIds: [victim, UNKNOWN_NODE] }));
  assert.deepEqual(out.Successful, [victim]);
  assert.equal(out.Failed.length, 1);
  assert.equal(out.Failed[0].NodeId, UNKNOWN_NODE);
  assert.equal(out.Failed[0].Code, "NodeIdNotFound");
  await waitUntil(async () => {
    const ns = await sm.send(new ListClusterNodesCommand({ ClusterName: "js-p2" }));
    return !ns.ClusterNodeSummaries.some((n) => n.InstanceId === victim);
  }, `${victim} to go`);
  const d = await sm.send(new DescribeClusterCommand({ ClusterName: "js-p2" }));
  assert.equal(group(d, "workers").TargetCount, 1);
});

test("errors arrive as the SDK's exception classes", async () => {
  const before = (await sm.send(new ListClustersCommand({ MaxResults: 100 }))).ClusterSummaries;
  let e = await rejects(sm.send(new CreateClusterCommand(clusterSpec("js-main"))));
  assert.ok(e instanceof ResourceInUse, `got ${e.name}: ${e.message}`);
  assertClientError(e, "ResourceInUse");
  assert.match(e.message, /js-main/);

  e = await rejects(sm.send(new DescribeClusterCommand({ ClusterName: "nope" })));
  assert.ok(e instanceof ResourceNotFound, `got ${e.name}: ${e.message}`);
  assertClientError(e, "ResourceNotFound");

  for (const [spec, text] of [
    [clusterSpec("bad_name!"), /failed to satisfy constraint/],
    [clusterSpec("a".repeat(64)), /failed to satisfy constraint/],
    [clusterSpec("enum-bad", { NodeRecovery: "Bogus" }), /Bogus/],
    [clusterSpec("eks-one", { Orchestrator: { Eks: {
      ClusterArn: "arn:aws:eks:us-west-2:123456789012:cluster/k" } } }), /Eks/],
  ]) {
    e = await rejects(sm.send(new CreateClusterCommand(spec)));
    assertClientError(e, "ValidationException");
    assert.match(e.message, text);
  }
  const after = (await sm.send(new ListClustersCommand({ MaxResults: 100 }))).ClusterSummaries;
  assert.deepEqual(after.map((c) => c.ClusterArn).sort(), before.map((c) => c.ClusterArn).sort());
});

test("update while Creating is a ConflictException", async () => {
  const slow = await startServer(60000);
  try {
    const client = makeClient(slow.endpoint);
    await client.send(new CreateClusterCommand(clusterSpec("slow")));
    const e = await rejects(client.send(new UpdateClusterCommand({
      ClusterName: "slow", InstanceGroups: [CONTROLLER, workers(4)] })));
    assert.ok(e instanceof ConflictException, `got ${e.name}: ${e.message}`);
    assertClientError(e, "ConflictException");
    const d = await client.send(new DescribeClusterCommand({ ClusterName: "slow" }));
    assert.equal(d.ClusterStatus, "Creating");
    assert.equal(group(d, "workers").TargetCount, 2);
  } finally {
    await slow.stop();
  }
});

test("delete cluster, then ResourceNotFound", async () => {
  await waitStatus("js-p4");
  const out = await sm.send(new DeleteClusterCommand({ ClusterName: "js-p4" }));
  assert.equal(out.ClusterArn, arns["js-p4"]);
  await waitUntil(async () => {
    try {
      const d = await sm.send(new DescribeClusterCommand({ ClusterName: "js-p4" }));
      assert.equal(d.ClusterStatus, "Deleting");
      return false;
    } catch (e) {
      if (e instanceof ResourceNotFound) return true;
      throw e;
    }
  }, "js-p4 to be deleted");
  const names = (await sm.send(new ListClustersCommand({}))).ClusterSummaries
    .map((c) => c.ClusterName);
  assert.ok(!names.includes("js-p4"));
  assert.ok(names.includes("js-main"));
});

// ---- runner ------------------------------------------------------------------------------------

let passed = 0, failed = 0;
try {
  server = await startServer(100);
  sm = makeClient(server.endpoint);
  for (const t of tests) {
    const started = Date.now();
    try {
      await t.fn();
      passed++;
      console.log(`ok   ${t.name} (${Date.now() - started} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${t.name} (${Date.now() - started} ms)\n     ${e.stack || e}`);
    }
  }
} catch (e) {
  failed++;
  console.log(`FAIL setup: ${e.stack || e}`);
} finally {
  if (server) await server.stop();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
