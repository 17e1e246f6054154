/* runtime/llm/model.c: an LLM artifact on a device (relaxc/llm.h "models"): its sections
 * llm.json and tokenizer.json, its KV cache (the artifact's create_kv_cache), the prefill and
 * decode calls, and the generation loop that `relaxc generate` runs. */
#include "relaxc/ccl.h"
#include "relaxc/llm.h"
#include "relaxc/runtime.h"
#include "runtime/llm/grammar.h"
#include "runtime/llm/kv_cache.h"
#include "runtime/llm/prefix_cache.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LLM_MAX_EOS 8 /* end-of-sequence ids kept (Llama 3 lists 3) */

struct rx_llm_model {
  rx_rt_device *device;
  rx_rt_artifact *artifact;
  rx_tokenizer *tok;      /* NULL: no tokenizer.json */
  rx_chat_template *chat; /* NULL: no chat_template.json */
  rx_rt_value *cache;
  rx_kv_cache *kv;    /* the cache's object (borrowed from cache) */
  rx_rt_value *batch; /* the batch argument of prefill and decode, set before each call */
  int64_t *counts;    /* max_batch: a call's new tokens per sequence */
  int32_t vocab, bos;
  int64_t max_seq_len, max_batch;
  int32_t eos[LLM_MAX_EOS];
  int neos;
  char device_name[300];
  rx_rt_comm *comm;        /* tensor parallelism (options.comm, retained); NULL: one process */
  bool leading;            /* rank 0 of several, loaded: broadcasts its calls (llm_lead) */
  rx_llm_step_stats steps; /* with comm: forward's time and its collectives' */
};

static const void *section(const rx_rt_artifact *a, const char *name, size_t *out_size) {
  for (size_t i = 0; i < rx_rt_artifact_section_count(a); i++) {
    const char *n;
    const void *d;
    size_t sz;
    if (rx_rt_artifact_section(a, i, &n, &d, &sz) && !strcmp(n, name)) {
      *out_size = sz;
      return d;
    }
  }
  return NULL;
}

static int64_t json_int(const cJSON *o, const char *k, int64_t def) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : def;
}

/* llm.json: what prefill and decode produce and what stops generation. */
static rx_status read_meta(rx_llm_model *m, const char *path) {
  size_t len = 0;
  const char *text = section(m->artifact, "llm.json", &len);
  if (!text)
    return base_status_make(RX_ERR_INVALID,
                            "%s is not an LLM artifact (no llm.json section): compile a Hugging "
                            "Face model folder (relaxc compile DIR --target ...)",
                            path);
  cJSON *j = cJSON_ParseWithLength(text, len);
  m->vocab = (int32_t)json_int(j, "vocab_size", 0);
  m->max_seq_len = json_int(j, "max_seq_len", 0);
  m->max_batch = json_int(j, "max_batch", 0);
  m->bos = (int32_t)json_int(j, "bos_token_id", -1);
  const cJSON *eos = cJSON_GetObjectItemCaseSensitive(j, "eos_token_ids"), *it;
  cJSON_ArrayForEach(it, eos) {
    if (cJSON_IsNumber(it) && m->neos < LLM_MAX_EOS) m->eos[m->neos++] = (int32_t)it->valuedouble;
  }
  cJSON_Delete(j);
  if (m->vocab <= 0 || m->max_seq_len <= 0 || m->max_batch <= 0)
    return base_status_make(RX_ERR_INVALID,
                            "%s: llm.json lacks vocab_size, max_seq_len or max_batch (or is not "
                            "valid JSON)",
                            path);
  return NULL;
}

static rx_status load_tokenizer(rx_llm_model *m, const char *path) {
  size_t len = 0;
  const char *text = section(m->artifact, "tokenizer.json", &len);
  if (!text) return NULL;
  char name[512];
  snprintf(name, sizeof name, "%s: tokenizer.json", path);
  return rx_tokenizer_load(text, len, name, &m->tok);
}

/* chat_template.json: {"format": 1, "chat_template": TEXT, "bos_token": S, "eos_token": S} */
static rx_status load_chat_template(rx_llm_model *m, const char *path) {
  size_t len = 0;
  const char *text = section(m->artifact, "chat_template.json", &len);
  if (!text) return NULL;
  cJSON *j = cJSON_ParseWithLength(text, len);
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "format");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "bos_token");
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "eos_token");
  rx_status s = NULL;
  if (!cJSON_IsNumber(f) || f->valuedouble != 1 || !cJSON_IsString(t))
    s = base_status_make(RX_ERR_INVALID,
                         "%s: chat_template.json: expected format 1 and a string chat_template",
                         path);
  char name[512];
  snprintf(name, sizeof name, "%s: chat_template", path);
  if (!s)
    s = rx_chat_template_parse(t->valuestring, strlen(t->valuestring), name,
                               cJSON_IsString(b) ? b->valuestring : NULL,
                               cJSON_IsString(e) ? e->valuestring : NULL, &m->chat);
  cJSON_Delete(j);
  return s;
}

