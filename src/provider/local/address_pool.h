#pragma once
// Node addresses of one cluster's subnet (a /22, kSubnetBits): which are taken, which one a
// new node gets. Pure: the provider builds a pool from the nodes it lists (their addresses
// adopted) whenever it places a node. Layout of the subnet (docs/nodes.md): .0 network, .1
// the bridge's host address, .2 up to the last but one the nodes, the last the IMDS
// namespace's own address.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "hyperfleet/common/status.h"

namespace hf::provider::local {

/// The node addresses of the cluster subnet starting at `subnet_base`, and which are taken.
class AddressPool {
 public:
  /// `subnet_base`: the subnet's first address (host order), aligned to kSubnetBits.
  explicit AddressPool(uint32_t subnet_base) : base_(subnet_base) {}

  /// Ok when `ip` (dotted text) is a node address of the subnet. Errors: InvalidArgument
  /// "requested address <ip> is not a node address of <base>/22".
  Status CheckNodeAddress(std::string_view ip) const;

  /// Marks `ip` taken (a listed node's address). Anything that is not a node address of the
  /// subnet (empty, malformed, outside) is ignored: it takes nothing from the pool.
  void Adopt(std::string_view ip);

  /// Frees `ip` again; nothing when it was not taken.
  void Release(std::string_view ip);

  /// Takes the lowest free node address and returns it. Errors: ResourceExhausted "no free
  /// address left in the cluster's subnet" (all 1,021 taken).
  StatusOr<std::string> Allocate();

  /// Number of addresses taken.
  size_t taken() const { return taken_.size(); }

 private:
  // The offset of `ip` in the subnet when it is a node address.
  bool NodeOffset(std::string_view ip, uint32_t* offset) const;

  uint32_t base_;
  std::set<uint32_t> taken_;  // offsets in the subnet
};

}  // namespace hf::provider::local
