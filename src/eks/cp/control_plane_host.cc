// Host observations for the EKS control planes (control_plane_host.h).
#include "eks/cp/control_plane_host.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/ipv4.h"
#include "hyperfleet/common/uri.h"
#include "hyperfleet/http/http_client.h"
#include "hyperfleet/http/tls_identity.h"

namespace hf::eks::host {
namespace fs = std::filesystem;

std::string DefaultPortReservationsDir() {
  const uid_t uid = ::geteuid();
  return uid == 0 ? "/run/hyperfleet/eks-ports" : absl::StrCat("/tmp/hyperfleet-eks-ports-", uid);
}

std::set<int> ReservedPorts(const std::string& dir) {
  std::set<int> ports;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string path = entry.path().string();
    if (entry.path().filename().string().front() == '.') continue;  // the lock, temporaries
    // Line 1: the plane's directory; line 2: its ports.
    auto text = ReadFile(path);
    if (!text.ok()) continue;
    const std::vector<std::string> lines = absl::StrSplit(*text, '\n');
    if (lines.size() < 2 || !fs::exists(lines[0] + "/control-plane.json", ec)) {
      fs::remove(path, ec);
      continue;
    }
    for (absl::string_view word : absl::StrSplit(lines[1], ' ', absl::SkipEmpty())) {
      int port = 0;
      if (absl::SimpleAtoi(word, &port)) ports.insert(port);
    }
  }
  return ports;
}

Status ReservePorts(const std::string& dir, const std::string& plan_dir,
                    const std::vector<int>& ports) {
  return WriteFileAtomically(dir + "/" + UriEncode(plan_dir),
                             absl::StrCat(plan_dir, "\n", absl::StrJoin(ports, " "), "\n"), 0644);
}

std::set<int> ListeningPorts() {
  std::set<int> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    auto text = ReadFile(table);
    if (!text.ok()) continue;
    bool header = true;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      if (std::exchange(header, false)) continue;
      // "  0: 0100007F:1F90 00000000:0000 0A ...": local address, remote, state (0A: LISTEN).
      const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 4 || f[3] != "0A") continue;
      const size_t colon = f[1].rfind(':');
      int port = 0;
      if (colon != absl::string_view::npos &&
          absl::SimpleHexAtoi(f[1].substr(colon + 1), &port)) {
        ports.insert(port);
      }
    }
  }
  return ports;
}

std::vector<std::string> Ipv4Addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET ||
        (ifa->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    const auto* sin = reinterpret_cast<const sockaddr_in*>(ifa->ifa_addr);
    out.push_back(Ipv4Text(ntohl(sin->sin_addr.s_addr)));
  }
  freeifaddrs(list);
  return out;
}

std::optional<int> SupervisorPid(const std::string& dir) {
  auto text = ReadFile(dir + "/supervisor.pid");
  int pid = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid) || pid <= 0) {
    return std::nullopt;
  }
  auto cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  if (!cmdline.ok() || cmdline->empty()) return std::nullopt;  // gone, or a zombie
  // argv is NUL-separated: the directory must be a whole argument.
  const std::string arg = std::string(1, '\0') + dir + std::string(1, '\0');
  if (cmdline->find(kSupervisorCommand) == std::string::npos ||
      (std::string(1, '\0') + *cmdline).find(arg) == std::string::npos) {
    return std::nullopt;
  }
  return pid;
}

std::vector<int> ProcessesUnder(const std::string& dir) {
  std::vector<int> out;
  const std::string prefix = dir + "/";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid == getpid()) continue;
    auto cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    bool ours = cmdline.ok() && (cmdline->find(prefix) != std::string::npos ||
                                 cmdline->find(dir + std::string(1, '\0')) != std::string::npos);
    std::error_code link_ec;
    const std::string cwd = fs::read_symlink(absl::StrCat("/proc/", pid, "/cwd"), link_ec);
    if (!link_ec && (cwd == dir || cwd.rfind(prefix, 0) == 0)) ours = true;
    if (ours) out.push_back(pid);
  }
  return out;
}

StatusOr<std::string> ApiserverPin(const std::string& dir) {
  HF_ASSIGN_OR_RETURN(std::string pem, ReadFile(dir + "/pki/apiserver.crt"));
  return http::CertificateSha256(pem);
}

StatusOr<std::string> ApiserverGet(int port, const std::string& pin, const std::string& path,
                                   int timeout_seconds) {
  http::HttpClient client(http::HttpClientOptions{pin, /*direct=*/true});
  http::HttpRequest request;
  request.method = "GET";
  request.target = path;
  HF_ASSIGN_OR_RETURN(http::HttpResponse response,
                      client.Send(absl::StrCat("https://127.0.0.1:", port), request,
                                  timeout_seconds));
  if (response.status != 200) {
    return absl::FailedPreconditionError(
        absl::StrCat("GET ", path, ": ", response.status, " ", response.body.substr(0, 200)));
  }
  return response.body;
}

}  // namespace hf::eks::host
