/* Helpers shared by the subcommands of the relaxc command line. */
#include "commands.h"

#include "frontends/hf/hf.h"

#include "base/base.h"
#include "base/npy.h"
#include "ir/ir.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include "relaxc/compiler.h" /* RELAXC_VERSION */

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the option parser ---- */
enum { HELP_COLUMN = 28, HELP_WIDTH = 99 }; /* where an option's help starts; the line width */

/* text from column HELP_COLUMN (where the caller is), wrapped at HELP_WIDTH */
static void wrap(FILE *out, const char *text) {
  int col = HELP_COLUMN;
  for (const char *p = text; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (col > HELP_COLUMN && col + 1 + (int)n > HELP_WIDTH) {
      fprintf(out, "\n%*s", HELP_COLUMN, "");
      col = HELP_COLUMN;
    }
    fprintf(out, "%s%.*s", col > HELP_COLUMN ? " " : "", (int)n, p);
    col += (col > HELP_COLUMN) + (int)n;
    p += n;
  }
  fputc('\n', out);
}

void cli_print_help(const rx_cli_command *c, bool full, FILE *out) {
  fprintf(out, "usage: relaxc %s%s%s%s\n", c->name, c->synopsis[0] ? " " : "", c->synopsis,
          c->flags[0].name ? " [options]" : "");
  if (!full) return;
  fprintf(out, "\n%s\n", c->summary);
  if (c->details) fprintf(out, "%s\n", c->details);
  fputs("\noptions:\n", out);
  for (const rx_cli_flag *f = c->flags; f->name; f++) {
    char left[128];
    snprintf(left, sizeof left, "  %s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "",
             f->name, f->arg ? " " : "", f->arg ? f->arg : "");
    int n = (int)strlen(left);
    if (n >= HELP_COLUMN) { /* a long option: its help on the next lines */
      fprintf(out, "%s\n", left);
      n = 0;
    }
    fprintf(out, "%s%*s", n ? left : "", HELP_COLUMN - n, "");
    wrap(out, f->help);
    if (f->choices) {
      rx_strbuf b = {0};
      base_strbuf_printf(&b, "%s: one of", f->arg);
      for (int i = 0; f->choices[i]; i++)
        base_strbuf_printf(&b, "%s %s", i ? "," : "", f->choices[i]);
      fprintf(out, "%*s", HELP_COLUMN, "");
      wrap(out, b.data);
      base_strbuf_free(&b);
    }
  }
  fprintf(out, "  -h, --help%*sprint this help and exit\n", HELP_COLUMN - 12, "");
  fprintf(out, "  --version%*sprint the version and exit\n", HELP_COLUMN - 11, "");
  fputs("\nexit status: 0 success, 1 errors in the input (or a file that cannot be read or "
        "written),\n2 usage error.\n",
        out);
}

int cli_usage_error(const rx_cli_command *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("relaxc: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  cli_print_help(c, false, stderr);
  fprintf(stderr, "Try 'relaxc %s --help' for more information.\n", c->name);
  return 2;
}

rx_cli_args cli_begin(const rx_cli_command *cmd, int argc, char **argv) {
  rx_cli_args it = {cmd, argc, argv, 1, NULL, NULL, -1};
  return it;
}

bool cli_next(rx_cli_args *it) {
  it->flag = it->value = NULL;
  if (it->status >= 0 || it->i >= it->argc) return false;
  const char *a = it->argv[it->i++];
  if (a[0] != '-' || !a[1]) { /* a positional argument ("-" is standard input) */
    it->value = a;
    return true;
  }
  if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
    cli_print_help(it->cmd, true, stdout);
    it->status = 0;
    return false;
  }
  if (!strcmp(a, "--version")) {
    printf("relaxc %s\n", RELAXC_VERSION);
    it->status = 0;
    return false;
  }
  const char *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '=');
  size_t n = eq ? (size_t)(eq - a) : strlen(a);
  for (const rx_cli_flag *f = it->cmd->flags; f->name; f++) {
    bool named = (strlen(f->name) == n && !strncmp(a, f->name, n)) ||
                 (f->alias && strlen(f->alias) == n && !strncmp(a, f->alias, n));
    if (!named) continue;
    it->flag = f->name;
    if (!f->arg) {
      if (eq) {
        it->status = cli_usage_error(it->cmd, "option '%s' takes no value", f->name);
        return false;
      }
      return true;
    }
    if (eq) {
      it->value = eq + 1;
    } else if (it->i < it->argc) {
      it->value = it->argv[it->i++];
    } else {
      it->status = cli_usage_error(it->cmd, "option '%s' needs a value (%s)", a, f->arg);
      return false;
    }
    return true;
  }
  it->status = cli_usage_error(it->cmd, "unknown option '%s' for '%s'", a, it->cmd->name);
  return false;
}

