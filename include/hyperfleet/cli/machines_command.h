#pragma once
// `hyperfleet machines`: the machine registry from the operator's side (docs/machines.md),
// through the HyperfleetMachines operations on the API endpoint (signed like `hyperfleet
// jobs`: --endpoint-url, --region, --profile, --data-dir).
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers `hyperfleet machines add|list|describe|update|remove|drain|undrain|return|
/// spares`. add ADDRESS --instance-type T --key FILE (--host-key 'TYPE BASE64' |
/// --host-key-file FILE) [--port] [--user] [--override]; spares [TYPE COUNT] sets a target
/// or lists them. Exit 1 on errors, with the AWS-style message. The private key is read
/// from its file and sent to the control plane once; no output shows it.
void AddMachinesCommand(CLI::App& app);

}  // namespace hf::cli
