#include "hyperfleet/http/http_client.h"

#include <curl/curl.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace hf::http {
namespace {

// curl_global_init is not thread-safe and curl_easy_init would call it lazily; do it once.
void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Strings are assembled with std::string: Debian's Abseil has its own string_view type,
// which does not mix with std::string_view in absl::StrCat.
std::string JoinUrl(std::string_view base_url, std::string_view target) {
  while (!base_url.empty() && base_url.back() == '/') base_url.remove_suffix(1);
  std::string url(base_url);
  if (target.empty() || target.front() != '/') url += '/';
  url += target;
  return url;
}

std::string_view StripSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

size_t OnBodyData(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// libcurl calls this once per header line, including status lines of interim responses
// (100 Continue); a new status line starts a new header block so only the final one remains.
size_t OnHeaderLine(char* data, size_t size, size_t count, void* user) {
  auto* headers = static_cast<Headers*>(user);
  std::string_view line(data, size * count);
  if (line.substr(0, 5) == "HTTP/") {
    headers->clear();
    return size * count;
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.empty()) return size * count;
  if ((line.front() == ' ' || line.front() == '\t') && !headers->empty()) {
    // Obsolete line folding: a continuation of the previous value.
    headers->back().second += ' ';
    headers->back().second += StripSpaces(line);
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * count;
  headers->emplace_back(std::string(line.substr(0, colon)),
                        std::string(StripSpaces(line.substr(colon + 1))));
  return size * count;
}

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

}  // namespace

struct HttpClient::Impl {
  CURL* curl = nullptr;
  long connections_opened = 0;

  Impl() {
    InitCurlOnce();
    curl = curl_easy_init();
  }
  ~Impl() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

HttpClient::HttpClient() : impl_(std::make_unique<Impl>()) {}
HttpClient::~HttpClient() = default;
HttpClient::HttpClient(HttpClient&& other) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&& other) noexcept = default;

long HttpClient::connections_opened() const { return impl_ ? impl_->connections_opened : 0; }

StatusOr<HttpResponse> HttpClient::Send(const std::string& base_url, const HttpRequest& request,
                                        int timeout_seconds) {
  const std::string url = JoinUrl(base_url, request.target);
  const std::string method = request.method.empty() ? "GET" : request.method;
  auto fail = [&](std::string_view why) {
    std::string message = method + " " + url + ": ";
    message += why;
    return absl::UnavailableError(message);
  };
  if (!impl_ || impl_->curl == nullptr) return fail("could not create a libcurl handle");
  CURL* curl = impl_->curl;
  // Reset clears the previous request's options but keeps the connection cache.
  curl_easy_reset(curl);

  HttpResponse response;
  char error_buffer[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: callers may be threaded
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  if (timeout_seconds > 0) {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_seconds) * 1000L);
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnBodyData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &OnHeaderLine);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response.headers);

  if (method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (method == "GET" && request.body.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  } else {
    if (!request.body.empty() || method == "POST") {
      // POSTFIELDS does not copy: `request` outlives curl_easy_perform below.
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    }
    if (method != "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }

  std::unique_ptr<curl_slist, SlistDeleter> header_list;
  auto add_header = [&](const std::string& line) {
    curl_slist* appended = curl_slist_append(header_list.get(), line.c_str());
    if (appended != nullptr) {
      (void)header_list.release();
      header_list.reset(appended);
    }
    return appended != nullptr;
  };
  for (const auto& [name, value] : request.headers) {
    // "Name;" is libcurl's spelling for a header with an empty value ("Name:" removes it).
    const std::string line = value.empty() ? name + ";" : name + ": " + value;
    if (!add_header(line)) return fail("out of memory building headers");
  }
  if (!request.body.empty() && !request.header("Content-Type").has_value()) {
    // Otherwise libcurl labels POST bodies application/x-www-form-urlencoded.
    if (!add_header("Content-Type:")) return fail("out of memory building headers");
  }
  if (header_list) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, header_list.get());

  const CURLcode code = curl_easy_perform(curl);
  long connects = 0;
  if (curl_easy_getinfo(curl, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK) {
    impl_->connections_opened += connects;
  }
  // The header list and error buffer are about to go away; make sure the handle forgets them.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  if (code != CURLE_OK) {
    return fail(error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code));
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace hf::http