int cli_unhandled(const rx_cli_args *it) {
  fprintf(stderr, "relaxc: internal error: '%s' does not handle its option '%s'\n", it->cmd->name,
          it->flag ? it->flag : "(positional)");
  assert(!"a command's table lists an option it does not handle");
  return 2;
}

/* ---- integer options ---- */

bool cli_parse_int(const char *s, long long lo, long long hi, long long *out) {
  const char *p = s + (*s == '-');
  if (!*p) return false;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9') return false; /* no spaces, '+', fraction or exponent */
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno == ERANGE || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int cli_int_option(const rx_cli_args *it, long long lo, long long hi, long long *out) {
  if (cli_parse_int(it->value, lo, hi, out)) return 0;
  return cli_usage_error(it->cmd, "%s %s: expected an integer from %lld to %lld", it->flag,
                         it->value, lo, hi);
}

/* ---- files ---- */

char *cli_read_input(const char *path, rx_file_kind kind, size_t *out_len) {
  *out_len = 0;
  char *text = NULL;
  rx_status st = strcmp(path, "-") ? base_read_file_kind(path, kind, &text, out_len)
                                   : base_read_stream_kind(stdin, "<stdin>", kind, &text, out_len);
  if (st) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
    rx_status_free(st);
    return NULL;
  }
  return text;
}

const char *cli_input_name(const char *path) { return strcmp(path, "-") == 0 ? "<stdin>" : path; }

char *cli_dir_of(const char *path) {
  if (!strcmp(path, "-")) return NULL;
  const char *slash = strrchr(path, '/');
  if (!slash) return base_strdup(".");
  if (slash == path) return base_strdup("/");
  return base_strndup(path, (size_t)(slash - path));
}

bool cli_not_dir(const char *path) {
  struct stat st;
  if (strcmp(path, "-") && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    fprintf(stderr, "relaxc: error: %s: is a directory\n", path);
    return false;
  }
  return true;
}

bool cli_can_write(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0) { /* replaced: it must be a file we may write */
    if (S_ISDIR(st.st_mode)) {
      fprintf(stderr, "relaxc: error: cannot write '%s': it is a directory\n", path);
      return false;
    }
    if (access(path, W_OK) != 0) {
      fprintf(stderr, "relaxc: error: cannot write '%s': %s\n", path, strerror(errno));
      return false;
    }
    return true;
  }
  char *dir = cli_dir_of(path); /* created: its directory must exist and be writable */
  bool ok = true;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "relaxc: error: cannot write '%s': no directory '%s'\n", path, dir);
    ok = false;
  } else if (access(dir, W_OK | X_OK) != 0) {
    fprintf(stderr, "relaxc: error: cannot write '%s': directory '%s': %s\n", path, dir,
            strerror(errno));
    ok = false;
  }
  free(dir);
  return ok;
}

bool cli_is_onnx(const char *path, const char *bytes, size_t len) {
  size_t n = strlen(path);
  if (n > 5 && !strcmp(path + n - 5, ".onnx")) return true;
  if (!len) return false;
  unsigned char c = (unsigned char)bytes[0];
  return c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v';
}

bool cli_make_dir(const char *dir) {
  char *p = base_strdup(dir);
  int err = *p ? 0 : ENOENT;
  for (char *q = p + 1; !err; q++) { /* each prefix ending before a '/', then the whole path */
    if (*q && *q != '/') continue;
    char c = *q;
    *q = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) err = errno;
    *q = c;
    if (!c) break;
  }
  struct stat st;
  if (!err && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) err = ENOTDIR;
  if (err) fprintf(stderr, "relaxc: error: cannot create directory '%s': %s\n", dir, strerror(err));
  free(p);
  return !err;
}

