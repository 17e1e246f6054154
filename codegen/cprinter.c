/* The C-like printer base shared by CUDA C, GLSL and MSL (tinygrad-style): it walks a lowered
 * kernel's statements and expressions and asks the language's cg_lang table for type names,
 * builtins, intrinsics and literal forms, and its hooks for what differs in shape (preamble
 * and signature, shared declarations, subgroup reductions).
 *
 * Conventions of the emitted code:
 * - index arithmetic (symbolic expressions of the IR) is printed in the kernel's index type
 *   (int, or the 64-bit type); floor division and modulo become `/` and `%` where the analyzer
 *   proves the operands non-negative, shifts and masks for powers of two, else helpers
 *   rx_floordiv / rx_floormod;
 * - buffers are flattened row-major; shared allocations are hoisted to kernel (GLSL: file)
 *   scope; local allocations are zero-filled arrays, as the interpreter defines;
 * - a loop bound to threadIdx.* declares its variable from the thread index and guards its
 *   body when its extent is below the block size;
 * - f16/bf16 math intrinsics are computed in f32 and rounded once (what the interpreter does);
 *   erf where the language has none is rx_erf: a Taylor series for |x| < 0.5 (relative error
 *   below 1e-7) and Abramowitz-Stegun 7.1.26 above (absolute error below 1.5e-7). */
#include "cg_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------------------------ */

/* Identifiers from users (.rx text, ONNX files) are data: cg_ident maps every string to an
 * identifier valid in C++ (CUDA, MSL) and GLSL that is none of the language's reserved words,
 * library names or reserved prefixes (cg_lang.reserved, .reserved_prefixes). Three classes, told
 * apart by their first characters, so the map is one-to-one and never yields a generated name:
 *   A  [A-Za-z][A-Za-z0-9_]* without "__", not reserved, not starting with "rx_": as is;
 *   B  the same character rules, but reserved in the language or starting with "rx_":
 *      "rx_u_" + name;
 *   C  anything else (a leading '_' or digit, "__", characters such as '.', '-', non-ASCII):
 *      "rx_x" + name with every byte other than [A-Za-z0-9] written as '_' and two lowercase
 *      hex digits ("a.b" -> "rx_xa_2eb", "__x" -> "rx_x_5f_5fx"): no "__", decodable.
 * Names the printers generate begin with "rx_" and never with "rx_u_" or "rx_x" (rx_erf,
 * rx_floordiv, rx_pc, rx_buf0, rx_params, ...), so they cannot meet a user name either. */

static bool ident_alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

const char *const cg_cxx_reserved[] = {
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "final",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "import",
    "inline",
    "int",
    "long",
    "module",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "override",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    "main",
    "std",
    "NULL",
    "size_t",
    "ptrdiff_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "intptr_t",
    "uintptr_t",
    "assert",
    "printf",
    "malloc",
    "free",
    "memcpy",
    "memset",
    "offsetof",
    NULL,
};

bool cg_is_reserved(const cg_lang *L, const char *name) {
  for (const char *const *w = L->reserved_shared; w && *w; w++)
    if (strcmp(name, *w) == 0) return true;
  for (const char *const *w = L->reserved; w && *w; w++)
    if (strcmp(name, *w) == 0) return true;
  for (const char *const *w = L->reserved_prefixes; w && *w; w++)
    if (strncmp(name, *w, strlen(*w)) == 0) return true;
  return false;
}

const char *cg_ident(const cg_lang *L, rx_arena *a, const char *name) {
  const unsigned char *s = (const unsigned char *)name;
  bool plain = ident_alnum(s[0]) && !(s[0] >= '0' && s[0] <= '9');
  for (size_t i = 0; plain && s[i]; i++)
    plain = ident_alnum(s[i]) || (s[i] == '_' && s[i + 1] != '_');
  if (plain && strncmp(name, "rx_", 3) != 0 && !cg_is_reserved(L, name)) return name;
  rx_strbuf b = {0};
  if (plain) {
    base_strbuf_printf(&b, "rx_u_%s", name);
  } else {
    base_strbuf_append(&b, "rx_x");
    for (size_t i = 0; s[i]; i++)
      if (ident_alnum(s[i]))
        base_strbuf_putc(&b, (char)s[i]);
      else
        base_strbuf_printf(&b, "_%02x", s[i]);
  }
  const char *r = base_arena_strdup(a, b.data);
  base_strbuf_free(&b);
  return r;
}

const char *cg_name(cg_printer *p, const char *name) { return cg_ident(p->L, &p->m->arena, name); }

void cg_indent(cg_printer *p, rx_strbuf *o) {
  for (int i = 0; i < p->indent; i++) base_strbuf_append(o, "  ");
}

