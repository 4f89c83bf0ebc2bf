#include "hyperfleet/auth/sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <map>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/strings.h"
#include "hyperfleet/common/uri.h"

namespace hf::auth {
namespace {

using Digest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
constexpr std::string_view kTerminator = "aws4_request";

// ---- AWS-style errors --------------------------------------------------------------------

Status MissingToken() {
  return WithAwsErrorType(absl::UnauthenticatedError("Request is missing Authentication Token"),
                          "MissingAuthenticationTokenException");
}

Status Incomplete(const std::string& message) {
  return WithAwsErrorType(absl::InvalidArgumentError(message), "IncompleteSignatureException");
}

Status InvalidSignature(const std::string& message) {
  return WithAwsErrorType(absl::UnauthenticatedError(message), "InvalidSignatureException");
}

Status SignatureMismatch() {
  return InvalidSignature(
      "The request signature we calculated does not match the signature you provided. Check "
      "your AWS Secret Access Key and signing method. Consult the service documentation for "
      "details.");
}

Status UnrecognizedClient() {
  return WithAwsErrorType(
      absl::UnauthenticatedError("The security token included in the request is invalid."),
      "UnrecognizedClientException");
}

// ---- Small string helpers ----------------------------------------------------------------

bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

std::string ToLower(std::string_view s) { return absl::AsciiStrToLower(AbslView(s)); }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(AbslView(a), AbslView(b));
}

// Trimall from the SigV4 rules: trim, and collapse inner whitespace runs to one space (what
// botocore's ' '.join(value.split()) does).
void AppendTrimAll(std::string_view value, std::string& out) {
  value = StripAsciiWhitespace(value);
  bool in_space = false;
  for (char c : value) {
    if (IsSpace(c)) {
      in_space = true;
      continue;
    }
    if (in_space) out.push_back(' ');
    in_space = false;
    out.push_back(c);
  }
}

std::string HexEncode(const unsigned char* data, size_t size) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(data), size));
}

// ---- Crypto (OpenSSL) --------------------------------------------------------------------

Digest Sha256(std::string_view data) {
  Digest out{};
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data());
  return out;
}

Digest Hmac(const void* key, size_t key_size, std::string_view data) {
  Digest out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key, static_cast<int>(key_size),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
  return out;
}

Digest DeriveSigningKey(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service) {
  std::string k_secret = "AWS4";
  k_secret.append(secret);
  Digest k = Hmac(k_secret.data(), k_secret.size(), date);
  k = Hmac(k.data(), k.size(), region);
  k = Hmac(k.data(), k.size(), service);
  return Hmac(k.data(), k.size(), kTerminator);
}

// Signing keys change once a day per (secret, region, service), so a small cache saves four
// HMACs on every request. Cleared wholesale when full: entries are cheap to recompute.
class SigningKeyCache {
 public:
  Digest Get(std::string_view secret, std::string_view date, std::string_view region,
             std::string_view service) {
    std::string key;
    key.reserve(secret.size() + date.size() + region.size() + service.size() + 3);
    key.append(secret).append(1, '\0').append(date).append(1, '\0');
    key.append(region).append(1, '\0').append(service);
    {
      std::shared_lock lock(mu_);
      auto it = keys_.find(key);
      if (it != keys_.end()) return it->second;
    }
    Digest derived = DeriveSigningKey(secret, date, region, service);
    std::unique_lock lock(mu_);
    if (keys_.size() >= kMaxEntries) keys_.clear();
    keys_.emplace(std::move(key), derived);
    return derived;
  }

 private:
  static constexpr size_t kMaxEntries = 256;
  std::shared_mutex mu_;
  std::unordered_map<std::string, Digest> keys_;
};

SigningKeyCache& KeyCache() {
  static auto* cache = new SigningKeyCache();  // never destroyed: used from I/O threads
  return *cache;
}

// ---- Time --------------------------------------------------------------------------------

// Request times are kept in seconds: a nanosecond SystemTime overflows outside 1678..2262,
// and X-Amz-Date may carry any year.
using Seconds = std::chrono::sys_seconds;

