/* test_ptx_checks: what the PTX of the memory-bound decode kernels shows without a GPU (issue 13,
 * "Checks without a GPU"), at Llama-2-7B and Llama-3-8B shapes, for sm_80 and sm_90.
 *
 * The kernels: every kernel that runs in a decode step of one sequence with a full cache, of the
 * programs with a role in support_decode.h (decode GEMV, rms_norm, silu * mul, softmax, decode
 * attention). Each is compiled by NVRTC as relaxc emits it, and its PTX is scanned:
 *   v128   at least one 128-bit global load (ld.global[.nc].v4 of 32-bit words, .v2 of 64-bit
 *          ones, .v8 of 16-bit ones: what NVRTC makes of a uint4 / float4 load);
 *   div64  no 64-bit division or remainder (div/rem .s64/.u64) inside a loop (an instruction
 *          between a label and a later branch back to it);
 *   spill  ptxas -v reports no spill stores or loads;
 *   cpasync the decode attention (paged_decode_attention, ops/attention.c) copies the KV cache
 *          through cp.async (cp.async.ca/cg.shared.global), in 16-byte copies, which count as
 *          128-bit global loads for v128;
 *   local  the decode attention uses no local memory (no .local in its PTX: no stack arrays,
 *          no spills).
 * A kernel that fails a check because another engineer's part of issue 13 is unfinished is
 * listed in xfails below with whose part it is and why, and reported as "expected failure" (the
 * list should end empty); one that passes a listed check is reported as "unexpected pass", to be
 * taken off the list. Any other failure fails the test. Without NVRTC or ptxas: skipped (77).
 *
 * usage: test_ptx_checks [TESTS_DIR] (RX_PTX_VERBOSE=1 prints every kernel's counts) */
#include "support_decode.h"
#include "targets/toolchain.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECKS(X)                                                                                  \
  X(V128, "v128", "128-bit global loads")                                                          \
  X(DIV64, "div64", "no 64-bit division in loops")                                                 \
  X(SPILL, "spill", "no spills")                                                                   \
  X(CPASYNC, "cpasync", "cp.async in the decode attention")                                        \
  X(LOCAL, "local", "no local memory in the decode attention")

typedef enum check {
#define X(e, n, d) CK_##e,
  CHECKS(X)
#undef X
      CK_COUNT
} check;
static const char *const check_names[] = {
#define X(e, n, d) n,
    CHECKS(X)
#undef X
};

/* The decode attention's kernel: its name starts with this (the op's program). */
#define DECODE_ATTENTION "paged_decode_attention"

/* Checks that fail because a part of issue 13 is not done yet: whose part, and why. */
static const struct xfail {
  rxd_role role;
  check ck;
  const char *owner, *reason;
  const char *kernel; /* the kernel's name starts with this (NULL: every kernel of the role) */
} xfails[] = {
    {RXD_ROLE_COUNT, CK_COUNT, NULL, NULL, NULL}, /* the end (the list may be empty) */
};

static int passed, failed, xfailed, xpassed;

static const struct xfail *expected(const rxd_kernel *k, check c) {
  for (size_t i = 0; i < RX_ARRAY_LEN(xfails); i++)
    if (xfails[i].role == k->role && xfails[i].ck == c &&
        (!xfails[i].kernel ||
         !strncmp(k->kernel->name, xfails[i].kernel, strlen(xfails[i].kernel))))
      return &xfails[i];
  return NULL;
}

/* ---- the PTX scanner ---- */
#define MAX_LABELS 4096
#define MAX_LOOPS  1024

typedef struct ptx_scan {
  int loads128, loads_narrow; /* ld.global instructions by width (and 16-byte cp.async) */
  int cp_async;               /* cp.async.ca/cg.shared.global copies */
  int local;                  /* lines that name the .local state space */
  int div64, div64_in_loops;  /* div/rem .s64/.u64 instructions */
  char first_div[160];        /* the first one inside a loop */
} ptx_scan;

/* The opcode of a PTX instruction line (after an optional @predicate), copied into op. */
static void opcode(const char *line, char *op, size_t n) {
  while (isspace((unsigned char)*line)) line++;
  if (*line == '@') {
    while (*line && !isspace((unsigned char)*line)) line++;
    while (isspace((unsigned char)*line)) line++;
  }
  size_t i = 0;
  while (line[i] && !isspace((unsigned char)line[i]) && line[i] != ';' && i + 1 < n) {
    op[i] = line[i];
    i++;
  }
  op[i] = 0;
}