static rx_status call(rx_llm_model *m, const char *fn, rx_rt_value *const *args, size_t n,
                      rx_rt_value **out) {
  return rx_rt_vm_call_values(m->artifact, fn, args, n, out);
}

/* A run-time max_seq_len (o->max_seq_len) below the artifact's: prompts, the generation loop and
 * the default cache capacity follow it. The compiled bound stays an upper bound: more is an
 * error (the plan and the host program's checks assume it). */
static rx_status run_limits(rx_llm_model *m, const rx_llm_model_options *o) {
  if (!o || o->max_seq_len == 0) return NULL;
  if (o->max_seq_len < 0 || o->max_seq_len > m->max_seq_len)
    return base_status_make(RX_ERR_INVALID,
                            "max_seq_len %lld at run time: expected 1..%lld, the artifact's "
                            "(compile with --max-seq-len for a longer one)",
                            (long long)o->max_seq_len, (long long)m->max_seq_len);
  m->max_seq_len = o->max_seq_len;
  return NULL;
}

static rx_status create_cache(rx_llm_model *m, const rx_llm_model_options *o) {
  int64_t cap = o && o->capacity > 0 ? o->capacity : m->max_seq_len;
  int64_t seqs = o && o->max_sequences > 0 ? o->max_sequences : 1;
  rx_rt_value *args[2] = {NULL, NULL};
  rx_status s = rx_rt_value_from_prim(RX_DTYPE_I64, cap, &args[0]);
  if (!s) s = rx_rt_value_from_prim(RX_DTYPE_I64, seqs, &args[1]);
  if (!s) s = call(m, "create_kv_cache", args, 2, &m->cache);
  if (s && !(o && o->capacity > 0))
    s = base_status_annotate(s,
                             "a KV cache for the model's max_seq_len of %lld tokens (set a "
                             "smaller capacity or length: --kv-capacity, --max-seq-len)",
                             (long long)cap);
  rx_rt_value_release(args[0]);
  rx_rt_value_release(args[1]);
  if (!s && !(m->kv = llm_kv_cache_of(m->cache)))
    s = base_status_make(RX_ERR_INVALID, "create_kv_cache did not return a KV cache");
  return s;
}

/* Prefills of 1, 16 and 17 tokens (the matmuls' variants n == 1, n <= 16 and the rest) and one
 * decode on a scratch sequence, forgotten after: drivers finish building a pipeline at its first
 * launch (lavapipe compiles each to machine code then), so the first real request and its
 * timings do not pay for it. */
static rx_status warm_up(rx_llm_model *m) {
  const int64_t seq = INT64_MAX; /* an id no caller picks */
  static const int32_t ids[17] = {0};
  const size_t sizes[3] = {1, 16, 17};
  float *logits = malloc((size_t)m->vocab * sizeof *logits);
  if (!logits) return base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory: logits");
  rx_status s = NULL;
  for (int i = 0; i < 3 && !s; i++) {
    if (llm_kv_cache_length(m->kv, seq) + (int64_t)sizes[i] + 1 > m->max_seq_len ||
        llm_kv_cache_free_tokens(m->kv) < (int64_t)sizes[i] + RX_KV_PAGE)
      break; /* a model or a cache too small for more */
    s = rx_llm_prefill(m, seq, ids, sizes[i], logits);
    if (!s) s = rx_llm_decode(m, &seq, ids, 1, logits);
  }
  llm_kv_cache_remove(m->kv, seq);
  free(logits);
  return s ? base_status_annotate(s, "warming up") : NULL;
}

/* ---- tensor parallelism: rank 0 leads, the others follow (options.comm) ---- */
/* The rank's artifact: its part of a multi-rank artifact (relaxc compile --tensor-parallel N,
 * rx_rt_artifact_load_rank; N must be the communicator's size); else MODEL.rankR.rxm beside
 * MODEL.rxm where it exists (one artifact per rank, made some other way), else MODEL.rxm whole
 * (every rank holds the whole model). */
static rx_status load_rank(rx_llm_model *m, rx_rt_comm *comm, const char *path) {
  char rank_path[4096];
  const char *p = path;
  int ranks = 1, world = comm ? rx_rt_comm_size(comm) : 1, rank = comm ? rx_rt_comm_rank(comm) : 0;
  rx_status probe = rx_rt_artifact_rank_count(path, &ranks);
  if (probe) { /* not readable: the load below says why, as for one process */
    rx_status_free(probe);
    ranks = 1;
  }
  if (ranks > 1) {
    if (ranks != world)
      return base_status_make(RX_ERR_INVALID,
                              "%s: an artifact of %d ranks, run by %d process%s (mpirun -n %d)",
                              path, ranks, world, world == 1 ? "" : "es", ranks);
    RX_RETURN_IF_ERROR(rx_rt_artifact_load_rank(m->device, path, rank, &m->artifact));
  } else {
    if (world > 1) {
      size_t len = strlen(path);
      if (len > 4 && !strcmp(path + len - 4, ".rxm") && len < sizeof rank_path - 32) {
        snprintf(rank_path, sizeof rank_path, "%.*s.rank%d.rxm", (int)(len - 4), path, rank);
        if (access(rank_path, R_OK) == 0) p = rank_path;
      }
    }
    RX_RETURN_IF_ERROR(rx_rt_artifact_load(m->device, p, &m->artifact));
  }
  if (!comm) return NULL;
  m->comm = comm;
  rx_rt_comm_retain(comm);
  rx_rt_artifact_set_comm(m->artifact, comm);
  if (rx_rt_device_get_info(m->device)->backend == RX_RT_BACKEND_CUDA &&
      rx_rt_comm_size(comm) > 1 && strcmp(rx_rt_comm_backend(comm), "nccl"))
    RX_RETURN_IF_ERROR(rx_rt_comm_enable_nccl(comm, m->device));
  return NULL;
}

