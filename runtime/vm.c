/* runtime/vm.c: executes the host program of an artifact (runtime/vm_format.h), and the tensors
 * and values it works on.
 *
 * A call runs one graph function in a frame: its registers (values, reference-counted) and its
 * symbol table (symbolic variable name -> int64, bound by CHECK_TENSOR / MATCH_CAST / DEFINE).
 * The loader (artifact.c) validated every instruction, so operands are read without bound checks;
 * what depends on run-time values (the kind of value in a register, expressions, shapes, sizes)
 * is checked here and returned as a status naming the function.
 *
 * Planned storages: an ALLOC_STORAGE instruction is sized by its first execution and kept by the
 * artifact across calls; a later call that needs more bytes is an error naming the storage (the
 * compiler sizes storages at the function's upper bounds). Kernels bind whole buffers (the
 * library's rx_rt_library_run takes buffers, not views), so a tensor placed in a storage at an
 * offset gets the storage's slot buffer for that offset (see vm_slot in vm.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/vm.h"

#define VM_MAX_DEPTH 64 /* CALL_FN nesting (a TAIL_CALL_FN runs in its caller's place) */
#ifndef VM_MAX_STEPS    /* the fuzz build (RX_FUZZ) sets a smaller one */
#define VM_MAX_STEPS                                                                               \
  100000000ull /* instructions per call (a tail call starts a new one): a looping program ends     \
                  with an error */
#endif
#ifndef VM_MAX_TAIL_CALLS      /* the fuzz build (RX_FUZZ) sets one: a fuzzed self tail call ends */
#define VM_MAX_TAIL_CALLS 0ull /* 0: none (an ONNX Loop runs as many steps as it asks) */
#endif
/* Tail calls between device synchronizations: a backend holds what a batch of launches used
 * (Vulkan: the batch's log, descriptor sets, buffers released meanwhile) until it completes, so a
 * loop of tail calls that reads nothing back would grow them with its steps; every 64 steps
 * (a few hundred launches) they are handed back, at the cost of one wait. */
#define VM_TAIL_SYNC 64u

/* ---- dtypes ---- */
size_t rx_rt_dtype_size(rx_dtype t) {
  static const size_t bits[] = {0,
#define RX_DT_BITS_(e, n, b, f, s) b,
                                RX_DTYPES(RX_DT_BITS_)
#undef RX_DT_BITS_
  };
  return (unsigned)t < RX_DTYPE_COUNT ? bits[t] / 8 : 0;
}

const char *rx_rt_dtype_name(rx_dtype t) {
  static const char *const names[] = {"any",
#define RX_DT_NAME_(e, n, b, f, s) n,
                                      RX_DTYPES(RX_DT_NAME_)
#undef RX_DT_NAME_
  };
  return (unsigned)t < RX_DTYPE_COUNT ? names[t] : "?";
}

void vm_format_type(char *buf, size_t size, rx_dtype dtype, int ndim, const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, size, "%s[", rx_rt_dtype_name(dtype));
  for (int i = 0; i < ndim && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
}

/* Bytes of a tensor; false on overflow or a negative dimension. */
static bool tensor_bytes(rx_dtype dtype, int ndim, const int64_t *shape, uint64_t *out) {
  int64_t n = 0;
  bool ok = base_shape_count(ndim, shape, rx_rt_dtype_size(dtype), &n) == RX_COUNT_OK;
  *out = (uint64_t)n;
  return ok;
}

/* Buffers are never empty and are allocated in whole 4-byte words. */
static size_t buffer_bytes(uint64_t bytes) { return bytes < 4 ? 4 : (size_t)((bytes + 3) & ~3ull); }

/* ---- tensors ---- */
rx_rt_tensor *vm_tensor_new(rx_rt_buffer *b, rx_dtype dtype, int ndim, const int64_t *shape) {
  rx_rt_tensor *t = rt_alloc(&b->device->alloc, sizeof *t);
  if (!t) return NULL;
  t->refs = 1;
  t->buffer = b;
  rx_rt_buffer_retain(b);
  t->dtype = dtype;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  return t;
}

static rx_status check_type(rx_dtype dtype, int ndim, const int64_t *shape, uint64_t *bytes) {
  if ((unsigned)dtype >= RX_DTYPE_COUNT || dtype == RX_DTYPE_UNKNOWN)
    return base_status_make(RX_ERR_INVALID, "tensor: dtype %d is not a known dtype", (int)dtype);
  if (ndim < 0 || ndim > RX_RT_MAX_NDIM)
    return base_status_make(RX_ERR_INVALID, "tensor: rank %d is outside 0..%d", ndim,
                            RX_RT_MAX_NDIM);
  if (ndim && !shape) return base_status_make(RX_ERR_INVALID, "tensor: NULL shape");
  if (!tensor_bytes(dtype, ndim, shape, bytes)) {
    char ty[256];
    vm_format_type(ty, sizeof ty, dtype, ndim, shape);
    int64_t n;
    if (base_shape_count(ndim, shape, 1, &n) == RX_COUNT_NEGATIVE)
      return base_status_make(RX_ERR_INVALID, "tensor: shape %s has a negative dimension", ty);
    return base_status_make(RX_ERR_INVALID, "tensor: the %s of %s overflows",
                            base_shape_count(ndim, shape, 1, &n) ? "element count" : "byte size",
                            ty);
  }
  return NULL;
}

rx_status rx_rt_tensor_wrap(rx_rt_buffer *b, rx_dtype dtype, int ndim, const int64_t *shape,
                            rx_rt_tensor **out_tensor) {
  if (!out_tensor || !b) return base_status_make(RX_ERR_INVALID, "rx_rt_tensor_wrap: NULL");
  *out_tensor = NULL;
  uint64_t bytes = 0;
  RX_RETURN_IF_ERROR(check_type(dtype, ndim, shape, &bytes));
  if (bytes > b->size) {
    char ty[256];
    vm_format_type(ty, sizeof ty, dtype, ndim, shape);
    return base_status_make(RX_ERR_INVALID, "tensor %s needs %llu bytes, the buffer has %zu", ty,
                            (unsigned long long)bytes, b->size);
  }
  rx_rt_tensor *t = vm_tensor_new(b, dtype, ndim, shape);
  if (!t) return rt_oom("a tensor", sizeof *t);
  *out_tensor = t;
  return NULL;
}

rx_status rx_rt_tensor_create(rx_rt_device *d, rx_dtype dtype, int ndim, const int64_t *shape,
                              rx_rt_tensor **out_tensor) {
  if (!out_tensor || !d) return base_status_make(RX_ERR_INVALID, "rx_rt_tensor_create: NULL");
  *out_tensor = NULL;
  uint64_t bytes = 0;
  RX_RETURN_IF_ERROR(check_type(dtype, ndim, shape, &bytes));
  if (bytes > SIZE_MAX - 4) {
    char ty[256];
    vm_format_type(ty, sizeof ty, dtype, ndim, shape);
    return base_status_make(
        RX_ERR_OUT_OF_MEMORY,
        "out of host memory: a tensor %s of %llu bytes is larger than the address "
        "space",
        ty, (unsigned long long)bytes);
  }
  rx_rt_buffer *b = NULL;
  RX_RETURN_IF_ERROR(rx_rt_buffer_alloc(d, buffer_bytes(bytes), &b));
  rx_status s = rx_rt_tensor_wrap(b, dtype, ndim, shape, out_tensor);
  rx_rt_buffer_release(b);
  return s;
}

rx_status rx_rt_tensor_from_host(rx_rt_device *d, rx_dtype dtype, int ndim, const int64_t *shape,
                                 const void *data, rx_rt_tensor **out_tensor) {
  if (!out_tensor) return base_status_make(RX_ERR_INVALID, "rx_rt_tensor_from_host: NULL");
  *out_tensor = NULL;
  rx_rt_tensor *t = NULL;
  RX_RETURN_IF_ERROR(rx_rt_tensor_create(d, dtype, ndim, shape, &t));
  size_t bytes = rx_rt_tensor_bytes(t);
  if (bytes && !data) {
    rx_rt_tensor_release(t);
    return base_status_make(RX_ERR_INVALID, "rx_rt_tensor_from_host: NULL data");
  }
  rx_status s = rx_rt_buffer_write(t->buffer, 0, data, bytes);
  if (s) {
    rx_rt_tensor_release(t);
    return s;
  }
  *out_tensor = t;
  return NULL;
}

rx_status rx_rt_tensor_import_host(rx_rt_device *d, rx_dtype dtype, int ndim, const int64_t *shape,
                                   void *data, rx_rt_tensor **out_tensor, rx_rt_import *out_kind) {
  if (out_kind) *out_kind = RX_RT_IMPORT_NONE;
  if (!out_tensor || !d) return base_status_make(RX_ERR_INVALID, "rx_rt_tensor_import_host: NULL");
  *out_tensor = NULL;
  uint64_t bytes = 0;
  RX_RETURN_IF_ERROR(check_type(dtype, ndim, shape, &bytes));
  if (bytes == 0) return rx_rt_tensor_create(d, dtype, ndim, shape, out_tensor); /* no memory */
  if (bytes > SIZE_MAX - 4)
    return base_status_make(RX_ERR_INVALID, "rx_rt_tensor_import_host: %llu bytes",
                            (unsigned long long)bytes);
  rx_rt_buffer *b = NULL;
  RX_RETURN_IF_ERROR(rx_rt_buffer_import_host(d, data, (size_t)bytes, &b, out_kind));
  rx_status s = rx_rt_tensor_wrap(b, dtype, ndim, shape, out_tensor);
  rx_rt_buffer_release(b);
  if (s && out_kind) *out_kind = RX_RT_IMPORT_NONE;
  return s;
}