std::string FormatAmzDate(Seconds secs) {
  using namespace std::chrono;
  auto days = floor<std::chrono::days>(secs);
  year_month_day ymd(days);
  hh_mm_ss hms(secs - days);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04d%02u%02uT%02d%02d%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

bool ParseDigits(std::string_view s, int* out) {
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return !s.empty();
}

std::optional<Seconds> MakeTime(int y, int mo, int d, int h, int mi, int s) {
  using namespace std::chrono;
  year_month_day ymd{year(y), month(static_cast<unsigned>(mo)), day(static_cast<unsigned>(d))};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 59) return std::nullopt;
  return Seconds(sys_days(ymd)) + hours(h) + minutes(mi) + seconds(s);
}

// ISO-8601 basic format, as X-Amz-Date carries it: 20261130T010104Z.
std::optional<Seconds> ParseAmzDate(std::string_view v) {
  if (v.size() != 16 || v[8] != 'T' || v[15] != 'Z') return std::nullopt;
  int y, mo, d, h, mi, s;
  if (!ParseDigits(v.substr(0, 4), &y) || !ParseDigits(v.substr(4, 2), &mo) ||
      !ParseDigits(v.substr(6, 2), &d) || !ParseDigits(v.substr(9, 2), &h) ||
      !ParseDigits(v.substr(11, 2), &mi) || !ParseDigits(v.substr(13, 2), &s)) {
    return std::nullopt;
  }
  return MakeTime(y, mo, d, h, mi, s);
}

// RFC 7231 IMF-fixdate, the usual form of a Date header: Mon, 30 Nov 2026 01:01:04 GMT.
std::optional<Seconds> ParseHttpDate(std::string_view v) {
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (v.size() != 29 || v[3] != ',' || v[4] != ' ' || v[7] != ' ' || v[11] != ' ' ||
      v[16] != ' ' || v[19] != ':' || v[22] != ':' || v.substr(25) != " GMT") {
    return std::nullopt;
  }
  int mo = 0;
  for (int i = 0; i < 12; ++i) {
    if (v.substr(8, 3) == kMonths[i]) mo = i + 1;
  }
  int y, d, h, mi, s;
  if (mo == 0 || !ParseDigits(v.substr(5, 2), &d) || !ParseDigits(v.substr(12, 4), &y) ||
      !ParseDigits(v.substr(17, 2), &h) || !ParseDigits(v.substr(20, 2), &mi) ||
      !ParseDigits(v.substr(23, 2), &s)) {
    return std::nullopt;
  }
  return MakeTime(y, mo, d, h, mi, s);
}

// ---- Canonical request -------------------------------------------------------------------

// Query components are decoded as WHATWG URLSearchParams does ('+' is a space, a bad escape
// stays literal), so any client's encoding canonicalizes to the same bytes.
std::string CanonicalQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> params;
  for (const QueryParam& p : ParseQueryLenient(query)) {
    params.emplace_back(UriEncode(p.name), UriEncode(p.value));
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out.push_back('&');
    out.append(name).append(1, '=').append(value);
  }
  return out;
}

// Non-S3 canonical URI, as botocore and the JS SDK compute it: drop empty and "." segments,
// resolve "..", keep a leading and trailing slash, then URI-encode the result once more
// (so a "%" already on the wire becomes "%25"). A normalized path like "/" or "/sm" is
// unchanged.
std::string CanonicalUri(std::string_view path) {
  if (path.empty()) return "/";
  std::vector<std::string_view> segments;
  std::string_view rest = path;
  while (true) {
    size_t slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!seg.empty() && seg != ".") {
      segments.push_back(seg);
    }
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  std::string normalized = path.front() == '/' ? "/" : "";
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i > 0) normalized.push_back('/');
    normalized.append(segments[i]);
  }
  if (!segments.empty() && path.back() == '/') normalized.push_back('/');
  return UriEncode(normalized, /*keep_slash=*/true);
}

