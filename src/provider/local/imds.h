#pragma once
// The IMDSv2 endpoint every cluster's nodes reach at 169.254.169.254 (docs/nodes.md): the
// listening socket made inside a network namespace; its answers are hf_imds's.
#include <cstdint>
#include <string>

#include "hyperfleet/common/status.h"
#include "hyperfleet/imds/imds.h"

namespace hf::provider::local {

// The answers and tokens are hf_imds's (include/hyperfleet/imds/imds.h), shared with the
// node agent on registered machines.
using imds::ImdsNode;
using imds::ImdsNodeOf;
using imds::ImdsResponse;
using imds::ImdsTokens;

/// A listening TCP socket (close-on-exec) bound to `ipv4`:`port` inside the network namespace
/// /run/netns/`ns`. Errors: Internal naming the namespace and errno text.
StatusOr<int> ListenInNetns(const std::string& ns, const std::string& ipv4, uint16_t port);

}  // namespace hf::provider::local
