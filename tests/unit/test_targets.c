/* Target descriptions: every name parses to its entry, the documented values are the ones the
 * vendors publish, the table is self-consistent, and bad target strings give messages that
 * name the input and list what is known.
 *
 * usage: test_targets [TESTS_DIR]   (the directory is not used) */
#include "base/base.h"
#include "check.h"
#include "targets/target.h"

#include <stdio.h>
#include <string.h>

/* Parses text, expecting success; returns the target or NULL (and records a failure). */
static const rx_target *parse_ok(const char *text) {
  const rx_target *t = (const rx_target *)1;
  rx_status s = tgt_target_parse(text, &t);
  CHECK_MSG(s == NULL, "parse '%s': %s", text, rx_status_message(s));
  rx_status_free(s);
  return t;
}

/* Parses text, expecting an RX_ERR_INVALID whose message contains every string of want
 * (NULL-terminated). */
static void parse_bad(const char *text, const char *const want[]) {
  const rx_target *t = (const rx_target *)1;
  rx_status s = tgt_target_parse(text, &t);
  CHECK_MSG(s != NULL, "parse '%s' should fail", text ? text : "(null)");
  CHECK_MSG(t == NULL, "parse '%s' must clear the out-parameter on error", text ? text : "(null)");
  if (s) {
    CHECK_MSG(rx_status_code_of(s) == RX_ERR_INVALID, "parse '%s': code %d", text,
              rx_status_code_of(s));
    const char *msg = rx_status_message(s);
    for (size_t i = 0; want[i]; i++)
      CHECK_MSG(strstr(msg, want[i]) != NULL, "parse '%s': message lacks '%s': %s", text, want[i],
                msg);
  }
  rx_status_free(s);
}

static void test_names(void) {
  size_t n = 0;
  const rx_target *all = tgt_target_list(&n);
  CHECK_MSG(n >= 7, "%zu targets", n);
  for (size_t i = 0; i < n; i++) {
    const rx_target *t = parse_ok(all[i].name);
    CHECK_MSG(t == &all[i], "'%s' parses to its own entry", all[i].name);
    CHECK_MSG(tgt_target_find(all[i].name) == &all[i], "find '%s'", all[i].name);
    for (size_t j = i + 1; j < n; j++)
      CHECK_MSG(strcmp(all[i].name, all[j].name) != 0, "duplicate name '%s'", all[i].name);
  }
  const char *required[] = {"cuda -arch=sm_80", "cuda -arch=sm_90", "vulkan",
                            "vulkan-lavapipe",  "vulkan-adreno",    "vulkan-mali",
                            "vulkan-nvidia",    "metal-apple7"};
  for (size_t i = 0; i < RX_ARRAY_LEN(required); i++)
    CHECK_MSG(tgt_target_find(required[i]) != NULL, "target '%s' is described", required[i]);
  CHECK_MSG(tgt_target_find("opencl") == NULL, "find unknown");

  /* short forms and spacing */
  CHECK_MSG(parse_ok("cuda") == tgt_target_find("cuda -arch=sm_80"), "cuda alone is sm_80");
  CHECK_MSG(parse_ok("metal") == tgt_target_find("metal-apple7"), "metal alone is apple7");
  CHECK_MSG(parse_ok("  cuda   -arch=sm_90  ") == tgt_target_find("cuda -arch=sm_90"), "spaces");
  CHECK_MSG(parse_ok("cuda --arch=sm_90") == tgt_target_find("cuda -arch=sm_90"), "--arch");
  CHECK_MSG(parse_ok("cuda -arch=sm_80 -arch=sm_90") == tgt_target_find("cuda -arch=sm_90"),
            "the last -arch wins");
  CHECK_MSG(parse_ok("vulkan\t") == tgt_target_find("vulkan"), "tab");
  CHECK_MSG(strcmp(tgt_target_kind_name(RX_TARGET_CUDA), "cuda") == 0 &&
                strcmp(tgt_target_kind_name(RX_TARGET_VULKAN), "vulkan") == 0 &&
                strcmp(tgt_target_kind_name(RX_TARGET_METAL), "metal") == 0,
            "kind names");
  CHECK_MSG(!strcmp(tgt_target_kind_entry(RX_TARGET_VULKAN), "main") &&
                !tgt_target_kind_entry(RX_TARGET_CUDA) && !tgt_target_kind_entry(RX_TARGET_METAL),
            "entry points");
}

