/* relaxc serve: an OpenAI-style HTTP server for an LLM artifact (tools/serve/server.c, README
 * "relaxc serve"). Built only with libmicrohttpd (tools/serve/serve.cmake); without it the command
 * says so and fails. With --tensor-parallel N the model runs on N ranks (docs/distributed.md,
 * "relaxc serve on several ranks"): under mpirun, rank 0 serves and the others follow its calls;
 * without mpirun, this process starts `mpirun -n N` of itself and relays its signals to rank 0. */
#include "relaxc/ccl.h"
#include "relaxc/llm.h"
#include "tools/commands.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef RX_HAVE_MICROHTTPD
#include "tools/serve/server.h"

typedef struct serve_cli {
  const char *model, *host, *device, *name;
  long long port, max_batch, kv_capacity, max_seq_len, prefill_chunk;
  bool prefix_cache;
  bool max_batch_given; /* --max-batch was on the command line: refused past the artifact's */
  /* the limits (server.h's RX_SERVE_* defaults when absent, 0 here) */
  long long idle_s, read_s, deadline_s, max_conns, per_ip, max_queue;
  bool deadline_given;
  const char *api_key;  /* --api-key, else RELAXC_API_KEY, else none */
  long long shutdown_s; /* --shutdown-timeout: how long SIGINT/SIGTERM lets requests finish */
  long long tp;         /* --tensor-parallel: ranks (0: not given) */
} serve_cli;

#define SHUTDOWN_TIMEOUT_S 30 /* the default of --shutdown-timeout */

static int parse(const rx_cli_command *cmd, int argc, char **argv, serve_cli *g) {
  g->host = "127.0.0.1";
  g->port = 8000;
  g->max_batch = 8;
  g->kv_capacity = 8192;
  g->shutdown_s = SHUTDOWN_TIMEOUT_S;
  g->prefix_cache = true;
  g->prefill_chunk = 512;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    const char *f = it.flag;
    int rc = 0;
    if (!f) {
      if (g->model)
        return cli_usage_error(cmd, "'serve' takes one MODEL.rxm, got '%s' too", it.value);
      g->model = it.value;
    } else if (!strcmp(f, "--host")) {
      g->host = it.value;
    } else if (!strcmp(f, "--device")) {
      g->device = it.value;
    } else if (!strcmp(f, "--model-name")) {
      g->name = it.value;
    } else if (!strcmp(f, "--port")) {
      rc = cli_int_option(&it, 0, 65535, &g->port);
    } else if (!strcmp(f, "--max-batch")) {
      rc = cli_int_option(&it, 1, 1024, &g->max_batch);
      g->max_batch_given = true;
    } else if (!strcmp(f, "--idle-timeout")) {
      rc = cli_int_option(&it, 1, 86400, &g->idle_s);
    } else if (!strcmp(f, "--read-timeout")) {
      rc = cli_int_option(&it, 1, 86400, &g->read_s);
    } else if (!strcmp(f, "--request-timeout")) {
      rc = cli_int_option(&it, 0, 7 * 86400, &g->deadline_s);
      g->deadline_given = true;
    } else if (!strcmp(f, "--max-connections")) {
      rc = cli_int_option(&it, 1, 1 << 20, &g->max_conns);
    } else if (!strcmp(f, "--max-connections-per-ip")) {
      rc = cli_int_option(&it, 1, 1 << 20, &g->per_ip);
    } else if (!strcmp(f, "--max-queue")) {
      rc = cli_int_option(&it, 1, 1 << 20, &g->max_queue);
    } else if (!strcmp(f, "--kv-capacity")) {
      rc = cli_int_option(&it, 16, 1 << 30, &g->kv_capacity);
    } else if (!strcmp(f, "--api-key")) {
      g->api_key = it.value;
    } else if (!strcmp(f, "--shutdown-timeout")) {
      rc = cli_int_option(&it, 0, 86400, &g->shutdown_s);
    } else if (!strcmp(f, "--max-seq-len")) {
      rc = cli_int_option(&it, 1, 1 << 30, &g->max_seq_len);
    } else if (!strcmp(f, "--prefill-chunk")) {
      rc = cli_int_option(&it, 0, 1 << 30, &g->prefill_chunk);
    } else if (!strcmp(f, "--tensor-parallel")) {
      rc = cli_int_option(&it, 1, 1024, &g->tp);
    } else if (!strcmp(f, "--prefix-cache")) {
      if (strcmp(it.value, "on") && strcmp(it.value, "off"))
        return cli_usage_error(cmd, "--prefix-cache takes on or off, got '%s'", it.value);
      g->prefix_cache = !strcmp(it.value, "on");
    } else {
      return cli_unhandled(&it);
    }
    if (rc) return rc;
  }
  if (it.status >= 0) return it.status;
  if (!g->model) return cli_usage_error(cmd, "%s", "'serve' needs a MODEL.rxm");
  if (!g->api_key) g->api_key = getenv("RELAXC_API_KEY");
  if (g->api_key && !*g->api_key)
    return cli_usage_error(cmd, "%s", "--api-key (or RELAXC_API_KEY) is empty");
  return -1;
}

