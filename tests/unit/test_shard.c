/* test_shard: tensor parallelism at the compiler level (issue 35), checked numerically.
 *
 * A global-view module (distributed struct info: weights placed S[d] on a mesh of WORLD devices)
 * goes through passes/shard.c and legalize; each rank's local program then runs on the reference
 * graph interpreter, every rank on its own fiber with its own shards of the parameters, in one
 * in-test "world": a rank that reaches a collective (a call_extern of an rx_ccl_* builtin)
 * deposits its tensor and yields; the last rank to arrive computes the collective for all ranks
 * (sum / max / concatenation / blocks of the reduction / root's copy), and every rank goes on
 * with its own result. Each rank's returned value (made whole by the pass) is compared with the
 * unsharded module's (the same text with the placements and the mesh removed) within 1e-5
 * relative L2, at ragged row counts (1, 7, 33; rows sharded by a fact: 4 times those). */
#include "base/base.h"
#include "check.h"
#include "interp/fiber.h"
#include "interp/graph_interp.h"
#include "ir/ir.h"
#include "ops/ops.h"
#include "passes/passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WORLD = 4, MAX_ARGS = 8 };

/* Column-parallel up/gate, row-parallel down with its allreduce, residual and norm (Megatron);
 * rows sharded by a fact, gathered back; partial sums through add, exp (allreduce), rms_norm
 * of a sharded dim (allgather), permute of a sharded tensor, a tuple made whole. */
static const char *const prog =
    "mesh m = [4]\n"
    "graph_fn mlp(x: f32[n, 16], wu: f32[16, 32] @ m[S[1]], wg: f32[16, 32] @ m[S[1]],\n"
    "             wd: f32[32, 16] @ m[S[0]], w: f32[16]) {\n"
    "  u = matmul(x, wu)\n"
    "  h = multiply(silu(matmul(x, wg)), u)\n"
    "  y = add(matmul(h, wd), x)\n"
    "  r = rms_norm(y, w)\n"
    "  return r\n"
    "}\n"
    "graph_fn rows(x: f32[n, 16] @ m[S[0]], w: f32[16, 8]) where n % 4 == 0 {\n"
    "  y = tanh(matmul(x, w))\n"
    "  return y\n"
    "}\n"
    "graph_fn mix(x: f32[n, 8], w1: f32[8, 16] @ m[S[1]], w2: f32[16, 8] @ m[S[0]],\n"
    "             g: f32[16], b: f32[1, 16] @ m[S[1]]) {\n"
    "  h = add(matmul(x, w1), b)\n"
    "  p = matmul(h, w2)\n"
    "  e = exp(add(p, p))\n"
    "  s = rms_norm(h, g)\n"
    "  t = permute(h, [1, 0])\n"
    "  return (e, s, t)\n"
    "}\n";

/* The text without its mesh line and its ` @ m[...]` placements: the unsharded module. */
static char *strip_placements(const char *t) {
  char *o = malloc(strlen(t) + 1), *w = o;
  if (!strncmp(t, "mesh ", 5)) t = strchr(t, '\n') + 1;
  while (*t) {
    if (!strncmp(t, " @ ", 3)) {
      t = strchr(t, '[');
      int depth = 0;
      do depth += *t == '[' ? 1 : *t == ']' ? -1 : 0;
      while (*++t && depth > 0);
      continue;
    }
    *w++ = *t++;
  }
  *w = '\0';
  return o;
}

static rx_module *build(const char *text, bool shard) {
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(m, "shard.rx", text, strlen(text), &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d) && (!shard || pass_shard(m, WORLD, &d)) &&
            ir_module_verify(m, &d) && pass_legalize(m, &d) && ops_module_normalize(m, &d) &&
            ir_module_verify(m, &d);
  CHECK_MSG(ok, "%s module: %s", shard ? "sharded" : "reference", rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) {
    rx_module_free(m);
    return NULL;
  }
  return m;
}

/* ---- the in-test world of ranks ---- */

