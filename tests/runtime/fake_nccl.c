/* tests/runtime/fake_nccl.c: a fake NCCL on the host, for the CUDA path of the collective
 * builtins (runtime/ccl/nccl.c) under mpirun with the fake CUDA driver (fake_cuda.c: device
 * memory is host memory, so a device address is a host pointer). tests/ccl/ccl.cmake builds it
 * as libnccl.so.2 in a directory of its own; the test names it in RX_NCCL_LIBRARY.
 *
 * The ranks are processes: ncclGetUniqueId creates a file in /dev/shm whose path is the id, and
 * every rank's ncclCommInitRank maps it. A collective writes what the rank called (the entry
 * point, count, type, operation, root) and its data into the rank's slot, waits for every rank
 * (a barrier in the file), checks that all called the same, computes the result on the host
 * (sums in double in rank order, rounded once) and waits again before the slots are reused.
 * ncclSend/ncclRecv go through a mailbox per (sender, receiver) pair.
 *
 * The checks of the sequence of calls: a communicator used before ncclCommInitRank or after
 * ncclCommDestroy, ranks that joined with another nranks, a NULL stream (the runtime must queue
 * on the device's stream), ranks that called different collectives or the same with other
 * arguments, a receive of another size than the send, a wait of over 30 s (a hang) each return
 * an error and append an "ERROR:" line to the trace; fake_nccl_count("misuse") counts them.
 * Every call appends its line to the trace (fake_nccl_trace_line), and fake_nccl_live() is the
 * count of communicators not destroyed. */
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "runtime/ccl/nccl_api.h"

#define API       __attribute__((visibility("default")))
#define MAX_RANKS 8
#define SLOT      (4u << 20) /* bytes of one rank's data, and of one mailbox */

typedef struct call_desc {
  int kind; /* 1 allreduce, 2 allgather, 3 reduce_scatter, 4 broadcast */
  int dtype, op, root;
  size_t count;
} call_desc;

typedef struct shared {
  int nranks, joined, left;
  unsigned arrived, gen; /* the barrier */
  call_desc descs[MAX_RANKS];
  struct {
    int full;
    size_t bytes;
  } box[MAX_RANKS][MAX_RANKS];
} shared;
#define SHARED_BYTES 4096
#define FILE_BYTES   ((size_t)SHARED_BYTES + (size_t)SLOT * (MAX_RANKS + MAX_RANKS * MAX_RANKS))

typedef struct fake_comm {
  shared *sh;
  uint8_t *base; /* the mapping */
  int rank, nranks;
  char path[128];
  struct fake_comm *next;
} fake_comm;

static fake_comm *live;
static char trace[512][160];
static int ntrace, nmisuse, ids;

static void log_line(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (ntrace < 512) vsnprintf(trace[ntrace++], sizeof trace[0], fmt, ap);
  va_end(ap);
}
static nccl_result misuse(const char *entry, const char *why) {
  nmisuse++;
  log_line("ERROR: %s: %s", entry, why);
  fprintf(stderr, "fake nccl: ERROR: %s: %s\n", entry, why);
  return 5; /* ncclInvalidUsage */
}

API int fake_nccl_trace_count(void) { return ntrace; }
API const char *fake_nccl_trace_line(int i) { return i >= 0 && i < ntrace ? trace[i] : ""; }
API void fake_nccl_trace_clear(void) { ntrace = 0; }
API int fake_nccl_count(const char *what) {
  if (!strcmp(what, "misuse")) return nmisuse;
  return -1;
}
API int fake_nccl_live(void) {
  int n = 0;
  for (fake_comm *c = live; c; c = c->next) n++;
  return n;
}

static bool is_live(fake_comm *c) {
  for (fake_comm *l = live; l; l = l->next)
    if (l == c) return true;
  return false;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* every rank of c arrives; false after 30 s */
static bool barrier(fake_comm *c) {
  shared *sh = c->sh;
  unsigned gen = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&sh->arrived, 1, __ATOMIC_ACQ_REL) == (unsigned)c->nranks) {
    __atomic_store_n(&sh->arrived, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&sh->gen, 1, __ATOMIC_RELEASE);
    return true;
  }
  double t0 = now();
  while (__atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE) == gen) {
    if (now() - t0 > 30) return false;
    sched_yield();
  }
  return true;
}