static int fail(rx_status s) {
  fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
  rx_status_free(s);
  return 1;
}

/* The model's name in requests and answers: the file's name without folders and .rxm. */
static void default_name(const char *path, char *out, size_t cap) {
  const char *b = strrchr(path, '/');
  snprintf(out, cap, "%s", b ? b + 1 : path);
  size_t n = strlen(out);
  if (n > 4 && !strcmp(out + n - 4, ".rxm")) out[n - 4] = 0;
}

#define KV_PAGE 16 /* tokens per KV page (runtime/llm/kv_cache.h's RX_KV_PAGE) */

/* Graceful shutdown after the signal sig: no new connections, and requests on open ones get 503;
 * those in flight may finish for up to timeout_s seconds (a second signal ends the wait), then
 * serve_server_stop cancels the rest. */
static void drain(rx_server *srv, const sigset_t *set, int sig, long long timeout_s) {
  serve_server_quiesce(srv);
  rx_server_stats st = serve_server_get_stats(srv);
  fprintf(stderr,
          "relaxc serve: stopping (%s): no new requests; %lld in flight may finish within %lld s "
          "(--shutdown-timeout; a second signal stops now)\n",
          sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)st.inflight, timeout_s);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    st = serve_server_get_stats(srv);
    clock_gettime(CLOCK_MONOTONIC, &now);
    double waited = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
    if (!st.inflight) break;
    if (waited >= (double)timeout_s) {
      fprintf(stderr, "relaxc serve: --shutdown-timeout %lld s passed: cancelling %lld requests\n",
              timeout_s, (long long)st.inflight);
      break;
    }
    struct timespec tick = {0, 20 * 1000000L};
    if (sigtimedwait(set, NULL, &tick) > 0) {
      fprintf(stderr, "relaxc serve: a second signal: cancelling %lld requests\n",
              (long long)st.inflight);
      break;
    }
  }
}

/* ---- tensor parallelism (docs/distributed.md, "relaxc serve on several ranks") ---- */
#define RANK0_PIDFILE_ENV "RX_SERVE_RANK0_PIDFILE" /* where rank 0 writes its pid (spawn_ranks) */

/* A rank other than 0 under mpirun: loads its part of the model and runs rank 0's calls (and its
 * KV cache's page operations) until rank 0 frees its model. */
static int follow_rank0(const serve_cli *g, rx_llm_model_options *mo) {
  int rank = rx_rt_comm_rank(mo->comm);
  fprintf(stderr, "relaxc serve: rank %d (pid %d) follows rank 0\n", rank, (int)getpid());
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(g->model, mo, &m);
  if (!s) s = rx_llm_model_follow(m);
  if (!s)
    fprintf(stderr, "relaxc serve: rank %d: rank 0 stopped; pages free here: %lld/%lld\n", rank,
            (long long)(rx_llm_model_kv_free_tokens(m) / KV_PAGE),
            (long long)(rx_llm_model_kv_capacity(m) / KV_PAGE));
  if (s) { /* rank 0 may be sending to this rank: MPI_Abort ends the job now (no hang) */
    fprintf(stderr, "relaxc serve: rank %d: error: %s; ending every rank\n", rank,
            rx_status_message(s));
    rx_status_free(s);
    rx_rt_comm_abort(mo->comm, 1);
  }
  rx_llm_model_free(m);
  rx_rt_comm_release(mo->comm);
  return s ? 1 : 0;
}

