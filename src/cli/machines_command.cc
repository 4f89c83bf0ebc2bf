#include "hyperfleet/cli/machines_command.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hyperfleet/cli/client_config.h"
#include "hyperfleet/cli/command_error.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/strings.h"

namespace hf::cli {
namespace {

using nlohmann::json;

/// The registry's operations on the API endpoint, signed like SageMaker's.
const ClientService& MachinesService() {
  static const ClientService service{"sagemaker", "HyperfleetMachines",
                                     "AWS_ENDPOINT_URL_SAGEMAKER"};
  return service;
}

struct Flags {
  ClientFlags client;
  std::string output = "text";
  // add / update
  std::string address;
  std::string id;
  std::string instance_type;
  std::string key_file;
  std::string host_key;
  std::string host_key_file;
  int port = 0;  // 0: not given
  std::string user;
  bool override_checks = false;
  // spares
  std::vector<std::string> spare;
};

StatusOr<json> Call(const Flags& f, std::string_view op, const json& body) {
  HF_ASSIGN_OR_RETURN(ClientConfig config, ResolveClientConfig(f.client, MachinesService()));
  AwsJsonClient client(std::move(config), MachinesService());
  // Registration connects to the machine and probes it: longer than a plain call.
  auto resp = client.Call(op, body, 180);
  if (!resp.ok()) {
    return absl::Status(resp.status().code(), DescribeCallError(resp.status(), op));
  }
  return resp;
}

/// The host key: --host-key's text or --host-key-file's first line.
StatusOr<std::string> HostKeyOf(const Flags& f) {
  if (!f.host_key_file.empty()) {
    HF_ASSIGN_OR_RETURN(std::string text, ReadFile(f.host_key_file));
    return std::string(StripAsciiWhitespace(text.substr(0, text.find('\n'))));
  }
  return f.host_key;
}

std::string Gib(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

/// One machine as `describe` shows it.
void PrintMachine(const json& m) {
  const json facts = m.value("Facts", json::object());
  std::printf("%s\n", m.value("MachineId", "").c_str());
  std::printf("  address        %s port %d%s\n", m.value("Address", "").c_str(), m.value("Port", 22),
              m.contains("HostName") ? absl::StrCat(" (", m.value("HostName", ""), ")").c_str() : "");
  std::printf("  user           %s\n", m.value("User", "").c_str());
  std::printf("  host key       %s\n", m.value("HostPublicKey", "").c_str());
  std::printf("  instance type  %s\n", m.value("InstanceType", "").c_str());
  std::printf("  state          %s%s%s\n", m.value("State", "").c_str(),
              m.value("Drained", false) ? " (drained)" : "",
              m.contains("StateReason") ? absl::StrCat(": ", m.value("StateReason", "")).c_str() : "");
  if (m.contains("NodeId")) {
    std::printf("  node           %s of cluster %s\n", m.value("NodeId", "").c_str(),
                m.value("ClusterId", "").c_str());
  }
  std::printf("  hardware       %d CPUs, %s GiB, %d GPUs%s%s\n", facts.value("Cpus", 0),
              Gib(facts.value("MemoryGiB", 0.0)).c_str(), facts.value("Gpus", 0),
              facts.value("GpuModel", "").empty() ? "" : absl::StrCat(" (", facts.value("GpuModel", ""), ")").c_str(),
              facts.value("NeuronDevices", 0) > 0
                  ? absl::StrCat(", ", facts.value("NeuronDevices", 0), " Neuron devices").c_str()
                  : "");
  std::printf("  os             %s %s, %s\n", facts.value("OsId", "").c_str(),
              facts.value("OsVersion", "").c_str(), facts.value("Arch", "").c_str());
  std::printf("  failures       %d\n", m.value("Failures", 0));
  if (m.value("OverrideChecks", false)) {
    std::printf("  override       registered with the override\n");
    for (const auto& s : m.value("Mismatches", json::array())) {
      std::printf("    - %s\n", s.get<std::string>().c_str());
    }
  }
}

/// The machines as a table: id, address, type, state (and why), node, facts.
void PrintTable(const json& machines) {
  std::printf("%-14s  %-21s  %-16s  %-20s  %-30s  %s\n", "ID", "ADDRESS", "TYPE", "STATE",
              "NODE", "HARDWARE / OS");
  for (const auto& m : machines) {
    const json facts = m.value("Facts", json::object());
    std::string state = m.value("State", "");
    if (m.value("Drained", false)) state += ",drained";
    if (m.value("OverrideChecks", false)) state += ",override";
    const std::string node =
        m.contains("NodeId") ? absl::StrCat(m.value("ClusterId", ""), "/", m.value("NodeId", "")) : "-";
    std::printf("%-14s  %-21s  %-16s  %-20s  %-30s  %dc %sG %dgpu %s %s\n",
                m.value("MachineId", "").c_str(),
                absl::StrCat(m.value("Address", ""), ":", m.value("Port", 22)).c_str(),
                m.value("InstanceType", "").c_str(), state.c_str(), node.c_str(),
                facts.value("Cpus", 0), Gib(facts.value("MemoryGiB", 0.0)).c_str(),
                facts.value("Gpus", 0), facts.value("OsId", "").c_str(),
                facts.value("OsVersion", "").c_str());
    if (m.contains("StateReason")) std::printf("%-14s  why: %s\n", "", m.value("StateReason", "").c_str());
  }
}

Status Print(const Flags& f, const json& resp) {
  if (f.output == "json") {
    std::printf("%s\n", resp.dump(2).c_str());
  } else if (resp.contains("Machine")) {
    PrintMachine(resp["Machine"]);
  } else if (resp.contains("Machines")) {
    PrintTable(resp["Machines"]);
  } else if (resp.contains("SpareTargets")) {
    std::printf("%-20s  %6s  %6s  %12s  %5s  %6s\n", "TYPE", "TARGET", "READY", "PROVISIONING",
                "FREE", "TOTAL");
    for (const auto& t : resp["SpareTargets"]) {
      std::printf("%-20s  %6d  %6d  %12d  %5d  %6d\n", t.value("InstanceType", "").c_str(),
                  t.value("Count", 0), t.value("Ready", 0), t.value("Provisioning", 0),
                  t.value("Free", 0), t.value("Total", 0));
    }
  }
  return absl::OkStatus();
}

Status RunAdd(const Flags& f) {
  HF_ASSIGN_OR_RETURN(std::string key, ReadFile(f.key_file));
  HF_ASSIGN_OR_RETURN(std::string host_key, HostKeyOf(f));
  if (host_key.empty()) {
    return absl::InvalidArgumentError("give the machine's host key: --host-key or --host-key-file");
  }
  json body = {{"Address", f.address}, {"InstanceType", f.instance_type},
               {"SshPrivateKey", key}, {"HostPublicKey", host_key}};
  if (f.port != 0) body["Port"] = f.port;
  if (!f.user.empty()) body["User"] = f.user;
  if (f.override_checks) body["OverrideChecks"] = true;
  HF_ASSIGN_OR_RETURN(json resp, Call(f, "RegisterMachine", body));
  return Print(f, resp);
}

Status RunUpdate(const Flags& f) {
  json body = {{"MachineId", f.id}};
  if (!f.key_file.empty()) {
    HF_ASSIGN_OR_RETURN(std::string key, ReadFile(f.key_file));
    body["SshPrivateKey"] = key;
  }
  HF_ASSIGN_OR_RETURN(std::string host_key, HostKeyOf(f));
  if (!host_key.empty()) body["HostPublicKey"] = host_key;
  if (f.port != 0) body["Port"] = f.port;
  if (!f.user.empty()) body["User"] = f.user;
  HF_ASSIGN_OR_RETURN(json resp, Call(f, "UpdateMachine", body));
  return Print(f, resp);
}

Status RunSpares(const Flags& f) {
  if (f.spare.size() == 2) {
    int count = 0;
    if (!absl::SimpleAtoi(AbslView(f.spare[1]), &count) || count < 0) {
      return absl::InvalidArgumentError("COUNT must be a whole number, 0 or more");
    }
    HF_RETURN_IF_ERROR(
        Call(f, "PutSpareTarget", json{{"InstanceType", f.spare[0]}, {"Count", count}}).status());
  } else if (!f.spare.empty()) {
    return absl::InvalidArgumentError("spares takes TYPE COUNT, or nothing to list the targets");
  }
  HF_ASSIGN_OR_RETURN(json resp, Call(f, "ListSpareTargets", json::object()));
  return Print(f, resp);
}

CLI::App* Sub(CLI::App& parent, const std::string& name, const std::string& help,
              std::shared_ptr<Flags> flags, Status (*run)(const Flags&)) {
  auto* cmd = parent.add_subcommand(name, help);
  AddClientFlags(*cmd, flags->client);
  cmd->add_option("--output", flags->output, "text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([flags, run, name] {
    if (Status s = run(*flags); !s.ok()) ExitWithError("machines " + name, s);
  });
  return cmd;
}

/// A subcommand taking one machine id and calling `op` with it.
void IdCommand(CLI::App& parent, const std::string& name, const std::string& help,
               const std::string& op) {
  auto flags = std::make_shared<Flags>();
  auto* cmd = parent.add_subcommand(name, help);
  AddClientFlags(*cmd, flags->client);
  cmd->add_option("id", flags->id, "Machine id (m-...)")->required();
  cmd->add_option("--output", flags->output, "text or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  cmd->callback([flags, name, op] {
    auto resp = Call(*flags, op, json{{"MachineId", flags->id}});
    Status s = resp.ok() ? Print(*flags, *resp) : resp.status();
    if (s.ok() && op == "DeregisterMachine") std::printf("removed %s\n", flags->id.c_str());
    if (!s.ok()) ExitWithError("machines " + name, s);
  });
}

}  // namespace

