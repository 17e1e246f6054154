/* runtime/vm_walk.c: the one decoder of host-program instructions (runtime/vm_format.h). The
 * loader's validator (runtime/artifact.c), the runtime's disassembler, the compiler's dump of
 * the host program (passes/lower_host.c) and the interpreter (runtime/vm.c) all find an
 * instruction's operands here, from the operand letters of RXVM_OPS. Compiled into the runtime
 * and into the compiler (it depends on nothing but the format header). */
#include "runtime/vm_format.h"

#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const op_names[] = {
#define RXVM_OP_NAME_(e, n, l, k) n,
    RXVM_OPS(RXVM_OP_NAME_)
#undef RXVM_OP_NAME_
};
static const char *const op_operands[] = {
#define RXVM_OP_KINDS_(e, n, l, k) k,
    RXVM_OPS(RXVM_OP_KINDS_)
#undef RXVM_OP_KINDS_
};

const char *rxvm_op_name(uint32_t op) { return op < RXVM_OP_COUNT ? op_names[op] : "?"; }
const char *rxvm_op_operands(uint32_t op) { return op < RXVM_OP_COUNT ? op_operands[op] : NULL; }

/* The operand kind of a layout letter (RXVM_OPERANDS); RXVM_OPND_COUNT for none. */
static rxvm_operand kind_of(char c) {
  switch (c) {
#define RXVM_OPERAND_CASE_(e, ch, d)                                                               \
  case ch:                                                                                         \
    return RXVM_OPND_##e;
    RXVM_OPERANDS(RXVM_OPERAND_CASE_)
#undef RXVM_OPERAND_CASE_
  }
  return RXVM_OPND_COUNT;
}

typedef struct walk {
  const uint32_t *code;
  uint32_t len, p;
  char *err;
  size_t err_size;
} walk;