static pid_t read_pid(const char *path) {
  FILE *f = fopen(path, "r");
  long pid = 0;
  if (f) {
    if (fscanf(f, "%ld", &pid) != 1) pid = 0;
    fclose(f);
  }
  return (pid_t)pid;
}

/* Not under mpirun: runs `RX_MPIRUN (mpirun) RX_MPIRUN_ARGS -n N relaxc serve ARGS` in its own
 * process group (so a terminal's Ctrl-C reaches this process only) and relays SIGINT and SIGTERM
 * to rank 0, which drains and stops the followers; the ranks' exit is this one's. A rank that
 * dies makes mpirun end the others and name it; this process then says the server stopped. */
static int spawn_ranks(const serve_cli *g, int argc, char **argv, const sigset_t *set) {
  char self[4096], pidfile[] = "/tmp/relaxc-serve-rank0-XXXXXX", np[32];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  int fd = k > 0 ? mkstemp(pidfile) : -1;
  if (fd < 0) {
    fprintf(stderr, "relaxc: error: --tensor-parallel: cannot find this program or make %s\n",
            pidfile);
    return 1;
  }
  close(fd);
  self[k] = 0;
  const char *mpirun = getenv("RX_MPIRUN") && *getenv("RX_MPIRUN") ? getenv("RX_MPIRUN") : "mpirun";
  char *extra = strdup(getenv("RX_MPIRUN_ARGS") ? getenv("RX_MPIRUN_ARGS") : "");
  char **av = calloc((size_t)argc + 48, sizeof *av);
  int n = 0, rc = 1;
  if (!extra || !av) goto out;
  av[n++] = (char *)mpirun;
  for (char *t = strtok(extra, " "); t && n < 40; t = strtok(NULL, " ")) av[n++] = t;
  snprintf(np, sizeof np, "%lld", g->tp);
  av[n++] = "-n";
  av[n++] = np;
  av[n++] = self;
  for (int i = 0; i < argc; i++) av[n++] = argv[i];
  setenv(RANK0_PIDFILE_ENV, pidfile, 1);
  pid_t child = fork();
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);
    execvp(av[0], av);
    fprintf(stderr, "relaxc: error: --tensor-parallel: cannot run %s (set RX_MPIRUN): %s\n", av[0],
            strerror(errno));
    _exit(127);
  }
  if (child < 0) goto out;
  fprintf(stderr, "relaxc serve: %lld ranks under %s (pid %d); rank 0 serves\n", g->tp, mpirun,
          (int)child);
  int st = 0;
  while (waitpid(child, &st, WNOHANG) != child) {
    struct timespec tick = {0, 100 * 1000000L};
    int sig = sigtimedwait(set, NULL, &tick);
    if (sig <= 0) continue;
    pid_t r0 = read_pid(pidfile);
    if (r0 > 0)
      kill(r0, sig); /* rank 0 drains, frees its model: the followers return, mpirun ends */
    else
      kill(-child, SIGTERM); /* rank 0 not up yet: mpirun ends the job */
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    rc = 0;
  } else {
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    fprintf(stderr,
            "relaxc serve: error: the %lld ranks under %s ended with %s %d, so the server "
            "stopped (%s's lines above name the rank that ended first)\n",
            g->tp, mpirun, WIFEXITED(st) ? "exit code" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), mpirun);
    if (!rc) rc = 1;
  }
out:
  unlink(pidfile);
  free(extra);
  free(av);
  return rc;
}

/* --tensor-parallel and mpirun: -1 when this process serves (one process, or rank 0, with
 * mo->comm set), else the exit code of a follower or of the process that spawned the ranks. */