/* The kernel output file names every writer takes from tgt_target_binary_name and _asm_name. */
static void test_file_names(void) {
  rx_arena a;
  base_arena_init(&a);
  const rx_target *cu = tgt_target_find("cuda -arch=sm_90"), *vk = tgt_target_find("vulkan"),
                  *mt = tgt_target_find("metal-apple7");
  CHECK_MSG(cu && vk && mt, "targets");
  CHECK_MSG(!strcmp(tgt_target_binary_name(&a, cu, "k"), "k.sm_90.cubin"), "cubin name");
  CHECK_MSG(!strcmp(tgt_target_asm_name(&a, cu, "k"), "k.ptx"), "ptx name");
  CHECK_MSG(!strcmp(tgt_target_binary_name(&a, vk, "k"), "k.spv"), "spv name");
  CHECK_MSG(!tgt_target_asm_name(&a, vk, "k"), "no Vulkan assembly");
  CHECK_MSG(!tgt_target_binary_name(&a, mt, "k") && !tgt_target_asm_name(&a, mt, "k"),
            "no Metal binary written by the compiler");
  base_arena_free(&a);
}

static void test_bad(void) {
  parse_bad("opencl", (const char *const[]){"unknown target 'opencl'", "'cuda -arch=sm_80'",
                                            "'cuda -arch=sm_90'", "'vulkan-lavapipe'",
                                            "'metal-apple7'", "'vulkan-mali'", NULL});
  parse_bad("", (const char *const[]){"empty target", "'vulkan'", NULL});
  parse_bad("   ", (const char *const[]){"empty target", NULL});
  parse_bad(NULL, (const char *const[]){"no target", NULL});
  parse_bad("cuda -arch=sm_75",
            (const char *const[]){"unknown architecture 'sm_75'", "sm_80", "sm_90", NULL});
  parse_bad("cuda -arch=", (const char *const[]){"unknown architecture ''", NULL});
  parse_bad("cuda -O3", (const char *const[]){"unknown option '-O3'", "-arch=sm_XX", NULL});
  parse_bad("vulkan -arch=sm_80",
            (const char *const[]){"'vulkan' takes no options", "-arch=sm_80", NULL});
  parse_bad("vulkan-lavapip", (const char *const[]){"unknown target 'vulkan-lavapip'", NULL});
  parse_bad("CUDA", (const char *const[]){"unknown target 'CUDA'", NULL});
}