// Canonical request over `signed_headers` in the order given. Every value of a repeated
// header is kept, joined by ','; a signed header that is absent gets an empty value (the
// signature then cannot match, which is the right outcome).
std::string CanonicalRequest(const HttpRequest& request,
                             const std::vector<std::string_view>& signed_names,
                             std::string_view signed_headers_line, std::string_view payload_hash) {
  std::string cr;
  cr.reserve(256 + request.target.size());
  cr.append(request.method).push_back('\n');
  cr.append(CanonicalUri(request.path())).push_back('\n');
  cr.append(CanonicalQuery(request.query())).push_back('\n');
  for (std::string_view name : signed_names) {
    for (char c : name) cr.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    cr.push_back(':');
    bool first = true;
    for (const auto& [k, v] : request.headers) {
      if (!EqualsIgnoreCase(k, name)) continue;
      if (!first) cr.push_back(',');
      first = false;
      AppendTrimAll(v, cr);
    }
    cr.push_back('\n');
  }
  cr.push_back('\n');
  cr.append(signed_headers_line).push_back('\n');
  cr.append(payload_hash);
  return cr;
}

std::string StringToSign(std::string_view amz_date, std::string_view scope,
                         std::string_view canonical_request) {
  Digest cr_hash = Sha256(canonical_request);
  std::string sts;
  sts.reserve(kAlgorithm.size() + amz_date.size() + scope.size() + 70);
  sts.append(kAlgorithm).append(1, '\n');
  sts.append(amz_date).append(1, '\n');
  sts.append(scope).append(1, '\n');
  sts.append(HexEncode(cr_hash.data(), cr_hash.size()));
  return sts;
}

std::string ComputeSignature(std::string_view secret, std::string_view date,
                             std::string_view region, std::string_view service,
                             std::string_view string_to_sign) {
  Digest key = KeyCache().Get(secret, date, region, service);
  Digest sig = Hmac(key.data(), key.size(), string_to_sign);
  return HexEncode(sig.data(), sig.size());
}

std::vector<std::string_view> SplitSignedHeaders(std::string_view list) {
  std::vector<std::string_view> names;
  while (true) {
    size_t semi = list.find(';');
    names.push_back(list.substr(0, semi));
    if (semi == std::string_view::npos) break;
    list.remove_prefix(semi + 1);
  }
  return names;
}

// ---- Authorization header ----------------------------------------------------------------

struct AuthorizationParams {
  std::optional<std::string_view> credential;
  std::optional<std::string_view> signed_headers;
  std::optional<std::string_view> signature;
};

bool IsParamSeparator(char c) { return c == ',' || IsSpace(c); }

// Parses "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...". Parameters may
// come in any order, separated by commas and/or whitespace, with optional spaces around '='.
// Unknown parameters are ignored. Errors: IncompleteSignatureException.
StatusOr<AuthorizationParams> ParseAuthorization(std::string_view header, bool has_date) {
  std::string_view value = StripAsciiWhitespace(header);
  size_t algo_end = 0;
  while (algo_end < value.size() && !IsSpace(value[algo_end])) ++algo_end;
  AuthorizationParams params;
  if (value.substr(0, algo_end) == kAlgorithm) {
    std::string_view rest = value.substr(algo_end);
    size_t i = 0;
    while (true) {
      while (i < rest.size() && IsParamSeparator(rest[i])) ++i;
      if (i >= rest.size()) break;
      size_t key_begin = i;
      while (i < rest.size() && rest[i] != '=' && !IsParamSeparator(rest[i])) ++i;
      std::string_view key = rest.substr(key_begin, i - key_begin);
      size_t j = i;
      while (j < rest.size() && IsSpace(rest[j])) ++j;
      if (j >= rest.size() || rest[j] != '=') {
        return Incomplete("'" + std::string(key) +
                          "' not a valid key=value pair (missing equal-sign) in Authorization "
                          "header: '" + std::string(value) + "'.");
      }
      i = j + 1;
      while (i < rest.size() && IsSpace(rest[i])) ++i;
      size_t value_begin = i;
      while (i < rest.size() && !IsParamSeparator(rest[i])) ++i;
      std::string_view param = rest.substr(value_begin, i - value_begin);
      if (key == "Credential") {
        params.credential = param;
      } else if (key == "SignedHeaders") {
        params.signed_headers = param;
      } else if (key == "Signature") {
        params.signature = param;
      }
    }
  }
  // An unknown scheme ("Bearer ...", SigV2's "AWS id:sig") is reported like AWS does: as a
  // header lacking every SigV4 parameter.
  std::string missing;
  if (!params.credential) missing += "Authorization header requires 'Credential' parameter. ";
  if (!params.signature) missing += "Authorization header requires 'Signature' parameter. ";
  if (!params.signed_headers) {
    missing += "Authorization header requires 'SignedHeaders' parameter. ";
  }
  if (!has_date) {
    missing += "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' "
               "header. ";
  }
  if (!missing.empty()) return Incomplete(missing + "Authorization=" + std::string(header));
  return params;
}