static int tp_setup(serve_cli *g, int argc, char **argv, const sigset_t *set,
                    rx_llm_model_options *mo) {
  const char *w = getenv("OMPI_COMM_WORLD_SIZE");
  int world = w ? atoi(w) : 1;
  if (world > 1 || (w && g->tp > 1)) {
    if (g->tp && g->tp != world) {
      fprintf(stderr,
              "relaxc: error: --tensor-parallel %lld, but mpirun started %d rank%s (mpirun -n "
              "%d): give equal numbers, or one of them\n",
              g->tp, world, world == 1 ? "" : "s", world);
      return 2;
    }
    g->tp = world;
    rx_status s = rx_rt_comm_create_mpi(&mo->comm);
    if (s) return fail(s);
    if (rx_rt_comm_rank(mo->comm) != 0) return follow_rank0(g, mo);
    const char *pf = getenv(RANK0_PIDFILE_ENV);
    FILE *f = pf && *pf ? fopen(pf, "w") : NULL;
    if (f) {
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
    }
    return -1;
  }
  if (g->tp > 1) return spawn_ranks(g, argc, argv, set);
  return -1;
}

int cli_cmd_serve(const rx_cli_command *cmd, int argc, char **argv) {
  serve_cli g = {0};
  int rc = parse(cmd, argc, argv, &g);
  if (rc >= 0) return rc;
  /* SIGINT and SIGTERM blocked in every thread (those started later inherit the mask); this one
   * takes them with sigwait and stops the server */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, NULL); /* threads started later inherit it; see sigwait */
  rx_llm_model_options mo = {.device = g.device,
                             .capacity = g.kv_capacity,
                             .max_sequences = g.max_batch,
                             .max_seq_len = g.max_seq_len};
  rc = tp_setup(&g, argc, argv, &set, &mo);
  if (rc >= 0) return rc;
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(g.model, &mo, &m);
  if (s) {
    rx_rt_comm_release(mo.comm);
    return fail(s);
  }
  char name[256];
  default_name(g.model, name, sizeof name);
  /* the default 8 shrinks to what the artifact runs; an explicit --max-batch past it is refused */
  int64_t most = rx_llm_model_max_batch(m);
  rx_server_options so = {.host = g.host,
                          .port = (int)g.port,
                          .max_batch =
                              g.max_batch_given || g.max_batch <= most ? g.max_batch : most,
                          .model_name = g.name ? g.name : name,
                          .idle_timeout_s = (int)g.idle_s,
                          .read_timeout_ms = g.read_s * 1000,
                          .deadline_ms = !g.deadline_given ? 0
                                         : g.deadline_s    ? g.deadline_s * 1000
                                                           : -1,
                          .max_connections = (int)g.max_conns,
                          .max_connections_per_ip = (int)g.per_ip,
                          .max_queue = g.max_queue,
                          .api_key = g.api_key,
                          .prefix_cache = g.prefix_cache,
                          .prefill_chunk = g.prefill_chunk};
  rx_server *srv = NULL;
  s = serve_server_start(m, &so, &srv);
  if (s) {
    rx_llm_model_free(m);
    rx_rt_comm_release(mo.comm);
    return fail(s);
  }
  char ranks[64] = "";
  if (mo.comm) snprintf(ranks, sizeof ranks, " (rank 0 of %d, tensor parallel)", (int)g.tp);
  fprintf(stderr,
          "relaxc serve: model '%s' on %s%s, http://%s:%d/v1/completions and "
          "/v1/chat/completions; up to %lld requests at once; Ctrl-C stops\n",
          so.model_name, rx_llm_model_device_name(m), ranks, g.host, serve_server_port(srv),
          (long long)serve_server_max_batch(srv));
  int sig = 0;
  sigwait(&set, &sig);
  drain(srv, &set, sig, g.shutdown_s);
  serve_server_stop(srv);
  /* every request ended, so every page is back: the line says so (the load test reads it) */
  int64_t pages = rx_llm_model_kv_capacity(m) / KV_PAGE;
  fprintf(stderr, "relaxc serve: pages free: %lld/%lld\n",
          (long long)(rx_llm_model_kv_free_tokens(m) / KV_PAGE), (long long)pages);
  rx_llm_model_free(m); /* with ranks: the followers return */
  rx_rt_comm_release(mo.comm);
  return 0;
}
#else
int cli_cmd_serve(const rx_cli_command *cmd, int argc, char **argv) {
  (void)cmd;
  (void)argc;
  (void)argv;
  fprintf(stderr, "relaxc: error: this relaxc was built without libmicrohttpd, so it has no "
                  "serve command (Debian: apt-get install libmicrohttpd-dev, then rebuild)\n");
  return 1;
}
#endif