API nccl_result ncclGetUniqueId(nccl_unique_id *id) {
  if (!id) return misuse("ncclGetUniqueId", "NULL id");
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "/dev/shm/rx_fake_nccl.%d.%d", (int)getpid(), ids++);
  int fd = open(id->internal, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)FILE_BYTES)) return misuse("ncclGetUniqueId", "no /dev/shm");
  close(fd);
  log_line("ncclGetUniqueId");
  return 0;
}

API nccl_result ncclCommInitRank(nccl_comm *out, int nranks, nccl_unique_id id, int rank) {
  if (!out) return misuse("ncclCommInitRank", "NULL output");
  if (nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
    return misuse("ncclCommInitRank", "rank or nranks out of range");
  fake_comm *c = calloc(1, sizeof *c);
  memcpy(c->path, id.internal, sizeof c->path - 1);
  int fd = open(c->path, O_RDWR);
  if (fd < 0) {
    free(c);
    return misuse("ncclCommInitRank", "an id no ncclGetUniqueId made");
  }
  c->base = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  c->sh = (shared *)c->base;
  c->rank = rank;
  c->nranks = nranks;
  int zero = 0;
  if (!__atomic_compare_exchange_n(&c->sh->nranks, &zero, nranks, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE) &&
      zero != nranks) {
    munmap(c->base, FILE_BYTES);
    free(c);
    return misuse("ncclCommInitRank", "ranks joined with different nranks");
  }
  __atomic_add_fetch(&c->sh->joined, 1, __ATOMIC_ACQ_REL);
  if (!barrier(c)) return misuse("ncclCommInitRank", "not every rank joined within 30 s");
  c->next = live;
  live = c;
  *out = c;
  log_line("ncclCommInitRank rank=%d nranks=%d", rank, nranks);
  return 0;
}

API nccl_result ncclCommDestroy(nccl_comm comm) {
  fake_comm *c = comm;
  if (!is_live(c)) return misuse("ncclCommDestroy", "not a live communicator");
  for (fake_comm **p = &live; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  if (__atomic_add_fetch(&c->sh->left, 1, __ATOMIC_ACQ_REL) == c->nranks) unlink(c->path);
  munmap(c->base, FILE_BYTES);
  free(c);
  log_line("ncclCommDestroy");
  return 0;
}

API const char *ncclGetErrorString(nccl_result r) {
  return r == 5 ? "invalid usage (fake NCCL)" : "error (fake NCCL)";
}

static size_t type_size(int t) {
  switch (t) {
  case NCCL_INT8:
    return 1;
  case NCCL_FLOAT16:
  case NCCL_BFLOAT16:
    return 2;
  case NCCL_INT32:
  case NCCL_FLOAT32:
    return 4;
  case NCCL_INT64:
  case NCCL_FLOAT64:
    return 8;
  default:
    return 0;
  }
}
static const char *type_name(int t) {
  switch (t) {
  case NCCL_INT8:
    return "int8";
  case NCCL_FLOAT16:
    return "float16";
  case NCCL_BFLOAT16:
    return "bfloat16";
  case NCCL_INT32:
    return "int32";
  case NCCL_FLOAT32:
    return "float32";
  case NCCL_INT64:
    return "int64";
  case NCCL_FLOAT64:
    return "float64";
  default:
    return "?";
  }
}
static double get(const uint8_t *p, int t, size_t i) {
  switch (t) {
  case NCCL_FLOAT16:
    return base_f16_to_f32(((const uint16_t *)p)[i]);
  case NCCL_BFLOAT16:
    return base_bf16_to_f32(((const uint16_t *)p)[i]);
  case NCCL_FLOAT32:
    return ((const float *)p)[i];
  case NCCL_FLOAT64:
    return ((const double *)p)[i];
  case NCCL_INT32:
    return ((const int32_t *)p)[i];
  case NCCL_INT64:
    return (double)((const int64_t *)p)[i];
  default:
    return ((const int8_t *)p)[i];
  }
}
static void put(uint8_t *p, int t, size_t i, double v) {
  switch (t) {
  case NCCL_FLOAT16:
    ((uint16_t *)p)[i] = base_f32_to_f16((float)v);
    break;
  case NCCL_BFLOAT16:
    ((uint16_t *)p)[i] = base_f32_to_bf16((float)v);
    break;
  case NCCL_FLOAT32:
    ((float *)p)[i] = (float)v;
    break;
  case NCCL_FLOAT64:
    ((double *)p)[i] = v;
    break;
  case NCCL_INT32:
    ((int32_t *)p)[i] = (int32_t)v;
    break;
  case NCCL_INT64:
    ((int64_t *)p)[i] = (int64_t)v;
    break;
  default:
    ((int8_t *)p)[i] = (int8_t)v;
    break;
  }
}

static uint8_t *slot(fake_comm *c, int r) { return c->base + SHARED_BYTES + (size_t)SLOT * r; }

static const char *const kinds[] = {"", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
                                    "ncclBroadcast"};

/* the common part: checks, this rank's data into its slot, the first barrier, the agreement */
static nccl_result enter(fake_comm *c, call_desc d, const void *send, size_t bytes, void *stream) {
  const char *e = kinds[d.kind];
  if (!is_live(c)) return misuse(e, "a communicator not initialized or destroyed");
  if (!stream) return misuse(e, "the NULL stream (not the device's)");
  if (!type_size(d.dtype)) return misuse(e, "an unknown data type");
  if (bytes > SLOT) return misuse(e, "over the fake's 4 MiB per rank");
  log_line("%s count=%zu %s%s%s root=%d", e, d.count, type_name(d.dtype),
           d.kind == 1 || d.kind == 3 ? (d.op == NCCL_MAX ? " max" : " sum") : "", "", d.root);
  c->sh->descs[c->rank] = d;
  memcpy(slot(c, c->rank), send, bytes);
  if (!barrier(c)) return misuse(e, "another rank did not arrive within 30 s");
  for (int r = 0; r < c->nranks; r++)
    if (memcmp(&c->sh->descs[r], &d, sizeof d)) {
      barrier(c);
      return misuse(e, "the ranks called different collectives or arguments");
    }
  return 0;
}

static nccl_result leave(fake_comm *c, int kind) {
  if (!barrier(c)) return misuse(kinds[kind], "another rank did not finish within 30 s");
  return 0;
}

API nccl_result ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op,
                              nccl_comm comm, nccl_stream stream) {
  fake_comm *c = comm;
  call_desc d = {1, dtype, op, 0, count};
  nccl_result r = enter(c, d, send, count * type_size(dtype), stream);
  if (r) return r;
  for (size_t i = 0; i < count; i++) {
    double acc = get(slot(c, 0), dtype, i);
    for (int k = 1; k < c->nranks; k++) {
      double v = get(slot(c, k), dtype, i);
      acc = op == NCCL_MAX ? (v > acc ? v : acc) : acc + v;
    }
    put(recv, dtype, i, acc);
  }
  return leave(c, 1);
}

API nccl_result ncclAllGather(const void *send, void *recv, size_t count, int dtype, nccl_comm comm,
                              nccl_stream stream) {
  fake_comm *c = comm;
  call_desc d = {2, dtype, 0, 0, count};
  size_t bytes = count * type_size(dtype);
  nccl_result r = enter(c, d, send, bytes, stream);
  if (r) return r;
  for (int k = 0; k < c->nranks; k++)
    memcpy((uint8_t *)recv + bytes * (size_t)k, slot(c, k), bytes);
  return leave(c, 2);
}

API nccl_result ncclReduceScatter(const void *send, void *recv, size_t count, int dtype, int op,
                                  nccl_comm comm, nccl_stream stream) {
  fake_comm *c = comm;
  call_desc d = {3, dtype, op, 0, count};
  nccl_result r = enter(c, d, send, count * type_size(dtype) * (size_t)(c ? c->nranks : 0), stream);
  if (r) return r;
  size_t off = count * (size_t)c->rank;
  for (size_t i = 0; i < count; i++) {
    double acc = get(slot(c, 0), dtype, off + i);
    for (int k = 1; k < c->nranks; k++) {
      double v = get(slot(c, k), dtype, off + i);
      acc = op == NCCL_MAX ? (v > acc ? v : acc) : acc + v;
    }
    put(recv, dtype, i, acc);
  }
  return leave(c, 3);
}

API nccl_result ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root,
                              nccl_comm comm, nccl_stream stream) {
  fake_comm *c = comm;
  call_desc d = {4, dtype, 0, root, count};
  if (c && is_live(c) && (root < 0 || root >= c->nranks)) return misuse("ncclBroadcast", "root");
  nccl_result r = enter(c, d, send, count * type_size(dtype), stream);
  if (r) return r;
  memcpy(recv, slot(c, root), count * type_size(dtype));
  return leave(c, 4);
}

