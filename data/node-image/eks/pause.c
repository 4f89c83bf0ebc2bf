// The pod sandbox's process: PID 1 of every pod, holding the pod's namespaces and nothing
// else. It sleeps until asked to stop and reaps orphans reparented to it. Built static by
// data/node-image/eks-layer.sh into the image registry.k8s.io/pause:3.6 nodes import.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void Stop(int sig) {
  (void)sig;
  _exit(0);
}

static void Reap(int sig) {
  (void)sig;
  while (waitpid(-1, 0, WNOHANG) > 0) {
  }
}

int main(void) {
  // As PID 1 a signal without a handler is ignored: SIGTERM/SIGINT must be handled to stop.
  struct sigaction stop = {0};
  stop.sa_handler = Stop;
  sigaction(SIGTERM, &stop, 0);
  sigaction(SIGINT, &stop, 0);
  struct sigaction reap = {0};
  reap.sa_handler = Reap;
  reap.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  sigaction(SIGCHLD, &reap, 0);
  for (;;) pause();
}
