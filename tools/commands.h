/* The relaxc command line: one table of commands (tools/relaxc.c, cli_commands), each with its
 * synopsis, description and options. The usage lines, `relaxc CMD --help`, `relaxc help CMD` and
 * the option parser all read that table, so a command accepts exactly the options its help lists.
 * A command's function takes the arguments from the command name on (argv[0] is the name) and
 * returns the process exit status (0 success, 1 errors in the input, 2 usage error). */
#ifndef RX_TOOLS_COMMANDS_H
#define RX_TOOLS_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/base.h" /* rx_file_kind */

typedef struct rx_cli_command rx_cli_command;

/* One option of a command. */
typedef struct rx_cli_flag {
  const char *name;           /* "--target": the name the parser hands to the command */
  const char *alias;          /* another spelling ("-o" for --output), or NULL */
  const char *arg;            /* the value's placeholder ("DIR"), or NULL for a switch */
  const char *help;           /* one line: what it does and its default */
  const char *const *choices; /* the values it takes, listed in the help (NULL: any) */
} rx_cli_flag;

struct rx_cli_command {
  const char *name;         /* "run" */
  const char *synopsis;     /* the arguments after the name: "MODEL.rxm --input NAME=SPEC ..." */
  const char *summary;      /* one line for the list of commands */
  const char *details;      /* more lines for `relaxc CMD --help` (NULL: none) */
  const rx_cli_flag *flags; /* ends with a {0} entry */
  int (*run)(const rx_cli_command *cmd, int argc, char **argv);
};

/* The commands, ending with a {0} entry (tools/relaxc.c). */
extern const rx_cli_command cli_commands[];

int cli_cmd_schedule(const rx_cli_command *cmd, int argc, char **argv); /* tools/cmd_schedule.c */
int cli_cmd_codegen(const rx_cli_command *cmd, int argc, char **argv);  /* tools/cmd_codegen.c */
int cli_cmd_compile(const rx_cli_command *cmd, int argc, char **argv);  /* tools/cmd_compile.c */
int cli_cmd_run(const rx_cli_command *cmd, int argc, char **argv);      /* tools/cmd_run.c */
int cli_cmd_inspect(const rx_cli_command *cmd, int argc, char **argv);  /* tools/cmd_inspect.c */
int cli_cmd_import(const rx_cli_command *cmd, int argc, char **argv);   /* tools/cmd_import.c */
int cli_cmd_generate(const rx_cli_command *cmd, int argc, char **argv); /* tools/cmd_generate.c */
int cli_cmd_serve(const rx_cli_command *cmd, int argc, char **argv);    /* tools/cmd_serve.c */
int cli_cmd_opt(const rx_cli_command *cmd, int argc, char **argv);      /* tools/cmd_opt.c */
/* relaxc inspect of a GGUF file (tools/inspect_gguf.c): whether path starts with GGUF's magic, and
 * the listing of one (exit status 0, or 1 after printing why the file was refused). */
bool cli_inspect_is_gguf(const char *path);
int cli_inspect_gguf(const char *path);

/* ---- the option parser (tools/cli.c) ----
 *   rx_cli_args it = cli_begin(cmd, argc, argv);
 *   while (cli_next(&it)) {
 *     if (!it.flag) FILE = it.value;                     (a positional argument)
 *     else if (!strcmp(it.flag, "--target")) T = it.value;
 *     else return cli_unhandled(&it);
 *   }
 *   if (it.status >= 0) return it.status;                (--help, --version, or a usage error)
 * An option is spelled as its table entry's name or alias; one that takes a value takes the next
 * argument or "--name=VALUE". -h/--help prints the command's help, --version the version. */