void AddMachinesCommand(CLI::App& app) {
  auto* machines = app.add_subcommand(
      "machines", "Your own machines over ssh: register them, see them, drain, return, spares");
  machines->require_subcommand(1);

  auto add = std::make_shared<Flags>();
  auto* add_cmd = Sub(*machines, "add",
                      "Register a machine: reached over ssh with its pinned host key, probed "
                      "and checked against the instance type",
                      add, RunAdd);
  add_cmd->add_option("address", add->address, "IPv4 address or host name")->required();
  add_cmd->add_option("--instance-type", add->instance_type, "e.g. ml.g5.xlarge")->required();
  add_cmd->add_option("--key", add->key_file, "ssh private key file (not encrypted)")->required();
  add_cmd->add_option("--host-key", add->host_key, "the machine's host public key, 'TYPE BASE64'");
  add_cmd->add_option("--host-key-file", add->host_key_file,
                      "a file holding it (e.g. a copy of /etc/ssh/ssh_host_ed25519_key.pub)");
  add_cmd->add_option("--port", add->port, "ssh port (default 22)")->check(CLI::Range(1, 65535));
  add_cmd->add_option("--user", add->user, "ssh user: root (default) or one with passwordless sudo");
  add_cmd->add_flag("--override", add->override_checks,
                    "keep it even when its hardware or OS does not fit the type (recorded)");

  auto list = std::make_shared<Flags>();
  auto* list_cmd = Sub(*machines, "list", "The machines: state (and why), node, hardware, OS", list,
                       [](const Flags& f) -> Status {
                         json body = json::object();
                         if (!f.instance_type.empty()) body["InstanceType"] = f.instance_type;
                         HF_ASSIGN_OR_RETURN(json resp, Call(f, "ListMachines", body));
                         return Print(f, resp);
                       });
  list_cmd->add_option("--instance-type", list->instance_type, "only machines of this type");

  auto update = std::make_shared<Flags>();
  auto* update_cmd = Sub(*machines, "update",
                         "Change how a machine is reached (reached with the new settings first)",
                         update, RunUpdate);
  update_cmd->add_option("id", update->id, "Machine id (m-...)")->required();
  update_cmd->add_option("--key", update->key_file, "new ssh private key file");
  update_cmd->add_option("--host-key", update->host_key, "new host public key, 'TYPE BASE64'");
  update_cmd->add_option("--host-key-file", update->host_key_file, "a file holding it");
  update_cmd->add_option("--port", update->port, "new ssh port")->check(CLI::Range(1, 65535));
  update_cmd->add_option("--user", update->user, "new ssh user");

  IdCommand(*machines, "describe", "One machine in full", "DescribeMachine");
  IdCommand(*machines, "remove", "Deregister a machine (refused while it serves a node)",
            "DeregisterMachine");
  IdCommand(*machines, "drain", "Grant it to no new node nor spare", "DrainMachine");
  IdCommand(*machines, "undrain", "Undo drain", "UndrainMachine");
  IdCommand(*machines, "return", "Return a quarantined machine (it is checked first)",
            "ReturnMachine");

  auto spares = std::make_shared<Flags>();
  auto* spares_cmd = Sub(*machines, "spares",
                         "Hot spares per instance type: TYPE COUNT sets a target; alone, lists",
                         spares, RunSpares);
  spares_cmd->add_option("target", spares->spare, "TYPE COUNT")->expected(0, 2);
}

}  // namespace hf::cli