typedef struct world world;
typedef struct rank {
  world *w;
  int r;
  rx_fiber *fiber;
  rx_module *m;
  const rx_graph_fn *f;
  rx_ginterp_value *in;
  int nin;
  rx_ginterp_value out;
  rx_status st;
  /* the collective it waits in */
  const char *name;
  rx_ginterp_value x;
  int64_t prims[MAX_ARGS];
  rx_ginterp_value res;
} rank;

struct world {
  rank ranks[WORLD];
  int arrived;
  unsigned gen;
  int collectives; /* how many ran, for the report */
};

static rx_ginterp_value new_tensor(rx_dtype dt, int ndim, const int64_t *shape) {
  rx_ginterp_value v = {.kind = RX_GV_TENSOR, .dtype = dt, .ndim = ndim};
  memcpy(v.shape, shape, sizeof *shape * (size_t)ndim);
  v.data = calloc((size_t)interp_graph_numel(&v) + 1, interp_graph_elem_size(dt));
  return v;
}

/* Rows before axis, extent of axis, elements after it. */
static void split_at(const rx_ginterp_value *v, int axis, int64_t *outer, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < axis; d++) *outer *= v->shape[d];
  for (int d = axis + 1; d < v->ndim; d++) *inner *= v->shape[d];
}

/* Computes the collective all ranks wait in, each rank's result in ranks[r].res. */
static rx_status compute(world *w) {
  rank *R = w->ranks;
  const char *name = R[0].name;
  for (int r = 1; r < WORLD; r++)
    if (strcmp(R[r].name, name) != 0)
      return base_status_make(RX_ERR_INVALID, "rank %d calls %s while rank 0 calls %s", r,
                              R[r].name, name);
  const rx_ginterp_value *x0 = &R[0].x;
  if (x0->kind != RX_GV_TENSOR || x0->dtype != RX_DTYPE_F32)
    return base_status_make(RX_ERR_UNSUPPORTED, "%s: the test world takes f32 tensors", name);
  int64_t n = interp_graph_numel(x0);
  w->collectives++;
  if (!strcmp(name, "rx_ccl_allreduce") || !strcmp(name, "rx_ccl_reduce_scatter")) {
    bool scatter = !strcmp(name, "rx_ccl_reduce_scatter");
    int64_t op = R[0].prims[scatter ? 1 : 0];
    float *acc = malloc(sizeof(float) * (size_t)n + 1);
    memcpy(acc, x0->data, sizeof(float) * (size_t)n);
    for (int r = 1; r < WORLD; r++)
      for (int64_t i = 0; i < n; i++) {
        float v = ((const float *)R[r].x.data)[i];
        acc[i] = op ? fmaxf(acc[i], v) : acc[i] + v;
      }
    for (int r = 0; r < WORLD; r++) {
      if (!scatter) {
        R[r].res = new_tensor(RX_DTYPE_F32, x0->ndim, x0->shape);
        memcpy(R[r].res.data, acc, sizeof(float) * (size_t)n);
        continue;
      }
      int axis = (int)R[0].prims[0];
      int64_t shape[RX_MAX_NDIM], outer, inner;
      memcpy(shape, x0->shape, sizeof shape);
      shape[axis] /= WORLD;
      R[r].res = new_tensor(RX_DTYPE_F32, x0->ndim, shape);
      split_at(x0, axis, &outer, &inner);
      int64_t blk = shape[axis] * inner;
      for (int64_t o = 0; o < outer; o++)
        memcpy((float *)R[r].res.data + o * blk, acc + o * x0->shape[axis] * inner + r * blk,
               sizeof(float) * (size_t)blk);
    }
    free(acc);
  } else if (!strcmp(name, "rx_ccl_allgather")) {
    int axis = (int)R[0].prims[0];
    int64_t shape[RX_MAX_NDIM], outer, inner;
    memcpy(shape, x0->shape, sizeof shape);
    shape[axis] *= WORLD;
    split_at(x0, axis, &outer, &inner);
    int64_t blk = x0->shape[axis] * inner;
    for (int r = 0; r < WORLD; r++) {
      R[r].res = new_tensor(RX_DTYPE_F32, x0->ndim, shape);
      for (int q = 0; q < WORLD; q++)
        for (int64_t o = 0; o < outer; o++)
          memcpy((float *)R[r].res.data + o * blk * WORLD + q * blk,
                 (const float *)R[q].x.data + o * blk, sizeof(float) * (size_t)blk);
    }
  } else if (!strcmp(name, "rx_ccl_broadcast")) {
    int root = (int)R[0].prims[0];
    for (int r = 0; r < WORLD; r++) {
      R[r].res = new_tensor(RX_DTYPE_F32, x0->ndim, x0->shape);
      memcpy(R[r].res.data, R[root].x.data, sizeof(float) * (size_t)n);
    }
  } else {
    return base_status_make(RX_ERR_UNSUPPORTED, "no collective %s in the test world", name);
  }
  return NULL;
}

