// OpenSSH's client with a pinned host key: see include/hyperfleet/ssh/ssh_client.h.
#include "hyperfleet/ssh/ssh_client.h"

#include <algorithm>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "hyperfleet/common/strings.h"
#include "ssh/ssh_args.h"

namespace hf::ssh {
namespace {

// ssh's own exit status for its failures (connection, authentication, host key).
constexpr int kSshFailure = 255;

bool HasBlank(std::string_view s) {
  for (char c : s) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '\0') return true;
  }
  return false;
}

// A host name or address usable on ssh's command line and in known_hosts.
Status CheckAddress(std::string_view address) {
  if (address.empty()) return absl::InvalidArgumentError("address must not be empty");
  if (address.front() == '-') {
    return absl::InvalidArgumentError("address must not start with '-'");
  }
  for (char c : address) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
          c == '_' || c == ':')) {
      return absl::InvalidArgumentError(
          absl::StrCat("address has a character not allowed in a host name: '",
                       std::string(1, c), "'"));
    }
  }
  return absl::OkStatus();
}

// Reads a big-endian length-prefixed string at `pos` of an ssh key blob (RFC 4253 §6.6).
bool ReadSshString(std::string_view blob, size_t& pos, std::string_view& out) {
  if (blob.size() - pos < 4) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(blob.data() + pos);
  const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
  pos += 4;
  if (blob.size() - pos < len) return false;
  out = blob.substr(pos, len);
  pos += len;
  return true;
}

// A memory file holding `input`, read from its start: stdin for ssh without a writer thread.
StatusOr<int> InputFile(std::string_view input) {
  const int fd = memfd_create("hf-ssh-input", MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  size_t done = 0;
  while (done < input.size()) {
    const ssize_t n = ::write(fd, input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("writing ssh input: ", std::strerror(e)));
    }
    done += static_cast<size_t>(n);
  }
  if (::lseek(fd, 0, SEEK_SET) != 0) {
    ::close(fd);
    return absl::InternalError("seeking ssh input");
  }
  return fd;
}

std::string Destination(const SshTarget& target) {
  return absl::StrCat(target.user, "@", target.address);
}

}  // namespace

namespace internal {

StatusOr<std::vector<std::string>> SshArgv(const SshTarget& target, std::string_view command) {
  HF_RETURN_IF_ERROR(CheckAddress(target.address));
  if (target.user.empty() || target.user.front() == '-' || HasBlank(target.user) ||
      target.user.find('@') != std::string::npos) {
    return absl::InvalidArgumentError("user must be a login name (no '@', blanks or leading '-')");
  }
  if (target.identity_file.empty()) {
    return absl::InvalidArgumentError("identity_file must name the private key file");
  }
  if (target.known_hosts_file.empty()) {
    return absl::InvalidArgumentError("known_hosts_file must name the pinned host key file");
  }
  if (target.connect_timeout_seconds <= 0) {
    return absl::InvalidArgumentError("connect_timeout_seconds must be positive");
  }
  std::vector<std::string> argv = {
      "ssh",
      "-F", "/dev/null",  // no user or system configuration
      "-o", "BatchMode=yes",
      "-o", "StrictHostKeyChecking=yes",
      "-o", absl::StrCat("UserKnownHostsFile=", target.known_hosts_file),
      "-o", "GlobalKnownHostsFile=/dev/null",
      "-o", "CheckHostIP=no",
      "-o", "UpdateHostKeys=no",
      "-o", "IdentitiesOnly=yes",
      "-o", "IdentityAgent=none",
      "-o", "ForwardAgent=no",
      "-o", "ForwardX11=no",
      "-o", "ClearAllForwardings=yes",
      "-o", "PasswordAuthentication=no",
      "-o", "KbdInteractiveAuthentication=no",
      "-o", absl::StrCat("ConnectTimeout=", target.connect_timeout_seconds),
      "-o", "ServerAliveInterval=5",
      "-o", "ServerAliveCountMax=3",
      "-o", "LogLevel=ERROR",
      "-i", target.identity_file,
      "-p", absl::StrCat(target.port),
      "-T",  // no terminal: the command's output is bytes, not a screen
      "--",
      Destination(target),
      std::string(command),
  };
  return argv;
}

std::vector<std::string> SshEnvironment() {
  return {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "HOME=/nonexistent"};
}

}  // namespace internal