/* Bits moved by a load opcode ("ld.global.nc.v4.u32": 128), 0 when no type is found. */
static int load_bits(const char *op) {
  int lanes = 1, bits = 0;
  for (const char *p = op; (p = strchr(p, '.')) != NULL; p++) {
    if (p[1] == 'v' && isdigit((unsigned char)p[2]))
      lanes = atoi(p + 2);
    else if (strchr("ubsf", p[1]) && isdigit((unsigned char)p[2])) {
      char *end;
      long b = strtol(p + 2, &end, 10);
      bits = (int)b * (strncmp(end, "x2", 2) == 0 ? 2 : 1); /* f16x2: two lanes in one word */
    }
  }
  return lanes * bits;
}

/* A label definition ("$L__BB0_3:") or the target of a branch ("@%p1 bra $L__BB0_3;"), copied
 * into name; false when the line is neither. */
static bool label_def(const char *line, char *name, size_t n) {
  while (isspace((unsigned char)*line)) line++;
  size_t i = 0;
  while ((isalnum((unsigned char)line[i]) || line[i] == '_' || line[i] == '$') && i + 1 < n)
    name[i] = line[i], i++;
  name[i] = 0;
  return i > 0 && line[i] == ':';
}
static bool branch_target(const char *op, const char *line, char *name, size_t n) {
  if (strncmp(op, "bra", 3) != 0) return false;
  const char *p = strstr(line, op) + strlen(op);
  while (isspace((unsigned char)*p)) p++;
  size_t i = 0;
  while ((isalnum((unsigned char)p[i]) || p[i] == '_' || p[i] == '$') && i + 1 < n)
    name[i] = p[i], i++;
  name[i] = 0;
  return i > 0;
}

static void scan_ptx(const char *ptx, ptx_scan *out) {
  memset(out, 0, sizeof *out);
  char *text = strdup(ptx);
  if (!text) abort();
  static char *lines[1 << 16];
  int nl = 0;
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && nl < (1 << 16);
       l = strtok_r(NULL, "\n", &save))
    lines[nl++] = l;
  static char labels[MAX_LABELS][64];
  static int label_line[MAX_LABELS], loop_lo[MAX_LOOPS], loop_hi[MAX_LOOPS];
  int nlabels = 0, nloops = 0;
  for (int i = 0; i < nl; i++) {
    char op[96], name[64];
    if (label_def(lines[i], name, sizeof name) && nlabels < MAX_LABELS) {
      snprintf(labels[nlabels], sizeof labels[0], "%s", name);
      label_line[nlabels++] = i;
      continue;
    }
    opcode(lines[i], op, sizeof op);
    if (branch_target(op, lines[i], name, sizeof name))
      for (int k = 0; k < nlabels && nloops < MAX_LOOPS; k++)
        if (!strcmp(labels[k], name)) loop_lo[nloops] = label_line[k], loop_hi[nloops++] = i;
  }
  for (int i = 0; i < nl; i++) {
    char op[96];
    opcode(lines[i], op, sizeof op);
    if (!strncmp(op, "ld.global", 9)) {
      if (load_bits(op) >= 128)
        out->loads128++;
      else
        out->loads_narrow++;
    }
    if (!strncmp(op, "cp.async.ca.shared.global", 25) ||
        !strncmp(op, "cp.async.cg.shared.global", 25)) {
      out->cp_async++;
      /* .cg copies 16 bytes only; .ca says its size after the two addresses */
      if (!strncmp(op, "cp.async.cg", 11) || strstr(lines[i], "], 16"))
        out->loads128++;
      else
        out->loads_narrow++;
    }
    if (strstr(lines[i], ".local")) out->local++;
    if ((!strncmp(op, "div.", 4) || !strncmp(op, "rem.", 4)) &&
        (strstr(op, ".s64") || strstr(op, ".u64"))) {
      out->div64++;
      for (int k = 0; k < nloops; k++) {
        if (i <= loop_lo[k] || i >= loop_hi[k]) continue;
        if (!out->div64_in_loops++)
          snprintf(out->first_div, sizeof out->first_div, "%s", lines[i] + strspn(lines[i], " \t"));
        break;
      }
    }
  }
  free(text);
}

