/* Programs compiled for a backend that is present and run through the runtime (runtime/), shared
 * by the tests that run kernels or artifacts on devices (test_conformance, test_attention,
 * test_e2e, test_llm, test_dynshape, test_big_grid). Compiled only into
 * the tests that link the runtime (RX_SUPPORT_RUNTIME, tests/CMakeLists.txt). */
#ifndef RX_SUPPORT_RUNTIME_H
#define RX_SUPPORT_RUNTIME_H

#include "relaxc/runtime.h"
#include "support_kernels.h"
#include "targets/target.h"

/* A backend as the tests use it: its device, and the target relaxc compiles for it. */
typedef struct rxk_backend {
  rx_rt_backend kind;
  rx_rt_device *dev; /* NULL: absent */
  char why[512];     /* why absent */
  rx_target target;  /* the description of the device, from the target table and the device */
} rxk_backend;

/* The target that describes the opened device dev, for relaxc to compile for: the table's entry
 * for its backend (Vulkan: "vulkan-lavapipe" on lavapipe, else "vulkan"), with the subgroup size
 * a Vulkan device reports (lavapipe's depends on the host's vector width; NVIDIA's is 32). */
void rxk_rt_target(const rx_rt_device *dev, rx_target *out);

/* Opens the backend b->kind (device spec as rx_rt_device_open takes it; Vulkan with the
 * validation layer) and picks its target: the table's entry, with the subgroup size the device
 * reports (lavapipe's depends on the host's vector width). Prints what it opened, or why not
 * (b->dev NULL, b->why set). */
void rxk_rt_open(rxk_backend *b, const char *spec);

/* The first of bs[0..n) whose device "<backend>:0" opens (rxk_rt_open: its target picked, why
 * not printed), released again (the LLM runtime opens its own); NULL when none does. */
rxk_backend *rxk_rt_first_present(rxk_backend *bs, int n);

/* Releases b's device where open; false, with the count and the last one in msg, when the
 * validation layer reported anything while it was open. */
bool rxk_rt_close(rxk_backend *b, char *msg, size_t n);

/* Schedules and generates f for b's target and loads its kernels on b's device (CUDA: PTX from
 * NVRTC; Vulkan: SPIR-V; Metal: source). Returns false with a message appended to msg. */
bool rxk_rt_load(rx_module *m, const rx_tensor_fn *f, rxk_backend *b, rx_rt_library **out,
                 rx_strbuf *msg);

/* Runs f from lib on b's device with io's buffers (every buffer uploaded, outputs included, so
 * that a program writing part of an output leaves the rest as given) and the symbolic values of
 * e, then reads the outputs back into io. With bench_runs > 0 it then times that many more runs
 * and stores the mean time per run in *out_ms. */
rx_status rxk_rt_run(rxk_backend *b, rx_rt_library *lib, const rx_tensor_fn *f, const rxk_env *e,
                     rxk_buffers *io, int bench_runs, double *out_ms);

/* The Hugging Face folder tests/llm/models/NAME (tests: the tests/ folder) in f32, at most
 * max_batch sequences per decode, compiled for target and written to path (test_batch,
 * test_serve). False with the reason in why (n bytes). */
bool rxk_compile_llm(const char *tests, const char *name, int64_t max_batch,
                     const rx_target *target, const char *path, char *why, size_t n);

/* m compiled for target into an artifact in memory (malloc'd, *len bytes), or NULL with the
 * diagnostics in why (n bytes) (test_autobatch, test_autobatch_models). */
unsigned char *rxk_compile_artifact(rx_module *m, const rx_target *target, size_t *len, char *why,
                                    size_t n);

/* tests/autobatch/FILES[0..n) (tests: the tests/ folder) read and parsed, in order, into one new
 * module called name; NULL with the reason in why (wn bytes) (test_autobatch_models,
 * test_autobatch_grain). */
rx_module *rxk_parse_autobatch(const char *tests, const char *const *files, size_t n,
                               const char *name, char *why, size_t wn);

/* The relative L2 distance of got from want (n floats): |got - want| / |want| (|want| taken as 1
 * when 0), in double (test_llm, test_batch: logits). */
double rxk_rel_l2(const float *got, const float *want, size_t n);

#endif