/* The calls rank 0 broadcasts: the model's (prefill, decode, reset) and the KV cache's page
 * operations outside them (the prefix cache's fork, retain, release: kv_cache.h's mirror). */
enum {
  LLM_CMD_STOP,
  LLM_CMD_PREFILL,
  LLM_CMD_DECODE,
  LLM_CMD_RESET,
  LLM_CMD_FORK,    /* seqs[0] the new sequence, ids its n shared pages */
  LLM_CMD_RETAIN,  /* seqs[0] the page */
  LLM_CMD_RELEASE, /* seqs[0] the page */
};
static const char *const llm_cmd_names[] = {"stop", "prefill", "decode", "reset",
                                            "fork", "retain",  "release"};

/* Rank 0: the call to every rank: a header (command, b, n, the digest of rank 0's KV cache
 * before the call, or 0 after a page operation already made), then seqs (b), counts (b, prefill)
 * and ids (n). */
static rx_status lead(rx_llm_model *m, int cmd, const int64_t *seqs, size_t b, const size_t *counts,
                      const int32_t *ids, size_t n) {
  bool after = cmd >= LLM_CMD_FORK; /* the mirror reports an operation made */
  int64_t h[4] = {cmd, (int64_t)b, (int64_t)n,
                  after || !m->kv ? 0 : (int64_t)llm_kv_cache_digest(m->kv)};
  /* the header: the followers wait for it, sleeping while rank 0 is idle (a server's followers
   * between requests) */
  RX_RETURN_IF_ERROR(rx_rt_comm_broadcast_host_idle(m->comm, h, sizeof h, 0));
  if (b) RX_RETURN_IF_ERROR(rx_rt_comm_broadcast_host(m->comm, (void *)seqs, b * sizeof *seqs, 0));
  if (counts) {
    int64_t *c = malloc(b * sizeof *c);
    if (!c) return base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory: counts");
    for (size_t i = 0; i < b; i++) c[i] = (int64_t)counts[i];
    rx_status s = rx_rt_comm_broadcast_host(m->comm, c, b * sizeof *c, 0);
    free(c);
    RX_RETURN_IF_ERROR(s);
  }
  if (n) RX_RETURN_IF_ERROR(rx_rt_comm_broadcast_host(m->comm, (void *)ids, n * sizeof *ids, 0));
  return NULL;
}

/* Rank 0's KV cache mirror (kv_cache.h): each page operation of the prefix cache broadcast. A
 * failed broadcast means a rank is gone: mpirun ends the job; it is said here too. */
static void mirror_kv(void *ctx, llm_kv_op op, int64_t arg, const int32_t *pages, int64_t npages) {
  rx_llm_model *m = ctx;
  int cmd = op == LLM_KV_OP_FORK     ? LLM_CMD_FORK
            : op == LLM_KV_OP_RETAIN ? LLM_CMD_RETAIN
                                     : LLM_CMD_RELEASE;
  rx_status s = lead(m, cmd, &arg, 1, NULL, pages, (size_t)npages);
  if (s) {
    fprintf(stderr, "relaxc: rank 0: the KV cache's %s could not reach the other ranks: %s\n",
            llm_cmd_names[cmd], rx_status_message(s));
    rx_status_free(s);
  }
}

/* A follower's page operation (LLM_CMD_FORK, _RETAIN, _RELEASE), checked as rank 0's was. */
static rx_status follow_page_op(rx_llm_model *m, int64_t cmd, int64_t arg, const int32_t *ids,
                                size_t n) {
  if (cmd == LLM_CMD_FORK) return llm_kv_cache_fork(m->kv, arg, ids, (int64_t)n);
  if (arg < 1 || arg > INT32_MAX || llm_kv_cache_page_refs(m->kv, (int32_t)arg) < 1)
    return base_status_make(RX_ERR_INTERNAL, "a %s of page %lld, which is not in use here",
                            llm_cmd_names[cmd], (long long)arg);
  if (cmd == LLM_CMD_RETAIN)
    llm_kv_cache_page_retain(m->kv, (int32_t)arg);
  else
    llm_kv_cache_page_release(m->kv, (int32_t)arg);
  return NULL;
}