typedef struct rx_cli_args {
  const rx_cli_command *cmd;
  int argc;
  char **argv;
  int i;             /* the next argument to read */
  const char *flag;  /* the option just read (its table name), or NULL for a positional argument */
  const char *value; /* its value (NULL for a switch), or the positional argument */
  int status;        /* -1 while parsing; after cli_next returned false: -1 done, else exit */
} rx_cli_args;
rx_cli_args cli_begin(const rx_cli_command *cmd, int argc, char **argv);
bool cli_next(rx_cli_args *it);
/* A table option the command did not handle: a bug in tools/ (asserts). */
int cli_unhandled(const rx_cli_args *it);
/* Prints "relaxc: MESSAGE", the command's usage line and a pointer to --help on stderr; returns 2.
 */
int cli_usage_error(const rx_cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The command's usage line, or (full) its whole help, on out. */
void cli_print_help(const rx_cli_command *cmd, bool full, FILE *out);

/* ---- integer options (tools/cli.c) ---- */
/* Is s a whole decimal integer in [lo, hi]: digits with an optional '-', nothing else (no white
 * space, '+', fraction or exponent: "1.5", " 7", "7k" and "1e3" are not), no overflow? */
bool cli_parse_int(const char *s, long long lo, long long hi, long long *out);
/* The value of the integer option it.flag, parsed by cli_parse_int: 0, or 2 after a usage
 * error naming the option, the value and the range. */
int cli_int_option(const rx_cli_args *it, long long lo, long long hi, long long *out);

/* ---- files (tools/cli.c) ---- */
/* The text of FILE, or of standard input for "-", read up to the limit of its kind (base.h,
 * RX_FILE_KINDS: text IR, ONNX, or RX_FILE_MODEL for either) (heap; NULL after printing why). */
char *cli_read_input(const char *path, rx_file_kind kind, size_t *out_len);
/* The name diagnostics use for FILE: "<stdin>" for "-". */
const char *cli_input_name(const char *path);
/* The directory of FILE (heap): "." for a bare name; NULL for "-" (the current directory). */
char *cli_dir_of(const char *path);
/* Is the input an ONNX model rather than .rx text? Yes when FILE ends in ".onnx", or when its
 * first byte is a control character other than white space (a binary protobuf: ONNX files begin
 * with the tag byte 0x08 of ir_version; .rx text never begins so). */
bool cli_is_onnx(const char *path, const char *bytes, size_t len);
/* Creates DIR and its missing parents; false after printing why. */
bool cli_make_dir(const char *dir);
/* Can FILE be written (created or replaced)? Checked before any work, so that an unwritable
 * output fails at once: its directory must exist and be writable, and FILE must not be a
 * directory. False after printing why, naming FILE. */
bool cli_can_write(const char *path);
/* Is FILE no directory? False after printing "FILE: is a directory" (a missing FILE is left to
 * its reader, which names it). */
bool cli_not_dir(const char *path);
/* Writes the weights of the ONNX model read from FILE (its bytes; external data relative to
 * FILE's directory) as DIR/<parameter name>.npy, creating DIR; 0, or 1 after printing why.
 * Only with RX_HAVE_ONNX. */
int cli_write_onnx_weights(const char *path, const void *bytes, size_t len, const char *dir);

/* The module m (relaxc/compiler.h's rx_module) printed on stdout; before each line
 * `tensor_fn NAME(`, note(NAME, ctx) may print a comment line of its own (relaxc schedule's rule,
 * relaxc opt's pattern). */
typedef struct rx_module rx_module;
void cli_print_module(rx_module *m, void (*note)(const char *fn_name, void *ctx), void *ctx);

/* ---- Hugging Face model folders (tools/cli.c) ---- */
typedef struct rx_hf_options rx_hf_options;
/* The value of --dtype, --max-seq-len or --max-batch (it.flag) into o: 0, or 2 after a usage
 * error. */
int cli_hf_flag(const rx_cli_args *it, rx_hf_options *o);
/* hf_import of DIR into m; false after printing the error. */
typedef struct rx_module rx_module;
bool cli_import_hf(rx_module *m, const char *dir, const rx_hf_options *o);

#endif