/* The values the vendors publish (see the comments in targets/targets.c). */
static void test_values(void) {
  const rx_target *a = tgt_target_find("cuda -arch=sm_80");
  const rx_target *h = tgt_target_find("cuda -arch=sm_90");
  const rx_target *v = tgt_target_find("vulkan");
  const rx_target *lp = tgt_target_find("vulkan-lavapipe");
  const rx_target *ad = tgt_target_find("vulkan-adreno");
  const rx_target *ma = tgt_target_find("vulkan-mali");
  const rx_target *m = tgt_target_find("metal-apple7");
  if (!a || !h || !v || !lp || !ad || !ma || !m) {
    CHECK_MSG(false, "a required target is missing");
    return;
  }
  /* CUDA Programming Guide, compute capability table */
  CHECK_MSG(a->kind == RX_TARGET_CUDA && strcmp(a->cuda_arch, "sm_80") == 0 && a->sm == 80,
            "sm_80 arch");
  CHECK_MSG(h->kind == RX_TARGET_CUDA && strcmp(h->cuda_arch, "sm_90") == 0 && h->sm == 90,
            "sm_90 arch");
  CHECK_MSG(a->max_threads_per_block == 1024 && h->max_threads_per_block == 1024,
            "CUDA 1024 threads");
  CHECK_MSG(a->max_block_dim[0] == 1024 && a->max_block_dim[1] == 1024 && a->max_block_dim[2] == 64,
            "CUDA block dims");
  CHECK_MSG(a->max_grid_dim[0] == 2147483647 && a->max_grid_dim[1] == 65535, "CUDA grid dims");
  CHECK_MSG(a->subgroup_size == 32 && h->subgroup_size == 32, "warp 32");
  CHECK_MSG(a->shared_bytes == 49152 && h->shared_bytes == 49152, "48 KiB default shared");
  CHECK_MSG(a->shared_bytes_optin == 163 * 1024, "sm_80 opt-in %d", a->shared_bytes_optin);
  CHECK_MSG(h->shared_bytes_optin == 227 * 1024, "sm_90 opt-in %d", h->shared_bytes_optin);
  CHECK_MSG(a->regs_per_block == 65536 && a->regs_per_thread == 255, "CUDA registers");
  CHECK_MSG(a->fp16 && a->bf16 && a->int8 && a->matrix_units, "sm_80 features");
  CHECK_MSG(a->vector_bytes == 16, "16-byte vector loads");

  /* Vulkan required limits */
  CHECK_MSG(v->kind == RX_TARGET_VULKAN, "vulkan kind");
  CHECK_MSG(v->max_threads_per_block == 128, "maxComputeWorkGroupInvocations %d",
            v->max_threads_per_block);
  CHECK_MSG(v->max_block_dim[0] == 128 && v->max_block_dim[1] == 128 && v->max_block_dim[2] == 64,
            "maxComputeWorkGroupSize");
  CHECK_MSG(v->shared_bytes == 16384, "maxComputeSharedMemorySize %d", v->shared_bytes);
  CHECK_MSG(v->push_constant_bytes == 128, "maxPushConstantsSize %d", v->push_constant_bytes);
  CHECK_MSG(v->max_storage_buffers == 4, "maxPerStageDescriptorStorageBuffers %d",
            v->max_storage_buffers);
  CHECK_MSG(v->subgroup_size == 0 && !v->subgroup_arithmetic, "no subgroup assumptions");
  CHECK_MSG(!v->fp16 && !v->int8 && !v->storage16 && !v->matrix_units, "no optional features");
  CHECK_MSG(v->vulkan.major == 1 && v->vulkan.minor == 2 && v->spirv.major == 1 &&
                v->spirv.minor == 5,
            "Vulkan 1.2 / SPIR-V 1.5");

  /* lavapipe (Mesa), Adreno, Mali */
  CHECK_MSG(lp->subgroup_size == 8 && lp->shared_bytes == 32768, "lavapipe subgroup 8, 32 KiB");
  CHECK_MSG(lp->max_threads_per_block == 1024 && lp->subgroup_arithmetic,
            "lavapipe 1024, arithmetic");
  CHECK_MSG(ad->subgroup_size == 64 && ad->max_subgroup_size == 128 && ad->shared_bytes == 32768,
            "Adreno subgroup 64..128, 32 KiB");
  CHECK_MSG(ma->subgroup_size == 16 && ma->shared_bytes == 32768 &&
                ma->max_threads_per_block == 512,
            "Mali subgroup 16, 32 KiB, 512");

  /* Metal feature set tables */
  CHECK_MSG(m->kind == RX_TARGET_METAL && m->max_threads_per_block == 1024, "apple7 1024 threads");
  CHECK_MSG(m->shared_bytes == 32768 && m->subgroup_size == 32, "apple7 32 KiB, SIMD 32");
  CHECK_MSG(m->max_storage_buffers == 31 && m->matrix_units, "apple7 31 buffers, simdgroup_matrix");
  CHECK_MSG(m->msl.major == 3, "MSL 3.x");
}