/* interp_graph_run_ext's hook: the builtins, computed across the ranks. */
static rx_status ccl_hook(void *arg, const char *name, const rx_ginterp_value *args, int nargs,
                          rx_ginterp_value *out) {
  rank *me = arg;
  world *w = me->w;
  if (nargs < 1 || nargs > MAX_ARGS || args[0].kind != RX_GV_TENSOR)
    return base_status_make(RX_ERR_INVALID, "%s: expected a tensor and prims", name);
  me->name = name;
  me->x = args[0];
  for (int i = 1; i < nargs; i++) me->prims[i - 1] = args[i].i;
  unsigned gen = w->gen;
  rx_status st = NULL;
  if (++w->arrived == WORLD) {
    st = compute(w);
    w->arrived = 0;
    w->gen++;
  } else {
    while (w->gen == gen) interp_fiber_yield(me->fiber);
  }
  *out = me->res;
  memset(&me->res, 0, sizeof me->res);
  return st;
}

static void rank_main(void *arg) {
  rank *me = arg;
  me->st = interp_graph_run_ext(me->m, me->f, me->in, me->nin, ccl_hook, me, &me->out);
}

/* ---- inputs ---- */

static uint64_t seed = 0x9e3779b97f4a7c15ull;
static float rnd(void) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((seed >> 40) & 0xffff) / 65536.0f - 0.5f;
}

/* Rank r's block of v along dim d (the whole of v when d < 0). */
static rx_ginterp_value shard_of(const rx_ginterp_value *v, int d, int r) {
  if (d < 0) {
    rx_ginterp_value c = new_tensor(v->dtype, v->ndim, v->shape);
    memcpy(c.data, v->data, sizeof(float) * (size_t)interp_graph_numel(v));
    return c;
  }
  int64_t shape[RX_MAX_NDIM], outer, inner;
  memcpy(shape, v->shape, sizeof shape);
  shape[d] /= WORLD;
  rx_ginterp_value c = new_tensor(v->dtype, v->ndim, shape);
  split_at(v, d, &outer, &inner);
  int64_t blk = shape[d] * inner;
  for (int64_t o = 0; o < outer; o++)
    memcpy((float *)c.data + o * blk, (const float *)v->data + o * v->shape[d] * inner + r * blk,
           sizeof(float) * (size_t)blk);
  return c;
}

/* The global shape of a parameter, with n for its symbolic dims. */
static void param_shape(const rx_sinfo *s, int64_t n, int64_t *shape) {
  for (int d = 0; d < s->ndim; d++)
    shape[d] = s->shape[d]->kind == RX_EXPR_CONST ? s->shape[d]->value : n;
}

static double rel_l2(const rx_ginterp_value *got, const rx_ginterp_value *want, bool *same_shape) {
  *same_shape = got->kind == RX_GV_TENSOR && got->ndim == want->ndim &&
                !memcmp(got->shape, want->shape, sizeof(int64_t) * (size_t)want->ndim);
  if (!*same_shape) return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < interp_graph_numel(want); i++) {
    double a = ((const float *)got->data)[i], b = ((const float *)want->data)[i];
    num += (a - b) * (a - b);
    den += b * b;
  }
  return sqrt(num) / (sqrt(den) + 1e-30);
}

