#include "provider/local/address_pool.h"

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/strings.h"
#include "provider/local/cluster_network.h"

namespace hf::provider::local {

bool AddressPool::NodeOffset(std::string_view ip, uint32_t* offset) const {
  const auto addr = ParseIpv4(ip);
  if (!addr || !PrefixesOverlap(*addr, 32, base_, kSubnetBits)) return false;
  *offset = *addr - base_;
  return *offset >= 2 && *offset < kSubnetSize - 1;
}

Status AddressPool::CheckNodeAddress(std::string_view ip) const {
  uint32_t offset = 0;
  if (!NodeOffset(ip, &offset)) {
    return absl::InvalidArgumentError(absl::StrCat("requested address ", AbslView(ip),
                                                   " is not a node address of ",
                                                   Ipv4Text(base_), "/22"));
  }
  return absl::OkStatus();
}

void AddressPool::Adopt(std::string_view ip) {
  uint32_t offset = 0;
  if (NodeOffset(ip, &offset)) taken_.insert(offset);
}

void AddressPool::Release(std::string_view ip) {
  uint32_t offset = 0;
  if (NodeOffset(ip, &offset)) taken_.erase(offset);
}

StatusOr<std::string> AddressPool::Allocate() {
  for (uint32_t offset = 2; offset < kSubnetSize - 1; ++offset) {
    if (taken_.insert(offset).second) return Ipv4Text(base_ + offset);
  }
  return absl::ResourceExhaustedError("no free address left in the cluster's subnet");
}

}  // namespace hf::provider::local