/* A follower's one call, as rank 0 broadcast it. */
static rx_status follow_one(rx_llm_model *m, const int64_t *h, int64_t *seqs, size_t *counts,
                            int32_t *ids, float *logits) {
  size_t b = (size_t)h[1], n = (size_t)h[2];
  rx_status s = rx_rt_comm_broadcast_host(m->comm, seqs, b * sizeof *seqs, 0);
  if (!s && h[0] == LLM_CMD_PREFILL) {
    int64_t *c = (int64_t *)counts; /* size_t and int64_t: the same width here */
    s = rx_rt_comm_broadcast_host(m->comm, c, b * sizeof *c, 0);
  }
  if (!s && n) s = rx_rt_comm_broadcast_host(m->comm, ids, n * sizeof *ids, 0);
  if (s) return s;
  if (h[3] && (uint64_t)h[3] != llm_kv_cache_digest(m->kv))
    return base_status_make(RX_ERR_INTERNAL,
                            "rank %d: its KV cache is out of step with rank 0's before rank 0's "
                            "%s (a page operation of rank 0 was not followed)",
                            rx_rt_comm_rank(m->comm), llm_cmd_names[h[0]]);
  rx_status e = NULL;
  if (h[0] >= LLM_CMD_FORK) {
    if ((e = follow_page_op(m, h[0], seqs[0], ids, n))) /* rank 0's succeeded: fatal here */
      return base_status_annotate(e, "rank %d: following rank 0's KV cache",
                                  rx_rt_comm_rank(m->comm));
    return NULL;
  }
  if (h[0] == LLM_CMD_PREFILL)
    e = rx_llm_prefill_batch(m, seqs, b, ids, n, counts, logits);
  else if (h[0] == LLM_CMD_DECODE)
    e = rx_llm_decode(m, seqs, ids, b, logits);
  else
    llm_kv_cache_remove(m->kv, seqs[0]);
  if (e) { /* rank 0 got the same */
    fprintf(stderr, "relaxc: rank %d: %s\n", rx_rt_comm_rank(m->comm), rx_status_message(e));
    rx_status_free(e);
  }
  return NULL;
}

rx_status rx_llm_model_follow(rx_llm_model *m) {
  if (!m || !m->comm || rx_rt_comm_rank(m->comm) == 0)
    return base_status_make(RX_ERR_INVALID, "rx_llm_model_follow: for the ranks other than 0 of "
                                            "a model loaded with a communicator");
  _Static_assert(sizeof(size_t) == sizeof(int64_t), "counts travel as int64");
  size_t cap = (size_t)m->max_seq_len * (size_t)(m->max_batch > 0 ? m->max_batch : 1);
  int64_t *seqs = malloc((size_t)m->max_batch * sizeof *seqs + 8);
  size_t *counts = malloc((size_t)m->max_batch * sizeof *counts + 8);
  int32_t *ids = malloc(cap * sizeof *ids + 4);
  float *logits = malloc((size_t)m->max_batch * (size_t)m->vocab * sizeof *logits + 4);
  rx_status s = NULL;
  if (!seqs || !counts || !ids || !logits)
    s = base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory: a follower's buffers");
  for (;;) {
    int64_t h[4] = {0, 0, 0, 0};
    if (!s) s = rx_rt_comm_broadcast_host_idle(m->comm, h, sizeof h, 0);
    if (s || h[0] == LLM_CMD_STOP) break;
    if (h[0] < LLM_CMD_PREFILL || h[0] > LLM_CMD_RELEASE || h[1] < 1 || h[1] > m->max_batch ||
        h[2] < 0 || (size_t)h[2] > cap) {
      s = base_status_make(RX_ERR_INTERNAL, "rank %d: rank 0 sent a call %lld of %lld, %lld",
                           rx_rt_comm_rank(m->comm), (long long)h[0], (long long)h[1],
                           (long long)h[2]);
      break;
    }
    s = follow_one(m, h, seqs, counts, ids, logits);
  }
  free(seqs);
  free(counts);
  free(ids);
  free(logits);
  return s;
}

rx_status rx_llm_model_load(const char *path, const rx_llm_model_options *o,
                            rx_llm_model **out_model) {
  if (!out_model || !path) return base_status_make(RX_ERR_INVALID, "rx_llm_model_load: NULL");
  *out_model = NULL;
  rx_llm_model *m = calloc(1, sizeof *m);
  if (!m) return base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory: a model");
  m->bos = -1;
  rx_status s = rx_rt_device_open(o ? o->device : NULL, NULL, &m->device);
  if (!s) s = load_rank(m, o ? o->comm : NULL, path);
  if (!s) s = read_meta(m, path);
  if (!s) s = load_tokenizer(m, path);
  if (!s) s = load_chat_template(m, path);
  if (!s) s = run_limits(m, o);
  if (!s) s = create_cache(m, o);
  if (!s) s = llm_kv_batch_new(&m->batch);
  if (!s && !(m->counts = malloc((size_t)m->max_batch * sizeof *m->counts)))
    s = base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory: a batch");
  if (!s) s = warm_up(m);
  if (s) {
    rx_llm_model_free(m);
    return s;
  }
  m->leading = m->comm && rx_rt_comm_size(m->comm) > 1 && rx_rt_comm_rank(m->comm) == 0;
  if (m->leading) llm_kv_cache_set_mirror(m->kv, mirror_kv, m);
  const rx_rt_device_info *info = rx_rt_device_get_info(m->device);
  snprintf(m->device_name, sizeof m->device_name, "%s (%s)", info->name,
           rx_rt_backend_name(info->backend));
  *out_model = m;
  return NULL;
}

