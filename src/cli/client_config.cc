#include "hyperfleet/cli/client_config.h"

#include <cstdlib>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/paths.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/http/http_client.h"

namespace hf::cli {
namespace {

constexpr std::string_view kDefaultEndpoint = "http://127.0.0.1:9080";
constexpr std::string_view kDefaultRegion = "us-west-2";

using Section = std::map<std::string, std::string>;
using IniFile = std::map<std::string, Section>;

/// Reads an AWS-style INI file: `[name]` sections, `key = value` lines, keys lowercased,
/// `#`/`;` comment lines skipped. nullopt when the file cannot be read.
std::optional<IniFile> ReadIni(const std::string& path) {
  const StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  IniFile out;
  std::string section;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    const std::string_view v = StripAsciiWhitespace(StdView(line));
    if (v.empty() || v[0] == '#' || v[0] == ';') continue;
    if (v.front() == '[' && v.back() == ']') {
      section = std::string(StripAsciiWhitespace(v.substr(1, v.size() - 2)));
      out[section];
      continue;
    }
    const size_t eq = v.find_first_of("=:");
    if (eq == std::string_view::npos || section.empty()) continue;
    out[section][absl::AsciiStrToLower(AbslView(StripAsciiWhitespace(v.substr(0, eq))))] =
        std::string(StripAsciiWhitespace(v.substr(eq + 1)));
  }
  return out;
}

std::string Home(const EnvLookup& env) {
  if (auto h = env("HOME")) return *h;
  return "/root";
}

/// Expands a leading "~/" as the AWS CLI does for its file variables.
std::string ExpandHome(const std::string& path, const EnvLookup& env) {
  if (path == "~" || path.starts_with("~/")) return Home(env) + path.substr(1);
  return path;
}

std::string StripTrailingSlash(std::string url) {
  while (url.size() > 1 && url.back() == '/') url.pop_back();
  return url;
}

/// The canonical code that an AWS error type maps back to on the client side.
absl::StatusCode CodeForAwsType(const std::string& type, int http_status) {
  if (absl::StrContains(type, "NotFound")) return absl::StatusCode::kNotFound;
  if (type == "InvalidSignatureException" || type == "UnrecognizedClientException" ||
      type == "MissingAuthenticationTokenException" || type == "IncompleteSignatureException") {
    return absl::StatusCode::kUnauthenticated;
  }
  if (absl::StrContains(type, "AccessDenied")) return absl::StatusCode::kPermissionDenied;
  if (http_status == 503) return absl::StatusCode::kUnavailable;
  if (http_status >= 500) return absl::StatusCode::kInternal;
  return absl::StatusCode::kInvalidArgument;
}

}  // namespace

const ClientService& SageMakerService() {
  static const ClientService s{"sagemaker", "SageMaker", "AWS_ENDPOINT_URL_SAGEMAKER"};
  return s;
}

const ClientService& LogsService() {
  static const ClientService s{"logs", "Logs_20140328", "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS"};
  return s;
}

void AddClientFlags(CLI::App& command, ClientFlags& flags) {
  command.add_option("--endpoint-url", flags.endpoint_url,
                     "Control plane URL (default: AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, "
                     "else http://127.0.0.1:9080)");
  command.add_option("--region", flags.region,
                     "Region to sign for (default: AWS_REGION, AWS_DEFAULT_REGION, the profile, "
                     "else us-west-2)");
  command.add_option("--profile", flags.profile, "Profile of the shared AWS files");
  command.add_option("--data-dir", flags.data_dir,
                     "Data dir whose credentials file is the last fallback");
}

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

StatusOr<std::string> HostOfUrl(std::string_view url) {
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    rest = url.substr(8);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid endpoint URL '", std::string(url), "': expected http(s)://HOST[:PORT]"));
  }
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (rest.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Invalid endpoint URL '", std::string(url), "': no host"));
  }
  return std::string(rest);
}