struct Scope {
  std::string_view key_id, date, region, service, terminator;
  std::string_view scope;  // date/region/service/terminator, as received
};

StatusOr<Scope> ParseCredential(std::string_view credential) {
  std::string_view parts[5];
  std::string_view rest = credential;
  int n = 0;
  while (true) {
    size_t slash = rest.find('/');
    if (n < 5) parts[n] = rest.substr(0, slash);
    ++n;
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  if (n != 5) {
    return Incomplete(
        "Credential must have exactly 5 slash-delimited elements, e.g. "
        "keyid/date/region/service/term, got '" + std::string(credential) + "'");
  }
  Scope s{parts[0], parts[1], parts[2], parts[3], parts[4], {}};
  s.scope = credential.substr(parts[0].size() + 1);
  return s;
}

std::string SkewMinutes(std::chrono::seconds max_skew) {
  return std::to_string(std::chrono::duration_cast<std::chrono::minutes>(max_skew).count());
}

}  // namespace

std::string Sha256Hex(std::string_view data) {
  Digest d = Sha256(data);
  return HexEncode(d.data(), d.size());
}

StatusOr<VerifiedIdentity> VerifySigV4(const HttpRequest& request, const SecretLookup& secrets,
                                       const SigV4Policy& policy, SystemTime now) {
  std::optional<std::string_view> authorization = request.header("Authorization");
  if (!authorization) return MissingToken();

  // X-Amz-Date wins over Date, as in every SDK that sends both.
  std::optional<std::string_view> date_header = request.header("X-Amz-Date");
  bool is_amz_date = date_header.has_value();
  if (!date_header) date_header = request.header("Date");

  HF_ASSIGN_OR_RETURN(AuthorizationParams params,
                      ParseAuthorization(*authorization, date_header.has_value()));
  HF_ASSIGN_OR_RETURN(Scope scope, ParseCredential(*params.credential));

  std::vector<std::string_view> signed_names = SplitSignedHeaders(*params.signed_headers);
  bool host_signed = std::any_of(signed_names.begin(), signed_names.end(),
                                 [](std::string_view n) { return EqualsIgnoreCase(n, "host"); });
  if (!host_signed) {
    return Incomplete("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");
  }

  std::string_view date_value = StripAsciiWhitespace(*date_header);
  std::optional<Seconds> request_time = ParseAmzDate(date_value);
  if (!request_time && !is_amz_date) request_time = ParseHttpDate(date_value);
  if (!request_time) {
    return Incomplete("Date must be in ISO-8601 'basic format'. Got '" + std::string(date_value) +
                      "'. See http://en.wikipedia.org/wiki/ISO_8601");
  }
  // The string to sign always carries the ISO-8601 basic form.
  std::string amz_date = FormatAmzDate(*request_time);

  if (scope.terminator != kTerminator) {
    return InvalidSignature("Credential should be scoped with a valid terminator: 'aws4_request', "
                            "not '" + std::string(scope.terminator) + "'. ");
  }
  if (scope.region != policy.region) {
    return InvalidSignature("Credential should be scoped to a valid region.");
  }
  if (std::find(policy.services.begin(), policy.services.end(), scope.service) ==
      policy.services.end()) {
    std::string expected = policy.services.empty() ? "" : policy.services.front();
    return InvalidSignature("Credential should be scoped to correct service: '" + expected +
                            "'. ");
  }
  if (scope.date != std::string_view(amz_date).substr(0, 8)) {
    return InvalidSignature(
        "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from "
        "HTTP: '" + std::string(scope.date) + "' != '" + amz_date.substr(0, 8) + "', from '" +
        amz_date + "'.");
  }

  const Seconds now_s = std::chrono::floor<std::chrono::seconds>(now);
  const auto skew = std::chrono::duration_cast<std::chrono::seconds>(policy.max_skew);
  if (*request_time < now_s - skew) {
    return InvalidSignature("Signature expired: " + amz_date + " is now earlier than " +
                            FormatAmzDate(now_s - skew) + " (" + FormatAmzDate(now_s) + " - " +
                            SkewMinutes(skew) + " min.)");
  }
  if (*request_time > now_s + skew) {
    return InvalidSignature("Signature not yet current: " + amz_date + " is still later than " +
                            FormatAmzDate(now_s + skew) + " (" + FormatAmzDate(now_s) + " + " +
                            SkewMinutes(skew) + " min.)");
  }

  std::optional<std::string> secret;
  if (secrets && !scope.key_id.empty()) secret = secrets(scope.key_id);
  if (!secret) return UnrecognizedClient();

  // x-amz-content-sha256 is what the client signed as the payload hash; it must also really
  // be the body's hash, or a captured signature would cover any body (UNSIGNED-PAYLOAD and
  // streaming forms are refused for the same reason).
  std::string body_hash = Sha256Hex(request.body);
  std::string_view payload_hash = body_hash;
  if (auto declared = request.header("X-Amz-Content-Sha256")) {
    payload_hash = StripAsciiWhitespace(*declared);
    if (!EqualsIgnoreCase(payload_hash, body_hash)) return SignatureMismatch();
  }

  std::string canonical =
      CanonicalRequest(request, signed_names, *params.signed_headers, payload_hash);
  std::string expected = ComputeSignature(*secret, scope.date, scope.region, scope.service,
                                          StringToSign(amz_date, scope.scope, canonical));
  std::string provided = ToLower(*params.signature);
  if (provided.size() != expected.size() ||
      CRYPTO_memcmp(provided.data(), expected.data(), expected.size()) != 0) {
    return SignatureMismatch();
  }
  return VerifiedIdentity{std::string(scope.key_id), std::string(scope.region),
                          std::string(scope.service)};
}