void rx_llm_model_free(rx_llm_model *m) {
  if (!m) return;
  if (m->leading) rx_status_free(lead(m, LLM_CMD_STOP, NULL, 0, NULL, NULL, 0));
  rx_rt_comm_release(m->comm);
  rx_rt_value_release(m->cache);
  rx_rt_value_release(m->batch);
  free(m->counts);
  rx_tokenizer_free(m->tok);
  rx_chat_template_free(m->chat);
  rx_rt_artifact_release(m->artifact);
  rx_rt_device_release(m->device);
  free(m);
}

const rx_tokenizer *rx_llm_model_tokenizer(const rx_llm_model *m) { return m->tok; }
const rx_chat_template *rx_llm_model_chat_template(const rx_llm_model *m) { return m->chat; }
int32_t rx_llm_model_vocab_size(const rx_llm_model *m) { return m->vocab; }
int64_t rx_llm_model_max_seq_len(const rx_llm_model *m) { return m->max_seq_len; }
const char *rx_llm_model_device_name(const rx_llm_model *m) { return m->device_name; }
rx_rt_device *rx_llm_model_device(const rx_llm_model *m) { return m->device; }
rx_kv_cache *llm_model_kv(rx_llm_model *m) { return m->kv; }
int64_t rx_llm_model_kv_bytes_per_token(const rx_llm_model *m) {
  return llm_kv_cache_bytes_per_token(m->kv);
}
int32_t rx_llm_model_bos_id(const rx_llm_model *m) {
  return m->bos >= 0 || !m->tok ? m->bos : rx_tokenizer_bos_id(m->tok);
}
bool rx_llm_model_is_eos(const rx_llm_model *m, int32_t id) {
  for (int i = 0; i < m->neos; i++)
    if (m->eos[i] == id) return true;
  return !m->neos && m->tok && rx_tokenizer_is_eos(m->tok, id);
}
int64_t rx_llm_model_seq_len(const rx_llm_model *m, int64_t seq) {
  return llm_kv_cache_length(m->kv, seq);
}
void rx_llm_model_reset(rx_llm_model *m, int64_t seq) {
  if (m->leading) rx_status_free(lead(m, LLM_CMD_RESET, &seq, 1, NULL, NULL, 0));
  llm_kv_cache_remove(m->kv, seq);
}
int64_t rx_llm_model_max_batch(const rx_llm_model *m) { return m->max_batch; }
int64_t rx_llm_model_max_sequences(const rx_llm_model *m) {
  return llm_kv_cache_max_sequences(m->kv);
}
int64_t rx_llm_model_sequences(const rx_llm_model *m) { return llm_kv_cache_sequences(m->kv); }
int64_t rx_llm_model_kv_capacity(const rx_llm_model *m) { return llm_kv_cache_capacity(m->kv); }
int64_t rx_llm_model_kv_free_tokens(const rx_llm_model *m) {
  return llm_kv_cache_free_tokens(m->kv);
}

/* Runs fn (prefill or decode) over the b sequences seqs with counts[i] new tokens each (ids,
 * n = their sum, packed) and reads b rows of vocab logits. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static rx_status forward_call(rx_llm_model *m, const char *fn, const int64_t *seqs,
                              const int64_t *counts, size_t b, const int32_t *ids, size_t n,
                              float *out_logits);

/* forward_call, timed with its collectives where there is a communicator (m->steps) */
static rx_status forward(rx_llm_model *m, const char *fn, const int64_t *seqs,
                         const int64_t *counts, size_t b, const int32_t *ids, size_t n,
                         float *out_logits) {
  if (!m->comm) return forward_call(m, fn, seqs, counts, b, ids, n, out_logits);
  double c0 = 0, c1 = 0, t0 = now_s();
  rx_rt_comm_stats(m->comm, &c0, NULL);
  rx_status s = forward_call(m, fn, seqs, counts, b, ids, n, out_logits);
  double t = now_s() - t0;
  rx_rt_comm_stats(m->comm, &c1, NULL);
  bool prefill = !strcmp(fn, "prefill");
  *(prefill ? &m->steps.prefills : &m->steps.decodes) += 1;
  *(prefill ? &m->steps.prefill_seconds : &m->steps.decode_seconds) += t;
  *(prefill ? &m->steps.prefill_comm_seconds : &m->steps.decode_comm_seconds) += c1 - c0;
  return s;
}