StatusOr<std::string> KnownHostsLine(std::string_view address, uint16_t port,
                                     std::string_view host_public_key) {
  HF_RETURN_IF_ERROR(CheckAddress(address));
  const std::string_view key = StripAsciiWhitespace(host_public_key);
  if (std::any_of(key.begin(), key.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 && c != '\t'; }) ||
      key.find('\x7f') != std::string_view::npos) {
    // A newline would make two known_hosts lines of one key.
    return absl::InvalidArgumentError("host key must be one line without control characters");
  }
  std::vector<std::string> parts =
      absl::StrSplit(AbslView(StripAsciiWhitespace(host_public_key)), absl::ByAnyChar(" \t"),
                     absl::SkipEmpty());
  if (parts.size() < 2) {
    return absl::InvalidArgumentError("host key must be \"<type> <base64>\" (e.g. ssh-ed25519 AAAA...)");
  }
  const std::string& type = parts[0];
  const std::string& base64 = parts[1];
  std::string blob;
  if (!absl::Base64Unescape(base64, &blob)) {
    return absl::InvalidArgumentError("host key's second field is not base64");
  }
  size_t pos = 0;
  std::string_view blob_type;
  if (!ReadSshString(blob, pos, blob_type) || blob_type != type) {
    return absl::InvalidArgumentError(
        absl::StrCat("host key's data does not hold a key of type ", type));
  }
  const std::string host =
      port == 22 ? std::string(address) : absl::StrCat("[", AbslView(address), "]:", port);
  return absl::StrCat(host, " ", type, " ", base64);
}

// The ssh client started for `command`: its arguments, fixed environment, "/" and a process
// group of its own (so a timeout kills what it started); streams left to the caller.
static StatusOr<ProcessSpec> SshSpec(const SshTarget& target, std::string_view command) {
  ProcessSpec spec;
  HF_ASSIGN_OR_RETURN(spec.argv, internal::SshArgv(target, command));
  spec.program = std::string(internal::kSshProgram);
  spec.env = internal::SshEnvironment();
  spec.cwd = "/";
  spec.group = ProcessGroup::kNewGroup;
  return spec;
}

StatusOr<SshResult> Run(const SshTarget& target, std::string_view command, std::string_view input,
                        Duration timeout) {
  HF_ASSIGN_OR_RETURN(ProcessSpec spec, SshSpec(target, command));
  spec.out = Stdio::Pipe();
  spec.err = Stdio::Pipe();
  int input_fd = -1;
  if (!input.empty()) {
    HF_ASSIGN_OR_RETURN(input_fd, InputFile(input));
    spec.in = Stdio::Fd(input_fd);
  }
  RunOptions options;
  options.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  options.kill_grace = std::chrono::milliseconds(2000);
  auto run = RunProcess(spec, options);
  if (input_fd >= 0) ::close(input_fd);
  if (!run.ok()) return run.status();
  if (run->ending != RunEnding::kExited) {
    return absl::DeadlineExceededError(absl::StrCat(
        "ssh ", Destination(target), " port ", target.port, ": no answer within ",
        std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), " s"));
  }
  if (run->exit.exit_code == kSshFailure && run->exit.signal == 0) {
    return absl::UnavailableError(absl::StrCat("ssh ", Destination(target), " port ", target.port,
                                               ": ",
                                               AbslView(StripAsciiWhitespace(run->err))));
  }
  SshResult result;
  result.exit_code = run->exit.exit_code;
  result.out = std::move(run->out);
  result.err = std::move(run->err);
  return result;
}

StatusOr<Subprocess> Start(const SshTarget& target, std::string_view command, Stdio in, Stdio out,
                           Stdio err) {
  HF_ASSIGN_OR_RETURN(ProcessSpec spec, SshSpec(target, command));
  spec.in = in;
  spec.out = out;
  spec.err = err;
  return Subprocess::Spawn(spec);
}

}  // namespace hf::ssh