void rx_rt_tensor_retain(rx_rt_tensor *t) {
  if (t) t->refs++;
}
void rx_rt_tensor_release(rx_rt_tensor *t) {
  if (!t || --t->refs > 0) return;
  rx_rt_buffer *b = t->buffer;
  rt_free(&b->device->alloc, t);
  rx_rt_buffer_release(b);
}
rx_dtype rx_rt_tensor_dtype(const rx_rt_tensor *t) { return t->dtype; }
int rx_rt_tensor_ndim(const rx_rt_tensor *t) { return t->ndim; }
const int64_t *rx_rt_tensor_shape(const rx_rt_tensor *t) { return t->shape; }
rx_rt_buffer *rx_rt_tensor_buffer(const rx_rt_tensor *t) { return t->buffer; }
size_t rx_rt_tensor_bytes(const rx_rt_tensor *t) {
  uint64_t n = 0;
  tensor_bytes(t->dtype, t->ndim, t->shape, &n);
  return (size_t)n;
}
rx_status rx_rt_tensor_read(rx_rt_tensor *t, void *dst, size_t bytes) {
  size_t n = rx_rt_tensor_bytes(t);
  if (bytes != n) {
    char ty[256];
    vm_format_type(ty, sizeof ty, t->dtype, t->ndim, t->shape);
    return base_status_make(RX_ERR_INVALID, "reading tensor %s: it has %zu bytes, asked for %zu",
                            ty, n, bytes);
  }
  return rx_rt_buffer_read(t->buffer, 0, dst, n);
}

/* ---- values ---- */
rx_rt_value *vm_value_new(const rx_rt_allocator *a, rx_rt_value_kind kind) {
  rx_rt_value *v = rt_alloc(a, sizeof *v);
  if (!v) return NULL;
  v->refs = 1;
  v->kind = kind;
  v->alloc = *a;
  return v;
}

void rx_rt_value_retain(rx_rt_value *v) {
  if (v) v->refs++;
}
void rx_rt_value_release(rx_rt_value *v) {
  if (!v || --v->refs > 0) return;
  rx_rt_tensor_release(v->tensor);
  if (v->otype && v->otype->destroy) v->otype->destroy(v->object);
  for (size_t i = 0; v->items && i < v->count; i++) rx_rt_value_release(v->items[i]);
  rx_rt_allocator a = v->alloc;
  rt_free(&a, v->items);
  rt_free(&a, v->dims);
  rt_free(&a, v);
}
rx_rt_value_kind rx_rt_value_kind_of(const rx_rt_value *v) { return v->kind; }
rx_rt_tensor *rx_rt_value_tensor(const rx_rt_value *v) {
  return v->kind == RX_RT_VALUE_TENSOR ? v->tensor : NULL;
}
size_t rx_rt_value_tuple_size(const rx_rt_value *v) {
  return v->kind == RX_RT_VALUE_TUPLE ? v->count : 0;
}
rx_rt_value *rx_rt_value_tuple_item(const rx_rt_value *v, size_t i) {
  return v->kind == RX_RT_VALUE_TUPLE && i < v->count ? v->items[i] : NULL;
}
int rx_rt_value_shape(const rx_rt_value *v, const int64_t **out_dims) {
  if (out_dims) *out_dims = v->kind == RX_RT_VALUE_SHAPE ? v->dims : NULL;
  return v->kind == RX_RT_VALUE_SHAPE ? (int)v->count : -1;
}
int64_t rx_rt_value_prim(const rx_rt_value *v, rx_dtype *out_dtype) {
  if (out_dtype) *out_dtype = v->kind == RX_RT_VALUE_PRIM ? v->dtype : RX_DTYPE_UNKNOWN;
  return v->kind == RX_RT_VALUE_PRIM ? v->prim : 0;
}

rx_status rx_rt_value_from_object(const rx_rt_object_type *type, void *object,
                                  rx_rt_value **out_value) {
  if (!out_value || !type) return base_status_make(RX_ERR_INVALID, "rx_rt_value_from_object: NULL");
  *out_value = NULL;
  rx_rt_value *v = vm_value_new(&rt_default_allocator, RX_RT_VALUE_OBJECT);
  if (!v) {
    if (type->destroy) type->destroy(object);
    return rt_oom("a value", sizeof *v);
  }
  v->otype = type;
  v->object = object;
  *out_value = v;
  return NULL;
}
void *rx_rt_value_object(const rx_rt_value *v, const rx_rt_object_type *type) {
  return v && v->kind == RX_RT_VALUE_OBJECT && v->otype == type ? v->object : NULL;
}

rx_status rx_rt_value_from_tensor(rx_rt_tensor *t, rx_rt_value **out_value) {
  if (!out_value || !t) return base_status_make(RX_ERR_INVALID, "rx_rt_value_from_tensor: NULL");
  *out_value = NULL;
  rx_rt_value *v = vm_value_new(&t->buffer->device->alloc, RX_RT_VALUE_TENSOR);
  if (!v) return rt_oom("a value", sizeof *v);
  rx_rt_tensor_retain(t);
  v->tensor = t;
  *out_value = v;
  return NULL;
}

rx_status rx_rt_value_from_prim(rx_dtype dtype, int64_t x, rx_rt_value **out_value) {
  if (!out_value) return base_status_make(RX_ERR_INVALID, "rx_rt_value_from_prim: NULL");
  *out_value = NULL;
  if ((unsigned)dtype >= RX_DTYPE_COUNT || dtype == RX_DTYPE_UNKNOWN)
    return base_status_make(RX_ERR_INVALID, "a prim value: dtype %d is not a known dtype",
                            (int)dtype);
  rx_rt_value *v = vm_value_new(&rt_default_allocator, RX_RT_VALUE_PRIM);
  if (!v) return rt_oom("a value", sizeof *v);
  v->dtype = dtype;
  v->prim = x;
  *out_value = v;
  return NULL;
}

rx_status rx_rt_value_from_shape(const int64_t *dims, int ndim, rx_rt_value **out_value) {
  if (!out_value || (ndim && !dims))
    return base_status_make(RX_ERR_INVALID, "rx_rt_value_from_shape: NULL");
  *out_value = NULL;
  if (ndim < 0 || ndim > RX_RT_MAX_NDIM)
    return base_status_make(RX_ERR_INVALID, "a shape value of %d dims (0 to %d)", ndim,
                            RX_RT_MAX_NDIM);
  rx_rt_value *v = vm_value_new(&rt_default_allocator, RX_RT_VALUE_SHAPE);
  if (!v || !(v->dims = rt_alloc(&rt_default_allocator, ((size_t)ndim + 1) * sizeof *v->dims))) {
    rx_rt_value_release(v);
    return rt_oom("a shape value", sizeof *v);
  }
  if (ndim) memcpy(v->dims, dims, (size_t)ndim * sizeof *dims);
  v->count = (size_t)ndim;
  *out_value = v;
  return NULL;
}

const char *vm_kind_name(const rx_rt_value *v) {
  if (!v) return "nothing";
  if (v->kind == RX_RT_VALUE_OBJECT) return v->otype->name;
  static const char *const names[] = {"a tensor", "a tuple", "a shape", "a prim", "a storage"};
  return (unsigned)v->kind < RX_ARRAY_LEN(names) ? names[v->kind] : "?";
}

/* ---- planned storages ---- */
void vm_storages_free(rx_rt_artifact *a) {
  for (size_t i = 0; a->storages && i < a->nstorages; i++) {
    vm_storage *s = &a->storages[i];
    for (size_t j = 0; j < s->nslots; j++) rx_rt_buffer_release(s->slots[j].buffer);
    rt_free(&a->alloc, s->slots);
    s->slots = NULL;
    s->nslots = s->cap = 0;
  }
}

/* ---- the host program compiled at load ---- */
typedef struct prep {
  rx_rt_artifact *a;
  vm_fn *f;
  uint32_t start; /* the instruction being prepared */
  rx_status err;
} prep;

static bool prep_expr(prep *c, uint32_t str) {
  rx_rt_artifact *a = c->a;
  if (a->exprs[str]) return true;
  rx_status s = rt_expr_compile(a->strings[str], &a->syms, &a->exprs[str]);
  if (s)
    c->err = base_status_annotate(s, "%s: host.rxvm: function '%s': word %u (%s)", a->name,
                                  c->f->name, c->start, vm_op_name(c->f->code[c->start]));
  return !s;
}

static bool prep_var(prep *c, uint32_t str) {
  rx_rt_artifact *a = c->a;
  if (a->sym_slot[str] != RT_NO_SLOT) return true;
  const char *name = a->strings[str];
  a->sym_slot[str] = rt_names_slot(&a->syms, name, strlen(name));
  if (a->sym_slot[str] == RT_NO_SLOT) c->err = rt_oom("a symbolic variable", strlen(name));
  return !c->err;
}

/* Compiles what one operand evaluates and gives what it binds a slot (rxvm_walk's visitor; the
 * loader has checked every string id). */
static bool prep_operand(void *ctx, rxvm_operand k, uint32_t at, uint32_t n) {
  prep *c = ctx;
  const uint32_t *w = c->f->code + at;
  bool ok = true;
  switch (k) {
  case RXVM_OPND_EXPR:
    return prep_expr(c, w[0]);
  case RXVM_OPND_VAR:
    return prep_var(c, w[0]);
  case RXVM_OPND_EXPRS:
    for (uint32_t i = 0; i < n && ok; i++) ok = prep_expr(c, w[1 + i]);
    return ok;
  case RXVM_OPND_PAIRS: /* (name, expr): the names are the program's (prep_call) */
    for (uint32_t i = 0; i < n && ok; i++) ok = prep_expr(c, w[2 + 2 * i]);
    return ok;
  case RXVM_OPND_DIMS:
    for (uint32_t i = 0, p = 1; n != VM_NONE && i < n && ok; i++) {
      if (w[p] == RXVM_DIM_CONST) {
        p += 3;
        continue;
      }
      ok = w[p] == RXVM_DIM_BIND ? prep_var(c, w[p + 1]) : prep_expr(c, w[p + 1]);
      p += 2;
    }
    return ok;
  default:
    return true;
  }
}

