#pragma once
// How every `hyperfleet` client command (logs, ssm, ...) finds the control plane and signs its
// requests, following the AWS tools' precedence rules (AWS CLI / SDK "configuration and
// credential file settings" and "service-specific endpoints" documentation):
//
//   endpoint    --endpoint-url, else AWS_ENDPOINT_URL_<SERVICE> (SAGEMAKER, CLOUDWATCH_LOGS),
//               else AWS_ENDPOINT_URL, else `endpoint_url` of the profile in the config
//               file, else http://127.0.0.1:9080 (the local server's default --listen);
//   region      --region, else AWS_REGION, else AWS_DEFAULT_REGION, else `region` of the
//               profile in the config file (AWS_CONFIG_FILE or ~/.aws/config), else us-west-2;
//   credentials AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), else the
//               profile (--profile, else AWS_PROFILE, else "default") in the shared
//               credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials), else
//               [default] of <data-dir>/credentials (the server's own file; data dir from
//               --data-dir / ResolveDataDir), else an error that lists what was tried.
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "hyperfleet/auth/sigv4.h"
#include "hyperfleet/common/clock.h"
#include "hyperfleet/common/status.h"
#include "hyperfleet/http/http.h"

namespace hf::http {
class HttpClient;
}

namespace hf::cli {

/// An AWS service that a client command calls: its SigV4 signing name, its JSON 1.1 target
/// prefix and the suffix of its service-specific endpoint variable.
struct ClientService {
  std::string signing_name;  ///< "sagemaker", "logs"
  std::string target_prefix; ///< "SageMaker", "Logs_20140328" (X-Amz-Target = prefix.Op)
  std::string endpoint_env;  ///< "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS"
};

/// SageMaker (HyperPod API): signing name sagemaker, target prefix SageMaker.
const ClientService& SageMakerService();
/// CloudWatch Logs: signing name logs, target prefix Logs_20140328.
const ClientService& LogsService();

/// The flags every client command takes (empty = not given).
struct ClientFlags {
  std::string endpoint_url{};  ///< --endpoint-url
  std::string region{};        ///< --region
  std::string profile{};       ///< --profile
  std::string data_dir{};      ///< --data-dir: where to find the server's credentials file
};

/// Adds --endpoint-url, --region, --profile and --data-dir to `command`, bound to `flags`
/// (which must outlive the parse).
void AddClientFlags(CLI::App& command, ClientFlags& flags);

/// Environment lookup; nullopt when unset. Empty values count as unset, as in botocore.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
/// The process environment (getenv).
EnvLookup ProcessEnv();

/// Everything a signed call needs.
struct ClientConfig {
  std::string endpoint_url;   ///< e.g. "http://127.0.0.1:9080" (no trailing '/')
  std::string region;         ///< e.g. "us-west-2"
  auth::AccessKey key;
  std::string session_token;  ///< sent as X-Amz-Security-Token when non-empty
  /// Where the key came from, for messages: "environment", "shared credentials file
  /// /root/.aws/credentials [default]", "data dir credentials /var/lib/hyperfleet/credentials".
  std::string credentials_source;
};

/// Resolves the configuration for `service` by the rules at the top of this file. `env`
/// defaults to the process environment (tests inject one; HOME comes from it too).
/// Errors: InvalidArgument for an endpoint URL that is not http(s)://...; NotFound (AWS type
/// NoCredentialsError) when no credentials were found, naming every place that was tried and
/// how to fix it; a profile named by --profile/AWS_PROFILE that is in neither file is an
/// error too (NotFound, type ProfileNotFound), as the AWS CLI does.
StatusOr<ClientConfig> ResolveClientConfig(const ClientFlags& flags, const ClientService& service,
                                           const EnvLookup& env = ProcessEnv());

/// A signed AWS JSON 1.1 client for one service. Not thread-safe (one HTTP connection,
/// reused across calls); use one per thread.
class AwsJsonClient {
 public:
  /// `clock` must outlive the client; null means the system clock.
  AwsJsonClient(ClientConfig config, ClientService service, const Clock* clock = nullptr);
  ~AwsJsonClient();
  AwsJsonClient(AwsJsonClient&&) noexcept;
  AwsJsonClient& operator=(AwsJsonClient&&) noexcept;

  /// POSTs `body` to "/" with X-Amz-Target "<target_prefix>.<operation>" and Content-Type
  /// application/x-amz-json-1.1, signed with SigV4 (service's signing name, config's region),
  /// and waits at most `timeout_seconds` (<= 0: no limit). Returns the parsed response body
  /// ({} for an empty body). Errors: Unavailable when the endpoint cannot be reached (the
  /// message names the URL); for an AWS error response, a Status carrying the AWS error type
  /// (AwsErrorTypeOf: the "__type" after any '#', else x-amzn-ErrorType) and its "message",
  /// with the canonical code from the type (ResourceNotFoundException → NotFound, signature
  /// and token errors → Unauthenticated, AccessDenied → PermissionDenied, other 4xx →
  /// InvalidArgument, 503 → Unavailable, other 5xx → Internal); Internal when a 200 body is
  /// not a JSON object.
  StatusOr<nlohmann::json> Call(std::string_view operation, const nlohmann::json& body,
                                int timeout_seconds = 60);

  /// Signs an arbitrary request to this endpoint in place (e.g. a WebSocket upgrade GET):
  /// sets Host from the endpoint, X-Amz-Security-Token when there is a session token, then
  /// SignSigV4 with the service's signing name. `request.target` is the path (+ query).
  void Sign(http::HttpRequest& request) const;

  /// The resolved configuration.
  const ClientConfig& config() const { return config_; }

 private:
  ClientConfig config_;
  ClientService service_;
  const Clock* clock_;
  std::unique_ptr<http::HttpClient> http_;
};

/// The text the AWS CLI prints for a failed call, e.g.
/// "An error occurred (ResourceNotFoundException) when calling the GetLogEvents operation:
/// The specified log group does not exist." Statuses without an AWS type print their message.
std::string DescribeCallError(const Status& status, std::string_view operation);

/// "host:port" of an http(s) URL (port omitted when absent), as SigV4's Host header wants it.
/// Errors: InvalidArgument when `url` does not start with http:// or https:// or has no host.
StatusOr<std::string> HostOfUrl(std::string_view url);

}  // namespace hf::cli
