// The registry's API operations: see include/hyperfleet/machines/machines_service.h.
#include "hyperfleet/machines/machines_service.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/strings.h"

namespace hf::machines {

using nlohmann::json;

namespace {

constexpr std::string_view kMachinesModel = R"({
  "version": "2.0",
  "metadata": {"apiVersion": "2026-12-02", "protocol": "json", "jsonVersion": "1.1",
               "targetPrefix": "HyperfleetMachines", "signingName": "sagemaker"},
  "operations": {
    "RegisterMachine": {"name": "RegisterMachine", "input": {"shape": "RegisterMachineRequest"},
                        "output": {"shape": "MachineResponse"}},
    "UpdateMachine": {"name": "UpdateMachine", "input": {"shape": "UpdateMachineRequest"},
                      "output": {"shape": "MachineResponse"}},
    "DescribeMachine": {"name": "DescribeMachine", "input": {"shape": "MachineIdRequest"},
                        "output": {"shape": "MachineResponse"}},
    "ListMachines": {"name": "ListMachines", "input": {"shape": "ListMachinesRequest"},
                     "output": {"shape": "ListMachinesResponse"}},
    "DeregisterMachine": {"name": "DeregisterMachine", "input": {"shape": "MachineIdRequest"},
                          "output": {"shape": "Empty"}},
    "DrainMachine": {"name": "DrainMachine", "input": {"shape": "MachineIdRequest"},
                     "output": {"shape": "MachineResponse"}},
    "UndrainMachine": {"name": "UndrainMachine", "input": {"shape": "MachineIdRequest"},
                       "output": {"shape": "MachineResponse"}},
    "ReturnMachine": {"name": "ReturnMachine", "input": {"shape": "MachineIdRequest"},
                      "output": {"shape": "MachineResponse"}},
    "PutSpareTarget": {"name": "PutSpareTarget", "input": {"shape": "PutSpareTargetRequest"},
                       "output": {"shape": "Empty"}},
    "ListSpareTargets": {"name": "ListSpareTargets", "input": {"shape": "Empty"},
                         "output": {"shape": "ListSpareTargetsResponse"}}
  },
  "shapes": {
    "Empty": {"type": "structure", "members": {}},
    "RegisterMachineRequest": {"type": "structure",
      "required": ["Address", "SshPrivateKey", "HostPublicKey", "InstanceType"],
      "members": {"Address": {"shape": "Host"}, "Port": {"shape": "Port"},
                  "User": {"shape": "User"}, "SshPrivateKey": {"shape": "PrivateKey"},
                  "HostPublicKey": {"shape": "PublicKey"}, "InstanceType": {"shape": "InstanceType"},
                  "OverrideChecks": {"shape": "Boolean"}}},
    "UpdateMachineRequest": {"type": "structure", "required": ["MachineId"],
      "members": {"MachineId": {"shape": "MachineId"}, "Port": {"shape": "Port"},
                  "User": {"shape": "User"}, "SshPrivateKey": {"shape": "PrivateKey"},
                  "HostPublicKey": {"shape": "PublicKey"}}},
    "MachineIdRequest": {"type": "structure", "required": ["MachineId"],
      "members": {"MachineId": {"shape": "MachineId"}}},
    "ListMachinesRequest": {"type": "structure",
      "members": {"InstanceType": {"shape": "InstanceType"}}},
    "PutSpareTargetRequest": {"type": "structure", "required": ["InstanceType", "Count"],
      "members": {"InstanceType": {"shape": "InstanceType"}, "Count": {"shape": "SpareCount"}}},
    "MachineResponse": {"type": "structure", "members": {"Machine": {"shape": "Machine"}}},
    "ListMachinesResponse": {"type": "structure",
      "members": {"Machines": {"shape": "MachineList"}}},
    "ListSpareTargetsResponse": {"type": "structure",
      "members": {"SpareTargets": {"shape": "SpareTargetList"}}},
    "MachineList": {"type": "list", "member": {"shape": "Machine"}},
    "Machine": {"type": "structure", "members": {
      "MachineId": {"shape": "String"}, "Address": {"shape": "String"},
      "HostName": {"shape": "String"}, "Port": {"shape": "Integer"}, "User": {"shape": "String"},
      "HostPublicKey": {"shape": "String"}, "InstanceType": {"shape": "String"},
      "State": {"shape": "String"}, "StateSince": {"shape": "Timestamp"},
      "StateReason": {"shape": "String"}, "ClusterId": {"shape": "String"},
      "NodeId": {"shape": "String"}, "Drained": {"shape": "Boolean"},
      "OverrideChecks": {"shape": "Boolean"}, "Mismatches": {"shape": "StringList"},
      "Facts": {"shape": "MachineFacts"}, "Failures": {"shape": "Integer"},
      "LastCheckTime": {"shape": "Timestamp"}, "RegisteredAt": {"shape": "Timestamp"}}},
    "MachineFacts": {"type": "structure", "members": {
      "Cpus": {"shape": "Integer"}, "MemoryGiB": {"shape": "Double"},
      "Gpus": {"shape": "Integer"}, "GpuModel": {"shape": "String"},
      "NeuronDevices": {"shape": "Integer"}, "OsId": {"shape": "String"},
      "OsVersion": {"shape": "String"}, "Arch": {"shape": "String"}}},
    "SpareTargetList": {"type": "list", "member": {"shape": "SpareTarget"}},
    "SpareTarget": {"type": "structure", "members": {
      "InstanceType": {"shape": "String"}, "Count": {"shape": "Integer"},
      "Ready": {"shape": "Integer"}, "Provisioning": {"shape": "Integer"},
      "Free": {"shape": "Integer"}, "Total": {"shape": "Integer"}}},
    "StringList": {"type": "list", "member": {"shape": "String"}},
    "Host": {"type": "string", "min": 1, "max": 253},
    "Port": {"type": "integer", "min": 1, "max": 65535},
    "User": {"type": "string", "min": 1, "max": 32},
    "PrivateKey": {"type": "string", "min": 1, "max": 16384, "sensitive": true},
    "PublicKey": {"type": "string", "min": 1, "max": 16384},
    "InstanceType": {"type": "string", "min": 1, "max": 64},
    "MachineId": {"type": "string", "min": 14, "max": 14, "pattern": "^m-[0-9a-f]{12}$"},
    "SpareCount": {"type": "integer", "min": 0, "max": 1000},
    "Boolean": {"type": "boolean"},
    "Integer": {"type": "integer"},
    "Double": {"type": "double"},
    "String": {"type": "string"},
    "Timestamp": {"type": "timestamp"}
  }
})";

