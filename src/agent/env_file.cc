#include "hyperfleet/agent/env_file.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/strings.h"

namespace hf::agent {

StatusOr<std::map<std::string, std::string>> ParseEnvFile(std::string_view text) {
  std::map<std::string, std::string> values;
  int line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = StripAsciiWhitespace(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    if (line.starts_with("export ")) line = StripAsciiWhitespace(line.substr(7));
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError("line " + std::to_string(line_number) +
                                        " is not KEY=VALUE");
    }
    std::string_view value = StripAsciiWhitespace(line.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    values[std::string(StripAsciiWhitespace(line.substr(0, eq)))] = std::string(value);
  }
  return values;
}

Status LoadAgentEnv(const std::string& path, AgentOptions* options) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::NotFoundError("cannot read " + std::string(text.status().message()));
  }
  auto values = ParseEnvFile(*text);
  if (!values.ok()) {
    return absl::InvalidArgumentError(path + ": " + std::string(values.status().message()));
  }
  auto take = [&](const char* key, std::string* out) -> Status {
    auto it = values->find(key);
    if (it == values->end() || it->second.empty()) {
      return absl::InvalidArgumentError(path + ": " + key + " is missing");
    }
    *out = it->second;
    return absl::OkStatus();
  };
  HF_RETURN_IF_ERROR(take("HF_AGENT_URL", &options->url));
  HF_RETURN_IF_ERROR(take("HF_INSTANCE_ID", &options->instance_id));
  HF_RETURN_IF_ERROR(take("HF_AGENT_TOKEN", &options->token));
  options->cert_sha256.clear();
  if (auto it = values->find("HF_AGENT_CERT_SHA256"); it != values->end()) {
    // As `openssl x509 -fingerprint -sha256` prints it (AB:CD:...) or plain hex.
    std::string pin = it->second;
    pin.erase(std::remove(pin.begin(), pin.end(), ':'), pin.end());
    options->cert_sha256 = absl::AsciiStrToLower(pin);
  }
  if (Status s = CheckAgentEndpoint(*options); !s.ok()) {
    return absl::InvalidArgumentError(path + ": " + std::string(s.message()));
  }
  options->script_environment.clear();
  for (const char* key : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy",
                          "NO_PROXY"}) {
    auto it = values->find(key);
    if (it != values->end()) options->script_environment.push_back(key + ("=" + it->second));
  }
  auto imds = ImdsFromEnv(*values, options->instance_id);  // HF_IMDS* (imds_server.h)
  if (!imds.ok()) return absl::InvalidArgumentError(path + ": " + std::string(imds.status().message()));
  options->imds = std::move(*imds);
  return absl::OkStatus();
}

Status CheckAgentEndpoint(const AgentOptions& options) {
  const std::string_view url = options.url;
  const std::string& pin = options.cert_sha256;
  if (url.starts_with("http://")) {
    if (!pin.empty()) {
      return absl::InvalidArgumentError(
          "HF_AGENT_CERT_SHA256 is set but HF_AGENT_URL is not https: the node token would "
          "travel in clear text");
    }
    return absl::OkStatus();
  }
  if (!url.starts_with("https://")) {
    return absl::InvalidArgumentError("HF_AGENT_URL must be http:// or https://, got '" +
                                      options.url + "'");
  }
  if (pin.empty()) {
    return absl::InvalidArgumentError(
        "HF_AGENT_URL is https but HF_AGENT_CERT_SHA256 is missing: the agent trusts only "
        "the pinned certificate of its control plane");
  }
  const bool hex = pin.size() == 64 && std::all_of(pin.begin(), pin.end(), [](char c) {
                     return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                   });
  if (!hex) {
    return absl::InvalidArgumentError(
        "HF_AGENT_CERT_SHA256 must be the certificate's SHA-256 as 64 hex digits");
  }
  return absl::OkStatus();
}

}  // namespace hf::agent
