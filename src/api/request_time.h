#pragma once
// Timestamps in SageMaker request bodies (private to src/api).
#include <optional>

#include <nlohmann/json.hpp>

#include "hyperfleet/common/clock.h"

namespace hf::api {

/// The request member `key` as a time: epoch seconds (what the SDKs send) or an RFC 3339
/// string; nullopt when absent or neither.
std::optional<SystemTime> RequestTimestamp(const nlohmann::json& in, const char* key);

}  // namespace hf::api