/* What every entry must satisfy whatever its values. */
static void test_consistency(void) {
  size_t n = 0;
  const rx_target *all = tgt_target_list(&n);
  for (size_t i = 0; i < n; i++) {
    const rx_target *t = &all[i];
    CHECK_MSG(t->source && strlen(t->source) > 10, "'%s' cites its source", t->name);
    CHECK_MSG(t->device && *t->device, "'%s' names its devices", t->name);
    CHECK_MSG(t->max_threads_per_block > 0, "'%s' threads", t->name);
    /* the figure the compiler warns against (issue 29): at least 4 GB, at most an H200's */
    CHECK_MSG(t->device_memory >= 4000000000ll && t->device_memory <= 141000000000ll,
              "'%s' device memory %lld", t->name, (long long)t->device_memory);
    long long product = 1;
    for (int d = 0; d < 3; d++) {
      CHECK_MSG(t->max_block_dim[d] > 0 && t->max_block_dim[d] <= t->max_threads_per_block,
                "'%s' block dim %d", t->name, d);
      CHECK_MSG(t->max_grid_dim[d] >= 65535, "'%s' grid dim %d", t->name, d);
      product *= t->max_block_dim[d];
    }
    CHECK_MSG(product >= t->max_threads_per_block, "'%s' block dims reach the thread limit",
              t->name);
    if (t->subgroup_size) {
      CHECK_MSG(t->min_subgroup_size <= t->subgroup_size &&
                    t->subgroup_size <= t->max_subgroup_size,
                "'%s' subgroup range", t->name);
      CHECK_MSG((t->subgroup_size & (t->subgroup_size - 1)) == 0, "'%s' subgroup power of two",
                t->name);
      CHECK_MSG(t->max_threads_per_block % t->subgroup_size == 0, "'%s' whole subgroups", t->name);
    } else {
      CHECK_MSG(!t->subgroup_arithmetic, "'%s': arithmetic needs a known subgroup size", t->name);
    }
    CHECK_MSG(t->shared_bytes >= 16384 && t->shared_bytes_optin >= t->shared_bytes, "'%s' shared",
              t->name);
    CHECK_MSG(t->push_constant_bytes >= 128, "'%s' at least 128 bytes of arguments (kernel ABI)",
              t->name);
    CHECK_MSG(t->vector_bytes >= 4 && (t->vector_bytes & (t->vector_bytes - 1)) == 0, "'%s' vector",
              t->name);
    CHECK_MSG(!t->bf16 || t->fp16, "'%s': bf16 without fp16", t->name);
    switch (t->kind) {
    case RX_TARGET_CUDA:
      CHECK_MSG(t->cuda_arch && t->sm >= 50 && strncmp(t->cuda_arch, "sm_", 3) == 0, "'%s' arch",
                t->name);
      CHECK_MSG(strstr(t->name, t->cuda_arch) != NULL, "'%s' name carries the arch", t->name);
      break;
    case RX_TARGET_VULKAN:
      CHECK_MSG(t->vulkan.major == 1 && t->vulkan.minor >= 2 && t->spirv.major == 1 &&
                    t->spirv.minor >= 5,
                "'%s' versions", t->name);
      CHECK_MSG(t->push_constant_bytes <= 256, "'%s' push constants", t->name);
      CHECK_MSG(!t->fp16 || t->storage16, "'%s' f16 kernels need 16-bit storage", t->name);
      CHECK_MSG(!t->cuda_arch, "'%s' no CUDA arch", t->name);
      break;
    case RX_TARGET_METAL:
      CHECK_MSG(t->msl.major >= 2 && !t->cuda_arch, "'%s' MSL version", t->name);
      break;
    }
  }
}