rx_llm_step_stats rx_llm_model_step_stats(const rx_llm_model *m) { return m->steps; }
void rx_llm_model_step_stats_reset(rx_llm_model *m) { memset(&m->steps, 0, sizeof m->steps); }

static rx_status forward_call(rx_llm_model *m, const char *fn, const int64_t *seqs,
                              const int64_t *counts, size_t b, const int32_t *ids, size_t n,
                              float *out_logits) {
  int64_t nn = (int64_t)n, bb = (int64_t)b;
  rx_rt_tensor *t = NULL;
  rx_rt_value *args[4] = {NULL, m->cache, m->batch, NULL}, *res = NULL;
  bool prefill = !strcmp(fn, "prefill");
  rx_status s = llm_kv_batch_set(m->batch, seqs, counts, b);
  if (!s) s = rx_rt_tensor_from_host(m->device, RX_DTYPE_I32, 1, &nn, ids, &t);
  if (!s) s = rx_rt_value_from_tensor(t, &args[0]);
  if (!s && prefill) s = rx_rt_value_from_shape(&bb, 1, &args[3]);
  if (!s) s = call(m, fn, args, prefill ? 4 : 3, &res);
  rx_rt_tensor *lt = res ? rx_rt_value_tensor(res) : NULL;
  if (!s && (!lt || rx_rt_tensor_bytes(lt) != b * (size_t)m->vocab * sizeof(float)))
    s = base_status_make(RX_ERR_INVALID, "%s did not return [%zu, %d] f32 logits", fn, b,
                         (int)m->vocab);
  if (!s) s = rx_rt_tensor_read(lt, out_logits, rx_rt_tensor_bytes(lt));
  rx_rt_value_release(res);
  rx_rt_value_release(args[0]);
  rx_rt_value_release(args[3]);
  rx_rt_tensor_release(t);
  return s;
}

/* What prefill and decode check before any call: token ids in the vocabulary (check_ids); at
 * most max_batch sequences, their ids >= 0 and distinct (check_seqs). */
static rx_status check_ids(const rx_llm_model *m, const char *fn, const int32_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= m->vocab)
      return base_status_make(RX_ERR_INVALID,
                              "%s: token id %d at %zu is outside the vocabulary "
                              "(0..%d)",
                              fn, (int)ids[i], i, (int)m->vocab - 1);
  return NULL;
}

static rx_status check_seqs(const rx_llm_model *m, const char *fn, const int64_t *seqs, size_t b) {
  if ((int64_t)b > m->max_batch)
    return base_status_make(RX_ERR_INVALID,
                            "%s: %zu sequences in one call, more than the model's maximum of %lld "
                            "(compile with --max-batch)",
                            fn, b, (long long)m->max_batch);
  for (size_t i = 0; i < b; i++) {
    if (seqs[i] < 0)
      return base_status_make(RX_ERR_INVALID, "%s: sequence id %lld at %zu is negative", fn,
                              (long long)seqs[i], i);
    for (size_t j = 0; j < i; j++)
      if (seqs[j] == seqs[i])
        return base_status_make(RX_ERR_INVALID, "%s: sequence %lld appears twice (at %zu and %zu)",
                                fn, (long long)seqs[i], j, i);
  }
  return NULL;
}

/* The most tokens one prefill call takes: the artifact's bound on n (its max_seq_len). */
static size_t prefill_budget(const rx_llm_model *m) { return (size_t)m->max_seq_len; }