StatusOr<VerifiedIdentity> VerifyPresignedUrl(std::string_view url, const http::Headers& headers,
                                              const SecretLookup& secrets,
                                              const PresignedPolicy& policy, SystemTime now) {
  auto refuse = [](std::string why) { return absl::UnauthenticatedError(why); };
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return refuse("the token's URL has no scheme");
  std::string_view rest = url.substr(scheme + 3);
  const size_t path_at = rest.find_first_of("/?");
  const std::string_view host = rest.substr(0, path_at);
  if (host.empty()) return refuse("the token's URL has no host");
  HttpRequest req;
  req.method = "GET";
  req.target = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
  if (req.target.starts_with('?')) req.target.insert(0, "/");
  // The query without the signature is what was signed.
  std::map<std::string, std::string, std::less<>> params;
  std::string signed_query;
  for (absl::string_view split : absl::StrSplit(AbslView(req.query()), '&')) {
    const std::string_view pair(split.data(), split.size());
    const std::vector<QueryParam> one = ParseQueryLenient(pair);
    if (one.empty()) continue;
    const QueryParam& p = one.front();
    params[p.name] = p.value;
    if (p.name == "X-Amz-Signature") continue;
    if (!signed_query.empty()) signed_query.push_back('&');
    signed_query.append(pair);
  }
  for (const char* name : {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date",
                           "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"}) {
    if (!params.contains(name)) return refuse(std::string("the token's URL has no ") + name);
  }
  if (params["X-Amz-Algorithm"] != kAlgorithm) return refuse("the token's algorithm is not "
                                                             "AWS4-HMAC-SHA256");
  auto parsed_scope = ParseCredential(params["X-Amz-Credential"]);
  if (!parsed_scope.ok()) return refuse("the token's X-Amz-Credential is not valid");
  const Scope& scope = *parsed_scope;
  if (scope.terminator != kTerminator || scope.region != policy.region ||
      scope.service != policy.service) {
    return refuse("the token is not scoped to " + policy.service + " in " + policy.region);
  }
  const std::optional<Seconds> signed_at = ParseAmzDate(params["X-Amz-Date"]);
  if (!signed_at || scope.date != std::string_view(params["X-Amz-Date"]).substr(0, 8)) {
    return refuse("the token's X-Amz-Date is not valid");
  }
  int expires = 0;
  if (!ParseDigits(params["X-Amz-Expires"], &expires) || expires <= 0 ||
      expires > policy.max_expires.count()) {
    return refuse("the token's X-Amz-Expires must be 1 to " +
                  std::to_string(policy.max_expires.count()) + " seconds");
  }
  const Seconds now_s = std::chrono::floor<std::chrono::seconds>(now);
  if (*signed_at < now_s - policy.max_age) return refuse("the token has expired");
  if (*signed_at > now_s + policy.max_skew) return refuse("the token is not yet valid");
  std::optional<std::string> secret;
  if (secrets && !scope.key_id.empty()) secret = secrets(scope.key_id);
  if (!secret) return refuse("the token's access key is not known");

  req.target = req.target.substr(0, req.target.find('?')) + "?" + signed_query;
  req.headers = headers;
  req.headers.emplace_back("host", std::string(host));
  const std::string& signed_line = params["X-Amz-SignedHeaders"];
  std::vector<std::string_view> names = SplitSignedHeaders(signed_line);
  std::string canonical = CanonicalRequest(req, names, signed_line, Sha256Hex(""));
  std::string expected = ComputeSignature(*secret, scope.date, scope.region, scope.service,
                                          StringToSign(params["X-Amz-Date"], scope.scope,
                                                       canonical));
  std::string provided = ToLower(params["X-Amz-Signature"]);
  if (provided.size() != expected.size() ||
      CRYPTO_memcmp(provided.data(), expected.data(), expected.size()) != 0) {
    return refuse("the token's signature does not match");
  }
  return VerifiedIdentity{std::string(scope.key_id), std::string(scope.region),
                          std::string(scope.service)};
}