std::string Str(const json& input, const char* key) { return input.value(key, std::string()); }

}  // namespace

MachinesService::MachinesService(MachineRegistry& registry) : registry_(registry) {
  auto parsed = model::ServiceModel::FromJson(kMachinesModel);
  if (!parsed.ok()) std::abort();  // a constant, covered by the unit tests
  model_ = *parsed;
}

json MachinesService::Describe(const store::MachineRecord& r) {
  const auto& f = r.facts;
  json out = {
      {"MachineId", r.id},
      {"Address", r.address},
      {"Port", r.port},
      {"User", r.user},
      {"HostPublicKey", r.host_key},
      {"InstanceType", r.instance_type},
      {"State", std::string(pool::MachineStateName(r.pool.state))},
      {"StateSince", ToEpochSeconds(r.pool.since)},
      {"Drained", r.drained},
      {"OverrideChecks", r.override_checks},
      {"Mismatches", r.mismatches},
      {"Facts", {{"Cpus", f.cpus}, {"MemoryGiB", f.memory_gib}, {"Gpus", f.gpus},
                 {"GpuModel", f.gpu_model}, {"NeuronDevices", f.neuron_devices},
                 {"OsId", f.os_id}, {"OsVersion", f.os_version}, {"Arch", f.arch}}},
      {"Failures", r.pool.failures.size()},
      {"RegisteredAt", ToEpochSeconds(r.registered_at)},
  };
  if (!r.host_name.empty()) out["HostName"] = r.host_name;
  if (!r.pool.reason.empty()) out["StateReason"] = r.pool.reason;
  if (!r.pool.cluster.empty()) out["ClusterId"] = r.pool.cluster;
  if (!r.pool.node.empty()) out["NodeId"] = r.pool.node;
  if (r.pool.last_check) out["LastCheckTime"] = ToEpochSeconds(*r.pool.last_check);
  return out;
}