rx_status rx_llm_prefill_batch(rx_llm_model *m, const int64_t *seqs, size_t b, const int32_t *ids,
                               size_t n, const size_t *counts, float *out_logits) {
  if (!m || !seqs || !b || !ids || !n || !counts || !out_logits)
    return base_status_make(RX_ERR_INVALID,
                            "rx_llm_prefill_batch: NULL, no sequences or no tokens");
  if (m->leading) RX_RETURN_IF_ERROR(lead(m, LLM_CMD_PREFILL, seqs, b, counts, ids, n));
  RX_RETURN_IF_ERROR(check_seqs(m, "prefill", seqs, b));
  size_t sum = 0;
  for (size_t i = 0; i < b; i++) {
    if (!counts[i])
      return base_status_make(RX_ERR_INVALID, "prefill: sequence %lld (at %zu) has no new tokens",
                              (long long)seqs[i], i);
    int64_t have = llm_kv_cache_length(m->kv, seqs[i]);
    if (counts[i] > (size_t)(m->max_seq_len - have) && !have)
      return base_status_make(RX_ERR_INVALID,
                              "sequence %lld: the prompt's %zu tokens exceed the artifact's "
                              "max_seq_len of %lld tokens (prompt and generated tokens together; "
                              "compile with a larger --max-seq-len, up to the model's "
                              "max_position_embeddings)",
                              (long long)seqs[i], counts[i], (long long)m->max_seq_len);
    if (counts[i] > (size_t)(m->max_seq_len - have))
      return base_status_make(RX_ERR_INVALID,
                              "sequence %lld: it holds %lld tokens, and %zu more would make %lld, "
                              "more than the artifact's max_seq_len of %lld tokens (compile with a "
                              "larger --max-seq-len, up to the model's max_position_embeddings)",
                              (long long)seqs[i], (long long)have, counts[i],
                              (long long)have + (long long)counts[i], (long long)m->max_seq_len);
    sum += counts[i];
  }
  if (sum != n)
    return base_status_make(RX_ERR_INVALID,
                            "prefill: the counts of the %zu sequences sum to %zu tokens, but %zu "
                            "ids were given",
                            b, sum, n);
  RX_RETURN_IF_ERROR(check_ids(m, "prefill", ids, n));
  /* calls of whole sequences, each within the artifact's bound on n; should a later call fail,
   * the sequences of the earlier ones are cut back, so a failed prefill appends nothing */
  int64_t *before = malloc(b * sizeof *before);
  if (!before) return base_status_make(RX_ERR_OUT_OF_MEMORY, "out of host memory: a prefill plan");
  for (size_t i = 0; i < b; i++) before[i] = llm_kv_cache_length(m->kv, seqs[i]);
  rx_status s = NULL;
  size_t at = 0, tok = 0;
  while (at < b && !s) {
    size_t end = at, ntok = 0;
    while (end < b && ntok + counts[end] <= prefill_budget(m)) {
      m->counts[end - at] = (int64_t)counts[end];
      ntok += counts[end++];
    }
    s = forward(m, "prefill", seqs + at, m->counts, end - at, ids + tok, ntok,
                out_logits + at * (size_t)m->vocab);
    at = end;
    tok += ntok;
  }
  if (s)
    for (size_t i = 0; i < b; i++) llm_kv_cache_truncate(m->kv, seqs[i], before[i]);
  free(before);
  return s;
}

rx_status rx_llm_prefill(rx_llm_model *m, int64_t seq, const int32_t *ids, size_t count,
                         float *out_logits) {
  if (!m || !ids || !count || !out_logits)
    return base_status_make(RX_ERR_INVALID, "rx_llm_prefill: NULL or no tokens");
  return rx_llm_prefill_batch(m, &seq, 1, ids, count, &count, out_logits);
}