static void compare(const char *fn, int64_t n, int r, const rx_ginterp_value *got,
                    const rx_ginterp_value *want) {
  if (want->kind == RX_GV_TUPLE) {
    CHECK_MSG(got->kind == RX_GV_TUPLE && got->nfields == want->nfields,
              "%s n=%lld rank %d: a "
              "tuple of %d",
              fn, (long long)n, r, want->nfields);
    for (int i = 0; got->kind == RX_GV_TUPLE && i < want->nfields && i < got->nfields; i++)
      compare(fn, n, r, &got->fields[i], &want->fields[i]);
    return;
  }
  bool same;
  double e = rel_l2(got, want, &same);
  CHECK_MSG(same, "%s n=%lld rank %d: shape differs from the unsharded result's", fn, (long long)n,
            r);
  CHECK_MSG(e <= 1e-5, "%s n=%lld rank %d: relative L2 error %.3g > 1e-5", fn, (long long)n, r, e);
}

/* Runs fn of the sharded module on WORLD ranks and of the reference at n rows. */
static void run_case(rx_module *global, rx_module *ref, rx_module *const *local, const char *fn,
                     int64_t n) {
  const rx_graph_fn *gf = ir_module_graph_fn(global, ir_module_intern(global, fn, strlen(fn)));
  const rx_graph_fn *rf = ir_module_graph_fn(ref, ir_module_intern(ref, fn, strlen(fn)));
  CHECK(gf && rf);
  if (!gf || !rf) return;
  int np = gf->nparams;
  rx_ginterp_value full[MAX_ARGS];
  world *w = calloc(1, sizeof *w);
  for (int i = 0; i < np; i++) {
    const rx_sinfo *s = gf->params[i]->sinfo;
    int64_t shape[RX_MAX_NDIM];
    param_shape(s, n, shape);
    full[i] = new_tensor(RX_DTYPE_F32, s->ndim, shape);
    for (int64_t k = 0; k < interp_graph_numel(&full[i]); k++) ((float *)full[i].data)[k] = rnd();
  }
  rx_ginterp_value want;
  CHECK_OK(interp_graph_run(ref, rf, full, np, &want));
  for (int r = 0; r < WORLD; r++) {
    rank *k = &w->ranks[r];
    k->w = w;
    k->r = r;
    k->m = local[r];
    k->f = ir_module_graph_fn(local[r], ir_module_intern(local[r], fn, strlen(fn)));
    k->nin = np;
    k->in = calloc((size_t)np, sizeof *k->in);
    for (int i = 0; i < np; i++) {
      const rx_sinfo *s = gf->params[i]->sinfo;
      k->in[i] = shard_of(&full[i], s->mesh && s->place[0] >= 0 ? s->place[0] : -1, r);
    }
    k->fiber = interp_fiber_new(8u << 20);
    interp_fiber_start(k->fiber, rank_main, k);
  }
  /* step the ranks until all are done (a rank waiting in a collective yields) */
  for (int rounds = 0, done = 0; done < WORLD && rounds < 100000; rounds++) {
    done = 0;
    for (int r = 0; r < WORLD; r++) {
      if (!interp_fiber_done(w->ranks[r].fiber)) interp_fiber_resume(w->ranks[r].fiber);
      done += interp_fiber_done(w->ranks[r].fiber);
    }
  }
  for (int r = 0; r < WORLD; r++) {
    rank *k = &w->ranks[r];
    CHECK_MSG(interp_fiber_done(k->fiber), "%s n=%lld rank %d never finished", fn, (long long)n, r);
    if (k->st) {
      CHECK_MSG(false, "%s n=%lld rank %d: %s", fn, (long long)n, r, rx_status_message(k->st));
      rx_status_free(k->st);
    } else {
      compare(fn, n, r, &k->out, &want);
    }
    interp_graph_value_free(&k->out);
    for (int i = 0; i < np; i++) interp_graph_value_free(&k->in[i]);
    free(k->in);
    interp_fiber_free(k->fiber);
  }
  printf("  %-5s n=%-4lld %d ranks, %d collectives each\n", fn, (long long)n, WORLD,
         w->collectives);
  interp_graph_value_free(&want);
  for (int i = 0; i < np; i++) interp_graph_value_free(&full[i]);
  free(w);
}

