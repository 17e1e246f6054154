/* Helpers shared by the subcommands of the relaxc command line. */
#include "commands.h"

#include "base/base.h"

#include <stdio.h>
#include <string.h>

char *rx_cli_read_input(const char *path, size_t *out_len) {
  *out_len = 0;
  if (strcmp(path, "-") != 0) {
    char *text = NULL;
    rx_status st = rx_read_file(path, &text, out_len);
    if (st) {
      fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
      rx_status_free(st);
      return NULL;
    }
    return text;
  }
  rx_strbuf b = {0};
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) rx_strbuf_appendn(&b, buf, n);
  if (ferror(stdin)) {
    rx_strbuf_free(&b);
    fputs("relaxc: error: cannot read standard input\n", stderr);
    return NULL;
  }
  *out_len = b.len;
  return rx_strbuf_take(&b);
}

const char *rx_cli_input_name(const char *path) { return strcmp(path, "-") == 0 ? "<stdin>" : path; }
