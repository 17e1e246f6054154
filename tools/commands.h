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

#include <stddef.h>

/* tools/cli.c: the text of FILE, or of standard input for "-" (heap; NULL after printing why). */
char *rx_cli_read_input(const char *path, size_t *out_len);
/* The name diagnostics use for FILE: "<stdin>" for "-". */
const char *rx_cli_input_name(const char *path);

#endif
