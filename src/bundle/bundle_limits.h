#pragma once
// Internal to hf_bundle: the size and count limits every bundle source applies while listing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "hyperfleet/bundle/bundle_source.h"

namespace hf::bundle {

/// Counts one more object of `size` bytes into `*total` for a listing that already holds
/// `count` objects. Errors: FailedPrecondition naming `where` when the listing would exceed
/// limits.max_objects or limits.max_total_bytes.
Status CountBundleObject(const BundleLimits& limits, const std::string& where, size_t count,
                         uint64_t size, uint64_t* total);

/// The error for a bundle (or one read) over limits.max_total_bytes.
Status BundleTooLarge(const BundleLimits& limits, const std::string& where);

}  // namespace hf::bundle