/* Runs fn of the local modules with inputs[r][0..np) on rank r; results in outs[r] (owned). */
static bool run_world(rx_module *const *local, const char *fn, rx_ginterp_value (*inputs)[MAX_ARGS],
                      int np, rx_ginterp_value *outs) {
  world *w = calloc(1, sizeof *w);
  for (int r = 0; r < WORLD; r++) {
    rank *k = &w->ranks[r];
    k->w = w;
    k->r = r;
    k->m = local[r];
    k->f = ir_module_graph_fn(local[r], ir_module_intern(local[r], fn, strlen(fn)));
    k->in = inputs[r];
    k->nin = np;
    k->fiber = interp_fiber_new(8u << 20);
    interp_fiber_start(k->fiber, rank_main, k);
  }
  for (int rounds = 0, done = 0; done < WORLD && rounds < 100000; rounds++) {
    done = 0;
    for (int r = 0; r < WORLD; r++) {
      if (!interp_fiber_done(w->ranks[r].fiber)) interp_fiber_resume(w->ranks[r].fiber);
      done += interp_fiber_done(w->ranks[r].fiber);
    }
  }
  bool ok = true;
  for (int r = 0; r < WORLD; r++) {
    rank *k = &w->ranks[r];
    ok = ok && interp_fiber_done(k->fiber) && !k->st;
    if (k->st) {
      CHECK_MSG(false, "%s rank %d: %s", fn, r, rx_status_message(k->st));
      rx_status_free(k->st);
    }
    outs[r] = k->out;
    interp_fiber_free(k->fiber);
  }
  free(w);
  return ok;
}

/* The collectives written in a local program, each rank with its own x, against C: the
 * reduce_scatter (sum) then allgather of x is the sum over ranks, broadcast from rank 2 is rank
 * 2's x, allreduce max the elementwise max. */
static void test_collectives(void) {
  static const char *const text = "graph_fn coll(x: f32[n, 8]) {\n"
                                  "  a = reduce_scatter(x, axis=1, world=4)\n"
                                  "  b = allgather(a, axis=1, world=4)\n"
                                  "  c = broadcast(x, root=2)\n"
                                  "  m = allreduce(x, op=\"max\")\n"
                                  "  return (b, c, m)\n"
                                  "}\n";
  rx_module *local[WORLD];
  bool ok = true;
  for (int r = 0; r < WORLD; r++) ok = (local[r] = build(text, true)) != NULL && ok;
  static const int64_t sizes[] = {1, 7, 33};
  for (size_t si = 0; ok && si < RX_ARRAY_LEN(sizes); si++) {
    int64_t n = sizes[si];
    rx_ginterp_value in[WORLD][MAX_ARGS], out[WORLD];
    for (int r = 0; r < WORLD; r++) {
      in[r][0] = new_tensor(RX_DTYPE_F32, 2, (int64_t[]){n, 8});
      for (int64_t i = 0; i < n * 8; i++) ((float *)in[r][0].data)[i] = rnd();
    }
    if (run_world(local, "coll", in, 1, out)) {
      bool good = true;
      for (int r = 0; r < WORLD; r++) {
        good = good && out[r].kind == RX_GV_TUPLE && out[r].nfields == 3;
        for (int64_t i = 0; good && i < n * 8; i++) {
          float sum = 0, mx = -INFINITY;
          for (int q = 0; q < WORLD; q++) {
            float v = ((const float *)in[q][0].data)[i];
            sum += v;
            mx = fmaxf(mx, v);
          }
          good = fabsf(((const float *)out[r].fields[0].data)[i] - sum) <= 1e-6f &&
                 ((const float *)out[r].fields[1].data)[i] == ((const float *)in[2][0].data)[i] &&
                 ((const float *)out[r].fields[2].data)[i] == mx;
        }
      }
      CHECK_MSG(good, "collectives at n=%lld differ from the C reference", (long long)n);
    }
    for (int r = 0; r < WORLD; r++) {
      interp_graph_value_free(&out[r]);
      interp_graph_value_free(&in[r][0]);
    }
  }
  for (int r = 0; r < WORLD; r++) rx_module_free(local[r]);
}

