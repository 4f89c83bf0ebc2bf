#pragma once
// Identifier formats from the SageMaker service model, and an injectable source of them.
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace hf {

/// Source of fresh identifiers. Thread-safe implementations only.
class IdSource {
 public:
  virtual ~IdSource() = default;
  /// 12 lowercase alphanumerics: the id part of a cluster ARN (`cluster/[a-z0-9]{12}`,
  /// pattern of ClusterArn in the service model).
  virtual std::string clusterId() = 0;
  /// `i-` + 17 lowercase hex digits (ClusterNodeId pattern `i-[a-f0-9]{8}(?:[a-f0-9]{9})?`).
  virtual std::string instanceId() = 0;
  /// An event id: a UUID, as the model's EventId pattern requires.
  virtual std::string eventId() = 0;
  /// A UUIDv4 string, for x-amzn-RequestId and provider request ids.
  virtual std::string uuid() = 0;
  /// 12 lowercase hex digits, the unique part of a NodeLogicalId.
  std::string logicalIdSuffix() { return uuid().substr(24); }
};

/// Ids from OpenSSL's CSPRNG.
class RandomIdSource final : public IdSource {
 public:
  std::string clusterId() override;
  std::string instanceId() override;
  std::string eventId() override;
  std::string uuid() override;
};

/// Deterministic ids from a counter and a seed, for tests and simulation: the n-th id of a
/// kind is a pure function of (seed, n).
class SequentialIdSource final : public IdSource {
 public:
  explicit SequentialIdSource(unsigned seed = 0) : seed_(seed) {}
  std::string clusterId() override;
  std::string instanceId() override;
  std::string eventId() override;
  std::string uuid() override;

 private:
  std::string next(std::string_view alphabet, int length);
  std::mutex mu_;
  unsigned seed_;
  unsigned long long counter_ = 0;
};

}  // namespace hf