/* CALL_KERNELS at c->start: its program in the library and the slots of its pairs' names. */
static bool prep_call(prep *c, size_t *cap) {
  rx_rt_artifact *a = c->a;
  const uint32_t *w = c->f->code + c->start + 1;
  uint32_t n = w[1], npairs = w[2 + n];
  const uint32_t *pairs = w + 3 + n;
  if (a->ncalls == *cap) {
    size_t ncap = *cap ? 2 * *cap : 64;
    vm_call *nc = rt_alloc(&a->alloc, ncap * sizeof *nc);
    if (!nc) return !(c->err = rt_oom("the kernel calls", ncap * sizeof *nc));
    if (a->ncalls) memcpy(nc, a->calls, a->ncalls * sizeof *nc);
    rt_free(&a->alloc, a->calls);
    a->calls = nc;
    *cap = ncap;
  }
  vm_call *call = &a->calls[a->ncalls];
  call->slots = rt_alloc(&a->alloc, ((size_t)npairs + 1) * sizeof *call->slots);
  if (!call->slots) return !(c->err = rt_oom("a kernel call", npairs * sizeof *call->slots));
  c->f->call_at[c->start] = (uint32_t)a->ncalls++;
  call->prog = a->library ? rt_library_program(a->library, a->strings[w[0]]) : NULL;
  for (uint32_t i = 0; i < npairs; i++)
    call->slots[i] =
        call->prog ? rt_names_find(&call->prog->vars, a->strings[pairs[2 * i]]) : RT_NO_SLOT;
  return true;
}

rx_status vm_prepare(rx_rt_artifact *a) {
  a->syms.alloc = &a->alloc;
  a->exprs = rt_alloc(&a->alloc, (a->nstrings + 1) * sizeof *a->exprs);
  a->sym_slot = rt_alloc(&a->alloc, (a->nstrings + 1) * sizeof *a->sym_slot);
  if (!a->exprs || !a->sym_slot) return rt_oom("the compiled host program", a->nstrings * 8);
  for (size_t i = 0; i < a->nstrings; i++) a->sym_slot[i] = RT_NO_SLOT;
  size_t cap = 0;
  prep c = {a, NULL, 0, NULL};
  for (size_t fi = 0; fi < a->nfns && !c.err; fi++) {
    c.f = &a->fns[fi];
    c.f->call_at = rt_alloc(&a->alloc, ((size_t)c.f->len + 1) * sizeof *c.f->call_at);
    if (!c.f->call_at) return rt_oom("the compiled host program", c.f->len * 4);
    for (uint32_t pc = 0; pc < c.f->len && !c.err;) {
      c.start = pc;
      pc = rxvm_walk(c.f->code, c.f->len, pc, prep_operand, &c, NULL, 0);
      RX_ASSERT(pc || c.err); /* validated by the loader */
      if (!c.err && c.f->code[c.start] == RXVM_OP_CALL_KERNELS) prep_call(&c, &cap);
    }
  }
  return c.err;
}

void vm_prepare_free(rx_rt_artifact *a) {
  for (size_t i = 0; a->exprs && i < a->nstrings; i++) rt_expr_free(&a->alloc, a->exprs[i]);
  for (size_t i = 0; i < a->ncalls; i++) rt_free(&a->alloc, a->calls[i].slots);
  for (size_t i = 0; a->fns && i < a->nfns; i++) rt_free(&a->alloc, a->fns[i].call_at);
  rt_free(&a->alloc, a->exprs);
  rt_free(&a->alloc, a->sym_slot);
  rt_free(&a->alloc, a->calls);
  rt_names_free(&a->syms);
  a->exprs = NULL;
}

/* ---- inspection: the programs a call runs ---- */
/* Instructions fn_programs walks at most: calls nested VM_MAX_DEPTH deep, a function calling
 * itself or others several times, could make the walk exponential in a corrupt artifact. */
#define VM_INSPECT_BUDGET 10000000ull

/* The string operand (word 1) of every instruction op in function fi and the functions it calls:
 * CALL_KERNELS' programs, CALL_EXTERN's builtins. */
static size_t fn_calls(const rx_rt_artifact *a, size_t fi, uint32_t op, const char **out,
                       size_t max, size_t n, int depth, unsigned long long *budget) {
  const vm_fn *f = &a->fns[fi];
  for (uint32_t pc = 0; pc < f->len && depth <= VM_MAX_DEPTH && *budget; --*budget) {
    const uint32_t *w = f->code + pc;
    if (w[0] == op && n++ < max && out) out[n - 1] = a->strings[w[1]];
    if (w[0] == RXVM_OP_CALL_FN) n = fn_calls(a, w[2], op, out, max, n, depth + 1, budget);
    if (w[0] == RXVM_OP_TAIL_CALL_FN) n = fn_calls(a, w[1], op, out, max, n, depth + 1, budget);
    pc = rxvm_walk(f->code, f->len, pc, NULL, NULL, NULL, 0);
    RX_ASSERT(pc); /* validated by the loader */
  }
  return n;
}

size_t rx_rt_artifact_function_programs(const rx_rt_artifact *a, size_t fn,
                                        const char **out_programs, size_t max) {
  unsigned long long budget = VM_INSPECT_BUDGET;
  return fn < a->nfns ? fn_calls(a, fn, RXVM_OP_CALL_KERNELS, out_programs, max, 0, 0, &budget) : 0;
}

size_t rx_rt_artifact_function_externs(const rx_rt_artifact *a, size_t fn, const char **out_externs,
                                       size_t max) {
  unsigned long long budget = VM_INSPECT_BUDGET;
  return fn < a->nfns ? fn_calls(a, fn, RXVM_OP_CALL_EXTERN, out_externs, max, 0, 0, &budget) : 0;
}

/* ---- a frame: registers and symbols ---- */
typedef struct frame {
  rx_rt_artifact *a;
  const vm_fn *f;
  rx_rt_value **regs;
  int64_t *values;    /* per symbol slot of the host program (a->syms) */
  uint8_t *bound;     /* per slot: bound in this call */
  rx_rt_value **args; /* the call's arguments (CHECK_TENSOR reads its parameter here) */
  uint32_t pc;        /* the current instruction (for messages) */
  uint32_t next;      /* the instruction after it (a jump changes it) */
  rx_rt_value *ret;   /* set by ret, with done */
  bool done;
  /* set by tail_call_fn, with done: the function to run in this call's place and its arguments
   * (retained; the array belongs to the frame) */
  bool tail;
  uint32_t tail_fn;
  rx_rt_value **tail_args;
} frame;

static rx_status ferr(frame *fr, rx_status_code code, const char *fmt, ...) RX_PRINTF(3, 4);
static rx_status ferr(frame *fr, rx_status_code code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return base_status_make(code, "%s: %s", fr->f->name, msg);
}

void vm_reg_name(char *buf, size_t size, const rx_rt_artifact *a, const vm_fn *f, uint32_t r) {
  const char *name = f->reg_names && r < f->nregs ? a->strings[f->reg_names[r]] : NULL;
  if (!name)
    snprintf(buf, size, "r%u", r); /* a host program older than version 3 */
  else if (!name[0])
    snprintf(buf, size, "a temporary");
  else
    snprintf(buf, size, "'%s'", name);
}

/* "planned storage 'storage 0'" (the name of its register), or "planned storage of word 9" (the
 * ALLOC_STORAGE instruction at pc) for a register without a name. */
static void storage_name(char *buf, size_t size, const frame *fr, uint32_t reg, uint32_t pc) {
  const char *name = fr->f->reg_names ? fr->a->strings[fr->f->reg_names[reg]] : "";
  if (name[0])
    snprintf(buf, size, "planned storage '%s'", name);
  else
    snprintf(buf, size, "planned storage of word %u", pc);
}

/* An error in the program's structure seen at run time (a register holding the wrong kind of
 * value): names the instruction and the binding. */
static rx_status bad_reg(frame *fr, uint32_t r, const char *want) {
  char reg[160];
  vm_reg_name(reg, sizeof reg, fr->a, fr->f, r);
  return ferr(fr, RX_ERR_INVALID, "word %u (%s): %s holds %s, expected %s", fr->pc,
              vm_op_name(fr->f->code[fr->pc]), reg, vm_kind_name(fr->regs[r]), want);
}

/* The value of a variable by name (messages only: the VM works with slots). */
static bool sym_get(const frame *fr, const char *name, int64_t *out) {
  uint32_t slot = rt_names_find(&fr->a->syms, name);
  *out = slot != RT_NO_SLOT && fr->bound[slot] ? fr->values[slot] : 0;
  return slot != RT_NO_SLOT && fr->bound[slot];
}

/* The expression of string str, compiled at load (vm_prepare), over the frame's symbols. */
static rx_status eval(frame *fr, const char *what, uint32_t str, int64_t *out) {
  const rt_expr *x = fr->a->exprs[str];
  RX_ASSERT(x); /* every string an instruction evaluates was compiled at load */
  rx_status st = rt_expr_eval(x, fr->values, fr->bound, out);
  if (st) return base_status_annotate(st, "%s: %s", fr->f->name, what);
  return NULL;
}

static void set_reg(frame *fr, uint32_t r, rx_rt_value *v) {
  rx_rt_value_release(fr->regs[r]);
  fr->regs[r] = v;
}