/* pass_shard_weights: rank r's copy of a weight bound to a parameter S[1] (columns) and S[0]
 * (rows) is its block, element for element; an unbound or replicated one stays whole. */
static void test_weights(void) {
  static const char *const text = "mesh m = [4]\n"
                                  "graph_fn f(x: f32[n, 3], a: f32[3, 8] @ m[S[1]],\n"
                                  "           b: f32[8, 3] @ m[S[0]], c: f32[3, 3]) {\n"
                                  "  y = matmul(matmul(matmul(x, a), b), c)\n"
                                  "  return y\n"
                                  "}\n";
  float a[24], b[24], c[9];
  for (int i = 0; i < 24; i++) a[i] = (float)i, b[i] = (float)(100 + i);
  for (int i = 0; i < 9; i++) c[i] = (float)(200 + i);
  for (int r = 0; r < WORLD; r++) {
    rx_module *m = rx_module_new();
    rx_diag d;
    base_diag_init(&d);
    CHECK(ir_parse_module(m, "w.rx", text, strlen(text), &d));
    CHECK_OK(rx_module_add_weight(m, "a", RX_DTYPE_F32, 2, (int64_t[]){3, 8}, RX_DTYPE_F32, a));
    CHECK_OK(rx_module_add_weight(m, "b", RX_DTYPE_F32, 2, (int64_t[]){8, 3}, RX_DTYPE_F32, b));
    CHECK_OK(rx_module_add_weight(m, "c", RX_DTYPE_F32, 2, (int64_t[]){3, 3}, RX_DTYPE_F32, c));
    CHECK(pass_shard_weights(m, WORLD, r, &d));
    const rx_weight *wa = ir_module_weight(m, ir_module_intern(m, "a", 1));
    const rx_weight *wb = ir_module_weight(m, ir_module_intern(m, "b", 1));
    const rx_weight *wc = ir_module_weight(m, ir_module_intern(m, "c", 1));
    CHECK(wa && wa->shape[0] == 3 && wa->shape[1] == 2 && wa->bytes == 24);
    CHECK(wb && wb->shape[0] == 2 && wb->shape[1] == 3 && wb->bytes == 24);
    CHECK(wc && wc->shape[0] == 3 && wc->shape[1] == 3 && wc->src == c);
    bool same = wa && wb;
    for (int i = 0; same && i < 3; i++)
      for (int j = 0; j < 2; j++)
        same = same && ((const float *)wa->src)[i * 2 + j] == a[i * 8 + r * 2 + j];
    for (int i = 0; same && i < 6; i++) same = same && ((const float *)wb->src)[i] == b[r * 6 + i];
    CHECK_MSG(same, "rank %d: the weights' blocks differ from the sources'", r);
    base_diag_free(&d);
    rx_module_free(m);
  }
}

int main(void) {
  char *ref_text = strip_placements(prog);
  rx_module *global = build(prog, false), *ref = build(ref_text, false), *local[WORLD] = {0};
  /* the global module, normalized only: its parameters' placements say how to shard inputs */
  rx_module *g0 = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  CHECK(ir_parse_module(g0, "shard.rx", prog, strlen(prog), &d) && ops_module_normalize(g0, &d));
  base_diag_free(&d);
  for (int r = 0; r < WORLD; r++) local[r] = build(prog, true);
  bool ok = global && ref;
  for (int r = 0; r < WORLD; r++) ok = ok && local[r];
  test_weights();
  test_collectives();
  static const int64_t sizes[] = {1, 7, 33};
  for (size_t i = 0; ok && i < RX_ARRAY_LEN(sizes); i++) {
    run_case(g0, ref, local, "mlp", sizes[i]);
    run_case(g0, ref, local, "rows", sizes[i] * WORLD);
    run_case(g0, ref, local, "mix", sizes[i]);
  }
  for (int r = 0; r < WORLD; r++) rx_module_free(local[r]);
  rx_module_free(global);
  rx_module_free(ref);
  rx_module_free(g0);
  free(ref_text);
  return check_finish("test_shard");
}
