// SPANK plugin behind `srun --auto-resume=1` (docs/slurm.md "Auto-resume"). It is loaded by
// srun, sbatch/salloc and slurmstepd through /opt/slurm/etc/plugstack.conf.d/; only srun and
// slurmstepd see the option. In srun, once the options are parsed and before any step is
// created, it replaces srun with `hyperfleet auto-resume ... -- <srun's own argv>`: that
// supervisor runs the same srun again (with HYPERFLEET_AUTO_RESUME_ACTIVE set, so this plugin
// then lets it run) and decides what to do when the step fails.
//
// Plugin arguments (plugstack line): supervisor=PATH (default /opt/hyperfleet/bin/hyperfleet),
// window=SECONDS (default 20); HYPERFLEET_AUTO_RESUME_WINDOW in srun's environment overrides
// the window. Plain C: it runs inside Slurm's processes.
#define _GNU_SOURCE
#include <slurm/spank.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

SPANK_PLUGIN(hyperfleet_auto_resume, 1)

#define ACTIVE_ENV "HYPERFLEET_AUTO_RESUME_ACTIVE"
#define WINDOW_ENV "HYPERFLEET_AUTO_RESUME_WINDOW"

static int g_auto_resume = 0;
static char g_supervisor[PATH_MAX] = "/opt/hyperfleet/bin/hyperfleet";
static char g_window[16] = "20";

// A window in whole seconds, 0..3600; false for anything else.
static bool ValidWindow(const char* s) {
  if (s == NULL || *s == '\0' || strlen(s) >= sizeof g_window) return false;
  char* end = NULL;
  errno = 0;
  const long v = strtol(s, &end, 10);
  return errno == 0 && *end == '\0' && v >= 0 && v <= 3600;
}

static int OnOption(int val, const char* optarg, int remote) {
  (void)val;
  if (remote) return 0;  // checked in srun already
  if (optarg != NULL && strcmp(optarg, "1") == 0) {
    // Checked here: srun 22.05 ignores a failing slurm_spank_init_post_opt, but not this.
    const char* job = getenv("SLURM_JOB_ID");
    if (getenv(ACTIVE_ENV) == NULL && (job == NULL || *job == '\0')) {
      slurm_error("[Auto Resume] Error: srun --auto-resume needs an existing allocation (run "
                  "it inside sbatch or salloc): SLURM_JOB_ID is not set");
      return -1;
    }
    g_auto_resume = 1;
    return 0;
  }
  if (optarg != NULL && strcmp(optarg, "0") == 0) {
    g_auto_resume = 0;
    return 0;
  }
  slurm_error("--auto-resume takes 1 (on) or 0 (off), not \"%s\"", optarg ? optarg : "");
  return -1;
}

static struct spank_option g_option = {
    "auto-resume", "1|0",
    "Hyperfleet: if the step fails because a node of the job is faulty, requeue the job "
    "(same job id) so that it resumes on healthy nodes",
    1, 0, OnOption};

// srun's own command line from /proc/self/cmdline; returns the number of arguments (0 on
// error) and a malloc'ed buffer that *argv points into.
static int ReadCmdline(char*** argv_out) {
  const int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t cap = 4096, len = 0;
  char* buf = malloc(cap + 1);
  for (;;) {
    if (buf == NULL) break;
    if (len == cap) {
      cap *= 2;
      char* bigger = realloc(buf, cap + 1);
      if (bigger == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = bigger;
    }
    const ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  if (buf == NULL || len == 0) {
    free(buf);
    return 0;
  }
  buf[len] = '\0';
  int argc = 0;
  for (size_t i = 0; i < len; i++) argc += buf[i] == '\0';
  char** argv = calloc((size_t)argc + 1, sizeof(char*));
  if (argv == NULL) {
    free(buf);
    return 0;
  }
  size_t pos = 0;
  for (int i = 0; i < argc; i++) {
    argv[i] = buf + pos;
    pos += strlen(buf + pos) + 1;
  }
  *argv_out = argv;
  return argc;
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  const spank_context_t ctx = spank_context();
  // sbatch and salloc are not offered the option (as on HyperPod): it is a step's option.
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE) return 0;
  for (int i = 0; i < ac; i++) {
    if (strncmp(av[i], "supervisor=", 11) == 0 && strlen(av[i] + 11) < sizeof g_supervisor) {
      strcpy(g_supervisor, av[i] + 11);
    } else if (strncmp(av[i], "window=", 7) == 0 && ValidWindow(av[i] + 7)) {
      strcpy(g_window, av[i] + 7);
    } else {
      slurm_error("hyperfleet_auto_resume: ignoring unknown or invalid argument \"%s\"", av[i]);
    }
  }
  return spank_option_register(sp, &g_option) == ESPANK_SUCCESS ? 0 : -1;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  if (spank_context() != S_CTX_LOCAL || !g_auto_resume) return 0;
  if (getenv(ACTIVE_ENV) != NULL) return 0;  // the supervisor's own srun
  const char* window = getenv(WINDOW_ENV);
  if (window == NULL || !ValidWindow(window)) window = g_window;
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    slurm_error("[Auto Resume] Error: cannot read /proc/self/exe: %s", strerror(errno));
    exit(1);
  }
  exe[n] = '\0';
  char** argv = NULL;
  const int argc = ReadCmdline(&argv);
  if (argc == 0) {
    slurm_error("[Auto Resume] Error: cannot read srun's command line: %s", strerror(errno));
    exit(1);
  }
  const char* head[] = {g_supervisor, "auto-resume", "--window", window, "--srun", exe, "--"};
  const int nhead = sizeof head / sizeof head[0];
  char** args = calloc((size_t)(nhead + argc + 1), sizeof(char*));
  if (args == NULL) exit(1);
  for (int i = 0; i < nhead; i++) args[i] = (char*)head[i];
  for (int i = 0; i < argc; i++) args[nhead + i] = argv[i];
  fflush(NULL);
  execv(g_supervisor, args);
  slurm_error("[Auto Resume] Error: cannot run %s: %s", g_supervisor, strerror(errno));
  // srun 22.05 goes on after a failing post-option hook: stop it rather than run the step
  // without the auto-resume it asked for.
  exit(1);
}