/* ---- the checks ---- */
static void report(const rxd_shape *s, const char *arch, const rxd_kernel *k, check c, bool ok,
                   const char *detail) {
  const struct xfail *x = expected(k, c);
  const char *name = k->kernel->name;
  if (ok && !x) {
    passed++;
  } else if (ok) {
    xpassed++;
    printf("unexpected pass: %s %s %s (%s) %s: listed as %s's; take it off the list\n", s->name,
           arch, name, rxd_role_name(k->role), check_names[c], x->owner);
  } else if (x) {
    xfailed++;
    printf("expected failure: %s: %s %s %s (%s) %s: %s [%s]\n", x->owner, s->name, arch, name,
           rxd_role_name(k->role), check_names[c], x->reason, detail);
  } else {
    failed++;
    fprintf(stderr, "FAIL: %s %s %s (%s) %s: %s\n", s->name, arch, name, rxd_role_name(k->role),
            check_names[c], detail);
  }
}

/* Returns false when a toolchain is missing (the run is then skipped). */
static bool check_kernel(const rxd_shape *s, const char *arch, const rxd_kernel *k, bool verbose) {
  char *ptx = NULL, *log = NULL, detail[256];
  size_t len = 0;
  rx_status st =
      tgt_nvrtc_compile(k->kernel->source, k->kernel->name, arch, false, &ptx, &len, &log);
  if (st) {
    failed++;
    fprintf(stderr, "FAIL: %s %s %s: NVRTC: %s\n%s\n", s->name, arch, k->kernel->name,
            rx_status_message(st), log ? log : "");
    rx_status_free(st);
    free(log);
    return true;
  }
  ptx_scan sc;
  scan_ptx(ptx, &sc);
  rx_ptxas_info info;
  rx_status ps = tgt_ptxas_report(ptx, arch, &info);
  bool have_ptxas = rx_status_code_of(ps) != RX_ERR_NOT_FOUND;
  if (verbose)
    printf("  %s %s %-40s %-9s 128-bit loads %d, narrower %d, div64 %d (%d in loops), %d spill "
           "bytes, %d cp.async, %d .local, %d registers\n",
           s->name, arch, k->kernel->name, rxd_role_name(k->role), sc.loads128, sc.loads_narrow,
           sc.div64, sc.div64_in_loops, ps ? -1 : info.spill_bytes, sc.cp_async, sc.local,
           ps ? -1 : info.max_registers);
  snprintf(detail, sizeof detail, "%d 128-bit and %d narrower global loads", sc.loads128,
           sc.loads_narrow);
  report(s, arch, k, CK_V128, sc.loads128 > 0, detail);
  snprintf(detail, sizeof detail, "%d inside loops, the first: %s", sc.div64_in_loops,
           sc.first_div);
  report(s, arch, k, CK_DIV64, sc.div64_in_loops == 0, detail);
  if (k->role == RXD_ATTENTION &&
      !strncmp(k->kernel->name, DECODE_ATTENTION, strlen(DECODE_ATTENTION))) {
    snprintf(detail, sizeof detail, "%d cp.async copies", sc.cp_async);
    report(s, arch, k, CK_CPASYNC, sc.cp_async > 0, detail);
    snprintf(detail, sizeof detail, "%d lines name .local", sc.local);
    report(s, arch, k, CK_LOCAL, sc.local == 0, detail);
  }
  if (!ps) {
    snprintf(detail, sizeof detail, "%d spill bytes, %d registers", info.spill_bytes,
             info.max_registers);
    report(s, arch, k, CK_SPILL, info.spill_bytes == 0, detail);
    tgt_ptxas_info_free(&info);
  } else if (have_ptxas) {
    failed++;
    fprintf(stderr, "FAIL: %s %s %s: ptxas: %s\n", s->name, arch, k->kernel->name,
            rx_status_message(ps));
  }
  rx_status_free(ps);
  free(ptx);
  free(log);
  return have_ptxas;
}

static bool verbose, have_ptxas = true;

static void visit(const rxd_shape *s, const rxd_kernel *k, void *ud) {
  (void)ud;
  static const char *const archs[] = {"sm_80", "sm_90"};
  for (size_t a = 0; a < RX_ARRAY_LEN(archs); a++)
    have_ptxas &= check_kernel(s, archs[a], k, verbose);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  rx_status s = tgt_nvrtc_load(NULL, NULL);
  if (s) {
    printf("SKIP: NVRTC is not present: %s\n", rx_status_message(s));
    rx_status_free(s);
    return 77;
  }
  const char *v = getenv("RX_PTX_VERBOSE");
  verbose = v && !strcmp(v, "1");
  failed += rxd_for_each_kernel(rxd_nshapes, "cuda -arch=sm_80", visit, NULL);
  printf("ptx checks: %d passed, %d failed, %d expected failures, %d unexpected passes%s\n", passed,
         failed, xfailed, xpassed, have_ptxas ? "" : " (no ptxas: spills not checked)");
  return failed || xpassed ? 1 : 0; /* a passing entry of xfails must leave the list */
}
