/* Subcommands of the relaxc command line implemented outside tools/relaxc.c. Each takes the
 * arguments after the command name's position (argv[0] is the command name) and returns the
 * process exit status (0 success, 1 errors in the input, 2 usage error). */
#ifndef RX_TOOLS_COMMANDS_H
#define RX_TOOLS_COMMANDS_H

int rx_cmd_schedule(int argc, char **argv); /* tools/cmd_schedule.c */
int rx_cmd_codegen(int argc, char **argv);  /* tools/cmd_codegen.c */
int rx_cmd_compile(int argc, char **argv);  /* tools/cmd_compile.c */
int rx_cmd_run(int argc, char **argv);      /* tools/cmd_run.c */
int rx_cmd_inspect(int argc, char **argv);  /* tools/cmd_inspect.c */
int rx_cmd_import(int argc, char **argv);   /* tools/cmd_import.c */

#include <stdbool.h>
#include <stddef.h>

/* tools/cli.c: the text of FILE, or of standard input for "-" (heap; NULL after printing why). */
char *rx_cli_read_input(const char *path, size_t *out_len);
/* The name diagnostics use for FILE: "<stdin>" for "-". */
const char *rx_cli_input_name(const char *path);
/* The directory of FILE (heap): "." for a bare name; NULL for "-" (the current directory). */
char *rx_cli_dir_of(const char *path);
/* Is the input an ONNX model rather than .rx text? Yes when FILE ends in ".onnx", or when its
 * first byte is a control character other than white space (a binary protobuf: ONNX files begin
 * with the tag byte 0x08 of ir_version; .rx text never begins so). */
bool rx_cli_is_onnx(const char *path, const char *bytes, size_t len);
/* Creates DIR and its missing parents; false after printing why. */
bool rx_cli_make_dir(const char *dir);
/* Writes the weights of the ONNX model read from FILE (its bytes; external data relative to
 * FILE's directory) as DIR/<parameter name>.npy, creating DIR; 0, or 1 after printing why.
 * Only with RX_HAVE_ONNX. */
int rx_cli_write_onnx_weights(const char *path, const void *bytes, size_t len, const char *dir);

#endif