#ifdef RX_HAVE_ONNX
int cli_write_onnx_weights(const char *in, const void *bytes, size_t len, const char *dir) {
  char *base = cli_dir_of(in);
  rx_onnx_weight *w = NULL;
  int nw = 0;
  rx_status s = onnx_weights(bytes, len, cli_input_name(in), base, &w, &nw);
  free(base);
  if (!s && !cli_make_dir(dir)) {
    onnx_weights_free(w, nw);
    return 1;
  }
  for (int i = 0; i < nw && !s; i++) {
    rx_npy a = {w[i].dtype, w[i].ndim, {0}, w[i].data, w[i].nbytes};
    memcpy(a.shape, w[i].shape, (size_t)w[i].ndim * sizeof *a.shape);
    rx_strbuf path = {0};
    base_strbuf_printf(&path, "%s/%s.npy", dir, w[i].name);
    s = base_npy_write(path.data, &a);
    base_strbuf_free(&path);
  }
  onnx_weights_free(w, nw);
  if (s) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
    rx_status_free(s);
    return 1;
  }
  return 0;
}
#endif

/* ---- Hugging Face model folders ---- */
int cli_hf_flag(const rx_cli_args *it, rx_hf_options *o) {
  const char *f = it->flag, *v = it->value;
  if (!strcmp(f, "--no-weights")) {
    o->no_weights = true;
    return 0;
  }
  if (!strcmp(f, "--quantize-embeddings")) {
    o->quantize_embeddings = true;
    return 0;
  }
  if (!strcmp(f, "--quantize")) { /* the scheme is checked by the importer (hf_import) */
    o->quantize = v;
    return 0;
  }
  if (!strcmp(f, "--dtype")) {
    o->dtype = !strcmp(v, "f32")    ? RX_DTYPE_F32
               : !strcmp(v, "f16")  ? RX_DTYPE_F16
               : !strcmp(v, "bf16") ? RX_DTYPE_BF16
                                    : RX_DTYPE_UNKNOWN;
    if (o->dtype == RX_DTYPE_UNKNOWN)
      return cli_usage_error(it->cmd, "--dtype %s: expected f32, f16 or bf16", v);
    return 0;
  }
  bool len = !strcmp(f, "--max-seq-len");
  long long n = 0;
  int rc = cli_int_option(it, 1, len ? (1ll << 24) : 65536, &n);
  if (rc) return rc;
  if (len)
    o->max_seq_len = n;
  else
    o->max_batch = n;
  return 0;
}

bool cli_import_hf(rx_module *m, const char *dir, const rx_hf_options *o) {
  /* through the public entry point, which embedders (the Python package) use too */
  rx_import_options io = {.dtype = o->dtype,
                          .max_seq_len = o->max_seq_len,
                          .max_batch = o->max_batch,
                          .no_weights = o->no_weights,
                          .quantize = o->quantize,
                          .quantize_embeddings = o->quantize_embeddings,
                          .tensor_parallel = o->tp_world,
                          .tensor_rank = o->tp_rank,
                          .pipeline_parallel = o->pp_world,
                          .pipeline_rank = o->pp_rank};
  rx_status s = rx_module_import(m, dir, &io, NULL);
  if (!s) return true;
  fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
  rx_status_free(s);
  return false;
}

void cli_print_module(rx_module *m, void (*note)(const char *fn_name, void *ctx), void *ctx) {
  rx_strbuf out = {0};
  ir_module_print(&out, m);
  const char *p = out.data ? out.data : "";
  while (*p) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p + 1) : strlen(p);
    const char *paren = strncmp(p, "tensor_fn ", 10) ? NULL : memchr(p, '(', len);
    if (paren) {
      char *name = base_strndup(p + 10, (size_t)(paren - p - 10));
      note(name, ctx);
      free(name);
    }
    fwrite(p, 1, len, stdout);
    p += len;
  }
  if (out.len && out.data[out.len - 1] != '\n') fputc('\n', stdout);
  base_strbuf_free(&out);
}
