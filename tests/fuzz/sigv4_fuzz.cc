// libFuzzer target for SigV4 verification: builds an HttpRequest from the input (an
// Authorization value, a few headers, a target, a body) and verifies it against a fixed key.
// Verification must never crash, whatever the bytes. A second check signs the same request
// with SignSigV4 and requires that it verifies: signer and verifier must canonicalize alike.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "hyperfleet/auth/sigv4.h"

namespace {

using hf::auth::AccessKey;
using hf::auth::SecretLookup;
using hf::auth::SigV4Policy;
using hf::http::HttpRequest;

constexpr char kKeyId[] = "AKIDEXAMPLE";
constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

// 2026-11-30T01:01:04Z
const hf::SystemTime kNow = hf::SystemTime(std::chrono::seconds(1796000464));

bool IsTokenName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

bool EqualsIgnoreCase(const std::string& a, const char* b) {
  return hf::http::HeaderNameEquals(a, b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint8_t mode = in.ConsumeIntegral<uint8_t>();

  HttpRequest request;
  request.method = (mode & 1) ? "POST" : in.ConsumeRandomLengthString(8);
  request.target = in.ConsumeRandomLengthString(64);
  std::string authorization = in.ConsumeRandomLengthString(256);
  // Half the inputs start from a well-formed prefix so the fuzzer reaches the canonical
  // request and signature code quickly instead of stopping at the parser.
  if (mode & 2) {
    authorization = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/us-west-2/sagemaker/"
                    "aws4_request, " + authorization;
  }
  if (mode & 8) {
    request.headers.emplace_back("X-Amz-Date", in.ConsumeRandomLengthString(20));
  } else if (mode & 2) {
    request.headers.emplace_back("X-Amz-Date", "20261130T010104Z");
  }
  if (!(mode & 4)) request.headers.emplace_back("Authorization", authorization);
  const int header_count = in.ConsumeIntegralInRange<int>(0, 6);
  for (int i = 0; i < header_count; ++i) {
    std::string name = in.ConsumeRandomLengthString(24);
    std::string value = in.ConsumeRandomLengthString(48);
    request.headers.emplace_back(std::move(name), std::move(value));
  }
  request.body = in.ConsumeRemainingBytesAsString();

  SecretLookup secrets = [](std::string_view id) -> std::optional<std::string> {
    if (id == kKeyId) return std::string(kSecret);
    return std::nullopt;
  };
  SigV4Policy policy;
  policy.region = "us-west-2";
  policy.services = {"sagemaker"};
  (void)hf::auth::VerifySigV4(request, secrets, policy, kNow);

  // Round trip, for requests a real HTTP server could deliver: header names are tokens, and
  // no x-amz-content-sha256 (which must equal the body hash) is present.
  for (const auto& [name, value] : request.headers) {
    if (!IsTokenName(name) || EqualsIgnoreCase(name, "x-amz-content-sha256")) return 0;
  }
  hf::auth::SignSigV4(request, AccessKey{kKeyId, kSecret}, "us-west-2", "sagemaker",
                      "127.0.0.1:18080", kNow);
  auto verified = hf::auth::VerifySigV4(request, secrets, policy, kNow);
  if (!verified.ok()) {
    std::fprintf(stderr, "signed request did not verify: %s\n",
                 verified.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
