// Registered machines and hot-spare targets in the SQLite store: the row codec (JSON only
// inside the row's body), reads, and the writes of a batch.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/strings.h"
#include "store/sqlite_store.h"
#include "store/statements.h"

namespace hf::store {
namespace {

using nlohmann::json;

constexpr const char* kMachineCols = "id, address, port, instance_type, revision, body";

json TimeJson(SystemTime t) { return ToEpochSeconds(t); }
SystemTime TimeOf(const json& j) {
  return j.is_number() ? FromEpochSeconds(j.get<double>()) : SystemTime{};
}

json FactsJson(const MachineFacts& f) {
  return {{"cpus", f.cpus},         {"memory_gib", f.memory_gib}, {"gpus", f.gpus},
          {"gpu_model", f.gpu_model}, {"neuron_devices", f.neuron_devices},
          {"os_id", f.os_id},       {"os_version", f.os_version}, {"arch", f.arch}};
}

MachineFacts FactsOf(const json& j) {
  MachineFacts f;
  if (!j.is_object()) return f;
  f.cpus = j.value("cpus", 0);
  f.memory_gib = j.value("memory_gib", 0.0);
  f.gpus = j.value("gpus", 0);
  f.gpu_model = j.value("gpu_model", "");
  f.neuron_devices = j.value("neuron_devices", 0);
  f.os_id = j.value("os_id", "");
  f.os_version = j.value("os_version", "");
  f.arch = j.value("arch", "");
  return f;
}

json PoolJson(const pool::Machine& m) {
  json failures = json::array();
  for (SystemTime t : m.failures) failures.push_back(TimeJson(t));
  json j = {{"state", std::string(pool::MachineStateName(m.state))},
            {"since", TimeJson(m.since)},
            {"cluster", m.cluster},
            {"node", m.node},
            {"reason", m.reason},
            {"failures", failures}};
  if (m.last_check) j["last_check"] = TimeJson(*m.last_check);
  return j;
}

pool::Machine PoolOf(const json& j, const std::string& id, const std::string& type) {
  pool::Machine m;
  m.id = id;
  m.instance_type = type;
  if (!j.is_object()) return m;
  m.state = pool::ParseMachineState(j.value("state", "")).value_or(pool::MachineState::kFree);
  m.since = TimeOf(j.value("since", json()));
  if (j.contains("last_check")) m.last_check = TimeOf(j["last_check"]);
  m.cluster = j.value("cluster", "");
  m.node = j.value("node", "");
  m.reason = j.value("reason", "");
  for (const auto& t : j.value("failures", json::array())) m.failures.push_back(TimeOf(t));
  return m;
}

std::string MachineBody(const MachineRecord& r) {
  json j = {{"host_name", r.host_name},
            {"user", r.user},
            {"host_key", r.host_key},
            {"facts", FactsJson(r.facts)},
            {"override", r.override_checks},
            {"mismatches", r.mismatches},
            {"drained", r.drained},
            {"registered_at", TimeJson(r.registered_at)},
            {"pool", PoolJson(r.pool)}};
  return j.dump();
}

MachineRecord ReadMachine(const sqlite::Statement& s) {
  MachineRecord r;
  ReadTexts(s, 0, r.id, r.address);
  r.port = static_cast<uint16_t>(s.int64(2));
  r.instance_type = s.text(3);
  r.revision = s.int64(4);
  json body = json::parse(s.text(5), nullptr, false);
  if (!body.is_object()) body = json::object();
  r.host_name = body.value("host_name", "");
  r.user = body.value("user", "root");
  r.host_key = body.value("host_key", "");
  r.facts = FactsOf(body.value("facts", json()));
  r.override_checks = body.value("override", false);
  for (const auto& m : body.value("mismatches", json::array())) {
    if (m.is_string()) r.mismatches.push_back(m.get<std::string>());
  }
  r.drained = body.value("drained", false);
  r.registered_at = TimeOf(body.value("registered_at", json()));
  r.pool = PoolOf(body.value("pool", json()), r.id, r.instance_type);
  return r;
}

}  // namespace

StatusOr<std::vector<MachineRecord>> SqliteStore::machines() {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::vector<MachineRecord>> {
    auto s = db.cached(absl::StrCat("SELECT ", kMachineCols, " FROM machines ORDER BY id"));
    return ReadAll<MachineRecord>(db, s, "list machines", ReadMachine);
  });
}

StatusOr<MachineRecord> SqliteStore::machine(const std::string& id) {
  return withReader([&](sqlite::Database& db) -> StatusOr<MachineRecord> {
    auto s = db.cached(absl::StrCat("SELECT ", kMachineCols, " FROM machines WHERE id = ?1"));
    s.bind(1, id);
    return ReadOne<MachineRecord>(db, s, "read machine", ReadMachine, [&] {
      return absl::NotFoundError(absl::StrCat("Machine ", id, " not found"));
    });
  });
}

StatusOr<std::map<std::string, int, std::less<>>> SqliteStore::spareTargets() {
  return withReader([&](sqlite::Database& db) -> StatusOr<std::map<std::string, int, std::less<>>> {
    auto s = db.cached("SELECT instance_type, count FROM spare_targets ORDER BY instance_type");
    std::map<std::string, int, std::less<>> out;
    HF_RETURN_IF_ERROR(ForEachRow(db, s, "list spare targets", [&](const sqlite::Statement& row) {
      out[row.text(0)] = static_cast<int>(row.int64(1));
    }));
    return out;
  });
}

Status WriteMachine(sqlite::Database& db, const MachineWrite& w, int64_t rev) {
  const MachineRecord& r = w.machine;
  HF_RETURN_IF_ERROR(
      CheckRevision(db, "machines", "id", r.id, w.expected_revision, "Machine"));
  if (w.erase) {
    auto s = db.cached("DELETE FROM machines WHERE id = ?1");
    s.bind(1, r.id);
    return RunWrite(db, s, "delete machine");
  }
  {
    // Another machine at the same address and port: a conflict, said plainly.
    auto s = db.cached("SELECT id FROM machines WHERE address = ?1 AND port = ?2 AND id <> ?3");
    s.bindAll(r.address, static_cast<int64_t>(r.port), r.id);
    const StatusOr<bool> row = s.step();
    if (!row.ok()) return db.error("read machine address");
    if (*row) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Machine ", s.text(0), " is registered at ", r.address, " port ", r.port, " already"));
    }
  }
  auto s = db.cached(absl::StrCat(
      "INSERT INTO machines (", kMachineCols,
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(id) DO UPDATE SET "
      "address = excluded.address, port = excluded.port, instance_type = excluded.instance_type, "
      "revision = excluded.revision, body = excluded.body"));
  s.bindAll(r.id, r.address, static_cast<int64_t>(r.port), r.instance_type, rev, MachineBody(r));
  return RunWrite(db, s, "write machine");
}

Status WriteSpareTarget(sqlite::Database& db, const SpareTargetWrite& w) {
  if (w.count <= 0) {
    auto s = db.cached("DELETE FROM spare_targets WHERE instance_type = ?1");
    s.bind(1, w.instance_type);
    return RunWrite(db, s, "delete spare target");
  }
  auto s = db.cached(
      "INSERT INTO spare_targets (instance_type, count) VALUES (?1, ?2) "
      "ON CONFLICT(instance_type) DO UPDATE SET count = excluded.count");
  s.bindAll(w.instance_type, static_cast<int64_t>(w.count));
  return RunWrite(db, s, "write spare target");
}

}  // namespace hf::store