/* Matrix units (PTX ISA matrix shape tables; Metal's simdgroup_matrix; Vulkan queried). */
static void test_mma(void) {
  const rx_target *a = tgt_target_find("cuda -arch=sm_80");
  const rx_target *h = tgt_target_find("cuda -arch=sm_90");
  const rx_target *v = tgt_target_find("vulkan");
  const rx_target *lp = tgt_target_find("vulkan-lavapipe");
  const rx_target *m = tgt_target_find("metal-apple7");
  const rx_mma_shape *x = tgt_target_mma(a, RX_DTYPE_F16, RX_DTYPE_F32, -1);
  CHECK_MSG(x && x->api == RX_MMA_SYNC && x->m == 16 && x->n == 8 && x->k == 16 && x->threads == 32,
            "sm_80 f16 -> f32: mma.sync m16n8k16");
  x = tgt_target_mma(a, RX_DTYPE_I8, RX_DTYPE_I32, -1);
  CHECK_MSG(x && x->k == 32 && strstr(x->instr, "m16n8k32"), "sm_80 s8 -> s32: m16n8k32");
  CHECK_MSG(!tgt_target_mma(a, RX_DTYPE_F32, RX_DTYPE_F32, -1),
            "sm_80: no f32 inputs (tf32 left out)");
  CHECK_MSG(!tgt_target_mma(a, RX_DTYPE_F16, RX_DTYPE_F32, RX_MMA_WGMMA), "sm_80 has no wgmma");
  x = tgt_target_mma(h, RX_DTYPE_BF16, RX_DTYPE_F32, -1);
  CHECK_MSG(x && x->api == RX_MMA_WGMMA && x->m == 64 && x->n == 256 && x->n_step == 8 &&
                x->threads == 128,
            "sm_90 bf16 -> f32: wgmma m64nNk16 first");
  x = tgt_target_mma(h, RX_DTYPE_BF16, RX_DTYPE_F32, RX_MMA_SYNC);
  CHECK_MSG(x && x->m == 16 && x->n == 8, "sm_90 keeps mma.sync");
  /* subgroup fragments 16x16x16 over mma.sync, f16 and bf16 into f32, listed after mma.sync */
  for (int ti = 0; ti < 2; ti++)
    for (int d = 0; d < 2; d++) {
      const rx_target *t = ti ? h : a;
      rx_dtype ab = d ? RX_DTYPE_BF16 : RX_DTYPE_F16;
      x = tgt_target_mma(t, ab, RX_DTYPE_F32, RX_MMA_SYNC_FRAG);
      CHECK_MSG(x && x->m == 16 && x->n == 16 && x->k == 16 && x->threads == 32 &&
                    x > tgt_target_mma(t, ab, RX_DTYPE_F32, RX_MMA_SYNC),
                "%s %s: sync-frag 16x16x16 after mma.sync", t->name, d ? "bf16" : "f16");
    }
  CHECK_MSG(!tgt_target_mma(a, RX_DTYPE_F16, RX_DTYPE_F16, RX_MMA_SYNC_FRAG),
            "sm_80: fragments accumulate in f32 only");
  CHECK_MSG(!tgt_target_mma(v, RX_DTYPE_F16, RX_DTYPE_F32, -1) && v->mma_query,
            "vulkan: cooperative matrix shapes come from the device");
  CHECK_MSG(!lp->nmma && !lp->mma_query, "lavapipe: no cooperative matrix");
  x = tgt_target_mma(m, RX_DTYPE_F16, RX_DTYPE_F32, -1);
  CHECK_MSG(x && x->api == RX_MMA_SIMDGROUP && x->m == 8 && x->n == 8 && x->k == 8,
            "apple7: simdgroup_matrix 8x8");
  CHECK_MSG(!tgt_target_mma(m, RX_DTYPE_BF16, RX_DTYPE_F32, -1), "apple7: no bfloat matrices");
  const rx_target *nv = tgt_target_find("vulkan-nvidia");
  x = nv ? tgt_target_mma(nv, RX_DTYPE_F16, RX_DTYPE_F32, -1) : NULL;
  CHECK_MSG(x && x->api == RX_MMA_COOP && x->m == 16 && x->n == 16 && x->k == 16 &&
                x->threads == 32 && nv->subgroup_size == 32 && nv->min_subgroup_size == 32 &&
                nv->fp16 && nv->storage16,
            "vulkan-nvidia: VK_NV_cooperative_matrix 16x16x16 f16 -> f32 over subgroups of 32");
  size_t n = 0;
  const rx_target *all = tgt_target_list(&n);
  for (size_t i = 0; i < n; i++) {
    const rx_target *t = &all[i];
    CHECK_MSG(t->matrix_units == (t->nmma > 0), "'%s': matrix_units exactly when shapes are listed",
              t->name);
    for (int j = 0; j < t->nmma; j++) {
      const rx_mma_shape *s = &t->mma[j];
      CHECK_MSG(s->m > 0 && s->n > 0 && s->k > 0 && s->instr && *s->instr, "'%s' shape %d", t->name,
                j);
      CHECK_MSG(t->subgroup_size && s->threads % t->subgroup_size == 0,
                "'%s' shape %d: whole subgroups", t->name, j);
      CHECK_MSG(!s->n_step || s->n % s->n_step == 0, "'%s' shape %d: n a multiple of its step",
                t->name, j);
      CHECK_MSG(s->api != RX_MMA_WGMMA || t->sm >= 90, "'%s': wgmma needs sm_90", t->name);
      CHECK_MSG((s->api == RX_MMA_SYNC || s->api == RX_MMA_WGMMA || s->api == RX_MMA_SYNC_FRAG) ==
                    (t->kind == RX_TARGET_CUDA),
                "'%s' shape %d: an api of its kind", t->name, j);
    }
  }
  rx_strbuf b = {0};
  tgt_target_describe(&b, h);
  CHECK_MSG(b.data &&
                strstr(b.data, "matrix unit: wgmma m64n256k16 (n: multiples) bf16 x bf16 -> f32"),
            "%s", b.data ? b.data : "");
  CHECK_MSG(b.data &&
                strstr(b.data, "matrix unit: sync-frag m16n16k16 bf16 x bf16 -> f32, 32 threads"),
            "%s", b.data ? b.data : "");
  base_strbuf_free(&b);
}

