#include "provider/local/imds.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "hyperfleet/common/ipv4.h"

namespace hf::provider::local {

StatusOr<int> ListenInNetns(const std::string& ns, const std::string& ipv4, uint16_t port) {
  int fd = -1;
  std::string error;
  std::thread([&] {  // setns() changes only this thread's network namespace
    const int nsfd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) != 0) {
      error = absl::StrCat("cannot enter ", ns, ": ", std::strerror(errno));
      if (nsfd >= 0) close(nsfd);
      return;
    }
    close(nsfd);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(ParseIpv4(ipv4).value_or(0));
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 128) != 0) {
      error = absl::StrCat("cannot listen on ", ipv4, ":", port, " in ", ns, ": ",
                           std::strerror(errno));
      close(fd);
      fd = -1;
    }
  }).join();
  if (fd < 0) return absl::InternalError(error);
  return fd;
}

}  // namespace hf::provider::local