StatusOr<ClientConfig> ResolveClientConfig(const ClientFlags& flags, const ClientService& service,
                                           const EnvLookup& env) {
  ClientConfig c;
  const bool profile_named = !flags.profile.empty() || env("AWS_PROFILE").has_value();
  const std::string profile =
      !flags.profile.empty() ? flags.profile : env("AWS_PROFILE").value_or("default");

  const std::string config_path =
      ExpandHome(env("AWS_CONFIG_FILE").value_or(Home(env) + "/.aws/config"), env);
  const std::string creds_path = ExpandHome(
      env("AWS_SHARED_CREDENTIALS_FILE").value_or(Home(env) + "/.aws/credentials"), env);
  const std::optional<IniFile> config_file = ReadIni(config_path);
  const std::optional<IniFile> creds_file = ReadIni(creds_path);
  // In the config file a profile is "[profile name]", except "[default]".
  const Section* config_section = nullptr;
  if (config_file) {
    auto it = config_file->find(profile == "default" ? "default" : "profile " + profile);
    if (it == config_file->end() && profile == "default") it = config_file->find("profile default");
    if (it != config_file->end()) config_section = &it->second;
  }
  const Section* creds_section = nullptr;
  if (creds_file) {
    auto it = creds_file->find(profile);
    if (it != creds_file->end()) creds_section = &it->second;
  }
  if (profile_named && config_section == nullptr && creds_section == nullptr) {
    return WithAwsErrorType(
        absl::NotFoundError(absl::StrCat("The config profile (", profile,
                                         ") could not be found (looked in ", creds_path, " and ",
                                         config_path, ").")),
        "ProfileNotFound");
  }
  auto from_profile = [&](const char* key) -> std::optional<std::string> {
    for (const Section* s : {creds_section, config_section}) {
      if (s == nullptr) continue;
      auto it = s->find(key);
      if (it != s->end() && !it->second.empty()) return it->second;
    }
    return std::nullopt;
  };

  // Endpoint.
  if (!flags.endpoint_url.empty()) {
    c.endpoint_url = flags.endpoint_url;
  } else if (auto v = env(service.endpoint_env)) {
    c.endpoint_url = *v;
  } else if (auto v = env("AWS_ENDPOINT_URL")) {
    c.endpoint_url = *v;
  } else if (auto v = from_profile("endpoint_url")) {
    c.endpoint_url = *v;
  } else {
    c.endpoint_url = std::string(kDefaultEndpoint);
  }
  c.endpoint_url = StripTrailingSlash(c.endpoint_url);
  HF_RETURN_IF_ERROR(HostOfUrl(c.endpoint_url).status());

  // Region.
  if (!flags.region.empty()) {
    c.region = flags.region;
  } else if (auto v = env("AWS_REGION")) {
    c.region = *v;
  } else if (auto v = env("AWS_DEFAULT_REGION")) {
    c.region = *v;
  } else if (auto v = from_profile("region")) {
    c.region = *v;
  } else {
    c.region = std::string(kDefaultRegion);
  }

  // Credentials.
  auto id = env("AWS_ACCESS_KEY_ID");
  auto secret = env("AWS_SECRET_ACCESS_KEY");
  if (id && secret) {
    c.key = {*id, *secret};
    c.session_token = env("AWS_SESSION_TOKEN").value_or("");
    c.credentials_source = "environment";
    return c;
  }
  if (creds_section != nullptr || config_section != nullptr) {
    auto pid = from_profile("aws_access_key_id");
    auto psecret = from_profile("aws_secret_access_key");
    if (pid && psecret) {
      c.key = {*pid, *psecret};
      c.session_token = from_profile("aws_session_token").value_or("");
      c.credentials_source =
          absl::StrCat("shared credentials file ", creds_path, " [", profile, "]");
      return c;
    }
  }
  // HYPERFLEET_DATA_DIR through `env` first, so that an injected environment is obeyed.
  const std::string data_dir = !flags.data_dir.empty() ? flags.data_dir
                               : env("HYPERFLEET_DATA_DIR").value_or(ResolveDataDir(""));
  const std::string data_creds = data_dir + "/credentials";
  if (auto file = ReadIni(data_creds)) {
    auto it = file->find("default");
    if (it != file->end() && it->second.count("aws_access_key_id") &&
        it->second.count("aws_secret_access_key")) {
      c.key = {it->second.at("aws_access_key_id"), it->second.at("aws_secret_access_key")};
      c.credentials_source = "data dir credentials " + data_creds;
      return c;
    }
  }
  return WithAwsErrorType(
      absl::NotFoundError(absl::StrCat(
          "Unable to locate credentials: tried AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ",
          creds_path, " [", profile, "] and ", data_creds,
          ". Export the server's key pair, point AWS_SHARED_CREDENTIALS_FILE at the server's "
          "credentials file, or pass --data-dir.")),
      "NoCredentialsError");
}

