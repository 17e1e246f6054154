/* One op's program on every target, shared by the tests that check an op's legalization against
 * a reference written in C (test_attention, test_ragged): the op call of a one-binding graph
 * `main` legalized (as passes/legalize.c does), or a hand-written tensor program `prog`, then
 * scheduled, generated and checked for each target (support_pipeline.c) and loaded on the
 * Vulkan device where one is open (support_runtime.c). Compiled only into the tests that link
 * the runtime (RX_SUPPORT_RUNTIME, tests/CMakeLists.txt). */
#ifndef RX_SUPPORT_ONEOP_H
#define RX_SUPPORT_ONEOP_H

#include "support_pipeline.h"
#include "support_runtime.h"

/* cuda sm_80 and sm_90, vulkan-lavapipe, vulkan, metal-apple7, vulkan-nvidia */
#define RXK_ONEOP_TARGETS 6
extern const char *const rxk_oneop_targets[RXK_ONEOP_TARGETS];

typedef struct rxk_oneop {
  char what[200];
  rx_module *m;
  rx_tensor_fn *f;
  rxk_prepared tp[RXK_ONEOP_TARGETS]; /* tp[i].ok false: not compiled for that target */
  rx_rt_library *lib;                 /* on vk's device; NULL when none is open */
} rxk_oneop;

/* Builds p from text (named what): the program of `main`'s op call (named name), or the tensor
 * program `prog` when text has no `main`, compiled for every target (bf16 too: GLSL keeps it in
 * 16-bit words and computes in f32) and loaded on vk's device when open. False when filter
 * (may be NULL) is not in what, or after counting a failure in st; free p either way. */
bool rxk_oneop_build(rxk_oneop *p, const char *text, const char *what, const char *name,
                     const char *filter, rxk_stats *st, rxk_backend *vk);
void rxk_oneop_free(rxk_oneop *p);
/* The buffer of p's k-th buffer parameter (the op's argument k) in b. */
rx_interp_arg *rxk_oneop_param(const rxk_oneop *p, rxk_buffers *b, int k);
/* The buffer of p's buffer parameter named name in b (there must be one). */
rx_interp_arg *rxk_oneop_named(const rxk_oneop *p, rxk_buffers *b, const char *name);

/* A step of xorshift64 on *state: the tests' reproducible random numbers. */
uint64_t rxk_xorshift(uint64_t *state);
/* slot[0 .. n): n distinct KV-cache slots of 0 .. nslots - 1, shuffled over the whole pool
 * (Fisher-Yates with rxk_xorshift of *rng). */
void rxk_shuffle_slots(int32_t *slot, int64_t n, int64_t nslots, uint64_t *rng);

/* The start of a one-op test's main: stdout line-buffered, the case filter (argv[2], else
 * RX_KERNEL_FILTER) in *out_filter, LD_PRELOAD dropped (in a sanitized build the Vulkan tests
 * run with the sanitizer runtime and lavapipe preloaded, tests/CMakeLists.txt; the compilers
 * the SIMT emulator starts must not inherit that), and vk opened on vulkan:0. */
void rxk_oneop_main_begin(int argc, char **argv, const char **out_filter, rxk_backend *vk);
/* Its end: vk closed (what the validation layer reported counts as a failure in st), the counts
 * printed as "NAME: P passed, F failed, S skipped"; the exit status. */
int rxk_oneop_main_end(rxk_stats *st, rxk_backend *vk, const char *name);

#endif