/* the mailbox of (from, to): after the slots */
static uint8_t *box_data(fake_comm *c, int from, int to) {
  return c->base + SHARED_BYTES + (size_t)SLOT * (MAX_RANKS + from * MAX_RANKS + to);
}

static nccl_result p2p_check(fake_comm *c, const char *e, int peer, size_t bytes, void *stream) {
  if (!is_live(c)) return misuse(e, "a communicator not initialized or destroyed");
  if (!stream) return misuse(e, "the NULL stream (not the device's)");
  if (peer < 0 || peer >= c->nranks || peer == c->rank) return misuse(e, "peer");
  if (bytes > SLOT) return misuse(e, "over the fake's 4 MiB per message");
  return 0;
}

API nccl_result ncclSend(const void *send, size_t count, int dtype, int peer, nccl_comm comm,
                         nccl_stream stream) {
  fake_comm *c = comm;
  size_t bytes = count * type_size(dtype);
  nccl_result r = p2p_check(c, "ncclSend", peer, bytes, stream);
  if (r) return r;
  log_line("ncclSend count=%zu %s peer=%d", count, type_name(dtype), peer);
  double t0 = now();
  while (__atomic_load_n(&c->sh->box[c->rank][peer].full, __ATOMIC_ACQUIRE)) {
    if (now() - t0 > 30) return misuse("ncclSend", "the mailbox stayed full for 30 s");
    sched_yield();
  }
  memcpy(box_data(c, c->rank, peer), send, bytes);
  c->sh->box[c->rank][peer].bytes = bytes;
  __atomic_store_n(&c->sh->box[c->rank][peer].full, 1, __ATOMIC_RELEASE);
  return 0;
}

API nccl_result ncclRecv(void *recv, size_t count, int dtype, int peer, nccl_comm comm,
                         nccl_stream stream) {
  fake_comm *c = comm;
  size_t bytes = count * type_size(dtype);
  nccl_result r = p2p_check(c, "ncclRecv", peer, bytes, stream);
  if (r) return r;
  log_line("ncclRecv count=%zu %s peer=%d", count, type_name(dtype), peer);
  double t0 = now();
  while (!__atomic_load_n(&c->sh->box[peer][c->rank].full, __ATOMIC_ACQUIRE)) {
    if (now() - t0 > 30) return misuse("ncclRecv", "nothing sent within 30 s");
    sched_yield();
  }
  size_t sent = c->sh->box[peer][c->rank].bytes;
  if (sent == bytes) memcpy(recv, box_data(c, peer, c->rank), bytes);
  __atomic_store_n(&c->sh->box[peer][c->rank].full, 0, __ATOMIC_RELEASE);
  return sent == bytes ? 0 : misuse("ncclRecv", "a receive of another size than the send");
}