void SignSigV4(HttpRequest& request, const AccessKey& key, std::string_view region,
               std::string_view service, std::string_view host, SystemTime now) {
  auto& headers = request.headers;
  auto drop = [&headers](std::string_view name) {
    headers.erase(std::remove_if(headers.begin(), headers.end(),
                                 [name](const auto& h) { return EqualsIgnoreCase(h.first, name); }),
                  headers.end());
  };
  drop("Authorization");  // a retry re-signs
  drop("X-Amz-Date");
  std::string amz_date = FormatAmzDate(std::chrono::floor<std::chrono::seconds>(now));
  headers.emplace_back("X-Amz-Date", amz_date);
  if (!request.header("Host")) headers.emplace_back("Host", std::string(host));

  std::vector<std::string> names;
  for (const auto& [k, v] : headers) {
    std::string lower = ToLower(k);
    if (lower == "content-type" || lower == "host" || lower.starts_with("x-amz-")) {
      names.push_back(std::move(lower));
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::string signed_line;
  std::vector<std::string_view> signed_names;
  for (const auto& n : names) {
    if (!signed_line.empty()) signed_line.push_back(';');
    signed_line.append(n);
    signed_names.push_back(n);
  }

  std::string body_hash = Sha256Hex(request.body);
  std::string payload_hash = body_hash;
  if (auto declared = request.header("X-Amz-Content-Sha256")) {
    payload_hash = std::string(StripAsciiWhitespace(*declared));
  }

  std::string date = amz_date.substr(0, 8);
  std::string scope = date + "/" + std::string(region) + "/" + std::string(service) + "/" +
                      std::string(kTerminator);
  std::string canonical = CanonicalRequest(request, signed_names, signed_line, payload_hash);
  std::string signature = ComputeSignature(key.secret_access_key, date, region, service,
                                           StringToSign(amz_date, scope, canonical));
  headers.emplace_back("Authorization", std::string(kAlgorithm) +
                                            " Credential=" + key.access_key_id + "/" + scope +
                                            ", SignedHeaders=" + signed_line +
                                            ", Signature=" + signature);
}

}  // namespace hf::auth