void cg_error(cg_printer *p, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  p->failed = true;
  base_diag_vreport(p->diag, RX_DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
}

static bool is_float(rx_dtype t) { return ir_dtype_is_float(t); }
static bool is_unsigned(rx_dtype t) { return ir_dtype_is_int(t) && !ir_dtype_is_signed(t); }
static bool via_f32(cg_printer *p, rx_dtype t) { return p->L->to_f32[t] != NULL; }
static bool arith_f32(cg_printer *p, rx_dtype t) { return p->L->arith_via_f32[t]; }
static const char *tname(cg_printer *p, rx_dtype t) {
  p->uses[t] = true;
  if (!p->L->types[t]) {
    if (!p->failed)
      cg_error(p, p->ck->loc, "kernel '%s': %s has no type in %s%s", p->ck->k->name,
               ir_dtype_name(t), cg_lang_name(p->L->lang),
               t == RX_DTYPE_BF16  ? " (no bf16 arithmetic in GLSL; use f16 or f32 on Vulkan)"
               : t == RX_DTYPE_F64 ? " (Metal has no double; use f32 on Metal)"
                                   : "");
    return "void";
  }
  return p->L->types[t];
}

/* ---- literals and casts ------------------------------------------------------------------ */

static void lit_float(cg_printer *p, rx_strbuf *o, double v, rx_dtype t);

static void lit_int(cg_printer *p, rx_strbuf *o, int64_t v, rx_dtype t) {
  const cg_lang *L = p->L;
  if (t == RX_DTYPE_BOOL) {
    base_strbuf_append(o, v ? "true" : "false");
    return;
  }
  if (is_float(t)) {
    lit_float(p, o, (double)v, t);
    return;
  }
  char num[48];
  if (t == RX_DTYPE_U8 || t == RX_DTYPE_U16) /* wrapped to t's width: GLSL's int holds it */
    v &= t == RX_DTYPE_U8 ? 0xff : 0xffff;
  if (t == RX_DTYPE_U32 || t == RX_DTYPE_U64) { /* wrapped to t's width, written unsigned */
    uint64_t u = t == RX_DTYPE_U64 ? (uint64_t)v : (uint64_t)v & 0xffffffffu;
    p->uses[t] = true;
    base_strbuf_printf(o, "%llu%s", (unsigned long long)u, t == RX_DTYPE_U64 ? L->u64_suffix : "u");
    return;
  }
  if (v == INT64_MIN)
    snprintf(num, sizeof num, "(-9223372036854775807%s - 1%s)", L->i64_suffix, L->i64_suffix);
  else if (v < 0)
    snprintf(num, sizeof num, "(%lld%s)", (long long)v, t == RX_DTYPE_I64 ? L->i64_suffix : "");
  else
    snprintf(num, sizeof num, "%lld%s", (long long)v, t == RX_DTYPE_I64 ? L->i64_suffix : "");
  if (t == RX_DTYPE_I32 || t == RX_DTYPE_I64) {
    if (t == RX_DTYPE_I64) p->uses[t] = true;
    base_strbuf_append(o, num);
  } else if (L->c_casts) {
    base_strbuf_printf(o, "((%s)%s)", tname(p, t), num);
  } else {
    base_strbuf_printf(o, "%s(%s)", tname(p, t), num);
  }
}

static void lit_float(cg_printer *p, rx_strbuf *o, double v, rx_dtype t) {
  const cg_lang *L = p->L;
  if (!is_float(t)) {
    lit_int(p, o, (int64_t)v, t);
    return;
  }
  float f = (float)v;
  char num[64];
  if (t == RX_DTYPE_F64 && isfinite(v)) { /* every digit of the double (GLSL: suffix lf) */
    char g[40];
    snprintf(g, sizeof g, "%.17g", v);
    if (!strpbrk(g, ".e")) strcat(g, ".0");
    base_strbuf_printf(o, v < 0 || (v == 0 && signbit(v)) ? "(%s%s)" : "%s%s", g, L->f64_suffix);
    p->uses[t] = true;
    return;
  }
  if (t == RX_DTYPE_F64) f = isnan(v) ? NAN : (float)v; /* inf and nan: as f32, converted below */
  if (isnan(f) || isinf(f)) {
    uint32_t bits = isnan(f) ? 0x7fc00000u : (f > 0 ? 0x7f800000u : 0xff800000u);
    char hex[16];
    snprintf(hex, sizeof hex, "0x%08xu", bits);
    snprintf(num, sizeof num, L->f32_bits, hex);
  } else {
    char g[40];
    snprintf(g, sizeof g, "%.9g", (double)f);
    if (!strpbrk(g, ".e")) strcat(g, ".0");
    snprintf(num, sizeof num, f < 0 || (f == 0 && signbit(f)) ? "(%s%s)" : "%s%s", g,
             L->f32_suffix);
  }
  if (t == RX_DTYPE_F32)
    base_strbuf_append(o, num);
  else if (L->from_f32[t]) {
    p->uses[t] = true;
    base_strbuf_printf(o, L->from_f32[t], num);
  } else
    base_strbuf_printf(o, "%s(%s)", tname(p, t), num);
}

/* A plain conversion between numeric types the language converts directly. */
static void plain_cast(cg_printer *p, rx_strbuf *o, rx_dtype to, const char *s) {
  if (p->L->c_casts)
    base_strbuf_printf(o, "((%s)(%s))", tname(p, to), s);
  else
    base_strbuf_printf(o, "%s(%s)", tname(p, to), s);
}

/* cg_lang.i64_by_halves: rx_i64(x), x's bits below its sign word's */
static void need_i64_halves(cg_printer *p) {
  if (p->need[CG_NEED_I64_HALVES]) return;
  p->need[CG_NEED_I64_HALVES] = true;
  p->uses[RX_DTYPE_I64] = true; /* its int64_t needs the language's 64-bit integer types */
  base_strbuf_printf(&p->helpers,
                     "%sint64_t rx_i64(int x) {\n"
                     "  return packInt2x32(ivec2(x, x >> 31));\n"
                     "}\n",
                     p->L->fn_prefix);
}

static void pcast(cg_printer *p, rx_strbuf *o, rx_dtype from, rx_dtype to, const char *s) {
  const cg_lang *L = p->L;
  if (from == to) {
    base_strbuf_append(o, s);
    return;
  }
  rx_strbuf tmp = {0};
  if (to == RX_DTYPE_BOOL) {
    if (via_f32(p, from)) {
      base_strbuf_printf(&tmp, L->to_f32[from], s);
      base_strbuf_printf(o, "(%s != 0.0%s)", tmp.data, L->f32_suffix);
    } else {
      base_strbuf_printf(o, "(%s != ", s);
      lit_int(p, o, 0, from);
      base_strbuf_putc(o, ')');
    }
  } else if (from == RX_DTYPE_BOOL) {
    base_strbuf_printf(o, "(%s ? ", s);
    lit_int(p, o, 1, to);
    base_strbuf_append(o, " : ");
    lit_int(p, o, 0, to);
    base_strbuf_putc(o, ')');
  } else if (via_f32(p, from) || via_f32(p, to)) {
    /* through f32: exact for f16/bf16 -> f32, rounds once going down */
    const char *f32s = s;
    if (via_f32(p, from)) {
      p->uses[from] = true;
      base_strbuf_printf(&tmp, L->to_f32[from], s);
      f32s = tmp.data;
    } else if (from != RX_DTYPE_F32) {
      plain_cast(p, &tmp, RX_DTYPE_F32, s);
      f32s = tmp.data;
    }
    if (to == RX_DTYPE_F32)
      base_strbuf_append(o, f32s);
    else if (via_f32(p, to)) {
      p->uses[to] = true;
      base_strbuf_printf(o, L->from_f32[to], f32s);
    } else
      plain_cast(p, o, to, f32s);
  } else if (L->i64_by_halves && from == RX_DTYPE_I32 && to == RX_DTYPE_I64) {
    need_i64_halves(p);
    base_strbuf_printf(o, "rx_i64(%s)", s);
  } else {
    plain_cast(p, o, to, s);
  }
  base_strbuf_free(&tmp);
}

/* ---- symbolic (index) expressions -------------------------------------------------------- */

static bool is_scalar_var(cg_printer *p, const rx_expr *v) {
  for (int i = 0; i < p->ck->k->nargs; i++)
    if (p->ck->k->args[i].kind == RX_KARG_SCALAR && p->ck->k->args[i].var == v) return true;
  return false;
}

static void ps(cg_printer *p, rx_strbuf *o, const rx_expr *e, int min);
static bool vec_opaque_ref(cg_printer *p, rx_strbuf *o, const rx_expr *e);
static void pt_index(cg_printer *p, rx_strbuf *o, const rx_tx *e);
static void ps_bool(cg_printer *p, rx_strbuf *o, const rx_expr *e, int min);

static bool is_boolish(const rx_expr *e) { return e->kind >= RX_EXPR_EQ && e->kind <= RX_EXPR_NOT; }

static const char *helper_name(cg_printer *p, bool mod, rx_dtype t);

/* Integer context: a comparison or logic node becomes 0/1. */
static void ps_int(cg_printer *p, rx_strbuf *o, const rx_expr *e, int min) {
  if (is_boolish(e)) {
    base_strbuf_append(o, "(");
    ps_bool(p, o, e, RX_PREC_OR);
    base_strbuf_append(o, " ? 1 : 0)");
    return;
  }
  ps(p, o, e, min);
}

static void ps_bool(cg_printer *p, rx_strbuf *o, const rx_expr *e, int min) {
  if (e->kind == RX_EXPR_CONST) {
    base_strbuf_append(o, e->value ? "true" : "false");
  } else if (is_boolish(e)) {
    ps(p, o, e, min);
  } else {
    if (min > RX_PREC_CMP) base_strbuf_putc(o, '(');
    ps(p, o, e, RX_PREC_ADD);
    base_strbuf_append(o, " != 0");
    if (min > RX_PREC_CMP) base_strbuf_putc(o, ')');
  }
}

static int64_t pow2_log(int64_t c) {
  if (c <= 0 || (c & (c - 1))) return -1;
  int64_t k = 0;
  while ((1LL << k) != c) k++;
  return k;
}

static bool nonneg(cg_printer *p, const rx_expr *e) {
  rx_interval r = sym_analyzer_bounds(p->an, e);
  return r.lo >= 0;
}

static void ps(cg_printer *p, rx_strbuf *o, const rx_expr *e, int min) {
  const cg_lang *L = p->L;
  int prec = e->kind == RX_EXPR_CONST && e->value < 0 ? RX_PREC_UNARY : sym_expr_kind_prec(e->kind);
  /* floordiv / floormod decide their form first */
  int fd_form = 0; /* 1: '/' or '%', 2: shift / mask, 3: helper */
  int64_t k2 = -1;
  if (e->kind == RX_EXPR_FLOORDIV || e->kind == RX_EXPR_FLOORMOD) {
    bool bpos =
        e->b->kind == RX_EXPR_CONST ? e->b->value > 0 : sym_analyzer_bounds(p->an, e->b).lo >= 1;
    if (bpos && nonneg(p, e->a))
      fd_form = 1;
    else if (e->b->kind == RX_EXPR_CONST && (k2 = pow2_log(e->b->value)) >= 0)
      fd_form = 2, prec = RX_PREC_ATOM;
    else
      fd_form = 3, prec = RX_PREC_ATOM;
  }
  bool paren = prec < min;
  if (paren) base_strbuf_putc(o, '(');
  switch (e->kind) {
  case RX_EXPR_CONST: {
    int64_t v = e->value;
    bool wide = v > 2147483647LL || v < -2147483647LL - 1;
    if (v == INT64_MIN)
      base_strbuf_printf(o, "(-9223372036854775807%s - 1)", L->i64_suffix);
    else
      base_strbuf_printf(o, "%lld%s", (long long)v, wide ? L->i64_suffix : "");
    break;
  }
  case RX_EXPR_VAR:
    if (e->name[0] == '%' && vec_opaque_ref(p, o, e)) break;
    if (is_scalar_var(p, e))
      L->scalar_ref(p, o, cg_name(p, e->name));
    else
      base_strbuf_append(o, cg_name(p, e->name));
    break;
  case RX_EXPR_ADD: {
    ps_int(p, o, e->a, RX_PREC_ADD);
    const rx_expr *b = e->b;
    if (b->kind == RX_EXPR_CONST && b->value < 0 && b->value != INT64_MIN) {
      base_strbuf_printf(o, " - %lld", -(long long)b->value);
    } else if (b->kind == RX_EXPR_MUL && b->b->kind == RX_EXPR_CONST && b->b->value < 0 &&
               b->b->value != INT64_MIN) {
      base_strbuf_append(o, " - ");
      ps_int(p, o, b->a, RX_PREC_MUL);
      if (b->b->value != -1) base_strbuf_printf(o, " * %lld", -(long long)b->b->value);
    } else {
      base_strbuf_append(o, " + ");
      ps_int(p, o, b, RX_PREC_MUL);
    }
    break;
  }
  case RX_EXPR_SUB:
    ps_int(p, o, e->a, RX_PREC_ADD);
    base_strbuf_append(o, " - ");
    ps_int(p, o, e->b, RX_PREC_MUL);
    break;
  case RX_EXPR_MUL:
    ps_int(p, o, e->a, RX_PREC_MUL);
    base_strbuf_append(o, " * ");
    ps_int(p, o, e->b, RX_PREC_UNARY);
    break;
  case RX_EXPR_FLOORDIV:
  case RX_EXPR_FLOORMOD: {
    bool mod = e->kind == RX_EXPR_FLOORMOD;
    if (fd_form == 1) {
      ps_int(p, o, e->a, RX_PREC_MUL);
      base_strbuf_append(o, mod ? " % " : " / ");
      ps_int(p, o, e->b, RX_PREC_UNARY);
    } else if (fd_form == 2) {
      base_strbuf_putc(o, '(');
      ps_int(p, o, e->a, RX_PREC_ADD);
      if (mod)
        base_strbuf_printf(o, " & %lld)", (long long)(e->b->value - 1));
      else
        base_strbuf_printf(o, " >> %lld)", (long long)k2);
    } else {
      base_strbuf_printf(o, "%s(",
                         helper_name(p, mod, p->ck->k->index64 ? RX_DTYPE_I64 : RX_DTYPE_I32));
      ps_int(p, o, e->a, RX_PREC_OR);
      base_strbuf_append(o, ", ");
      ps_int(p, o, e->b, RX_PREC_OR);
      base_strbuf_putc(o, ')');
    }
    break;
  }
  case RX_EXPR_MIN:
  case RX_EXPR_MAX:
    /* min/max are overloaded functions: in a kernel of 64-bit indices a literal operand is
     * written 64-bit too, or min(long long, int) is ambiguous (CUDA, MSL) */
    base_strbuf_printf(o, "%s(", sym_expr_kind_text(e->kind));
    for (int k = 0; k < 2; k++) {
      const rx_expr *x = k ? e->b : e->a;
      if (k) base_strbuf_append(o, ", ");
      if (x->kind == RX_EXPR_CONST && x->value != INT64_MIN && p->ck->k->index64)
        base_strbuf_printf(o, "%s%lld%s%s", x->value < 0 ? "(" : "", (long long)x->value,
                           L->i64_suffix, x->value < 0 ? ")" : "");
      else
        ps_int(p, o, x, RX_PREC_OR);
    }
    base_strbuf_putc(o, ')');
    break;
  case RX_EXPR_EQ:
  case RX_EXPR_NE:
  case RX_EXPR_LT:
  case RX_EXPR_LE:
  case RX_EXPR_GT:
  case RX_EXPR_GE: {
    ps_int(p, o, e->a, RX_PREC_ADD);
    base_strbuf_printf(o, " %s ", sym_expr_kind_text(e->kind));
    ps_int(p, o, e->b, RX_PREC_ADD);
    break;
  }
  case RX_EXPR_AND:
  case RX_EXPR_OR:
    ps_bool(p, o, e->a, prec);
    base_strbuf_printf(o, " %s ", sym_expr_kind_text(e->kind));
    ps_bool(p, o, e->b, prec + 1);
    break;
  case RX_EXPR_NOT:
    base_strbuf_putc(o, '!');
    ps_bool(p, o, e->a, RX_PREC_ATOM);
    break;
  case RX_EXPR_SELECT:
    base_strbuf_putc(o, '(');
    ps_bool(p, o, e->a, RX_PREC_OR);
    base_strbuf_append(o, " ? ");
    ps_int(p, o, e->b, RX_PREC_OR);
    base_strbuf_append(o, " : ");
    ps_int(p, o, e->c, RX_PREC_OR);
    base_strbuf_putc(o, ')');
    break;
  default:
    RX_ASSERT(!"bad expression kind");
  }
  if (paren) base_strbuf_putc(o, ')');
}

/* An index expression, simplified with the facts in scope. */
static void pidx(cg_printer *p, rx_strbuf *o, const rx_expr *e) {
  ps_int(p, o, sym_analyzer_simplify(p->an, e), RX_PREC_OR);
}

/* ---- helpers emitted once per kernel ----------------------------------------------------- */

static const char *helper_name(cg_printer *p, bool mod, rx_dtype t) {
  const cg_lang *L = p->L;
  int key = t == RX_DTYPE_I64 ? CG_NEED_FLOORDIV_I64 : CG_NEED_FLOORDIV_I32;
  if (!p->need[key]) {
    p->need[key] = true;
    const char *T = tname(p, t);
    rx_strbuf *h = &p->helpers;
    base_strbuf_printf(h, "%s%s rx_floordiv(%s a, %s b) {\n  %s q = a / b;\n", L->fn_prefix, T, T,
                       T, T);
    base_strbuf_append(h, "  return (q * b != a && ((a < ");
    lit_int(p, h, 0, t);
    base_strbuf_append(h, ") != (b < ");
    lit_int(p, h, 0, t);
    base_strbuf_append(h, "))) ? q - ");
    lit_int(p, h, 1, t);
    base_strbuf_append(h, " : q;\n}\n");
    base_strbuf_printf(h, "%s%s rx_floormod(%s a, %s b) {\n  %s r = a %% b;\n", L->fn_prefix, T, T,
                       T, T);
    base_strbuf_append(h, "  return (r != ");
    lit_int(p, h, 0, t);
    base_strbuf_append(h, " && ((r < ");
    lit_int(p, h, 0, t);
    base_strbuf_append(h, ") != (b < ");
    lit_int(p, h, 0, t);
    base_strbuf_append(h, "))) ? r + b : r;\n}\n");
  }
  return mod ? "rx_floormod" : "rx_floordiv";
}

static void need_erf(cg_printer *p) {
  if (p->need[CG_NEED_ERF]) return;
  p->need[CG_NEED_ERF] = true;
  const cg_lang *L = p->L;
  const char *abs_ = L->math[RX_INTRIN_ABS], *exp_ = L->math[RX_INTRIN_EXP];
  base_strbuf_printf(
      &p->helpers,
      "/* erf: Taylor series for |x| < 0.5 (relative error < 1e-7), Abramowitz-Stegun 7.1.26\n"
      "   above (absolute error < 1.5e-7) */\n"
      "%sfloat rx_erf(float x) {\n"
      "  float ax = %s(x);\n"
      "  if (ax < 0.5f) {\n"
      "    float x2 = x * x;\n"
      "    return x * (1.12837917f + x2 * (-0.376126389f + x2 * (0.112837917f + x2 * "
      "(-0.0268661706f + x2 * (0.00522397762f + x2 * -0.000854832702f)))));\n"
      "  }\n"
      "  float t = 1.0f / (1.0f + 0.3275911f * ax);\n"
      "  float y = 1.0f - ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - "
      "0.284496736f) * t + 0.254829592f) * t * %s(-ax * ax);\n"
      "  return x < 0.0f ? -y : y;\n"
      "}\n",
      L->fn_prefix, abs_, exp_);
}

/* asin(x) as atan(x, sqrt((1 - x)(1 + x))): for GLSL, whose asin Vulkan lets be as coarse as
 * atan2's bound (lavapipe's is off by 2e-4 near 0.57), while its atan is far closer. */
static void need_asin(cg_printer *p) {
  if (p->need[CG_NEED_ASIN]) return;
  p->need[CG_NEED_ASIN] = true;
  base_strbuf_printf(&p->helpers,
                     "%sfloat rx_asin(float x) {\n"
                     "  return atan(x, sqrt((1.0 - x) * (1.0 + x)));\n"
                     "}\n",
                     p->L->fn_prefix);
}

/* ---- tensor-program expressions ---------------------------------------------------------- */

static void pt(cg_printer *p, rx_strbuf *o, const rx_tx *e);

/* e printed as a value of dtype want (literals written directly in that type). */
static void pt_as(cg_printer *p, rx_strbuf *o, const rx_tx *e, rx_dtype want) {
  if (e->kind == RX_TX_INT) {
    lit_int(p, o, e->ival, want);
    return;
  }
  if (e->kind == RX_TX_FLOAT && is_float(want)) {
    lit_float(p, o, e->fval, want);
    return;
  }
  if (e->dtype == want) {
    pt(p, o, e);
    return;
  }
  rx_strbuf tmp = {0};
  pt(p, &tmp, e);
  pcast(p, o, e->dtype, want, tmp.data ? tmp.data : "");
  base_strbuf_free(&tmp);
}

/* An index given as a tensor-program value (not symbolic): converted to the index type. */
static void pt_index(cg_printer *p, rx_strbuf *o, const rx_tx *e) {
  pt_as(p, o, e, p->ck->k->index64 ? RX_DTYPE_I64 : RX_DTYPE_I32);
}

static void access_index(cg_printer *p, rx_strbuf *o, rx_buffer *b, rx_tx **idx, int n);

static void access(cg_printer *p, rx_strbuf *o, rx_buffer *b, rx_tx **idx, int n) {
  const char *name = NULL;
  for (int i = 0; i < p->ck->nshared; i++)
    if (p->ck->shared[i].buf == b) name = p->ck->shared[i].name;
  base_strbuf_printf(o, "%s[", cg_name(p, name ? name : b->name));
  if (p->ck->k->index64 && p->L->subscript64) {
    rx_strbuf tmp = {0};
    access_index(p, &tmp, b, idx, n);
    base_strbuf_printf(o, p->L->subscript64, tmp.data);
    base_strbuf_free(&tmp);
  } else {
    access_index(p, o, b, idx, n);
  }
  base_strbuf_putc(o, ']');
}

static void access_index(cg_printer *p, rx_strbuf *o, rx_buffer *b, rx_tx **idx, int n) {
  const rx_expr *flat = cg_flat_index(p->m, p->an, b, idx, n);
  if (flat) {
    ps_int(p, o, flat, RX_PREC_OR);
  } else {
    /* mixed: sum of index * stride, strides symbolic */
    rx_expr_ctx *c = p->m->ctx;
    for (int d = 0; d < n; d++) {
      const rx_expr *stride = sym_expr_const(c, 1);
      for (int q = d + 1; q < b->ndim; q++) stride = sym_expr_mul(c, stride, b->shape[q]);
      if (d) base_strbuf_append(o, " + ");
      base_strbuf_putc(o, '(');
      if (idx[d]->kind == RX_TX_SYM)
        ps_int(p, o, sym_analyzer_simplify(p->an, idx[d]->sym), RX_PREC_OR);
      else
        pt_index(p, o, idx[d]);
      base_strbuf_append(o, ")");
      if (!rx_expr_is_const(stride, 1)) {
        base_strbuf_append(o, " * ");
        ps_int(p, o, sym_analyzer_simplify(p->an, stride), RX_PREC_UNARY);
      }
    }
  }
}

static bool is_cmp(rx_binop op) { return op >= RX_BINOP_EQ && op <= RX_BINOP_GE; }

static void pbinary(cg_printer *p, rx_strbuf *o, const rx_tx *e) {
  const cg_lang *L = p->L;
  rx_binop op = e->binop;
  rx_dtype t = e->dtype; /* operand type */
  if (is_cmp(op)) t = e->a->weak && !e->b->weak ? e->b->dtype : e->a->dtype;
  if (op == RX_BINOP_AND || op == RX_BINOP_OR) t = RX_DTYPE_BOOL;
  if (e->a->kind == RX_TX_SYM && e->b->kind != RX_TX_SYM && !is_cmp(op) && op != RX_BINOP_AND &&
      op != RX_BINOP_OR)
    t = e->b->dtype;
  rx_strbuf a = {0}, b = {0};
  pt_as(p, &a, e->a, t);
  pt_as(p, &b, e->b, t);
  const char *sa = a.data ? a.data : "", *sb = b.data ? b.data : "";
  int64_t k2 = e->b->kind == RX_TX_INT ? pow2_log(e->b->ival)
               : e->b->kind == RX_TX_SYM && e->b->sym->kind == RX_EXPR_CONST
                   ? pow2_log(e->b->sym->value)
                   : -1;
  bool divmod = op == RX_BINOP_FLOORDIV || op == RX_BINOP_FLOORMOD;
  if (divmod && (t == RX_DTYPE_U16 || t == RX_DTYPE_U32 || t == RX_DTYPE_U64)) {
    /* unsigned: floor division and modulo are the language's own / and % (u16 computed in
     * 32 bits, as its + - * are below) */
    rx_strbuf x = {0}, y = {0}, r = {0};
    rx_dtype ht = t == RX_DTYPE_U16 ? RX_DTYPE_U32 : t;
    pcast(p, &x, t, ht, sa);
    pcast(p, &y, t, ht, sb);
    base_strbuf_printf(&r, "(%s %s %s)", x.data, op == RX_BINOP_FLOORDIV ? "/" : "%", y.data);
    pcast(p, o, ht, e->dtype, r.data);
    base_strbuf_free(&x);
    base_strbuf_free(&y);
    base_strbuf_free(&r);
  } else if (divmod && !is_float(t) && t != RX_DTYPE_I64 && k2 >= 0) {
    /* by a power of two 2^k2 in 32 bits: floor division is the arithmetic shift and floor modulo
     * the mask, for negative values too (two's complement; quantized weights' bit fields) */
    rx_strbuf x = {0}, call = {0};
    pcast(p, &x, t, RX_DTYPE_I32, sa);
    if (op == RX_BINOP_FLOORDIV)
      base_strbuf_printf(&call, "(%s >> %lld)", x.data, (long long)k2);
    else
      base_strbuf_printf(&call, "(%s & %lld)", x.data, (long long)((1LL << k2) - 1));
    pcast(p, o, RX_DTYPE_I32, e->dtype, call.data);
    base_strbuf_free(&x);
    base_strbuf_free(&call);
  } else if ((op == RX_BINOP_FLOORDIV || op == RX_BINOP_FLOORMOD) && !is_float(t)) {
    rx_dtype ht = t == RX_DTYPE_I64 ? RX_DTYPE_I64 : RX_DTYPE_I32;
    rx_strbuf x = {0}, y = {0};
    pcast(p, &x, t, ht, sa);
    pcast(p, &y, t, ht, sb);
    rx_strbuf call = {0};
    base_strbuf_printf(&call, "%s(%s, %s)", helper_name(p, op == RX_BINOP_FLOORMOD, ht), x.data,
                       y.data);
    pcast(p, o, ht, e->dtype, call.data);
    base_strbuf_free(&x);
    base_strbuf_free(&y);
    base_strbuf_free(&call);
  } else if (arith_f32(p, t) && op != RX_BINOP_AND && op != RX_BINOP_OR) {
    rx_strbuf x = {0};
    base_strbuf_append(&x, "(");
    base_strbuf_printf(&x, L->to_f32[t], sa);
    base_strbuf_printf(&x, " %s ", ir_binop_name(op));
    base_strbuf_printf(&x, L->to_f32[t], sb);
    base_strbuf_append(&x, ")");
    if (is_cmp(op))
      base_strbuf_append(o, x.data);
    else
      base_strbuf_printf(o, L->from_f32[t], x.data);
    base_strbuf_free(&x);
  } else if (L->c_casts && !is_cmp(op) && t == RX_DTYPE_U16) {
    /* u16 in C: promoted to int, where u16 * u16 can overflow; computed in unsigned int */
    const char *U = tname(p, RX_DTYPE_U32);
    base_strbuf_printf(o, "((%s)((%s)(%s) %s (%s)(%s)))", tname(p, t), U, sa, ir_binop_name(op), U,
                       sb);
  } else {
    const char *opname = ir_binop_name(op);
    bool narrow =
        L->c_casts && !is_cmp(op) && (t == RX_DTYPE_I8 || t == RX_DTYPE_I16 || t == RX_DTYPE_U8);
    if (narrow) base_strbuf_printf(o, "((%s)", tname(p, t));
    base_strbuf_printf(o, "(%s %s %s)", sa, opname, sb);
    if (narrow) base_strbuf_putc(o, ')');
  }
  base_strbuf_free(&a);
  base_strbuf_free(&b);
}

/* A float intrinsic computed in f32 on printed f32 operands (f64: in f64 with the language's
 * math_f64 functions). */
static void fmath(cg_printer *p, rx_strbuf *o, rx_intrinsic f, const char **args, bool f64) {
  const cg_lang *L = p->L;
  const char *sfx = f64 ? L->f64_suffix : L->f32_suffix;
  const char *const *math = f64 ? L->math_f64 : L->math;
  switch (f) {
  case RX_INTRIN_SIGMOID:
    base_strbuf_printf(o, "(1.0%s / (1.0%s + %s(-(%s))))", sfx, sfx, math[RX_INTRIN_EXP], args[0]);
    return;
  case RX_INTRIN_ERF:
    if (!L->has_erf) {
      need_erf(p);
      base_strbuf_printf(o, "rx_erf(%s)", args[0]);
      return;
    }
    break;
  case RX_INTRIN_ASIN:
    if (!math[f]) {
      need_asin(p);
      base_strbuf_printf(o, "rx_asin(%s)", args[0]);
      return;
    }
    break;
  default:
    break;
  }
  int n = ir_intrinsic_arity(f);
  base_strbuf_printf(o, "%s(", math[f]);
  for (int i = 0; i < n; i++) base_strbuf_printf(o, "%s%s", i ? ", " : "", args[i]);
  base_strbuf_putc(o, ')');
}

/* The helper of run-time checks: where ok is false, the check's code and v's two words go to the
 * error buffer (docs/kernel-abi.md, "Run-time checks"); v is the value. A rare store, no atomics:
 * of several failing threads one's words are kept (a mix of two only when both fail at once). */
static void need_check(cg_printer *p) {
  if (p->need[CG_NEED_CHECK]) return;
  p->need[CG_NEED_CHECK] = true;
  const cg_lang *L = p->L;
  const char *i64 = tname(p, RX_DTYPE_I64),
             *e = L->check_buf ? "rx_e" : cg_name(p, RX_KARG_ERROR_NAME);
  p->uses[RX_DTYPE_I64] = true;
  base_strbuf_printf(&p->helpers, "%s%s rx_check(bool ok, %s v, int code", L->fn_prefix, i64, i64);
  if (L->check_buf) base_strbuf_printf(&p->helpers, ", %s rx_e", L->check_buf);
  base_strbuf_printf(&p->helpers,
                     ") {\n"
                     "  if (!ok) {\n"
                     "    %s[0] = code;\n"
                     "    %s[1] = %s;\n"
                     "    %s[2] = %s;\n"
                     "  }\n"
                     "  return v;\n"
                     "}\n",
                     e, e, L->c_casts ? "(int)(v)" : "int(v)", e,
                     L->c_casts ? "(int)(v >> 32)" : "int(v >> 32)");
}

static void pcheck(cg_printer *p, rx_strbuf *o, const rx_tx *e) {
  need_check(p);
  rx_strbuf ok = {0}, v = {0}, r = {0};
  pt_as(p, &ok, e->a, RX_DTYPE_BOOL);
  pt_as(p, &v, e->b, RX_DTYPE_I64);
  base_strbuf_printf(&r, "rx_check(%s, %s, %d", ok.data, v.data,
                     (int)base_check_code(e->msg ? e->msg : ""));
  if (p->L->check_buf) base_strbuf_printf(&r, ", %s", cg_name(p, RX_KARG_ERROR_NAME));
  base_strbuf_putc(&r, ')');
  pcast(p, o, RX_DTYPE_I64, e->dtype, r.data);
  base_strbuf_free(&ok);
  base_strbuf_free(&v);
  base_strbuf_free(&r);
}

static void pcall(cg_printer *p, rx_strbuf *o, const rx_tx *e) {
  const cg_lang *L = p->L;
  rx_intrinsic f = e->intrin;
  rx_dtype t = e->dtype;
  const rx_tx *argv[3] = {e->a, e->b, e->c};
  int n = ir_intrinsic_arity(f);
  if (ir_intrinsic_kind(f) == 'c') {
    pcheck(p, o, e);
    return;
  }
  if (ir_intrinsic_kind(f) == 's') {
    rx_strbuf x = {0}, mk = {0};
    pt_as(p, &x, e->a, t);
    if (e->b) pt_as(p, &mk, e->b, RX_DTYPE_I32);
    L->subgroup(p, o, f, t, x.data ? x.data : "", e->b ? (mk.data ? mk.data : "0") : NULL);
    base_strbuf_free(&x);
    base_strbuf_free(&mk);
    return;
  }
  if (!is_float(t)) {
    /* integer abs / min / max, in int or the 64-bit type; u32/u64 in their own type (u16 in
     * u32): an unsigned abs is the value */
    rx_dtype ht = t == RX_DTYPE_I64 || t == RX_DTYPE_U64   ? t
                  : t == RX_DTYPE_U16 || t == RX_DTYPE_U32 ? RX_DTYPE_U32
                                                           : RX_DTYPE_I32;
    rx_strbuf s[2] = {{0}, {0}}, call = {0};
    for (int i = 0; i < n && i < 2; i++) {
      rx_strbuf tmp = {0};
      if (argv[i]->kind == RX_TX_SYM && argv[i]->sym->kind == RX_EXPR_CONST) {
        /* a constant in the call's own type: min(x, 9) with x 64-bit has one overload */
        lit_int(p, &s[i], argv[i]->sym->value, ht);
        continue;
      }
      pt_as(p, &tmp, argv[i], t);
      pcast(p, &s[i], t, ht, tmp.data);
      base_strbuf_free(&tmp);
    }
    if (f == RX_INTRIN_ABS && is_unsigned(ht))
      base_strbuf_append(&call, s[0].data);
    else if (f == RX_INTRIN_ABS)
      base_strbuf_printf(&call, "%s(%s)", ht == RX_DTYPE_I64 ? L->i64_abs : L->int_abs, s[0].data);
    else if (f == RX_INTRIN_MIN || f == RX_INTRIN_MAX)
      base_strbuf_printf(&call, "%s(%s, %s)", f == RX_INTRIN_MIN ? L->int_min : L->int_max,
                         s[0].data, s[1].data);
    else
      cg_error(p, e->loc, "intrinsic '%s' needs a float operand", ir_intrinsic_name(f));
    if (call.data) pcast(p, o, ht, t, call.data);
    base_strbuf_free(&s[0]);
    base_strbuf_free(&s[1]);
    base_strbuf_free(&call);
    return;
  }
  /* floats: f32 directly; f16/bf16 converted to f32, computed, rounded once; f64 in f64 where
   * the language has the function in double (math_f64), else through f32 like f16 (GLSL's exp,
   * log, sin, ...: f32 precision, docs/targets.md) */
  bool f64 = t == RX_DTYPE_F64 && L->math_f64[f == RX_INTRIN_SIGMOID ? RX_INTRIN_EXP : f] &&
             (f != RX_INTRIN_ERF || L->has_erf);
  rx_dtype ct = f64 ? RX_DTYPE_F64 : RX_DTYPE_F32; /* computed in */
  rx_strbuf s[3] = {{0}, {0}, {0}};
  const char *sv[3] = {"", "", ""};
  for (int i = 0; i < n; i++) {
    rx_strbuf tmp = {0};
    pt_as(p, &tmp, argv[i], t);
    pcast(p, &s[i], t, ct, tmp.data);
    sv[i] = s[i].data;
    base_strbuf_free(&tmp);
  }
  if (t == ct) {
    fmath(p, o, f, sv, f64);
  } else {
    rx_strbuf r = {0};
    fmath(p, &r, f, sv, false);
    pcast(p, o, RX_DTYPE_F32, t, r.data);
    base_strbuf_free(&r);
  }
  for (int i = 0; i < 3; i++) base_strbuf_free(&s[i]);
}

static bool vec_lane_ref(cg_printer *p, rx_strbuf *o, const void *node);

static void pt(cg_printer *p, rx_strbuf *o, const rx_tx *e) {
  const cg_lang *L = p->L;
  switch (e->kind) {
  case RX_TX_INT:
    lit_int(p, o, e->ival, e->dtype);
    break;
  case RX_TX_FLOAT:
    lit_float(p, o, e->fval, e->dtype);
    break;
  case RX_TX_SYM: {
    /* an operand of the value expressions around it (pbinary prints "(a op b)" with the
     * operands as they come): a compound one in parentheses, or i * (w / 2) printed as
     * i * w / 2 */
    const rx_expr *s = sym_analyzer_simplify(p->an, e->sym);
    if (e->dtype == RX_DTYPE_BOOL) {
      ps_bool(p, o, s, RX_PREC_UNARY);
    } else if (p->ck->k->index64) {
      ps_int(p, o, s, RX_PREC_UNARY);
    } else {
      rx_strbuf tmp = {0};
      ps_int(p, &tmp, s, RX_PREC_OR);
      pcast(p, o, RX_DTYPE_I32, e->dtype, tmp.data);
      base_strbuf_free(&tmp);
    }
    break;
  }
  case RX_TX_LOCAL:
    base_strbuf_append(o, cg_name(p, e->local->name));
    break;
  case RX_TX_LOAD: {
    p->uses[e->buf->dtype] = true;
    if (p->vloop && vec_lane_ref(p, o, e)) break;
    bool glob = cg_param_of(p->ck->fn, e->buf) >= 0;
    if (glob && L->storage[e->dtype]) { /* bool stored as bytes */
      rx_strbuf tmp = {0};
      access(p, &tmp, e->buf, e->idx, e->nidx);
      base_strbuf_printf(o, "(%s != %s(0))", tmp.data, L->storage[e->dtype]);
      base_strbuf_free(&tmp);
    } else {
      access(p, o, e->buf, e->idx, e->nidx);
    }
    break;
  }
  case RX_TX_BINARY:
    pbinary(p, o, e);
    break;
  case RX_TX_NEG:
    if (arith_f32(p, e->dtype)) {
      rx_strbuf x = {0}, y = {0};
      pt(p, &x, e->a);
      base_strbuf_append(&y, "(-");
      base_strbuf_printf(&y, L->to_f32[e->dtype], x.data);
      base_strbuf_append(&y, ")");
      base_strbuf_printf(o, L->from_f32[e->dtype], y.data);
      base_strbuf_free(&x);
      base_strbuf_free(&y);
    } else {
      base_strbuf_append(o, "(-");
      pt_as(p, o, e->a, e->dtype);
      base_strbuf_putc(o, ')');
    }
    break;
  case RX_TX_NOT:
    base_strbuf_append(o, "(!");
    pt_as(p, o, e->a, RX_DTYPE_BOOL);
    base_strbuf_putc(o, ')');
    break;
  case RX_TX_SELECT:
    base_strbuf_putc(o, '(');
    pt_as(p, o, e->a, RX_DTYPE_BOOL);
    base_strbuf_append(o, " ? ");
    pt_as(p, o, e->b, e->dtype);
    base_strbuf_append(o, " : ");
    pt_as(p, o, e->c, e->dtype);
    base_strbuf_putc(o, ')');
    break;
  case RX_TX_CAST: {
    rx_strbuf tmp = {0};
    pt(p, &tmp, e->a);
    pcast(p, o, e->a->dtype, e->dtype, tmp.data ? tmp.data : "");
    base_strbuf_free(&tmp);
    break;
  }
  case RX_TX_CALL:
    pcall(p, o, e);
    break;
  case RX_TX_HAS_FRAG: /* lowering refuses it (lower.c) */
    cg_error(p, e->loc, "has_fragments(...) cannot be printed: scheduling decides it");
    break;
  }
}

/* ---- statements -------------------------------------------------------------------------- */

static void pstmt(cg_printer *p, rx_strbuf *o, rx_stmt *s);
static void pblock(cg_printer *p, rx_strbuf *o, rx_stmt *s);

/* ---- vectorized loops (passes/schedule.h, "VECTORIZED LOOPS") ----------------------------
 *
 * `for v in 0..L vectorize { body }` prints as
 *
 *   {
 *     T rx_v0[L];                      one lane array per vector access
 *     { const uint4 rx_w = ...; rx_v0[0] = <lane 0 of rx_w>; ... }   loads, before lane 0
 *     #pragma unroll
 *     for (int v = 0; v < L; ++v) { ... rx_v0[v] ... rx_v1[v] = ...; }   per lane, registers
 *     { uint4 rx_w; rx_w.x = <lanes 0, 1>; ...; ... = rx_w; }   stores, after lane L-1
 *   }
 *
 * Memory moves as raw 32-bit words, VEC_CHUNK_BYTES at a time, so one form serves every
 * element type of 32 bits or less: the language's from_bits / to_bits convert an element to and
 * from the low bits of a word, and sub-word lanes are shifts and masks. Which accesses qualify
 * (unconditional, `base + v`, base proven aligned, no hazard) is decided by vec_plan below; the
 * others print as they are inside the unrolled loop. Buffers in global memory qualify everywhere,
 * shared ones where the language can read a shared array as words (shared_vector_ref: CUDA). */

/* One thread's widest access: 16 bytes, a 128-bit load or store (ld.global.v4.u32 on NVIDIA;
 * uvec4 / uint4 elsewhere, the widest vector of 32-bit words in GLSL and MSL). Lanes wider than
 * that are several such accesses. */
#define VEC_CHUNK_BYTES 16
/* Accesses found in one loop body (every load and store, vectorized or not) and vector accesses
 * kept; a body with more prints scalar. Rules emit a handful. */
#define VEC_MAX_USES     64
#define VEC_MAX_ACCESSES 16

typedef struct vec_use {
  const void *node; /* the LOAD (rx_tx) or STORE (rx_stmt) */
  rx_buffer *buf;
  bool store, cond; /* cond: not executed for every lane (inside an if, a select arm, ...) */
  int acc;          /* its vector access in cg_vec_loop.acc, or -1 */
} vec_use;

typedef struct vec_access {
  rx_buffer *buf;
  const rx_karg *arg;  /* the kernel argument; NULL for a shared buffer */
  const rx_expr *base; /* flat offset of lane 0, a multiple of chunk / element bytes */
  bool store;
  int array; /* its lane array: rx_v<array> */
} vec_access;

struct cg_vec_loop {
  const rx_expr *lane;
  int lanes;
  vec_use uses[VEC_MAX_USES];
  int nuses;
  bool overflow;
  const rx_local *lets[VEC_MAX_USES]; /* the locals the body defines (they may vary per lane) */
  int nlets;
  struct {
    const rx_expr *var; /* an opaque variable of vec_index */
    const rx_tx *tx;    /* the index it stands for, printed in its place */
  } opaque[VEC_MAX_USES];
  int nopaque;
  vec_access acc[VEC_MAX_ACCESSES];
  int nacc;
};

static void vec_scan_tx(cg_vec_loop *vl, const rx_tx *e, bool cond);

static void vec_add_use(cg_vec_loop *vl, const void *node, rx_buffer *b, bool store, bool cond) {
  if (vl->nuses == VEC_MAX_USES) {
    vl->overflow = true;
    return;
  }
  vl->uses[vl->nuses++] = (vec_use){node, b, store, cond, -1};
}

static void vec_scan_tx(cg_vec_loop *vl, const rx_tx *e, bool cond) {
  if (!e) return;
  if (e->kind == RX_TX_LOAD) vec_add_use(vl, e, e->buf, false, cond);
  for (int i = 0; i < e->nidx; i++) vec_scan_tx(vl, e->idx[i], cond);
  bool lazy = e->kind == RX_TX_SELECT ||
              (e->kind == RX_TX_BINARY && (e->binop == RX_BINOP_AND || e->binop == RX_BINOP_OR));
  vec_scan_tx(vl, e->a, cond);
  vec_scan_tx(vl, e->b, cond || lazy);
  vec_scan_tx(vl, e->c, cond || lazy);
}

/* Every access of the body; top: the statement runs once per lane, unconditionally. */
static void vec_scan_stmt(cg_vec_loop *vl, const rx_stmt *s, bool top) {
  if (!s) return;
  if (s->kind == RX_STMT_STORE) vec_add_use(vl, s, s->buf, true, !top);
  if (s->kind == RX_STMT_LET) {
    if (vl->nlets == VEC_MAX_USES)
      vl->overflow = true;
    else
      vl->lets[vl->nlets++] = s->local;
  }
  bool nested = s->kind == RX_STMT_IF || s->kind == RX_STMT_FOR || s->kind == RX_STMT_REDUCE;
  for (int i = 0; i < s->n; i++) vec_scan_stmt(vl, s->body[i], top && s->kind == RX_STMT_SEQ);
  for (int i = 0; i < s->nidx; i++) vec_scan_tx(vl, s->idx[i], !top);
  vec_scan_tx(vl, s->value, !top);
  vec_scan_stmt(vl, s->inner, top && !nested);
  vec_scan_stmt(vl, s->init, false);
  vec_scan_stmt(vl, s->otherwise, false);
}

static const rx_karg *karg_of(cg_printer *p, const rx_buffer *b) {
  int param = cg_param_of(p->ck->fn, b);
  for (int i = 0; param >= 0 && i < p->ck->k->nargs; i++)
    if (p->ck->k->args[i].kind == RX_KARG_BUFFER && p->ck->k->args[i].param == param)
      return &p->ck->k->args[i];
  return NULL;
}

static int vec_elem_bytes(const cg_printer *p, rx_dtype t) {
  if (!p->L->from_bits[t] || !p->L->to_bits[t]) return 0;
  int bytes = ir_dtype_bits(t) / 8;
  return bytes == 1 || bytes == 2 || bytes == 4 ? bytes : 0;
}

/* Index i of an access as an expression for the alignment proof: a symbolic index as it is; an
 * integer local defined outside the loop body (an index loaded before the loop, such as a page
 * id; possibly under an integer cast) as an opaque variable of its own, the same in every lane:
 * any integer, so only what holds for every value is proven (a multiple of a constant row width
 * stays one). NULL for anything else. */
static const rx_expr *vec_index(cg_printer *p, cg_vec_loop *vl, const rx_tx *i) {
  rx_expr_ctx *c = p->m->ctx;
  const rx_tx *whole = i;
  if (i->kind == RX_TX_SYM) return i->sym;
  if (i->kind == RX_TX_INT) return sym_expr_const(c, i->ival);
  while (i->kind == RX_TX_CAST && ir_dtype_is_int(i->dtype)) i = i->a;
  if (i->kind != RX_TX_LOCAL || !ir_dtype_is_int(i->local->dtype)) return NULL;
  for (int k = 0; k < vl->nlets; k++)
    if (vl->lets[k] == i->local) return NULL;
  char name[96]; /* '%' keeps it apart from every variable of the program */
  snprintf(name, sizeof name, "%%let.%p", (const void *)i->local);
  const rx_expr *v = sym_expr_var(c, name);
  for (int k = 0; k < vl->nopaque; k++)
    if (vl->opaque[k].var == v) return v;
  if (vl->nopaque == VEC_MAX_USES) return NULL;
  vl->opaque[vl->nopaque].var = v;
  vl->opaque[vl->nopaque++].tx = whole;
  return v;
}

/* Prints the index an opaque variable of vec_index stands for; false for any other variable. */
static bool vec_opaque_ref(cg_printer *p, rx_strbuf *o, const rx_expr *e) {
  const cg_vec_loop *vl = p->vopaque;
  for (int k = 0; vl && k < vl->nopaque; k++)
    if (vl->opaque[k].var == e) {
      base_strbuf_putc(o, '(');
      pt_index(p, o, vl->opaque[k].tx);
      base_strbuf_putc(o, ')');
      return true;
    }
  return false;
}

/* The flat row-major offset of an access for the alignment proof (vec_index), or NULL. */
static const rx_expr *vec_flat(cg_printer *p, cg_vec_loop *vl, const rx_buffer *b,
                               rx_tx *const *idx, int n) {
  rx_expr_ctx *c = p->m->ctx;
  const rx_expr *flat = sym_expr_const(c, 0);
  for (int d = 0; d < n; d++) {
    const rx_expr *i = vec_index(p, vl, idx[d]);
    if (!i) return NULL;
    flat = sym_expr_add(c, sym_expr_mul(c, flat, b->shape[d]), i);
  }
  return sym_analyzer_simplify(p->an, flat);
}

/* The vector access of use u (appended, or merged with a load of the same buffer and base), or
 * -1 when u stays scalar: not contiguous in the lanes, or not provably aligned. */
static int vec_access_of(cg_printer *p, cg_vec_loop *vl, const vec_use *u) {
  const rx_karg *a = karg_of(p, u->buf);
  bool shared = !a && u->buf->scope == RX_SCOPE_SHARED && p->L->shared_vector_ref;
  int S = vec_elem_bytes(p, u->buf->dtype);
  if ((!a && !shared) || !S || vl->lanes * S < 4) return -1;
  rx_tx *const *idx = u->store ? ((const rx_stmt *)u->node)->idx : ((const rx_tx *)u->node)->idx;
  int nidx = u->store ? ((const rx_stmt *)u->node)->nidx : ((const rx_tx *)u->node)->nidx;
  const rx_expr *flat = vec_flat(p, vl, u->buf, idx, nidx);
  if (!flat) return -1;
  const rx_expr *base = sym_analyzer_simplify(p->an, sym_expr_sub(p->m->ctx, flat, vl->lane));
  if (sym_expr_uses_var(base, vl->lane)) return -1;
  int chunk = vl->lanes * S < VEC_CHUNK_BYTES ? vl->lanes * S : VEC_CHUNK_BYTES;
  int64_t k = chunk / S, d = sym_analyzer_divisor(p->an, base);
  rx_expr_ctx *c = p->m->ctx;
  if (d != 0 && d % k != 0 &&
      sym_analyzer_prove(p->an, sym_expr_cmp(c, RX_EXPR_EQ,
                                             sym_expr_floormod(c, base, sym_expr_const(c, k)),
                                             sym_expr_const(c, 0))) != RX_TRUE)
    return -1;
  for (int i = 0; i < vl->nacc; i++)
    if (!u->store && !vl->acc[i].store && vl->acc[i].buf == u->buf && vl->acc[i].base == base)
      return i;
  if (vl->nacc == VEC_MAX_ACCESSES) return -1;
  vl->acc[vl->nacc] = (vec_access){u->buf, a, base, u->store, p->nlane_arrays++};
  return vl->nacc++;
}

/* Decides the vector accesses of loop s (lane range bound in p->an). */
static void vec_plan(cg_printer *p, cg_vec_loop *vl, const rx_stmt *s) {
  vl->lane = s->vars[0];
  vl->lanes = (int)s->extent[0]->value;
  vec_scan_stmt(vl, s->inner, true);
  if (vl->overflow) return;
  for (int i = 0; i < vl->nuses; i++) {
    vec_use *u = &vl->uses[i];
    if (u->cond) continue;
    int nstores = 0, nloads = 0;
    for (int j = 0; j < vl->nuses; j++) {
      if (vl->uses[j].buf != u->buf) continue;
      nstores += vl->uses[j].store;
      nloads += !vl->uses[j].store;
    }
    if (nstores > (u->store ? 1 : 0) || (u->store && nloads > 0)) continue; /* a hazard */
    u->acc = vec_access_of(p, vl, u);
  }
}

/* Word w of rx_w (a vector of `words` words). */
static void vec_word(rx_strbuf *o, int words, int w) {
  if (words == 1)
    base_strbuf_append(o, "rx_w");
  else
    base_strbuf_printf(o, "rx_w.%c", "xyzw"[w]);
}

static int words_log2(int words) { return words == 1 ? 0 : words == 2 ? 1 : 2; }

/* The vector reference of chunk c of access a. */
static void vec_ref(cg_printer *p, rx_strbuf *o, const vec_access *a, int chunk, int c) {
  int S = ir_dtype_bits(a->buf->dtype) / 8;
  rx_expr_ctx *x = p->m->ctx;
  const rx_expr *index = sym_expr_add(
      x, sym_expr_floordiv(x, a->base, sym_expr_const(x, chunk / S)), sym_expr_const(x, c));
  rx_strbuf ix = {0}, sub = {0};
  pidx(p, &ix, index);
  if (p->ck->k->index64 && p->L->subscript64) base_strbuf_printf(&sub, p->L->subscript64, ix.data);
  const char *at = sub.data ? sub.data : ix.data;
  if (!a->arg) {
    p->L->shared_vector_ref(p, o, a->buf, chunk / 4, at, a->store);
  } else {
    p->views[a->arg - p->ck->k->args] |= (unsigned char)(1u << words_log2(chunk / 4));
    p->L->vector_ref(p, o, a->arg, chunk / 4, at, a->store);
  }
  base_strbuf_free(&ix);
  base_strbuf_free(&sub);
}

/* Loads (before the lanes) or stores (after them) of access a, one chunk per block. */
static void vec_move(cg_printer *p, rx_strbuf *o, const vec_access *a, int lanes) {
  const cg_lang *L = p->L;
  rx_dtype t = a->buf->dtype;
  int S = ir_dtype_bits(t) / 8, per_word = 4 / S, bits = 8 * S;
  int chunk = lanes * S < VEC_CHUNK_BYTES ? lanes * S : VEC_CHUNK_BYTES, words = chunk / 4;
  const char *W = L->vec_words[words_log2(words)];
  for (int c = 0; c < lanes * S / chunk; c++) {
    cg_indent(p, o);
    if (!a->store) {
      base_strbuf_printf(o, "{\n");
      p->indent++;
      cg_indent(p, o);
      base_strbuf_printf(o, "const %s rx_w = ", W);
      vec_ref(p, o, a, chunk, c);
      base_strbuf_append(o, ";\n");
    } else {
      base_strbuf_printf(o, "{\n");
      p->indent++;
      cg_indent(p, o);
      base_strbuf_printf(o, "%s rx_w;\n", W);
    }
    for (int w = 0; w < words; w++) {
      int lane0 = (c * words + w) * per_word;
      rx_strbuf word = {0}, part = {0};
      vec_word(&word, words, w);
      cg_indent(p, o);
      if (!a->store) {
        for (int j = 0; j < per_word; j++) {
          base_strbuf_free(&part);
          if (per_word == 1)
            base_strbuf_append(&part, word.data);
          else if (j == 0)
            base_strbuf_printf(&part, "(%s & 0x%xu)", word.data, (1u << bits) - 1u);
          else if (j == per_word - 1)
            base_strbuf_printf(&part, "(%s >> %d)", word.data, j * bits);
          else
            base_strbuf_printf(&part, "((%s >> %d) & 0x%xu)", word.data, j * bits,
                               (1u << bits) - 1u);
          base_strbuf_printf(o, "%srx_v%d[%d] = ", j ? " " : "", a->array, lane0 + j);
          base_strbuf_printf(o, L->from_bits[t], part.data);
          base_strbuf_append(o, ";");
        }
      } else {
        base_strbuf_printf(o, "%s = ", word.data);
        for (int j = 0; j < per_word; j++) {
          base_strbuf_free(&part);
          base_strbuf_printf(&part, "rx_v%d[%d]", a->array, lane0 + j);
          if (j) base_strbuf_append(o, " | (");
          base_strbuf_printf(o, L->to_bits[t], part.data);
          if (j) base_strbuf_printf(o, " << %d)", j * bits);
        }
        base_strbuf_append(o, ";");
      }
      base_strbuf_append(o, "\n");
      base_strbuf_free(&word);
      base_strbuf_free(&part);
    }
    if (a->store) {
      cg_indent(p, o);
      vec_ref(p, o, a, chunk, c);
      base_strbuf_append(o, " = rx_w;\n");
    }
    p->indent--;
    cg_indent(p, o);
    base_strbuf_append(o, "}\n");
  }
}

/* The lane-array element for use node inside the loop, or false when it is a scalar access. */
static bool vec_lane_ref(cg_printer *p, rx_strbuf *o, const void *node) {
  cg_vec_loop *vl = p->vloop;
  for (int i = 0; vl && i < vl->nuses; i++) {
    if (vl->uses[i].node != node || vl->uses[i].acc < 0) continue;
    base_strbuf_printf(o, "rx_v%d[", vl->acc[vl->uses[i].acc].array);
    if (p->ck->k->index64 && p->L->subscript64)
      base_strbuf_printf(o, p->L->subscript64, cg_name(p, vl->lane->name));
    else
      base_strbuf_append(o, cg_name(p, vl->lane->name));
    base_strbuf_putc(o, ']');
    return true;
  }
  return false;
}

static void pfor_serial(cg_printer *p, rx_strbuf *o, rx_stmt *s, int i);

/* A vectorized loop: its vector loads, the lanes, its vector stores. False (nothing printed)
 * when no access qualifies: the caller prints the plain unrolled loop. */
static bool pfor_vector(cg_printer *p, rx_strbuf *o, rx_stmt *s) {
  if (p->vloop || s->nvars != 1 || s->extent[0]->kind != RX_EXPR_CONST || s->extent[0]->value < 2 ||
      s->extent[0]->value > 16)
    return false;
  cg_vec_loop *vl = base_calloc(1, sizeof *vl);
  size_t mark = sym_analyzer_mark(p->an);
  sym_analyzer_bind_range(p->an, s->vars[0], s->lo[0], s->extent[0]);
  bool zero_lo = rx_expr_is_const(s->lo[0], 0);
  if (zero_lo) vec_plan(p, vl, s);
  sym_analyzer_reset(p->an, mark);
  if (vl->nacc == 0) {
    free(vl);
    return false;
  }
  cg_indent(p, o);
  base_strbuf_printf(o, "{ /* %s in 0..%d vectorized:", s->vars[0]->name, vl->lanes);
  for (int i = 0; i < vl->nacc; i++)
    base_strbuf_printf(o, " %s %s", vl->acc[i].store ? "store" : "load",
                       vl->acc[i].arg ? vl->acc[i].arg->name : vl->acc[i].buf->name);
  base_strbuf_append(o, " */\n");
  p->indent++;
  for (int i = 0; i < vl->nacc; i++) {
    cg_indent(p, o);
    base_strbuf_printf(o, "%s rx_v%d[%d];\n", tname(p, vl->acc[i].buf->dtype), vl->acc[i].array,
                       vl->lanes);
  }
  p->vopaque = vl;
  for (int i = 0; i < vl->nacc; i++)
    if (!vl->acc[i].store) vec_move(p, o, &vl->acc[i], vl->lanes);
  p->vloop = vl;
  pfor_serial(p, o, s, 0);
  pblock(p, o, s->inner);
  cg_indent(p, o);
  base_strbuf_append(o, "}\n");
  p->vloop = NULL;
  sym_analyzer_reset(p->an, mark);
  for (int i = 0; i < vl->nacc; i++)
    if (vl->acc[i].store) vec_move(p, o, &vl->acc[i], vl->lanes);
  p->vopaque = NULL;
  p->indent--;
  cg_indent(p, o);
  base_strbuf_append(o, "}\n");
  free(vl);
  return true;
}

static void pblock(cg_printer *p, rx_strbuf *o, rx_stmt *s) {
  p->indent++;
  if (s && s->kind == RX_STMT_SEQ)
    for (int i = 0; i < s->n; i++) pstmt(p, o, s->body[i]);
  else if (s)
    pstmt(p, o, s);
  p->indent--;
}

static void pfor_serial(cg_printer *p, rx_strbuf *o, rx_stmt *s, int i) {
  const cg_lang *L = p->L;
  const rx_expr *v = s->vars[i];
  const char *name = cg_name(p, v->name);
  if ((s->kind == RX_STMT_FOR &&
       (s->loop_kind == RX_LOOP_UNROLL || s->loop_kind == RX_LOOP_VECTORIZE)) &&
      L->unroll) {
    p->need[CG_NEED_UNROLL] = true;
    cg_indent(p, o);
    base_strbuf_printf(o, "%s\n", L->unroll);
  }
  if (s->kind == RX_STMT_FOR && s->loop_kind == RX_LOOP_ROLLED && L->rolled) {
    cg_indent(p, o);
    base_strbuf_printf(o, "%s\n", L->rolled);
  }
  cg_indent(p, o);
  base_strbuf_printf(o, "for (%s %s = ", p->idx, name);
  pidx(p, o, s->lo[i]);
  base_strbuf_printf(o, "; %s < ", name);
  pidx(p, o, sym_expr_add(p->m->ctx, s->lo[i], s->extent[i]));
  base_strbuf_printf(o, "; ++%s) {\n", name);
  sym_analyzer_bind_range(p->an, v, s->lo[i], s->extent[i]);
}

/* a nested block in braces */
static void pseq(cg_printer *p, rx_strbuf *o, rx_stmt *s) {
  cg_indent(p, o);
  base_strbuf_append(o, "{\n");
  pblock(p, o, s);
  cg_indent(p, o);
  base_strbuf_append(o, "}\n");
}

/* lowering refuses a target whose language has no matrix-unit statements first (lower.c) */
static void pmma(cg_printer *p, rx_strbuf *o, const rx_stmt *s) {
  if (p->L->mma)
    p->L->mma(p, o, s);
  else
    cg_error(p, s->loc,
             "matrix-unit statements (mma, async_copy, ldmatrix) cannot be printed in "
             "this language");
}

void cg_access(cg_printer *p, rx_strbuf *o, rx_buffer *b, rx_tx **idx, int n) {
  access(p, o, b, idx, n);
}

void cg_value(cg_printer *p, rx_strbuf *o, const rx_tx *e, rx_dtype want) { pt_as(p, o, e, want); }
/* A fragment's ALLOC or a frag statement (ir.h, RX_STMT_FRAG): its operands printed, then the
 * language's hook (lowering refuses a target without one first, lower.c). */
static void pfrag(cg_printer *p, rx_strbuf *o, const rx_stmt *s) {
  if (!p->L->frag) {
    cg_error(p, s->loc, "subgroup matrix fragments cannot be printed in this language");
    return;
  }
  rx_strbuf off = {0}, stride = {0}, value = {0};
  const rx_buffer *f = s->buf;
  cg_frag_ops ops = {.frag = cg_name(p, f->name),
                     .type = tname(p, f->dtype),
                     .rows = (int)f->shape[0]->value,
                     .cols = (int)f->shape[1]->value};
  if (s->kind == RX_STMT_FRAG && s->frag_op == RX_FRAG_OP_MMA) {
    ops.a = cg_name(p, s->mma_a->name);
    ops.b = cg_name(p, s->mma_b->name);
    ops.c = cg_name(p, s->mma_c->name);
  } else if (s->kind == RX_STMT_FRAG && s->frag_op == RX_FRAG_OP_FILL) {
    pt_as(p, &value, s->value, f->dtype);
    ops.value = value.data;
  } else if (s->kind == RX_STMT_FRAG) {
    const char *name = NULL;
    for (int i = 0; i < p->ck->nshared; i++)
      if (p->ck->shared[i].buf == s->mem) name = p->ck->shared[i].name;
    ops.mem = cg_name(p, name ? name : s->mem->name);
    access_index(p, &off, s->mem, s->idx, s->nidx);
    pt_index(p, &stride, s->value);
    ops.off = off.data;
    ops.stride = stride.data;
  }
  p->L->frag(p, o, s, &ops);
  base_strbuf_free(&off);
  base_strbuf_free(&stride);
  base_strbuf_free(&value);
}

/* A local allocation: an array set to zero, or a fragment's declaration */
static void palloc(cg_printer *p, rx_strbuf *o, const rx_stmt *s) {
  rx_buffer *b = s->buf;
  if (b->scope != RX_SCOPE_LOCAL) return; /* shared: hoisted; global: rejected by lowering */
  if (b->frag) {
    pfrag(p, o, s);
    return;
  }
  int64_t n = 1;
  for (int d = 0; d < b->ndim; d++) n *= b->shape[d]->value;
  const char *name = cg_name(p, b->name);
  cg_indent(p, o);
  base_strbuf_printf(o, "%s %s[%lld];\n", tname(p, b->dtype), name, (long long)(n ? n : 1));
  cg_indent(p, o);
  if (n == 1) {
    base_strbuf_printf(o, "%s[0] = ", name);
  } else {
    base_strbuf_printf(o, "for (int rx_z = 0; rx_z < %lld; ++rx_z) %s[rx_z] = ", (long long)n,
                       name);
  }
  lit_int(p, o, 0, b->dtype);
  base_strbuf_append(o, ";\n");
}

static void pstmt(cg_printer *p, rx_strbuf *o, rx_stmt *s) {
  if (!s || p->failed) return;
  const cg_lang *L = p->L;
  size_t mark = sym_analyzer_mark(p->an);
  switch (s->kind) {
  case RX_STMT_SEQ:
    pseq(p, o, s);
    break;
  case RX_STMT_FOR:
    if (s->loop_kind >= RX_LOOP_THREAD_X) {
      int ax = s->loop_kind - RX_LOOP_THREAD_X;
      const rx_expr *ext = sym_analyzer_simplify(p->an, s->extent[0]);
      const char *name = cg_name(p, s->vars[0]->name);
      cg_indent(p, o);
      base_strbuf_printf(o, "{ /* %s in 0..%lld: threadIdx.%c */\n", s->vars[0]->name,
                         (long long)ext->value, "xyz"[ax]);
      p->indent++;
      cg_indent(p, o);
      base_strbuf_printf(o, "%s%s %s = ", L->let_prefix, p->idx, name);
      if (L->c_casts)
        base_strbuf_printf(o, "(%s)%s", p->idx, L->thread_idx[ax]);
      else
        base_strbuf_printf(o, "%s(%s)", p->idx, L->thread_idx[ax]);
      if (!rx_expr_is_const(s->lo[0], 0)) {
        base_strbuf_append(o, " + ");
        ps_int(p, o, sym_analyzer_simplify(p->an, s->lo[0]), RX_PREC_MUL);
      }
      base_strbuf_append(o, ";\n");
      bool guard = ext->value < p->ck->k->block[ax];
      if (guard) {
        cg_indent(p, o);
        base_strbuf_printf(o, "if (%s < ", name);
        pidx(p, o, sym_expr_add(p->m->ctx, s->lo[0], ext));
        base_strbuf_append(o, ") {\n");
      }
      cg_bind_loop(p->an, s);
      if (!guard) p->indent--;
      pblock(p, o, s->inner);
      if (guard) {
        cg_indent(p, o);
        base_strbuf_append(o, "}\n");
      } else {
        p->indent++;
      }
      p->indent--;
      cg_indent(p, o);
      base_strbuf_append(o, "}\n");
    } else if (s->loop_kind != RX_LOOP_VECTORIZE || !pfor_vector(p, o, s)) {
      pfor_serial(p, o, s, 0);
      pblock(p, o, s->inner);
      cg_indent(p, o);
      base_strbuf_append(o, "}\n");
    }
    break;
  case RX_STMT_REDUCE:
    cg_indent(p, o);
    base_strbuf_append(o, "{ /* reduce: init */\n");
    pblock(p, o, s->init);
    cg_indent(p, o);
    base_strbuf_append(o, "}\n");
    for (int i = 0; i < s->nvars; i++) {
      pfor_serial(p, o, s, i);
      p->indent++;
    }
    p->indent--;
    pblock(p, o, s->inner);
    for (int i = 0; i < s->nvars; i++) {
      cg_indent(p, o);
      base_strbuf_append(o, "}\n");
      if (i + 1 < s->nvars) p->indent--;
    }
    break;
  case RX_STMT_STORE: {
    cg_indent(p, o);
    if (!p->vloop || !vec_lane_ref(p, o, s)) access(p, o, s->buf, s->idx, s->nidx);
    base_strbuf_append(o, " = ");
    rx_dtype t = s->buf->dtype;
    p->uses[t] = true;
    bool glob = cg_param_of(p->ck->fn, s->buf) >= 0;
    if (glob && L->storage[t]) {
      base_strbuf_append(o, "(");
      pt_as(p, o, s->value, t);
      base_strbuf_printf(o, " ? %s(1) : %s(0))", L->storage[t], L->storage[t]);
    } else {
      pt_as(p, o, s->value, t);
    }
    base_strbuf_append(o, ";\n");
    break;
  }
  case RX_STMT_LET:
    cg_indent(p, o);
    if (s->local->sym) { /* a symbolic let: an index like a loop variable */
      base_strbuf_printf(o, "%s%s %s = ", L->let_prefix, p->idx, cg_name(p, s->local->name));
      pt_as(p, o, s->value, p->ck->k->index64 ? RX_DTYPE_I64 : RX_DTYPE_I32);
      base_strbuf_append(o, ";\n");
      break;
    }
    base_strbuf_printf(o, "%s%s %s = ", L->let_prefix, tname(p, s->local->dtype),
                       cg_name(p, s->local->name));
    pt_as(p, o, s->value, s->local->dtype);
    base_strbuf_append(o, ";\n");
    break;
  case RX_STMT_ALLOC:
    palloc(p, o, s);
    break;
  case RX_STMT_IF:
    cg_indent(p, o);
    base_strbuf_append(o, "if (");
    if (s->value->kind == RX_TX_SYM) {
      ps_bool(p, o, sym_analyzer_simplify(p->an, s->value->sym), RX_PREC_OR);
      sym_analyzer_assume(p->an, s->value->sym);
    } else {
      pt_as(p, o, s->value, RX_DTYPE_BOOL);
    }
    base_strbuf_append(o, ") {\n");
    pblock(p, o, s->inner);
    sym_analyzer_reset(p->an, mark);
    if (s->otherwise) {
      cg_indent(p, o);
      base_strbuf_append(o, "} else {\n");
      if (s->value->kind == RX_TX_SYM)
        sym_analyzer_assume(p->an, sym_expr_not(p->m->ctx, s->value->sym));
      pblock(p, o, s->otherwise);
    }
    cg_indent(p, o);
    base_strbuf_append(o, "}\n");
    break;
  case RX_STMT_BARRIER:
    cg_indent(p, o);
    base_strbuf_printf(o, "%s\n", L->barrier);
    break;
  default: /* mma and the other matrix-unit statements (ir.h: the kinds after BARRIER) */
    pmma(p, o, s);
    break;
  case RX_STMT_FRAG:
    pfrag(p, o, s);
    break;
  }
  sym_analyzer_reset(p->an, mark);
}

/* ---- the kernel -------------------------------------------------------------------------- */

void cg_header_comment(cg_printer *p, rx_strbuf *o) {
  rx_kernel *k = p->ck->k;
  const rx_target *t = p->ck->t;
  base_strbuf_printf(o, "// relaxc kernel %s: program %s, rule %s, target %s\n", k->name,
                     p->ck->fn->name, k->rule ? k->rule : "(unknown)", t->name);
  base_strbuf_append(o, "// ABI (docs/kernel-abi.md):");
  int nb = 0;
  for (int i = 0; i < k->nargs; i++) {
    const rx_karg *a = &k->args[i];
    if (a->kind != RX_KARG_BUFFER) continue;
    base_strbuf_printf(o, "%s %s: %s %s @%d", nb++ ? "," : " buffers", a->name,
                       ir_dtype_name(a->dtype), a->written ? "out" : "in", a->binding);
  }
  if (!nb) base_strbuf_append(o, " no buffers");
  base_strbuf_append(o, ";");
  int ns = 0;
  for (int i = 0; i < k->nargs; i++) {
    const rx_karg *a = &k->args[i];
    if (a->kind != RX_KARG_SCALAR) continue;
    base_strbuf_printf(o, "%s %s", ns++ ? "," : " i32 values", a->name);
  }
  if (!ns)
    base_strbuf_append(o, " no symbolic values");
  else if (t->kind == RX_TARGET_VULKAN)
    base_strbuf_printf(o, " (%s, %d bytes)", k->uses_ubo ? "uniform buffer" : "push constants",
                       k->scalar_bytes);
  base_strbuf_append(o, "\n// launch: grid [");
  for (int a = 0; a < 3; a++) {
    if (a) base_strbuf_append(o, ", ");
    sym_expr_print(o, k->grid[a]);
  }
  base_strbuf_printf(o, "], block [%d, %d, %d], shared %lld bytes, %s indices", k->block[0],
                     k->block[1], k->block[2], (long long)k->shared_bytes,
                     k->index64 ? "64-bit" : "32-bit");
  if (k->cond) {
    base_strbuf_append(o, ", when ");
    sym_expr_print(o, k->cond);
  }
  base_strbuf_append(o, "\n");
}

bool cg_print(const cg_lang *L, cg_kernel *ck, rx_diag *diag) {
  cg_printer p = {.L = L, .ck = ck, .m = ck->m, .diag = diag};
  p.an = cg_analyzer(ck->m, ck->fn);
  p.views = base_calloc((size_t)ck->k->nargs + 1, 1);
  p.idx = ck->k->index64 ? L->idx64 : L->idx32;
  if (ck->k->index64) p.uses[RX_DTYPE_I64] = true;
  for (int i = 0; i < ck->k->nargs; i++)
    if (ck->k->args[i].kind == RX_KARG_BUFFER) p.uses[ck->k->args[i].dtype] = true;
  for (int i = 0; i < ck->nshared; i++) p.uses[ck->shared[i].buf->dtype] = true;
  rx_kernel *k = ck->k;

  /* the body first: it decides which helpers, types and extensions the preamble needs */
  rx_strbuf body = {0};
  p.indent = 1;
  for (int a = 0; a < 3; a++) {
    if (!ck->bvar[a]) continue;
    cg_indent(&p, &body);
    base_strbuf_printf(&body, "%s%s %s = ", L->let_prefix, p.idx, cg_name(&p, ck->bvar[a]->name));
    if (L->c_casts)
      base_strbuf_printf(&body, "(%s)%s", p.idx, L->block_idx[a]);
    else
      base_strbuf_printf(&body, "%s(%s)", p.idx, L->block_idx[a]);
    if (!rx_expr_is_const(ck->blo[a], 0)) {
      base_strbuf_append(&body, " + ");
      ps_int(&p, &body, sym_analyzer_simplify(p.an, ck->blo[a]), RX_PREC_MUL);
    }
    base_strbuf_append(&body, ";\n");
    sym_analyzer_bind_range(p.an, ck->bvar[a], ck->blo[a], k->grid[a]);
  }
  if (L->shared_decl)
    for (int i = 0; i < ck->nshared; i++) L->shared_decl(&p, &body, &ck->shared[i]);
  for (int a = 0; a < 3; a++) {
    /* thread ranges are known for the whole body: the analyzer may use them in guards */
    (void)a;
  }
  p.indent = 0;
  if (ck->body) pblock(&p, &body, ck->body);
  for (int t = 1; t < RX_DTYPE_COUNT && !p.failed; t++)
    if (p.uses[t]) (void)tname(&p, (rx_dtype)t);
  rx_strbuf src = {0};
  if (!p.failed) {
    L->open_kernel(&p, &src);
    if (body.data) base_strbuf_append(&src, body.data);
    base_strbuf_append(&src, "}\n");
  }
  bool ok = !p.failed;
  if (ok) k->source = base_arena_strdup(&ck->m->arena, src.data);
  base_strbuf_free(&src);
  base_strbuf_free(&body);
  base_strbuf_free(&p.helpers);
  sym_analyzer_free(p.an);
  free(p.views);
  return ok;
}
