/* The memory-bound kernels of an LLM decode step (issue 13), for the static checks that stand in
 * for a GPU: the PTX checks (test_ptx_checks) and the coalescing report of the SIMT emulator
 * (test_coalescing).
 *
 * Where they come from: a Llama decoder of one layer imported from its config.json alone (the
 * weights stay parameters, the shapes are the model's), compiled for CUDA with fusion, and its
 * `decode` function's programs; plus a small graph module at the same model's shapes for the ops
 * a fused decoder no longer has as programs of their own (silu(g) * u, a softmax over a cache row).
 * Each program is given a role by what it computes, not by its generated name:
 *   gemv       a reduction reading a weight matrix (a 2-D f16 parameter of at least 2^20
 *              elements, or int32 words packing as many), so every decode matmul with its fused
 *              prologue or epilogue;
 *   rms_norm   an rsqrt of a mean of squares (the norm, alone or fused with the residual add);
 *   silu_mul   a sigmoid times a product, no weight matrix;
 *   softmax    an exp and a max reduction, not an attention program;
 *   attention  the decode attention over the paged cache and its merge of the chunks.
 * A role without a program in a model is an error (the classification broke). */
#ifndef RX_SUPPORT_DECODE_H
#define RX_SUPPORT_DECODE_H

#include "base/base.h"
#include "codegen/codegen.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "support_kernels.h"

#define RXD_ROLES(X)                                                                               \
  X(GEMV, "gemv")                                                                                  \
  X(RMS_NORM, "rms_norm")                                                                          \
  X(SILU_MUL, "silu_mul")                                                                          \
  X(SOFTMAX, "softmax")                                                                            \
  X(ATTENTION, "attention")

typedef enum rxd_role {
#define X(e, n) RXD_##e,
  RXD_ROLES(X)
#undef X
      RXD_ROLE_COUNT
} rxd_role;
const char *rxd_role_name(rxd_role r);

/* The model shapes of the checks. */
typedef struct rxd_shape {
  const char *name;   /* "llama2-7b" */
  const char *config; /* its config.json (one layer) */
  int hidden, intermediate, heads, kv_heads, head_dim, max_pos;
} rxd_shape;
extern const rxd_shape rxd_shapes[];
extern const int rxd_nshapes;
/* Llama-2-7B quantized as AWQ (groups of 128) and GPTQ v2 (act-order) checkpoints (their
 * config.json's quantization_config): the GEMVs of int32 words. */
extern const rxd_shape rxd_quant_shapes[];
extern const int rxd_nquant_shapes;

typedef struct rxd_kernel {
  rxd_role role;
  const rx_tensor_fn *program; /* unscheduled, as the module holds it */
  const rx_kernel *kernel;     /* a kernel of its CUDA code that runs at the values of rxd_env */
  rxk_env env;                 /* the program's symbolic values in a decode step */
} rxd_kernel;

typedef struct rxd_model {
  const rxd_shape *shape;
  rx_module *m[2]; /* the decoder and the ops module */
  rx_compile_result r[2];
  rxd_kernel *k;
  int n;
} rxd_model;

/* Builds the model for target (a CUDA target) under tmpdir (config.json written there);
 * false with the reason in why. Free with rxd_model_free in every case. */
bool rxd_model_build(rxd_model *out, const rxd_shape *s, const char *target, const char *tmpdir,
                     char *why, size_t n);
void rxd_model_free(rxd_model *md);

/* Builds each of the first nshapes models (for target, config files under a temporary folder)
 * and calls visit on each of its kernels; a model that does not build is reported on stderr
 * ("FAIL: ...") and counted. Returns the count. */
typedef void (*rxd_visit)(const rxd_shape *s, const rxd_kernel *k, void *ud);
int rxd_for_each_kernel(int nshapes, const char *target, rxd_visit visit, void *ud);
/* The same over the first nshapes of shapes. */
int rxd_for_each_kernel_of(const rxd_shape *shapes, int nshapes, const char *target,
                           rxd_visit visit, void *ud);

/* The symbolic values of program f in a decode step of one sequence with a full cache: the
 * batch b (or n) 1, the cache of max_pos tokens (mp: its pages of 16 tokens, pages: as many
 * pages in the pool, m: its length), any other 1. */
void rxd_env(const rxd_shape *s, const rx_tensor_fn *f, rxk_env *out);

#endif