/* The variables of an expression with their values: "n = 4099, m = 3". */
static void describe_vars(const frame *fr, const char *e, char *buf, size_t size) {
  size_t n = 0;
  char seen[512] = " ";
  buf[0] = '\0';
  for (const char *p = e; *p;) {
    bool start = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z');
    if (!start && !(*p >= '0' && *p <= '9')) {
      p++;
      continue;
    }
    const char *s = p;
    while (*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
           (*p >= '0' && *p <= '9'))
      p++;
    if (!start) continue; /* a number */
    char name[130];
    size_t len = (size_t)(p - s) < 126 ? (size_t)(p - s) : 126;
    name[0] = ' ';
    memcpy(name + 1, s, len);
    name[len + 1] = ' ';
    name[len + 2] = '\0';
    int64_t v;
    if (strstr(seen, name) || strlen(seen) + len + 2 >= sizeof seen) continue;
    strcat(seen, name + 1);
    name[len + 1] = '\0';
    if (!sym_get(fr, name + 1, &v) || n >= size) continue;
    n += (size_t)snprintf(buf + n, size - n, "%s%s = %lld", n ? ", " : "", name + 1, (long long)v);
  }
}

/* A shape value's text, as the printer writes a Shape struct info: "Shape([2, 3])". */
static void format_shape(char *buf, size_t size, int ndim, const int64_t *dims) {
  size_t n = (size_t)snprintf(buf, size, "Shape([");
  for (int i = 0; i < ndim && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
  if (n < size) snprintf(buf + n, size - n, "])");
}

/* CHECK_TENSOR / MATCH_CAST: checks dtype, rank and dims of (dtype, ndim, shape) against the
 * descriptors at code[p] (dtype word, then ndim and dims), binding new variables. what names the
 * checked value ("parameter 'x'"), expected is the struct info's text. is_shape: the value is a
 * shape (MATCH_CAST to a Shape struct info), shape its values. */
static rx_status match(frame *fr, uint32_t p, rx_dtype dtype, int ndim, const int64_t *shape,
                       bool is_shape, const char *what, const char *expected) {
  const uint32_t *w = fr->f->code;
  char detail[512] = "";
  rx_dtype want = (rx_dtype)w[p++];
  uint32_t nd = w[p++];
  if (want != RX_DTYPE_UNKNOWN && want != dtype) {
    snprintf(detail, sizeof detail, "dtype %s, expected %s", rx_rt_dtype_name(dtype),
             rx_rt_dtype_name(want));
  } else if (nd != VM_NONE && (int)nd != ndim) {
    snprintf(detail, sizeof detail, "rank %d, expected %u", ndim, nd);
  } else if (nd != VM_NONE) {
    /* constants and bindings first, then expressions (which may use later bindings) */
    for (int pass = 0; pass < 2 && !detail[0]; pass++) {
      uint32_t q = p;
      for (uint32_t i = 0; i < nd && !detail[0]; i++) {
        uint32_t kind = w[q++];
        if (kind == RXVM_DIM_CONST) {
          int64_t c = (int64_t)((uint64_t)w[q] | (uint64_t)w[q + 1] << 32);
          q += 2;
          if (pass == 0 && shape[i] != c)
            snprintf(detail, sizeof detail, "dimension %u is %lld, expected %lld", i,
                     (long long)shape[i], (long long)c);
          continue;
        }
        uint32_t str = w[q++];
        const char *text = fr->a->strings[str];
        if (kind == RXVM_DIM_BIND && pass == 0) {
          uint32_t slot = fr->a->sym_slot[str];
          if (!fr->bound[slot]) {
            if (shape[i] < 0) /* from a shape value: symbolic variables are sizes */
              snprintf(detail, sizeof detail,
                       "dimension %u is %lld, but %s is a size and cannot be negative", i,
                       (long long)shape[i], text);
            else
              fr->values[slot] = shape[i], fr->bound[slot] = 1;
          } else if (fr->values[slot] != shape[i]) {
            snprintf(detail, sizeof detail, "dimension %u is %lld, but %s = %lld", i,
                     (long long)shape[i], text, (long long)fr->values[slot]);
          }
        } else if (kind == RXVM_DIM_EXPR && pass == 1) {
          int64_t v;
          RX_RETURN_IF_ERROR(eval(fr, what, str, &v));
          if (v != shape[i]) {
            char vars[256];
            describe_vars(fr, text, vars, sizeof vars);
            snprintf(detail, sizeof detail, "dimension %u is %lld, expected %s = %lld%s%s%s", i,
                     (long long)shape[i], text, (long long)v, vars[0] ? " with " : "", vars, "");
          }
        }
      }
    }
  }
  if (!detail[0]) return NULL;
  char got[512];
  if (is_shape)
    format_shape(got, sizeof got, ndim, shape);
  else
    vm_format_type(got, sizeof got, dtype, ndim, shape);
  return ferr(fr, RX_ERR_INVALID, "%s: expected %s, got %s (%s)", what, expected, got, detail);
}

static rx_status exec(rx_rt_artifact *a, uint32_t fi, rx_rt_value **args, rx_rt_value **out);

static rx_status alloc_tensor(frame *fr, const uint32_t *w, uint32_t p, rx_rt_value **out) {
  uint32_t dst = w[p], st = w[p + 1], off_str = w[p + 2];
  rx_dtype dtype = (rx_dtype)w[p + 3];
  int ndim = (int)w[p + 4];
  int64_t shape[RX_RT_MAX_NDIM];
  char reg[160];
  vm_reg_name(reg, sizeof reg, fr->a, fr->f, dst);
  for (int i = 0; i < ndim; i++) {
    RX_RETURN_IF_ERROR(eval(fr, "alloc_tensor: a dimension", w[p + 5 + i], &shape[i]));
    if (shape[i] < 0)
      return ferr(fr, RX_ERR_INVALID, "alloc_tensor for %s: dimension %d is %s = %lld, negative",
                  reg, i, fr->a->strings[w[p + 5 + i]], (long long)shape[i]);
  }
  uint64_t bytes = 0;
  if (!tensor_bytes(dtype, ndim, shape, &bytes) || bytes > SIZE_MAX / 2) {
    char ty[256];
    vm_format_type(ty, sizeof ty, dtype, ndim, shape);
    return ferr(fr, RX_ERR_OUT_OF_MEMORY, "alloc_tensor for %s: the byte size of %s overflows", reg,
                ty);
  }
  rx_rt_buffer *buf = NULL;
  rx_rt_device *d = fr->a->device;
  if (st == VM_NONE) { /* a dynamic allocation (the device suballocates and reuses) */
    RX_RETURN_IF_ERROR(base_status_annotate(rx_rt_buffer_alloc(d, buffer_bytes(bytes), &buf),
                                            "%s: alloc_tensor for %s", fr->f->name, reg));
  } else {
    rx_rt_value *sv = fr->regs[st];
    if (!sv || sv->kind != RX_RT_VALUE_STORAGE) return bad_reg(fr, st, "a storage");
    vm_storage *s = sv->storage;
    char sname[200];
    storage_name(sname, sizeof sname, fr, st, s->pc);
    int64_t off;
    RX_RETURN_IF_ERROR(eval(fr, "alloc_tensor: the offset", off_str, &off));
    if (off < 0 || (uint64_t)off > (uint64_t)s->bytes || bytes > (uint64_t)(s->bytes - off))
      return ferr(fr, RX_ERR_INVALID,
                  "alloc_tensor for %s: %llu bytes at offset %lld do not fit in the %s (%lld "
                  "bytes)",
                  reg, (unsigned long long)bytes, (long long)off, sname, (long long)s->bytes);
    for (size_t i = 0; i < s->nslots && !buf; i++)
      if (s->slots[i].offset == off) buf = s->slots[i].buffer;
    if (buf) {
      rx_rt_buffer_retain(buf);
    } else {
      if (s->nslots == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4;
        vm_slot *n = rt_alloc(&fr->a->alloc, cap * sizeof *n);
        if (!n) return rt_oom("storage slots", cap * sizeof *n);
        if (s->nslots) memcpy(n, s->slots, s->nslots * sizeof *n);
        rt_free(&fr->a->alloc, s->slots);
        s->slots = n;
        s->cap = cap;
      }
      RX_RETURN_IF_ERROR(base_status_annotate(
          rx_rt_buffer_alloc(d, buffer_bytes((uint64_t)(s->bytes - off)), &buf),
          "%s: %s (%lld bytes)", fr->f->name, sname, (long long)s->bytes));
      s->slots[s->nslots++] = (vm_slot){off, buf};
      buf->kept = true;
      rx_rt_buffer_retain(buf);
    }
  }
  rx_rt_tensor *t = vm_tensor_new(buf, dtype, ndim, shape);
  rx_rt_buffer_release(buf);
  rx_rt_value *v = t ? vm_value_new(&fr->a->alloc, RX_RT_VALUE_TENSOR) : NULL;
  if (!v) {
    rx_rt_tensor_release(t);
    return rt_oom("a tensor", sizeof *t);
  }
  v->tensor = t;
  *out = v;
  return NULL;
}

/* ---- profiling (vm.h) ---- */
typedef struct vm_profile_row {
  const char *prog; /* the artifact's string */
  uint64_t calls;
  double ms;
} vm_profile_row;
typedef struct vm_profile vm_profile;
struct vm_profile {
  size_t n, cap;
  vm_profile_row *rows;
};

static double wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void vm_profile_init(rx_rt_artifact *a) {
  const char *e = getenv("RX_PROFILE");
  if (e && *e && strcmp(e, "0")) a->profile = rt_alloc(&a->alloc, sizeof *a->profile);
}

static double profile_start(rx_rt_artifact *a) {
  rx_status s = rx_rt_device_synchronize(a->device);
  rx_status_free(s); /* reported by the call itself */
  return wall_ms();
}

static rx_status profile_stop(rx_rt_artifact *a, const char *prog, double t0) {
  RX_RETURN_IF_ERROR(rx_rt_device_synchronize(a->device));
  double ms = wall_ms() - t0;
  vm_profile *p = a->profile;
  size_t i = 0;
  while (i < p->n && p->rows[i].prog != prog) i++;
  if (i == p->n) {
    if (p->n == p->cap) {
      size_t cap = p->cap ? 2 * p->cap : 64;
      vm_profile_row *r = rt_alloc(&a->alloc, cap * sizeof *r);
      if (!r) return rt_oom("the profile", cap * sizeof *r);
      if (p->n) memcpy(r, p->rows, p->n * sizeof *r);
      rt_free(&a->alloc, p->rows);
      p->rows = r;
      p->cap = cap;
    }
    p->rows[p->n++] = (vm_profile_row){prog, 0, 0};
  }
  p->rows[i].calls++;
  p->rows[i].ms += ms;
  return NULL;
}

static int by_time(const void *x, const void *y) {
  double a = ((const vm_profile_row *)x)->ms, b = ((const vm_profile_row *)y)->ms;
  return a < b ? 1 : a > b ? -1 : 0;
}

void vm_profile_report(rx_rt_artifact *a) {
  vm_profile *p = a->profile;
  if (!p) return;
  qsort(p->rows, p->n, sizeof *p->rows, by_time);
  double total = 0;
  for (size_t i = 0; i < p->n; i++) total += p->rows[i].ms;
  fprintf(stderr, "profile of %s (RX_PROFILE): %.3f ms in %zu programs, synchronized\n", a->name,
          total, p->n);
  for (size_t i = 0; i < p->n; i++)
    fprintf(stderr, "  %10.3f ms %5.1f%% %8llu calls  %s\n", p->rows[i].ms,
            total > 0 ? 100 * p->rows[i].ms / total : 0, (unsigned long long)p->rows[i].calls,
            p->rows[i].prog);
  rt_free(&a->alloc, p->rows);
  rt_free(&a->alloc, p);
  a->profile = NULL;
}

/* "call_kernels 'p' on 'x', 'w', 'h'": the error s of a call, placed in the function. */
static rx_status call_error(frame *fr, rx_status s, const char *prog, const uint32_t *regs,
                            uint32_t n) {
  rx_strbuf args = {0};
  for (uint32_t i = 0; i < n; i++) {
    if (regs[i] == VM_NONE) continue;
    char reg[160];
    vm_reg_name(reg, sizeof reg, fr->a, fr->f, regs[i]);
    base_strbuf_printf(&args, "%s%s", args.len ? ", " : " on ", reg);
  }
  s = base_status_annotate(s, "%s: call_kernels '%s'%s", fr->f->name, prog,
                           args.data ? args.data : "");
  base_strbuf_free(&args);
  return s;
}

/* CALL_KERNELS: the program and the slots of its variables were resolved at load (vm_call);
 * each (name, expression) pair gives one of the program's variables (the first pair of a name
 * counts), then the program runs. */
static rx_status call_kernels(frame *fr, const uint32_t *w, uint32_t p) {
  rx_rt_artifact *a = fr->a;
  const char *prog = a->strings[w[p]];
  uint32_t n = w[p + 1];
  const uint32_t *regs = w + p + 2;
  uint32_t nsyms = w[p + 2 + n];
  const uint32_t *pairs = w + p + 3 + n;
  const vm_call *c = &a->calls[fr->f->call_at[fr->pc]];
  rx_rt_buffer *stack_bufs[32], **bufs = stack_bufs;
  int64_t values[RT_MAX_PROGRAM_VARS];
  uint8_t bound[RT_MAX_PROGRAM_VARS];
  rx_status s = NULL;
  if (!c->prog)
    return call_error(
        fr,
        base_status_make(RX_ERR_NOT_FOUND, "%s: no program named '%s'", a->library->origin, prog),
        prog, regs, n);
  memset(bound, 0, c->prog->vars.count);
  if (n > 32 && !(bufs = rt_alloc(&a->alloc, n * sizeof *bufs)))
    return rt_oom("kernel arguments", n * sizeof *bufs);
  for (uint32_t i = 0; i < n && !s; i++) {
    bufs[i] = NULL;
    if (regs[i] == VM_NONE) continue;
    rx_rt_value *v = fr->regs[regs[i]];
    if (!v || v->kind != RX_RT_VALUE_TENSOR)
      s = bad_reg(fr, regs[i], "a tensor");
    else
      bufs[i] = v->tensor->buffer;
  }
  for (uint32_t i = 0; i < nsyms && !s; i++) {
    int64_t v = 0;
    s = eval(fr, "call_kernels: a symbolic value", pairs[2 * i + 1], &v);
    uint32_t slot = c->slots[i];
    if (!s && slot != RT_NO_SLOT && !bound[slot]) values[slot] = v, bound[slot] = 1;
  }
  if (!s) {
    double t0 = a->profile ? profile_start(a) : 0;
    s = rt_program_run(c->prog, bufs, n, values, bound);
    if (a->profile && !s) s = profile_stop(a, prog, t0);
    if (s) s = call_error(fr, s, prog, regs, n);
  }
  if (bufs != stack_bufs) rt_free(&a->alloc, bufs);
  return s;
}

/* The truth of a JUMP_IF_NOT condition: a prim, or a one-element tensor read from the device. */
static rx_status truth(frame *fr, uint32_t r, bool *out) {
  rx_rt_value *v = fr->regs[r];
  *out = false;
  if (v && v->kind == RX_RT_VALUE_PRIM) {
    *out = v->prim != 0;
    return NULL;
  }
  if (!v || v->kind != RX_RT_VALUE_TENSOR) return bad_reg(fr, r, "a prim or a one-element tensor");
  rx_rt_tensor *t = v->tensor;
  int64_t count = 0;
  base_shape_count(t->ndim, t->shape, 1, &count); /* a tensor's shape has a valid count */
  size_t es = rx_rt_dtype_size(t->dtype);
  if (count != 1 || t->dtype == RX_DTYPE_F32 || t->dtype == RX_DTYPE_F16 ||
      t->dtype == RX_DTYPE_BF16 || t->dtype == RX_DTYPE_F64) {
    char ty[256], reg[160];
    vm_format_type(ty, sizeof ty, t->dtype, t->ndim, t->shape);
    vm_reg_name(reg, sizeof reg, fr->a, fr->f, r);
    return ferr(fr, RX_ERR_INVALID,
                "word %u (jump_if_not): the condition %s is a tensor %s, "
                "expected one bool or integer element",
                fr->pc, reg, ty);
  }
  uint8_t bytes[8] = {0};
  RX_RETURN_IF_ERROR(base_status_annotate(rx_rt_buffer_read(t->buffer, 0, bytes, es),
                                          "%s: reading a condition", fr->f->name));
  for (size_t i = 0; i < es; i++) *out = *out || bytes[i];
  return NULL;
}

/* TENSOR_TO_SHAPE: the values of a 1-D (or 0-d) i64/i32 tensor, read from the device, as a
 * shape value. */
static rx_status tensor_to_shape(frame *fr, uint32_t src, const char *what, rx_rt_value **out) {
  rx_rt_value *x = fr->regs[src];
  if (!x || x->kind != RX_RT_VALUE_TENSOR) return bad_reg(fr, src, "a tensor");
  rx_rt_tensor *t = x->tensor;
  if ((t->dtype != RX_DTYPE_I64 && t->dtype != RX_DTYPE_I32) || t->ndim > 1 ||
      (t->ndim == 1 && t->shape[0] > RX_RT_MAX_NDIM)) {
    char ty[256];
    vm_format_type(ty, sizeof ty, t->dtype, t->ndim, t->shape);
    return ferr(fr, RX_ERR_INVALID,
                "%s: expected a 1-D i64 or i32 tensor of at most %d values (or a 0-d one), "
                "got %s",
                what, RX_RT_MAX_NDIM, ty);
  }
  size_t n = t->ndim ? (size_t)t->shape[0] : 1, es = rx_rt_dtype_size(t->dtype);
  uint8_t bytes[8 * RX_RT_MAX_NDIM];
  if (n)
    RX_RETURN_IF_ERROR(base_status_annotate(rx_rt_buffer_read(t->buffer, 0, bytes, n * es),
                                            "%s: %s: reading the tensor", fr->f->name, what));
  rx_rt_value *v = vm_value_new(&fr->a->alloc, RX_RT_VALUE_SHAPE);
  if (!v || !(v->dims = rt_alloc(&fr->a->alloc, (n + 1) * sizeof *v->dims))) {
    rx_rt_value_release(v);
    return rt_oom("a shape", 64);
  }
  v->count = n;
  for (size_t i = 0; i < n; i++) {
    if (es == 8) {
      int64_t d;
      memcpy(&d, bytes + 8 * i, 8);
      v->dims[i] = d;
    } else {
      int32_t d;
      memcpy(&d, bytes + 4 * i, 4);
      v->dims[i] = d;
    }
  }
  *out = v;
  return NULL;
}

/* RESHAPE: a view of a tensor (the same buffer) with the dims of a shape value, one -1
 * inferred; the element counts must agree. */
static rx_status reshape(frame *fr, uint32_t src, uint32_t shp, const char *what,
                         rx_rt_value **out) {
  rx_rt_value *x = fr->regs[src], *s = fr->regs[shp];
  if (!x || x->kind != RX_RT_VALUE_TENSOR) return bad_reg(fr, src, "a tensor");
  if (!s || s->kind != RX_RT_VALUE_SHAPE) return bad_reg(fr, shp, "a shape");
  rx_rt_tensor *t = x->tensor;
  char ty[256], sh[256];
  vm_format_type(ty, sizeof ty, t->dtype, t->ndim, t->shape);
  format_shape(sh, sizeof sh, (int)s->count, s->dims);
  if (s->count > RX_RT_MAX_NDIM)
    return ferr(fr, RX_ERR_INVALID, "%s: the new shape %s has more than %d dims", what, sh,
                RX_RT_MAX_NDIM);
  int64_t have_count = 0;
  base_shape_count(t->ndim, t->shape, 1, &have_count); /* a tensor's shape has a valid count */
  uint64_t have = (uint64_t)have_count, want = 1;
  int64_t dims[RX_RT_MAX_NDIM];
  int infer = -1;
  for (size_t i = 0; i < s->count; i++) {
    dims[i] = s->dims[i];
    if (dims[i] == -1 && infer < 0) {
      infer = (int)i;
      continue;
    }
    if (dims[i] < 0)
      return ferr(fr, RX_ERR_INVALID,
                  "%s: the new shape %s has the negative dim %lld (only one -1 is allowed, "
                  "inferred)",
                  what, sh, (long long)dims[i]);
  }
  int64_t known[RX_RT_MAX_NDIM], want_count = 0; /* the -1 dim counted as 1 */
  for (size_t i = 0; i < s->count; i++) known[i] = (int)i == infer ? 1 : dims[i];
  if (base_shape_count((int)s->count, known, 1, &want_count) != RX_COUNT_OK)
    return ferr(fr, RX_ERR_INVALID, "%s: the element count of the new shape %s overflows", what,
                sh);
  want = (uint64_t)want_count;
  if (infer >= 0) {
    if (want && have % want == 0) {
      dims[infer] = (int64_t)(have / want);
      want = have;
    } else {
      return ferr(fr, RX_ERR_INVALID,
                  "%s: cannot reshape %s (%llu elements) to %s: the -1 dim cannot be inferred",
                  what, ty, (unsigned long long)have, sh);
    }
  }
  if (want != have)
    return ferr(fr, RX_ERR_INVALID,
                "%s: cannot reshape %s (%llu elements) to %s (%llu elements): the element "
                "counts differ",
                what, ty, (unsigned long long)have, sh, (unsigned long long)want);
  rx_rt_tensor *r = vm_tensor_new(t->buffer, t->dtype, (int)s->count, dims);
  rx_rt_value *v = r ? vm_value_new(&fr->a->alloc, RX_RT_VALUE_TENSOR) : NULL;
  if (!v) {
    rx_rt_tensor_release(r);
    return rt_oom("a tensor", sizeof *r);
  }
  v->tensor = r;
  *out = v;
  return NULL;
}

/* ---- the instructions: one function each, p the offset of its first operand (the layout of
 * RXVM_OPS, validated by the loader). fr->next is the next instruction (rxvm_walk's); jumps
 * change it, ret sets fr->ret and fr->done. ---- */

/* Sets register dst to x (retained). */
static rx_status set_to(frame *fr, rx_rt_value *x, uint32_t dst) {
  rx_rt_value_retain(x);
  set_reg(fr, dst, x);
  return NULL;
}

static rx_status op_CHECK_TENSOR(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_artifact *a = fr->a;
  uint32_t r = w[p], param = w[p + 1];
  rx_rt_value *x = fr->args[param];
  char what[256];
  snprintf(what, sizeof what, "parameter '%s'", a->strings[w[p + 2]]);
  if (!x || x->kind != RX_RT_VALUE_TENSOR)
    return ferr(fr, RX_ERR_INVALID, "%s: expected %s, got %s", what, a->strings[w[p + 3]],
                vm_kind_name(x));
  RX_RETURN_IF_ERROR(match(fr, p + 4, x->tensor->dtype, x->tensor->ndim, x->tensor->shape, false,
                           what, a->strings[w[p + 3]]));
  return r != param ? set_to(fr, x, r) : NULL;
}

static rx_status op_MATCH_CAST(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_artifact *a = fr->a;
  uint32_t dst = w[p], src = w[p + 1];
  const char *expected = a->strings[w[p + 2]];
  rx_rt_value *x = fr->regs[src];
  char what[256], reg[160];
  vm_reg_name(reg, sizeof reg, a, fr->f, src);
  snprintf(what, sizeof what, "match_cast of %s", reg);
  bool want_shape = !strncmp(expected, "Shape", 5); /* a Shape struct info's text */
  if (x && x->kind == RX_RT_VALUE_TENSOR && !want_shape) {
    RX_RETURN_IF_ERROR(match(fr, p + 3, x->tensor->dtype, x->tensor->ndim, x->tensor->shape, false,
                             what, expected));
  } else if (x && x->kind == RX_RT_VALUE_SHAPE) {
    if (w[p + 3] != RX_DTYPE_UNKNOWN)
      return ferr(fr, RX_ERR_INVALID, "%s: expected %s, got a shape", what, expected);
    RX_RETURN_IF_ERROR(
        match(fr, p + 3, RX_DTYPE_UNKNOWN, (int)x->count, x->dims, true, what, expected));
  } else {
    return ferr(fr, RX_ERR_INVALID, "%s: expected %s, got %s", what, expected, vm_kind_name(x));
  }
  return set_to(fr, x, dst);
}

static rx_status op_ASSERT(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  const char *e = fr->a->strings[w[p]], *msg = fr->a->strings[w[p + 1]];
  int64_t x;
  RX_RETURN_IF_ERROR(eval(fr, "a fact", w[p], &x));
  if (x) return NULL;
  char vars[512];
  describe_vars(fr, e, vars, sizeof vars);
  bool extra = msg[0] && !strstr(msg, e); /* a message that only restates it: left out */
  return ferr(fr, RX_ERR_INVALID, "violated fact '%s'%s%s%s%s%s", e, vars[0] ? " with " : "", vars,
              extra ? " (" : "", extra ? msg : "", extra ? ")" : "");
}

static rx_status op_DEFINE(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  int64_t x;
  RX_RETURN_IF_ERROR(eval(fr, "define", w[p + 1], &x));
  uint32_t slot = fr->a->sym_slot[w[p]];
  fr->values[slot] = x;
  fr->bound[slot] = 1;
  return NULL;
}

static rx_status op_ALLOC_STORAGE(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_artifact *a = fr->a;
  uint32_t fi = (uint32_t)(fr->f - a->fns);
  vm_storage *s = NULL;
  for (size_t i = 0; i < a->nstorages && !s; i++)
    if (a->storages[i].fn == fi && a->storages[i].pc == fr->pc) s = &a->storages[i];
  RX_ASSERT(s); /* the loader made one per ALLOC_STORAGE */
  int64_t bytes;
  char sname[200];
  storage_name(sname, sizeof sname, fr, w[p], fr->pc);
  RX_RETURN_IF_ERROR(eval(fr, "alloc_storage", w[p + 1], &bytes));
  if (bytes < 0)
    return ferr(fr, RX_ERR_INVALID, "%s: size %s = %lld is negative", sname, a->strings[w[p + 1]],
                (long long)bytes);
  if (bytes > s->bytes) { /* the first call, or a size expression that grew (sized at run time:
                            the plan had no bound for it): its buffers are made again, larger;
                            tensors of earlier calls keep the old ones */
    for (size_t i = 0; i < s->nslots; i++) rx_rt_buffer_release(s->slots[i].buffer);
    s->nslots = 0;
    s->bytes = bytes;
  }
  rx_rt_value *v = vm_value_new(&a->alloc, RX_RT_VALUE_STORAGE);
  if (!v) return rt_oom("a value", 64);
  v->storage = s;
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_ALLOC_TENSOR(frame *fr, uint32_t p) {
  rx_rt_value *v = NULL;
  RX_RETURN_IF_ERROR(alloc_tensor(fr, fr->f->code, p, &v));
  set_reg(fr, fr->f->code[p], v);
  return NULL;
}

static rx_status op_CALL_KERNELS(frame *fr, uint32_t p) { return call_kernels(fr, fr->f->code, p); }

/* name, n, regs...: a builtin (runtime/externs.c). A returning builtin's last register is its
 * result; a destination-passing one writes into the tensors its last registers hold. */
static rx_status op_CALL_EXTERN(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_artifact *a = fr->a;
  const char *name = a->strings[w[p]];
  uint32_t n = w[p + 1];
  const vm_extern *e = vm_extern_find(name);
  if (!e)
    return ferr(fr, RX_ERR_UNSUPPORTED,
                "extern '%s' is not available in this runtime (its builtins: %s)", name,
                vm_extern_names());
  if (e->returning && (!n || w[p + 1 + n] == VM_NONE))
    return ferr(fr, RX_ERR_INVALID, "extern '%s' returns a value but the call gives no register",
                name);
  uint32_t nargs = e->returning ? n - 1 : n;
  rx_rt_value *stack_args[16], **args = stack_args;
  if (nargs > 16 && !(args = rt_alloc(&a->alloc, nargs * sizeof *args)))
    return rt_oom("call arguments", nargs * sizeof *args);
  rx_status s = NULL;
  for (uint32_t i = 0; i < nargs && !s; i++) {
    uint32_t r = w[p + 2 + i];
    args[i] = r == VM_NONE ? NULL : fr->regs[r];
    if (!args[i]) s = bad_reg(fr, r, "a value");
  }
  rx_rt_value *result = NULL;
  vm_extern_call c = {a, a->device, name};
  if (!s) s = e->fn(&c, args, nargs, e->returning ? &result : NULL);
  if (args != stack_args) rt_free(&a->alloc, args);
  if (s) { /* the builtin's message, placed in the function */
    rx_rt_value_release(result);
    rx_status r = ferr(fr, rx_status_code_of(s), "%s", rx_status_message(s));
    rx_status_free(s);
    return r;
  }
  if (e->returning) set_reg(fr, w[p + 1 + n], result);
  return NULL;
}

static rx_status op_CALL_FN(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_artifact *a = fr->a;
  uint32_t dst = w[p], fi = w[p + 1], n = w[p + 2];
  rx_rt_value *stack_args[16], **args = stack_args, *v = NULL;
  if (n > 16 && !(args = rt_alloc(&a->alloc, n * sizeof *args)))
    return rt_oom("call arguments", n * sizeof *args);
  rx_status s = NULL;
  for (uint32_t i = 0; i < n && !s; i++) {
    args[i] = fr->regs[w[p + 3 + i]];
    if (!args[i]) s = bad_reg(fr, w[p + 3 + i], "a value");
  }
  if (!s) {
    a->depth++;
    s = exec(a, fi, args, &v);
    a->depth--;
  }
  if (args != stack_args) rt_free(&a->alloc, args);
  if (s) return s;
  if (dst == VM_NONE)
    rx_rt_value_release(v);
  else
    set_reg(fr, dst, v);
  return NULL;
}

static rx_status op_TAIL_CALL_FN(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  uint32_t fi = w[p], n = w[p + 1];
  rx_rt_value **args = rt_alloc(&fr->a->alloc, (n + 1) * sizeof *args);
  if (!args) return rt_oom("call arguments", n * sizeof *args);
  for (uint32_t i = 0; i < n; i++) {
    if (!(args[i] = fr->regs[w[p + 2 + i]])) {
      for (uint32_t k = 0; k < i; k++) rx_rt_value_release(args[k]);
      rt_free(&fr->a->alloc, args);
      return bad_reg(fr, w[p + 2 + i], "a value");
    }
    rx_rt_value_retain(args[i]);
  }
  fr->tail = fr->done = true;
  fr->tail_fn = fi;
  fr->tail_args = args;
  return NULL;
}

static rx_status op_PRIM(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  int64_t x;
  RX_RETURN_IF_ERROR(eval(fr, "prim", w[p + 2], &x));
  rx_rt_value *v = vm_value_new(&fr->a->alloc, RX_RT_VALUE_PRIM);
  if (!v) return rt_oom("a value", 64);
  v->dtype = (rx_dtype)w[p + 1];
  v->prim = x;
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_SHAPE(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  uint32_t n = w[p + 1];
  rx_rt_value *v = vm_value_new(&fr->a->alloc, RX_RT_VALUE_SHAPE);
  if (!v || !(v->dims = rt_alloc(&fr->a->alloc, (n + 1) * sizeof *v->dims))) {
    rx_rt_value_release(v);
    return rt_oom("a shape", 64);
  }
  v->count = n;
  for (uint32_t i = 0; i < n; i++) {
    rx_status s = eval(fr, "shape", w[p + 2 + i], &v->dims[i]);
    if (s) {
      rx_rt_value_release(v);
      return s;
    }
  }
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_TUPLE(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  uint32_t n = w[p + 1];
  rx_rt_value *v = vm_value_new(&fr->a->alloc, RX_RT_VALUE_TUPLE);
  if (!v || !(v->items = rt_alloc(&fr->a->alloc, (n + 1) * sizeof *v->items))) {
    rx_rt_value_release(v);
    return rt_oom("a tuple", 64);
  }
  for (uint32_t i = 0; i < n; i++) {
    rx_rt_value *x = fr->regs[w[p + 2 + i]];
    if (!x) {
      rx_rt_value_release(v);
      return bad_reg(fr, w[p + 2 + i], "a value");
    }
    rx_rt_value_retain(x);
    v->items[v->count++] = x;
  }
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_GET_ITEM(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_value *t = fr->regs[w[p + 1]];
  if (!t || t->kind != RX_RT_VALUE_TUPLE) return bad_reg(fr, w[p + 1], "a tuple");
  if (w[p + 2] >= t->count)
    return ferr(fr, RX_ERR_INVALID, "word %u (get_item): index %u of a tuple of %zu", fr->pc,
                w[p + 2], t->count);
  rx_rt_value *v = t->items[w[p + 2]];
  rx_rt_value_retain(v);
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_MOVE(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_value *v = fr->regs[w[p + 1]];
  if (!v) return bad_reg(fr, w[p + 1], "a value");
  rx_rt_value_retain(v);
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_JUMP(frame *fr, uint32_t p) {
  fr->next = fr->f->code[p];
  return NULL;
}

static rx_status op_JUMP_IF_NOT(frame *fr, uint32_t p) {
  bool c;
  RX_RETURN_IF_ERROR(truth(fr, fr->f->code[p], &c));
  if (!c) fr->next = fr->f->code[p + 1];
  return NULL;
}

static rx_status op_FREE(frame *fr, uint32_t p) {
  if (fr->f->code[p] != VM_NONE) set_reg(fr, fr->f->code[p], NULL);
  return NULL;
}

static rx_status op_RET(frame *fr, uint32_t p) {
  uint32_t r = fr->f->code[p];
  rx_rt_value *v;
  if (r == VM_NONE) {
    if (!(v = vm_value_new(&fr->a->alloc, RX_RT_VALUE_TUPLE))) return rt_oom("a value", 64);
  } else {
    v = fr->regs[r];
    if (!v) return bad_reg(fr, r, "a value");
    rx_rt_value_retain(v);
  }
  fr->ret = v;
  fr->done = true;
  return NULL;
}

static rx_status op_TENSOR_TO_SHAPE(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_value *v = NULL;
  RX_RETURN_IF_ERROR(tensor_to_shape(fr, w[p + 1], fr->a->strings[w[p + 2]], &v));
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_RESHAPE(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_value *v = NULL;
  RX_RETURN_IF_ERROR(reshape(fr, w[p + 1], w[p + 2], fr->a->strings[w[p + 3]], &v));
  set_reg(fr, w[p], v);
  return NULL;
}

static rx_status op_WEIGHT(frame *fr, uint32_t p) {
  const uint32_t *w = fr->f->code;
  rx_rt_value *v = vm_weight_value(fr->a, fr->a->strings[w[p + 1]]);
  RX_ASSERT(v); /* the loader checked the name, and a call's artifact has uploaded its weights */
  return set_to(fr, v, w[p]);
}

/* The interpreter's table, built from RXVM_OPS: a missing handler is a compile error. */
static rx_status (*const ops[])(frame *, uint32_t) = {
#define RXVM_OP_FN_(e, n, l, k) [RXVM_OP_##e] = op_##e,
    RXVM_OPS(RXVM_OP_FN_)
#undef RXVM_OP_FN_
};

/* Runs the instruction at *pc and moves *pc to the next one (the walker's, or a jump's). */
static rx_status step(frame *fr, uint32_t *pc) {
  fr->pc = *pc;
  uint32_t op = fr->f->code[*pc];
  fr->next = rxvm_walk(fr->f->code, fr->f->len, *pc, NULL, NULL, NULL, 0);
  RX_ASSERT(op < RXVM_OP_COUNT && fr->next); /* validated by the loader */
  RX_RETURN_IF_ERROR(ops[op](fr, *pc + 1));
  *pc = fr->next;
  return NULL;
}

/* Runs function f of the frame to its ret or tail call (fr->done) or an error; fr->args are its
 * arguments. Its registers are released when it returns. */
static rx_status run_frame(frame *fr) {
  rx_rt_artifact *a = fr->a;
  const vm_fn *f = fr->f;
  fr->regs = rt_alloc(&a->alloc, (f->nregs + 1) * sizeof *fr->regs);
  fr->values = rt_alloc(&a->alloc, (a->syms.count + 1) * sizeof *fr->values);
  fr->bound = rt_alloc(&a->alloc, a->syms.count + 1);
  rx_status s = NULL;
  if (!fr->regs || !fr->values || !fr->bound) s = rt_oom("registers", f->nregs * sizeof *fr->regs);
  for (uint32_t i = 0; i < f->nparams && !s; i++) {
    fr->regs[i] = fr->args[i];
    rx_rt_value_retain(fr->args[i]);
  }
  uint32_t pc = 0;
  unsigned long long steps = 0;
  while (!s && !fr->done) {
    if (pc >= f->len) {
      s = base_status_make(RX_ERR_INVALID, "%s: reached the end of its code without ret", f->name);
      break;
    }
    if (++steps > VM_MAX_STEPS) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: executed %llu instructions without returning (a "
                           "loop in the host program?)",
                           f->name, VM_MAX_STEPS);
      break;
    }
    s = step(fr, &pc);
  }
  for (uint32_t i = 0; fr->regs && i < f->nregs; i++) rx_rt_value_release(fr->regs[i]);
  rt_free(&a->alloc, fr->regs);
  rt_free(&a->alloc, fr->values);
  rt_free(&a->alloc, fr->bound);
  fr->regs = NULL;
  fr->values = NULL;
  fr->bound = NULL;
  return s;
}

static void free_args(rx_rt_artifact *a, rx_rt_value **args, uint32_t n) {
  for (uint32_t i = 0; args && i < n; i++) rx_rt_value_release(args[i]);
  rt_free(&a->alloc, args);
}

/* Runs function fi: a tail call runs its callee in the same frame (the caller's registers
 * released first), so a loop lowered to self tail recursion does not nest. */
static rx_status exec(rx_rt_artifact *a, uint32_t fi, rx_rt_value **args, rx_rt_value **out) {
  *out = NULL;
  const vm_fn *f = &a->fns[fi];
  if (a->depth > VM_MAX_DEPTH)
    return base_status_make(RX_ERR_INVALID, "%s: calls nested more than %d deep", f->name,
                            VM_MAX_DEPTH);
  rx_rt_value **owned = NULL; /* a tail call's arguments */
  uint32_t nowned = 0;
  unsigned long long tails = 0;
  unsigned nsync = 0;
  rx_status s = NULL;
  for (;;) {
    frame fr = {.a = a, .f = f, .args = owned ? owned : args};
    s = run_frame(&fr);
    free_args(a, owned, nowned);
    owned = NULL;
    if (!fr.tail) {
      *out = fr.ret;
      break;
    }
    owned = fr.tail_args;
    f = &a->fns[fr.tail_fn];
    nowned = f->nparams; /* the loader checked the count */
    if (s) break;
    if (VM_MAX_TAIL_CALLS && ++tails > VM_MAX_TAIL_CALLS) {
      s = base_status_make(RX_ERR_INVALID, "%s: more than %llu tail calls", f->name,
                           VM_MAX_TAIL_CALLS);
      break;
    }
    if (++nsync == VM_TAIL_SYNC) {
      nsync = 0;
      if ((s = rx_rt_device_synchronize(a->device))) break;
    }
  }
  free_args(a, owned, nowned);
  if (s && *out) {
    rx_rt_value_release(*out);
    *out = NULL;
  }
  return s;
}

/* ---- calls ---- */
static rx_status find_fn(const rx_rt_artifact *a, const char *name, uint32_t *out) {
  *out = 0;
  for (size_t i = 0; i < a->nfns; i++)
    if (!strcmp(a->fns[i].name, name)) {
      *out = (uint32_t)i;
      return NULL;
    }
  rx_strbuf names = {0};
  for (size_t i = 0; i < a->nfns; i++)
    base_strbuf_printf(&names, "%s%s", i ? ", " : "", a->fns[i].name);
  rx_status s = base_status_make(RX_ERR_NOT_FOUND, "no function '%s' in %s (functions: %s)", name,
                                 a->name, names.data ? names.data : "none");
  base_strbuf_free(&names);
  return s;
}

/* At most this many parameters are listed in a message (with their types), then "and N more": an
 * LLM's function has hundreds, nearly all bound to weights. */
#define COUNT_ERROR_LISTED 8

/* "x: f32[n, 4096], pos: Prim(i64)" for the parameters of fi (inputs: only those not bound to
 * weights), the first COUNT_ERROR_LISTED of them, then "and N more". */
static void list_params(rx_strbuf *b, const rx_rt_artifact *a, uint32_t fi, bool inputs) {
  size_t listed = 0, more = 0;
  for (uint32_t i = 0; i < a->fns[fi].nparams; i++) {
    if (inputs && rx_rt_artifact_param_weight(a, fi, i, NULL)) continue;
    if (listed == COUNT_ERROR_LISTED) {
      more++;
      continue;
    }
    rx_rt_param_info pi;
    rx_rt_artifact_function_param(a, fi, i, &pi);
    base_strbuf_printf(b, "%s%s: %s", listed++ ? ", " : "", pi.name[0] ? pi.name : "?",
                       pi.expected);
  }
  if (more) base_strbuf_printf(b, ", and %zu more", more);
}

/* "main takes 5 arguments (x: f32[n, 4], w1: ...), got 3"; with weights bound: "main takes 1
 * argument (x: f32[n, 4]) and gets its 4 weights from the artifact, or all 5 to override them,
 * got 3". */
static rx_status count_error(const rx_rt_artifact *a, uint32_t fi, size_t n) {
  const vm_fn *f = &a->fns[fi];
  uint32_t nb = vm_weights_bound(a, fi), ni = f->nparams - nb;
  rx_strbuf list = {0};
  list_params(&list, a, fi, nb > 0);
  rx_status s;
  if (nb)
    s = base_status_make(
        RX_ERR_INVALID,
        "%s takes %u argument%s (%s) and gets its %u weight%s from the artifact, or "
        "all %u to override them, got %zu",
        f->name, ni, ni == 1 ? "" : "s", list.data ? list.data : "", nb, nb == 1 ? "" : "s",
        f->nparams, n);
  else
    s = base_status_make(RX_ERR_INVALID, "%s takes %u argument%s (%s), got %zu", f->name,
                         f->nparams, f->nparams == 1 ? "" : "s", list.data ? list.data : "", n);
  base_strbuf_free(&list);
  return s;
}

/* The arguments of a call as function fi's parameters (borrowed): every parameter given, or the
 * weights in the places of the parameters bound to them. */
static rx_status call_args(const rx_rt_artifact *a, uint32_t fi, rx_rt_value *const *in, size_t n,
                           rx_rt_value **args) {
  const vm_fn *f = &a->fns[fi];
  uint32_t nb = vm_weights_bound(a, fi);
  bool fill = n != f->nparams && nb && n == f->nparams - nb;
  if (n != f->nparams && !fill) return count_error(a, fi, n);
  for (uint32_t p = 0, k = 0; p < f->nparams; p++) {
    bool bound = fill && rx_rt_artifact_param_weight(a, fi, p, NULL);
    rx_rt_value *v = bound ? vm_param_weight(a, fi, p) : in[k++];
    RX_ASSERT(v || !bound); /* a device's artifact uploaded every weight */
    args[p] = v;
    const char *why = !v                               ? "NULL"
                      : v->kind == RX_RT_VALUE_STORAGE ? "a planned storage is no argument"
                      : v->kind == RX_RT_VALUE_TENSOR && v->tensor->buffer->device != a->device
                          ? "the tensor is on another device"
                          : NULL;
    if (why) {
      rx_rt_param_info pi;
      rx_rt_artifact_function_param(a, fi, p, &pi);
      return base_status_make(RX_ERR_INVALID, "%s: parameter %u '%s': %s", f->name, p, pi.name,
                              why);
    }
  }
  return NULL;
}

rx_status rx_rt_vm_call_values(rx_rt_artifact *a, const char *fn, rx_rt_value *const *in, size_t n,
                               rx_rt_value **out_result) {
  if (!out_result || !a || !fn || (n && !in))
    return base_status_make(RX_ERR_INVALID, "rx_rt_vm_call: NULL");
  *out_result = NULL;
  uint32_t fi = 0;
  RX_RETURN_IF_ERROR(find_fn(a, fn, &fi));
  if (!a->device)
    return base_status_make(RX_ERR_INVALID,
                            "%s was loaded without a device: it can be inspected, "
                            "not called",
                            a->name);
  if (a->device->lost) return rt_device_error(a->device);
  const vm_fn *f = &a->fns[fi];
  rx_rt_value **args = rt_alloc(&a->alloc, ((size_t)f->nparams + 1) * sizeof *args);
  if (!args) return rt_oom("call arguments", f->nparams * sizeof *args);
  rx_status s = call_args(a, fi, in, n, args);
  if (!s) {
    a->depth = 0;
    s = exec(a, fi, args, out_result);
  }
  /* run-time checks of its kernels (an index from data out of range): one small read where a
   * kernel with checks ran; a failed check fails the call */
  rx_status cs = rx_rt_library_check(a->library);
  if (cs && !s) {
    s = cs;
    rx_rt_value_release(*out_result);
    *out_result = NULL;
  } else {
    rx_status_free(cs);
  }
  rt_free(&a->alloc, args);
  return s;
}

rx_status rx_rt_vm_call(rx_rt_artifact *a, const char *fn, rx_rt_tensor *const *inputs, size_t n,
                        rx_rt_value **out_result) {
  if (!out_result || !a || !fn || (n && !inputs))
    return base_status_make(RX_ERR_INVALID, "rx_rt_vm_call: NULL");
  *out_result = NULL;
  rx_rt_value **args = rt_alloc(&a->alloc, (n + 1) * sizeof *args);
  if (!args) return rt_oom("call arguments", n * sizeof *args);
  rx_status s = NULL;
  for (size_t i = 0; i < n && !s; i++) { /* a NULL tensor: a NULL value, named by the call */
    if (!inputs[i]) continue;
    if (!(args[i] = vm_value_new(&a->alloc, RX_RT_VALUE_TENSOR))) {
      s = rt_oom("a value", 64);
      break;
    }
    args[i]->tensor = inputs[i];
    rx_rt_tensor_retain(inputs[i]);
  }
  if (!s) s = rx_rt_vm_call_values(a, fn, args, n, out_result);
  for (size_t i = 0; i < n; i++) rx_rt_value_release(args[i]);
  rt_free(&a->alloc, args);
  return s;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

rx_status rx_rt_vm_bench(rx_rt_artifact *a, const char *fn, rx_rt_tensor *const *inputs, size_t n,
                         int warmup, int iters, double *out_ms_per_call) {
  if (!out_ms_per_call) return base_status_make(RX_ERR_INVALID, "rx_rt_vm_bench: NULL");
  *out_ms_per_call = 0;
  if (iters < 1)
    return base_status_make(RX_ERR_INVALID, "bench: %d iterations (at least 1)", iters);
  double t0 = 0;
  for (int i = 0; i < warmup + iters; i++) {
    if (i == warmup) {
      if (a->device) RX_RETURN_IF_ERROR(rx_rt_device_synchronize(a->device));
      t0 = now_ms();
    }
    rx_rt_value *r = NULL;
    RX_RETURN_IF_ERROR(rx_rt_vm_call(a, fn, inputs, n, &r));
    rx_rt_value_release(r);
  }
  RX_RETURN_IF_ERROR(rx_rt_device_synchronize(a->device));
  *out_ms_per_call = (now_ms() - t0) / iters;
  return NULL;
}
