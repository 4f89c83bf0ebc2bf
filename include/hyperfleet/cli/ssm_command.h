#pragma once
// `hyperfleet ssm start-session`: shell sessions into nodes, as HyperPod users do with SSM.
#include <CLI/CLI.hpp>

namespace hf::cli {

/// Registers `hyperfleet ssm start-session --target
/// sagemaker-cluster:<cluster-id>_<instance-group-name>-<instance-id> [--command C]` with the
/// client flags of client_config.h (endpoint from --endpoint-url, AWS_ENDPOINT_URL_SAGEMAKER,
/// AWS_ENDPOINT_URL; signed for service "ssm"). Without --command and with a terminal on
/// stdin and stdout: an interactive login shell under a pty (raw mode, window resizes
/// forwarded); otherwise the command (or a shell reading stdin) with stdout and stderr apart.
/// Exits with the remote exit status; on an error prints it (as the AWS CLI words call
/// errors) and exits 255, as the AWS CLI does.
void AddSsmCommand(CLI::App& app);

}  // namespace hf::cli