rx_status rx_llm_decode(rx_llm_model *m, const int64_t *seqs, const int32_t *ids, size_t count,
                        float *out_logits) {
  if (!m || !seqs || !ids || !count || !out_logits)
    return base_status_make(RX_ERR_INVALID, "rx_llm_decode: NULL or no sequences");
  if (m->leading) RX_RETURN_IF_ERROR(lead(m, LLM_CMD_DECODE, seqs, count, NULL, ids, count));
  RX_RETURN_IF_ERROR(check_seqs(m, "decode", seqs, count));
  for (size_t i = 0; i < count; i++)
    if (!llm_kv_cache_length(m->kv, seqs[i]))
      return base_status_make(RX_ERR_INVALID,
                              "decode: sequence %lld (at %zu) holds no tokens: prefill it first",
                              (long long)seqs[i], i);
  RX_RETURN_IF_ERROR(check_ids(m, "decode", ids, count));
  for (size_t i = 0; i < count; i++) m->counts[i] = llm_kv_cache_length(m->kv, seqs[i]);
  rx_status s = forward(m, "decode", seqs, NULL, count, ids, count, out_logits);
  if (s) /* a forward that failed after rx_kv_extend (a device error) leaves no token behind */
    for (size_t i = 0; i < count; i++) llm_kv_cache_truncate(m->kv, seqs[i], m->counts[i]);
  return s;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The text id adds (NULL, 0 without a tokenizer), less what the stop strings hold back or cut
 (*cut), and whether generation goes on. */
static rx_status emit(const rx_llm_generate_params *p, rx_detokenizer *d, rx_stop_matcher *stop,
                      int32_t id, bool *go, bool *cut) {
  const char *text = NULL;
  size_t len = 0;
  if (d) RX_RETURN_IF_ERROR(rx_detokenizer_push(d, id, &text, &len));
  if (d && stop) *cut = rx_stop_matcher_push(stop, text ? text : "", len, &text, &len);
  *go = !p->on_token || p->on_token(p->user, id, text ? text : "", len);
  return NULL;
}

/* The end: what the detokenizer and then the stop matcher still hold goes to on_token. */
static rx_status emit_rest(const rx_llm_generate_params *p, rx_detokenizer *d,
                           rx_stop_matcher *stop, bool *cut) {
  if (!d || !p->on_token) return NULL;
  const char *text;
  size_t len;
  RX_RETURN_IF_ERROR(rx_detokenizer_flush(d, &text, &len));
  if (stop) {
    *cut = rx_stop_matcher_push(stop, text, len, &text, &len) || *cut;
    if (len) p->on_token(p->user, -1, text, len);
    rx_stop_matcher_flush(stop, &text, &len);
  }
  if (len) p->on_token(p->user, -1, text, len);
  return NULL;
}

typedef struct gen_state {
  int32_t *hist; /* prompt + new tokens: the repetition penalty's history */
  size_t nhist;
  float *logits;
  rx_sampler *sampler;
  rx_detokenizer *detok;
  rx_stop_matcher *stop;   /* p->stop, or NULL */
  size_t prompt;           /* the prompt's ids in hist */
  rx_llm_matcher *matcher; /* structured output (p->grammar), or NULL */
} gen_state;

static rx_status gen_loop(rx_llm_model *m, int64_t seq, const rx_llm_generate_params *p,
                          gen_state *g, int32_t *out_ids, rx_llm_generate_stats *st) {
  double t0 = now_ms();
  for (int64_t i = 0; i < p->max_tokens; i++) {
    int32_t id;
    bool whole = false; /* structured output: the value is whole and only EOS may follow */
    if (g->matcher)
      RX_RETURN_IF_ERROR(llm_grammar_mask_row(g->matcher, m, g->logits, m->vocab, &whole));
    if (whole) {
      st->stopped_by_eos = true;
      break;
    }
    rx_token_logprobs lp;
    RX_RETURN_IF_ERROR(rx_sampler_sample_ex(g->sampler, g->logits, m->vocab, g->hist, g->nhist,
                                            g->prompt, p->top_logprobs,
                                            p->on_token_info ? &lp : NULL, &id));
    if (g->matcher) RX_RETURN_IF_ERROR(llm_grammar_accept_id(g->matcher, m, id));
    if (p->on_token_info) p->on_token_info(p->user, &lp);
    g->hist[g->nhist++] = id;
    if (out_ids) out_ids[i] = id;
    st->new_tokens++;
    bool go = true;
    if (rx_llm_model_is_eos(m, id)) {
      st->stopped_by_eos = true;
      go = false;
    }
    bool more = true, cut = false;
    RX_RETURN_IF_ERROR(emit(p, st->stopped_by_eos ? NULL : g->detok, g->stop, id, &more, &cut));
    st->stopped_by_string = cut;
    if (!go || !more || cut || i + 1 >= p->max_tokens ||
        llm_kv_cache_length(m->kv, seq) >= m->max_seq_len)
      break;
    RX_RETURN_IF_ERROR(rx_llm_decode(m, &seq, &id, 1, g->logits));
  }
  bool cut = st->stopped_by_string;
  RX_RETURN_IF_ERROR(emit_rest(p, g->detok, g->stop, &cut));
  st->stopped_by_string = cut && !st->stopped_by_eos;
  st->decode_ms = now_ms() - t0;
  return NULL;
}

rx_status rx_llm_generate(rx_llm_model *m, int64_t seq, const int32_t *prompt, size_t count,
                          const rx_llm_generate_params *p, int32_t *out_ids,
                          rx_llm_generate_stats *out_stats) {
  rx_llm_generate_stats st = {0};
  if (out_stats) *out_stats = st;
  if (!m || !prompt || !count || !p || p->max_tokens < 1)
    return base_status_make(RX_ERR_INVALID, "rx_llm_generate: NULL, no prompt or max_tokens < 1");
  rx_llm_model_reset(m, seq);
  gen_state g = {0};
  g.hist = malloc((count + (size_t)p->max_tokens) * sizeof *g.hist);
  g.logits = malloc((size_t)m->vocab * sizeof *g.logits);
  rx_status s = g.hist && g.logits ? NULL : base_status_make(RX_ERR_OUT_OF_MEMORY, "out of memory");
  if (!s) s = rx_sampler_create(&p->sampling, &g.sampler);
  if (!s && m->tok) s = rx_detokenizer_create(m->tok, RX_TOKENIZER_SKIP_SPECIAL, &g.detok);
  if (!s && p->nstop) s = rx_stop_matcher_create(p->stop, p->nstop, &g.stop);
  if (!s && (p->top_logprobs < 0 || p->top_logprobs > RX_LLM_MAX_TOP_LOGPROBS))
    s = base_status_make(RX_ERR_INVALID, "rx_llm_generate: top_logprobs %d is not in [0, %d]",
                         (int)p->top_logprobs, RX_LLM_MAX_TOP_LOGPROBS);
  if (!s && p->grammar) s = rx_llm_matcher_create(p->grammar, &g.matcher);
  if (!s) {
    memcpy(g.hist, prompt, count * sizeof *prompt);
    g.nhist = g.prompt = count;
    st.prompt_tokens = count;
    double t0 = now_ms();
    s = rx_llm_prefill(m, seq, prompt, count, g.logits);
    st.prefill_ms = now_ms() - t0;
  }
  if (!s) s = gen_loop(m, seq, p, &g, out_ids, &st);
  rx_detokenizer_free(g.detok);
  rx_stop_matcher_free(g.stop);
  rx_llm_matcher_free(g.matcher);
  rx_sampler_free(g.sampler);
  free(g.hist);
  free(g.logits);
  if (out_stats) *out_stats = st;
  return s;
}