AwsJsonClient::AwsJsonClient(ClientConfig config, ClientService service, const Clock* clock)
    : config_(std::move(config)), service_(std::move(service)), clock_(clock),
      http_(std::make_unique<http::HttpClient>()) {}
AwsJsonClient::~AwsJsonClient() = default;
AwsJsonClient::AwsJsonClient(AwsJsonClient&&) noexcept = default;
AwsJsonClient& AwsJsonClient::operator=(AwsJsonClient&&) noexcept = default;

void AwsJsonClient::Sign(http::HttpRequest& request) const {
  const std::string host = HostOfUrl(config_.endpoint_url).value_or("");
  std::erase_if(request.headers, [](const auto& h) {
    return http::HeaderNameEquals(h.first, "Host") ||
           http::HeaderNameEquals(h.first, "X-Amz-Security-Token");
  });
  request.headers.emplace_back("Host", host);
  if (!config_.session_token.empty()) {
    request.headers.emplace_back("X-Amz-Security-Token", config_.session_token);
  }
  static const SystemClock system_clock;
  const SystemTime now = (clock_ != nullptr ? clock_ : &system_clock)->now();
  auth::SignSigV4(request, config_.key, config_.region, service_.signing_name, host, now);
}

StatusOr<nlohmann::json> AwsJsonClient::Call(std::string_view operation,
                                             const nlohmann::json& body, int timeout_seconds) {
  http::HttpRequest req;
  req.method = "POST";
  req.target = "/";
  req.headers = {{"Content-Type", "application/x-amz-json-1.1"},
                 {"X-Amz-Target", absl::StrCat(service_.target_prefix, ".", std::string(operation))}};
  req.body = body.dump();
  Sign(req);
  HF_ASSIGN_OR_RETURN(http::HttpResponse resp,
                      http_->Send(config_.endpoint_url, req, timeout_seconds));
  nlohmann::json parsed = resp.body.empty() ? nlohmann::json::object()
                                            : nlohmann::json::parse(resp.body, nullptr, false);
  if (resp.status >= 200 && resp.status < 300) {
    if (parsed.is_discarded() || !parsed.is_object()) {
      return absl::InternalError(absl::StrCat("The response to ", std::string(operation),
                                              " is not a JSON object: ", resp.body.substr(0, 200)));
    }
    return parsed;
  }
  std::string type, message;
  if (parsed.is_object()) {
    if (auto it = parsed.find("__type"); it != parsed.end() && it->is_string()) {
      type = it->get<std::string>();
    }
    for (const char* key : {"message", "Message"}) {
      if (auto it = parsed.find(key); it != parsed.end() && it->is_string()) {
        message = it->get<std::string>();
        break;
      }
    }
  }
  if (type.empty()) {
    for (const auto& [name, value] : resp.headers) {
      if (http::HeaderNameEquals(name, "x-amzn-ErrorType")) type = value;
    }
  }
  if (auto hash = type.find('#'); hash != std::string::npos) type = type.substr(hash + 1);
  if (auto colon = type.find(':'); colon != std::string::npos) type = type.substr(0, colon);
  if (type.empty()) type = resp.status >= 500 ? "InternalFailure" : "UnknownError";
  if (message.empty()) message = absl::StrCat("HTTP ", resp.status, " ", resp.body.substr(0, 200));
  return WithAwsErrorType(Status(CodeForAwsType(type, resp.status), message), type);
}

std::string DescribeCallError(const Status& status, std::string_view operation) {
  if (auto type = AwsErrorTypeOf(status)) {
    if (*type == "NoCredentialsError" || *type == "ProfileNotFound") {
      return std::string(status.message());
    }
    return absl::StrCat("An error occurred (", *type, ") when calling the ", std::string(operation),
                        " operation: ", std::string(status.message()));
  }
  return std::string(status.message());
}

}  // namespace hf::cli