static bool fail(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(walk *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (w->err && w->err_size) vsnprintf(w->err, w->err_size, fmt, ap);
  va_end(ap);
  return false;
}

/* The next word, or an error when the operands run past the end of the code. */
static bool word(walk *w, uint32_t *out) {
  *out = 0;
  if (w->p >= w->len)
    return fail(w, "its operands run past the end of the code (%u words)", w->len);
  *out = w->code[w->p++];
  return true;
}

/* A count of items of `per` words each that must fit in the rest of the code. */
static bool count(walk *w, uint32_t per, uint32_t *out) {
  if (!word(w, out)) return false;
  if ((uint64_t)*out * per > w->len - w->p)
    return fail(w, "a count of %u does not fit in the code", *out);
  return true;
}

static bool rank(walk *w, bool any_ok, uint32_t *out) {
  if (!word(w, out)) return false;
  if (*out == RXVM_NONE && any_ok) return true;
  if (*out > RXVM_MAX_NDIM) return fail(w, "rank %d exceeds %d", (int)*out, RXVM_MAX_NDIM);
  return true;
}

/* Moves past one operand of kind k; *out_count as rxvm_walk documents. */
static bool operand(walk *w, rxvm_operand k, uint32_t *out_count) {
  uint32_t n = 1, x = 0;
  switch (k) {
  case RXVM_OPND_DIMS:
    if (!rank(w, true, &n)) return false;
    for (uint32_t i = 0; n != RXVM_NONE && i < n; i++) {
      if (!word(w, &x)) return false;
      if (x == RXVM_DIM_CONST) {
        if (!word(w, &x) || !word(w, &x)) return false;
      } else if (x == RXVM_DIM_BIND || x == RXVM_DIM_EXPR) {
        if (!word(w, &x)) return false;
      } else {
        return fail(w, "dimension %u has the unknown kind %u", i, x);
      }
    }
    break;
  case RXVM_OPND_EXPRS:
    if (!rank(w, false, &n)) return false;
    for (uint32_t i = 0; i < n; i++)
      if (!word(w, &x)) return false;
    break;
  case RXVM_OPND_REGS:
  case RXVM_OPND_REGS_OPT:
    if (!count(w, 1, &n)) return false;
    w->p += n;
    break;
  case RXVM_OPND_PAIRS:
    if (!count(w, 2, &n)) return false;
    w->p += 2 * n;
    break;
  default:
    if (!word(w, &x)) return false;
  }
  *out_count = n;
  return true;
}

uint32_t rxvm_walk(const uint32_t *code, uint32_t len, uint32_t pc, rxvm_visit_fn visit, void *ctx,
                   char *out_error, size_t error_size) {
  walk w = {code, len, pc, out_error, error_size};
  if (out_error && error_size) out_error[0] = '\0';
  if (pc >= len) return fail(&w, "no instruction at word %u (the code has %u)", pc, len), 0;
  uint32_t op = code[w.p++];
  const char *kinds = rxvm_op_operands(op);
  if (!kinds) return fail(&w, "unknown opcode %u", op), 0;
  for (const char *c = kinds; *c; c++) {
    rxvm_operand k = kind_of(*c);
    uint32_t at = w.p, n = 0;
    if (!operand(&w, k, &n)) return 0;
    if (visit && !visit(ctx, k, at, n)) return 0;
  }
  return w.p;
}

/* ---- the disassembler: `relaxc compile --dump-after lower_host`, `relaxc inspect --code` ---- */

static const char *const dtype_names[] = {"any",
#define RXVM_DTYPE_NAME_(e, n, b, f, s) n,
                                          RX_DTYPES(RXVM_DTYPE_NAME_)
#undef RXVM_DTYPE_NAME_
};

typedef struct dis {
  rx_strbuf *out;
  const uint32_t *code;
  const char *const *strs; /* the program's strings */
  uint32_t nstrs;
  rxvm_operand last; /* the previous operand's kind (EXPRS after a dtype: a tensor's dims) */
  bool ok;
} dis;

static void put_str(dis *d, uint32_t id) {
  if (id < d->nstrs) {
    base_strbuf_printf(d->out, " \"%s\"", d->strs[id]);
  } else {
    base_strbuf_printf(d->out, " <bad string %u>", id);
    d->ok = false;
  }
}
static void put_reg(dis *d, uint32_t r) {
  if (r == RXVM_NONE)
    base_strbuf_append(d->out, " -");
  else
    base_strbuf_printf(d->out, " r%u", r);
}

/* ndim dimension descriptors from w: " [ bind "n", 4 ]" */
static void put_dims(dis *d, const uint32_t *w, uint32_t nd) {
  if (nd == RXVM_NONE) {
    base_strbuf_append(d->out, " [ndim=any]");
    return;
  }
  base_strbuf_append(d->out, " [");
  for (uint32_t i = 0; i < nd; i++) {
    if (i) base_strbuf_append(d->out, ",");
    if (w[0] == RXVM_DIM_CONST) {
      base_strbuf_printf(d->out, " %lld", (long long)(int64_t)((uint64_t)w[2] << 32 | w[1]));
      w += 3;
    } else {
      base_strbuf_append(d->out, w[0] == RXVM_DIM_BIND ? " bind" : " expr");
      put_str(d, w[1]);
      w += 2;
    }
  }
  base_strbuf_append(d->out, " ]");
}

static bool put_operand(void *ctx, rxvm_operand k, uint32_t at, uint32_t n) {
  dis *d = ctx;
  const uint32_t *w = d->code + at;
  switch (k) {
  case RXVM_OPND_REG:
  case RXVM_OPND_REG_OPT:
    put_reg(d, w[0]);
    break;
  case RXVM_OPND_PARAM:
    base_strbuf_printf(d->out, " param %u", w[0]);
    break;
  case RXVM_OPND_STR:
  case RXVM_OPND_EXPR:
  case RXVM_OPND_VAR:
    put_str(d, w[0]);
    break;
  case RXVM_OPND_DTYPE:
  case RXVM_OPND_DTYPE_KNOWN:
    base_strbuf_printf(d->out, " %s", w[0] < RX_DTYPE_COUNT ? dtype_names[w[0]] : "?");
    break;
  case RXVM_OPND_DIMS:
    put_dims(d, w + 1, n);
    break;
  case RXVM_OPND_EXPRS: {
    bool dims = d->last == RXVM_OPND_DTYPE || d->last == RXVM_OPND_DTYPE_KNOWN;
    if (dims) base_strbuf_append(d->out, " [");
    for (uint32_t i = 0; i < n; i++) {
      if (dims && i) base_strbuf_append(d->out, ",");
      put_str(d, w[1 + i]);
    }
    if (dims) base_strbuf_append(d->out, " ]");
    break;
  }
  case RXVM_OPND_REGS:
  case RXVM_OPND_REGS_OPT:
    base_strbuf_printf(d->out, " (%u)", n);
    for (uint32_t i = 0; i < n; i++) put_reg(d, w[1 + i]);
    break;
  case RXVM_OPND_PAIRS:
    base_strbuf_printf(d->out, " syms (%u)", n);
    for (uint32_t i = 0; i < n; i++) {
      put_str(d, w[1 + 2 * i]);
      base_strbuf_append(d->out, " =");
      put_str(d, w[2 + 2 * i]);
    }
    break;
  case RXVM_OPND_FN:
    base_strbuf_printf(d->out, " fn %u", w[0]);
    break;
  case RXVM_OPND_INDEX:
    base_strbuf_printf(d->out, " .%u", w[0]);
    break;
  case RXVM_OPND_TARGET:
    base_strbuf_printf(d->out, " @%u", w[0]);
    break;
  case RXVM_OPND_COUNT:
    break;
  }
  d->last = k;
  return true;
}

bool rxvm_disasm_fn(rx_strbuf *out, const char *name, uint32_t nparams, const uint32_t *code,
                    uint32_t len, const uint32_t *reg_names, uint32_t nregs,
                    const char *const *strings, uint32_t nstrings) {
  dis d = {out, code, strings, nstrings, RXVM_OPND_COUNT, true};
  base_strbuf_printf(out, "function \"%s\" params %u regs %u words %u\n", name, nparams, nregs,
                     len);
  char err[160];
  for (uint32_t p = 0; d.ok && p < len;) {
    base_strbuf_printf(out, "  %4u: %s", p, rxvm_op_name(code[p]));
    d.last = RXVM_OPND_COUNT;
    uint32_t next = rxvm_walk(code, len, p, put_operand, &d, err, sizeof err);
    base_strbuf_putc(out, '\n');
    if (!next) d.ok = false;
    p = next;
  }
  if (d.ok && reg_names) { /* version 3: the binding each register holds */
    base_strbuf_append(out, "  names:");
    for (uint32_t r = 0; r < nregs; r++) {
      base_strbuf_printf(out, " r%u", r);
      put_str(&d, reg_names[r]);
    }
    base_strbuf_putc(out, '\n');
  }
  return d.ok;
}