static void test_describe(void) {
  rx_strbuf b = {0};
  tgt_target_describe(&b, tgt_target_find("vulkan-lavapipe"));
  CHECK_MSG(b.data && strstr(b.data, "target: vulkan-lavapipe\n"), "%s", b.data ? b.data : "");
  CHECK_MSG(b.data && strstr(b.data, "subgroup size: 8 (hardware 8..8)"), "%s",
            b.data ? b.data : "");
  CHECK_MSG(b.data && strstr(b.data, "shared memory per block: 32768 bytes"), "%s",
            b.data ? b.data : "");
  base_strbuf_free(&b);
  tgt_target_describe(&b, tgt_target_find("vulkan"));
  CHECK_MSG(b.data && strstr(b.data, "subgroup size: unknown"), "%s", b.data ? b.data : "");
  base_strbuf_free(&b);
  tgt_target_describe(&b, tgt_target_find("cuda -arch=sm_90"));
  CHECK_MSG(b.data && strstr(b.data, "opt-in 232448") && strstr(b.data, "arch: sm_90"), "%s",
            b.data ? b.data : "");
  base_strbuf_free(&b);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  test_names();
  test_file_names();
  test_bad();
  test_values();
  test_consistency();
  test_mma();
  test_describe();
  return check_finish("test_targets");
}
