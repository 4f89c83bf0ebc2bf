#pragma once
// A real OpenSSH server for tests: `sshd -D -e -f <cfg>` on 127.0.0.1 at a free port, with a
// host key and a client key generated for it, admitting only that key (for the user running
// the test). Started and stopped by the test; ready once sshd says it listens (no sleeps).
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <pwd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "hyperfleet/common/fs.h"
#include "hyperfleet/common/subprocess.h"

namespace hf::testing {

class LocalSshd {
 public:
  /// Available when this host has sshd and ssh-keygen (Debian's openssh-server).
  static bool Available() {
    return std::filesystem::exists("/usr/sbin/sshd") && std::filesystem::exists("/usr/bin/ssh-keygen");
  }

  /// Generates keys under `dir` and starts sshd. Empty string on success, else why not.
  std::string Start(const std::string& dir) {
    dir_ = dir;
    if (auto e = Keygen(dir + "/host_ed25519"); !e.empty()) return e;
    if (auto e = Keygen(dir + "/client_ed25519"); !e.empty()) return e;
    if (auto e = Keygen(dir + "/other_ed25519"); !e.empty()) return e;
    std::filesystem::copy_file(dir + "/client_ed25519.pub", dir + "/authorized_keys");
    // sshd needs its privilege separation directory (the systemd unit creates it).
    std::filesystem::create_directories("/run/sshd");
    port_ = FreePort();
    const passwd* pw = ::getpwuid(::getuid());
    user_ = pw != nullptr ? pw->pw_name : "root";
    std::ofstream cfg(dir + "/sshd_config");
    cfg << "ListenAddress 127.0.0.1:" << port_ << "\n"
        << "HostKey " << dir << "/host_ed25519\n"
        << "AuthorizedKeysFile " << dir << "/authorized_keys\n"
        << "PidFile none\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        << "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        << "LogLevel INFO\nSubsystem sftp internal-sftp\n";
    cfg.close();
    ProcessSpec spec;
    spec.argv = {"/usr/sbin/sshd", "-D", "-e", "-f", dir + "/sshd_config"};
    spec.err = Stdio::Pipe();
    spec.group = ProcessGroup::kNewGroup;
    auto child = Subprocess::Spawn(spec);
    if (!child.ok()) return std::string(child.status().message());
    sshd_.emplace(std::move(*child));
    // Ready once it says "Server listening on 127.0.0.1 port N."
    std::string seen;
    char buf[512];
    while (seen.find("Server listening") == std::string::npos) {
      const ssize_t n = ::read(sshd_->stderr_fd(), buf, sizeof buf);
      if (n <= 0) return "sshd ended: " + seen;
      seen.append(buf, static_cast<size_t>(n));
    }
    return "";
  }

  ~LocalSshd() {
    if (sshd_) {
      sshd_->Kill(SIGKILL);
      sshd_->Wait();
    }
  }

  uint16_t port() const { return port_; }
  const std::string& user() const { return user_; }
  std::string client_key() const { return dir_ + "/client_ed25519"; }
  std::string other_key() const { return dir_ + "/other_ed25519"; }
  /// "ssh-ed25519 AAAA… comment" of the server's host key.
  std::string host_public_key() const { return *ReadFile(dir_ + "/host_ed25519.pub"); }
  /// Another key of the same type: the wrong pin.
  std::string wrong_host_public_key() const { return *ReadFile(dir_ + "/other_ed25519.pub"); }

  /// A port nobody listens on (bound, then closed).
  static uint16_t FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  }

 private:
  static std::string Keygen(const std::string& path) {
    auto r = RunCapture({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", path});
    if (!r.ok()) return std::string(r.status().message());
    return r->ok() ? "" : r->out;
  }

  std::string dir_;
  std::string user_;
  uint16_t port_ = 0;
  std::optional<Subprocess> sshd_;
};

}  // namespace hf::testing