StatusOr<json> MachinesService::call(std::string_view op, const json& input) {
  auto one = [](const StatusOr<store::MachineRecord>& r) -> StatusOr<json> {
    if (!r.ok()) return r.status();
    return json{{"Machine", Describe(*r)}};
  };
  const std::string id = Str(input, "MachineId");
  if (op == "RegisterMachine") {
    RegisterRequest req;
    req.address = Str(input, "Address");
    req.port = static_cast<uint16_t>(input.value("Port", 22));
    req.user = input.value("User", std::string("root"));
    req.private_key = Str(input, "SshPrivateKey");
    req.host_key = Str(input, "HostPublicKey");
    req.instance_type = Str(input, "InstanceType");
    req.override_checks = input.value("OverrideChecks", false);
    return one(registry_.registerMachine(req));
  }
  if (op == "UpdateMachine") {
    UpdateRequest req;
    req.id = id;
    if (input.contains("Port")) req.port = static_cast<uint16_t>(input["Port"].get<int>());
    if (input.contains("User")) req.user = Str(input, "User");
    if (input.contains("SshPrivateKey")) req.private_key = Str(input, "SshPrivateKey");
    if (input.contains("HostPublicKey")) req.host_key = Str(input, "HostPublicKey");
    return one(registry_.update(req));
  }
  if (op == "DescribeMachine") return one(registry_.describe(id));
  if (op == "DrainMachine") return one(registry_.setDrained(id, true));
  if (op == "UndrainMachine") return one(registry_.setDrained(id, false));
  if (op == "ReturnMachine") return one(registry_.returnMachine(id));
  if (op == "DeregisterMachine") {
    HF_RETURN_IF_ERROR(registry_.deregister(id));
    return json::object();
  }
  if (op == "ListMachines") {
    HF_ASSIGN_OR_RETURN(auto records, registry_.list());
    const std::string type = Str(input, "InstanceType");
    json list = json::array();
    for (const auto& r : records) {
      if (type.empty() || r.instance_type == type) list.push_back(Describe(r));
    }
    return json{{"Machines", list}};
  }
  if (op == "PutSpareTarget") {
    HF_RETURN_IF_ERROR(registry_.putSpareTarget(Str(input, "InstanceType"), input.value("Count", 0)));
    return json::object();
  }
  if (op == "ListSpareTargets") {
    HF_ASSIGN_OR_RETURN(auto targets, registry_.spareTargets());
    HF_ASSIGN_OR_RETURN(auto records, registry_.list());
    std::vector<pool::Machine> machines;
    for (const auto& r : records) machines.push_back(r.pool);
    json list = json::array();
    for (const auto& [type, count] : targets) {
      const pool::Capacity c = pool::CountCapacity(machines, type);
      list.push_back({{"InstanceType", type}, {"Count", count}, {"Ready", c.spares_ready},
                      {"Provisioning", c.spares_provisioning}, {"Free", c.free},
                      {"Total", c.total}});
    }
    return json{{"SpareTargets", list}};
  }
  return absl::UnimplementedError(absl::StrCat("HyperfleetMachines.", AbslView(op), " is not implemented"));
}

}  // namespace hf::machines
