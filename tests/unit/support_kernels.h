/* Shared by the kernel tests (test_kernels) and the conformance suite (test_conformance): the
 * symbolic sizes a program is run at, host buffers for its parameters, and the comparison of
 * outputs against the oracle (the reference interpreter) with the stated tolerances. */
#ifndef RX_SUPPORT_KERNELS_H
#define RX_SUPPORT_KERNELS_H

#include "base/base.h"
#include "interp/interp.h"
#include "ir/ir.h"

#define RXK_MAX_PARAMS 16
#define RXK_MAX_VARS   8

/* The sizes every symbolic variable takes in turn (the others stay at rxk_other_size, a
 * non-multiple of every tile size): 1, 7, 33, 128, 1000, 4099 (1, small primes, non-multiples
 * of tiles, above 4096). RX_KERNEL_SIZES (comma-separated) replaces the list: the sanitizer
 * pass of CI runs the sweeps at 1,7,33 only, the normal pass at every size. */
size_t rxk_size_count(void);
int64_t rxk_size_at(size_t i);
extern const int64_t rxk_other_size;

/* The kernel cache the tests' compiles share (driver/kcache.c; rx_compile_options.cache): the
 * directory $RX_TEST_KCACHE, else the build tree's tests/kcache (tests/CMakeLists.txt), opened
 * once per process and closed at exit; NULL (compile without) where RX_TEST_KCACHE is empty or 0.
 * The models and graphs the LLM and ONNX tests compile share most of their kernels, and each
 * distinct kernel then goes through the toolchains (shaderc, NVRTC) once per build, as a
 * user's `relaxc compile` does with its default cache; the tests of compilation itself
 * (test_compile, test_kcache, lit) compile without it. */
typedef struct rx_kcache rx_kcache;
rx_kcache *rxk_kcache(void);

/* Values of a program's symbolic variables. */
typedef struct rxk_env {
  const rx_expr *vars[RXK_MAX_VARS];
  int64_t values[RXK_MAX_VARS];
  int n;
} rxk_env;

/* The symbolic variables of a program (scalar parameters and variables of buffer shapes), each
 * at rxk_other_size. */
void rxk_program_vars(const rx_tensor_fn *f, rxk_env *e);
bool rxk_eval(const rx_expr *x, const rxk_env *e, int64_t *out);

/* Moves the values of vars[0..n) to the nearest ones (within RXK_FIT_RANGE) that satisfy every
 * `where` fact of f, vars[keep] last so the size under test changes least (1000 stays 1000 when
 * a fact asks for a multiple of 8; 33 becomes 32). False when no such values are near: the
 * facts exclude the size. */
#define RXK_FIT_RANGE 64
bool rxk_fit_facts(const rx_tensor_fn *f, const rx_expr *const *vars, int64_t *values, int n,
                   int keep);

/* Host copies of every parameter of a program, as the interpreter takes them. */
typedef struct rxk_buffers {
  int n;
  rx_interp_arg arg[RXK_MAX_PARAMS];
  size_t bytes[RXK_MAX_PARAMS];
} rxk_buffers;

/* Random inputs in [-1, 1), zeroed outputs; false with a message when a shape cannot be
 * evaluated. */
bool rxk_make_buffers(const rx_tensor_fn *f, const rxk_env *e, rxk_buffers *b, char *why, size_t n);
void rxk_copy_buffers(const rxk_buffers *from, rxk_buffers *to);
void rxk_free_buffers(rxk_buffers *b);
/* Element i of host data of dtype t (f16/bf16 as bits, integers as their C types) as a double. */
double rxk_load_elem(const void *p, rx_dtype t, size_t i);

/* Tolerance of an output dtype, as normalized error max|got - want| / max(1, max|want|):
 * f32 1e-4 (schedules reduce in another order than the serial oracle, over up to 4099 terms),
 * f16/bf16 2e-2 (a few units in the last place of half precision), f64 1e-4 (as f32: GLSL computes
 * its exp, log, ... in f32), integers exact (compared as doubles: u64 to 2^53). */
double rxk_tolerance(rx_dtype t);
/* Compares every output of got with want; false with a message naming the output, the error
 * and the worst element. */
bool rxk_compare_outputs(const rx_tensor_fn *f, const rxk_buffers *got, const rxk_buffers *want,
                         char *msg, size_t n);

/* Reads every .rx file of dir (sorted) into a list of heap paths. */
void rxk_list_rx_files(const char *dir, rx_ptrvec *out);
/* Parses, normalizes and verifies a file into a new module; NULL with the diagnostics in msg. */
rx_module *rxk_load_module(const char *path, rx_strbuf *msg);
/* rxk_load_module of the file rel below the tests folder (a test's argument); NULL after printing
 * "FAIL: PATH does not check:" and the diagnostics (a test's main then fails). */
rx_module *rxk_load_test_module(const char *tests, const char *rel);
/* The elements of a buffer (the product of its shape). */
size_t rxk_numel(const rx_interp_arg *a);
/* Parses, normalizes and verifies text (named `name` in messages); returns the diagnostics (heap)
 * or NULL when it verified, the module then in *out (or freed when out is NULL). */
char *rxk_verify_text(const char *name, const char *text, rx_module **out);
/* The tensor program of m named name, or NULL. */
const rx_tensor_fn *rxk_find_fn(rx_module *m, const char *name);

#endif
