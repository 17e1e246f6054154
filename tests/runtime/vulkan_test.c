/* tests/runtime/vulkan_test.c: the runtime on Vulkan (lavapipe in CI), under the Khronos
 * validation layer; any validation message fails the test.
 * Usage: rt_vulkan_test KERNEL_DIR (the hand-written kernels.json and the SPIR-V compiled from
 * the .comp files in tests/runtime/kernels by glslangValidator at build time). */
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"
#include "runtime/vulkan/vk_memory.h"

static const char *g_dir;

static rx_rt_device *open_dev(bool staging) {
  rx_rt_device_options o = {NULL, 1, staging};
  rx_rt_device *d = NULL;
  CHECK_OK(rx_rt_device_open("vulkan:0", &o, &d));
  return d;
}

static void check_no_validation(rx_rt_device *d, const char *what) {
  const char *last = NULL;
  size_t n = rx_rt_device_validation_messages(d, &last);
  CHECK_MSG(n == 0, "%s: %zu validation messages, the last: %s", what, n, last);
}

/* ---- devices ---- */
static void test_enumerate(void) {
  rx_rt_device_info *infos = NULL;
  size_t n = 0;
  CHECK_OK(rx_rt_enumerate(RX_RT_BACKEND_VULKAN, &infos, &n));
  CHECK_MSG(n >= 1, "no Vulkan device");
  for (size_t i = 0; i < n; i++) {
    const rx_rt_device_info *x = &infos[i];
    printf("vulkan:%d %s: memory %llu MiB, subgroup %u, shared %u B, push constants %u B, "
           "max threads %u, fp16 %d, int8 %d, timestamps %d, unified %d\n",
           x->index, x->name, (unsigned long long)(x->memory_bytes >> 20), x->subgroup_size,
           x->shared_memory_bytes, x->push_constant_bytes, x->max_threads_per_block, x->fp16,
           x->int8, x->timestamps, x->unified_memory);
    CHECK_MSG(x->backend == RX_RT_BACKEND_VULKAN && x->index == (int)i, "backend/index");
    CHECK_MSG(x->name[0] != '\0', "empty name");
    CHECK_MSG(x->memory_bytes > 0, "no memory");
    CHECK_MSG(x->subgroup_size >= 1, "subgroup size %u", x->subgroup_size);
    CHECK_MSG(x->push_constant_bytes >= 128, "push constants %u (Vulkan guarantees 128)",
              x->push_constant_bytes);
    CHECK_MSG(x->shared_memory_bytes >= 16384, "shared memory %u (Vulkan guarantees 16384)",
              x->shared_memory_bytes);
    CHECK_MSG(x->max_threads_per_block >= 128, "max threads %u", x->max_threads_per_block);
  }
  rx_rt_free_device_infos(infos);

  /* selection: by spec, by RX_DEVICE, and bad specs */
  rx_rt_device *d = NULL;
  setenv("RX_DEVICE", "vulkan:0", 1);
  rx_rt_device_options o = {NULL, 1, false};
  CHECK_OK(rx_rt_device_open(NULL, &o, &d));
  CHECK_MSG(d && rx_rt_device_get_info(d)->backend == RX_RT_BACKEND_VULKAN, "RX_DEVICE ignored");
  if (d) check_no_validation(d, "open via RX_DEVICE");
  rx_rt_device_release(d);
  unsetenv("RX_DEVICE");
  CHECK_ERR(rx_rt_device_open("vulkan:99", &o, &d), RX_ERR_NOT_FOUND, "vulkan:99");
  CHECK_MSG(d == NULL, "out_device must stay NULL on error");
  CHECK_ERR(rx_rt_device_open("opengl:0", &o, &d), RX_ERR_INVALID, "expected vulkan");
  CHECK_ERR(rx_rt_device_open("vulkan:x", &o, &d), RX_ERR_INVALID, "index");
  rx_status cs = rx_rt_backend_check(RX_RT_BACKEND_CUDA);
  if (cs) {
    CHECK_ERR(rx_rt_device_open("cuda:0", &o, &d), RX_ERR_NOT_FOUND, "cuda");
  } else {
    CHECK_SKIP("a CUDA driver is present: the missing-driver message is not checked here");
  }
  rx_status_free(cs);
#ifndef __APPLE__
  CHECK_ERR(rx_rt_device_open("metal:0", &o, &d), RX_ERR_UNSUPPORTED, "Apple");
#endif
}

/* ---- buffers ---- */
static uint32_t rng = 12345;
static uint8_t rnd(void) {
  rng = rng * 1664525u + 1013904223u;
  return (uint8_t)(rng >> 24);
}

static void test_buffers(rx_rt_device *d, const char *what) {
  static const size_t sizes[] = {1, 3, 4, 5, 7, 1000, 4099 * 4 + 1, ((size_t)64 << 20) + 3};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t n = sizes[si];
    uint8_t *host = malloc(n), *back = malloc(n), *model = malloc(n);
    for (size_t i = 0; i < n; i++) host[i] = model[i] = rnd();
    rx_rt_buffer *a = NULL, *b = NULL;
    CHECK_OK(rx_rt_buffer_alloc(d, n, &a));
    CHECK_OK(rx_rt_buffer_alloc(d, n, &b));
    if (!a || !b) {
      rx_rt_buffer_release(a);
      rx_rt_buffer_release(b);
      free(host), free(back), free(model);
      continue;
    }
    CHECK_MSG(rx_rt_buffer_size(a) == n, "size");
    CHECK_OK(rx_rt_buffer_write(a, 0, host, n));
    memset(back, 0, n);
    CHECK_OK(rx_rt_buffer_read(a, 0, back, n));
    CHECK_MSG(memcmp(back, model, n) == 0, "%s: round trip of %zu bytes", what, n);
    /* queued: an unaligned fill, an aligned fill, then copies at odd offsets */
    CHECK_OK(rx_rt_buffer_fill(b, 0, n, 0xAB));
    if (n > 2) {
      CHECK_OK(rx_rt_buffer_fill(a, 1, n - 2, 0x5C));
      memset(model + 1, 0x5C, n - 2);
    }
    if (n >= 8) {
      CHECK_OK(rx_rt_buffer_fill(a, 4, 4, 0x11));
      memset(model + 4, 0x11, 4);
    }
    uint8_t *bmodel = malloc(n);
    memset(bmodel, 0xAB, n);
    size_t off = n > 3 ? 1 : 0, len = n > 3 ? n - 3 : n;
    CHECK_OK(rx_rt_buffer_copy(a, off, b, n - len, len));
    memcpy(bmodel + (n - len), model + off, len);
    CHECK_OK(rx_rt_buffer_read(a, 0, back, n));
    CHECK_MSG(memcmp(back, model, n) == 0, "%s: fills of %zu bytes", what, n);
    CHECK_OK(rx_rt_buffer_read(b, 0, back, n));
    CHECK_MSG(memcmp(back, bmodel, n) == 0, "%s: fill + copy of %zu bytes", what, n);
    /* partial reads and writes at odd offsets */
    if (n >= 7) {
      uint8_t part[3] = {1, 2, 3}, got[5] = {0};
      CHECK_OK(rx_rt_buffer_write(b, n - 4, part, 3));
      memcpy(bmodel + n - 4, part, 3);
      CHECK_OK(rx_rt_buffer_read(b, n - 6, got, 5));
      CHECK_MSG(memcmp(got, bmodel + n - 6, 5) == 0, "%s: partial read/write", what);
    }
    CHECK_ERR(rx_rt_buffer_write(a, n, host, 1), RX_ERR_INVALID, "outside the buffer");
    CHECK_ERR(rx_rt_buffer_read(a, 1, back, n), RX_ERR_INVALID, "outside the buffer");
    CHECK_ERR(rx_rt_buffer_copy(a, 0, a, 0, n), RX_ERR_INVALID, "overlap");
    free(bmodel);
    free(host), free(back), free(model);
    rx_rt_buffer_release(a);
    rx_rt_buffer_release(b);
  }
  rx_rt_buffer *z = NULL;
  CHECK_ERR(rx_rt_buffer_alloc(d, 0, &z), RX_ERR_INVALID, "0 bytes");
  CHECK_ERR(rx_rt_buffer_alloc(d, (size_t)1 << 50, &z), RX_ERR_OUT_OF_MEMORY,
            "out of device memory");
  CHECK_MSG(z == NULL, "out_buffer must stay NULL on error");
  /* many small buffers: suballocation and reuse after free */
  rx_rt_buffer *many[300];
  for (int i = 0; i < 300; i++) {
    many[i] = NULL;
    CHECK_OK(rx_rt_buffer_alloc(d, 100 + (size_t)i, &many[i]));
  }
  for (int i = 0; i < 300; i += 2) rx_rt_buffer_release(many[i]);
  for (int i = 1; i < 300; i += 2) {
    int v = i * 7, got = 0;
    if (many[i]) CHECK_OK(rx_rt_buffer_write(many[i], 96, &v, 4));
    if (many[i]) CHECK_OK(rx_rt_buffer_read(many[i], 96, &got, 4));
    CHECK_MSG(got == v, "small buffer %d", i);
    rx_rt_buffer_release(many[i]);
  }
}

/* Buffers of sizes below, at and above the block size (RT_VK_BLOCK_SIZE) side by side: each
 * written with its own pattern and read back after all were written (no two share bytes); a big
 * one (its own block) freed and allocated again. */
static void test_block_sizes(rx_rt_device *d, const char *what) {
  const size_t block = (size_t)RT_VK_BLOCK_SIZE;
  const size_t sizes[] = {16, block / 2 + 12, block - 256, 4096, block, block + 4, 100};
  enum { N = sizeof sizes / sizeof sizes[0] };
  rx_rt_buffer *bufs[N] = {0};
  uint8_t *host = malloc(block + 4), *back = malloc(block + 4);
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < N; i++) {
      if (!bufs[i]) CHECK_OK(rx_rt_buffer_alloc(d, sizes[i], &bufs[i]));
      if (!bufs[i]) continue;
      for (size_t k = 0; k < sizes[i]; k++) host[k] = (uint8_t)(k * 31 + i * 7 + round);
      CHECK_OK(rx_rt_buffer_write(bufs[i], 0, host, sizes[i]));
    }
    for (size_t i = 0; i < N; i++) {
      if (!bufs[i]) continue;
      memset(back, 0, sizes[i]);
      CHECK_OK(rx_rt_buffer_read(bufs[i], 0, back, sizes[i]));
      size_t bad = sizes[i];
      for (size_t k = 0; k < sizes[i] && bad == sizes[i]; k++)
        if (back[k] != (uint8_t)(k * 31 + i * 7 + round)) bad = k;
      CHECK_MSG(bad == sizes[i], "%s: buffer %zu of %zu bytes differs at byte %zu (round %d)", what,
                i, sizes[i], bad, round);
    }
    /* the largest (its own block) and one suballocated given back, then allocated again */
    rx_rt_buffer_release(bufs[5]);
    rx_rt_buffer_release(bufs[1]);
    bufs[5] = bufs[1] = NULL;
  }
  for (size_t i = 0; i < N; i++) rx_rt_buffer_release(bufs[i]);
  free(host), free(back);
  check_no_validation(d, what);
}

/* ---- memory types (runtime/vulkan/vk_memory.h), on synthetic layouts ---- */
#define GIB ((VkDeviceSize)1 << 30)
#define MIB ((VkDeviceSize)1 << 20)

static uint32_t order_of(const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, rt_vk_use use,
                         uint32_t out[VK_MAX_MEMORY_TYPES]) {
  return rt_vk_type_order(mp, bits, use, rt_vk_unified(mp), out);
}

static void check_order(const char *layout, const char *use,
                        const VkPhysicalDeviceMemoryProperties *mp, uint32_t bits, rt_vk_use u,
                        const uint32_t *want, uint32_t nwant) {
  uint32_t got[VK_MAX_MEMORY_TYPES];
  uint32_t n = order_of(mp, bits, u, got);
  bool same = n == nwant;
  for (uint32_t i = 0; same && i < n; i++) same = got[i] == want[i];
  char gs[128] = "", ws[128] = "";
  for (uint32_t i = 0; i < n; i++) snprintf(gs + strlen(gs), sizeof gs - strlen(gs), " %u", got[i]);
  for (uint32_t i = 0; i < nwant; i++)
    snprintf(ws + strlen(ws), sizeof ws - strlen(ws), " %u", want[i]);
  CHECK_MSG(same, "%s, %s: memory types%s, expected%s", layout, use, gs, ws);
}

static void test_memory_types(void) {
  const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                              HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                              HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                              CA = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  const VkMemoryHeapFlags HDL = VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
  const uint32_t all = ~0u;

  /* (a) lavapipe (Mesa 22.3): one heap, one type that is everything */
  VkPhysicalDeviceMemoryProperties lvp = {0};
  lvp.memoryTypeCount = 1;
  lvp.memoryTypes[0] = (VkMemoryType){DL | HV | HC | CA, 0};
  lvp.memoryHeapCount = 1;
  lvp.memoryHeaps[0] = (VkMemoryHeap){2 * GIB, HDL};
  CHECK_MSG(rt_vk_unified(&lvp), "lavapipe: not unified (buffers would need staging copies)");
  const uint32_t t0[] = {0};
  for (int u = 0; u < RT_VK_NUSES; u++) check_order("lavapipe", "a use", &lvp, all, u, t0, 1);
  bool own = false;
  CHECK_MSG(rt_vk_block_bytes(2 * GIB, 0, 1000, &own) == RT_VK_BLOCK_SIZE && !own,
            "lavapipe: a small buffer gets a shared 64 MiB block");
  CHECK_MSG(rt_vk_block_bytes(2 * GIB, 0, RT_VK_BLOCK_SIZE + 4, &own) == RT_VK_BLOCK_SIZE + 4 &&
                own,
            "lavapipe: a buffer above the block size gets its own block");

  /* (b) an NVIDIA discrete GPU (H100, no resizable BAR): VRAM, host memory, the 256 MiB BAR */
  VkPhysicalDeviceMemoryProperties nv = {0};
  nv.memoryTypeCount = 4;
  nv.memoryTypes[0] = (VkMemoryType){DL, 0};
  nv.memoryTypes[1] = (VkMemoryType){HV | HC, 1};
  nv.memoryTypes[2] = (VkMemoryType){HV | HC | CA, 1};
  nv.memoryTypes[3] = (VkMemoryType){DL | HV | HC, 2};
  nv.memoryHeapCount = 3;
  nv.memoryHeaps[0] = (VkMemoryHeap){80 * GIB, HDL};
  nv.memoryHeaps[1] = (VkMemoryHeap){128 * GIB, 0};
  nv.memoryHeaps[2] = (VkMemoryHeap){256 * MIB, HDL};
  CHECK_MSG(rt_vk_main_heap(&nv) == 0, "NVIDIA: the main heap is %d", rt_vk_main_heap(&nv));
  CHECK_MSG(!rt_vk_unified(&nv), "NVIDIA: unified (buffers would live in the 256 MiB BAR)");
  const uint32_t nv_dev[] = {0, 3}, nv_up[] = {1, 2, 3}, nv_rb[] = {2, 1, 3}, nv_ubo[] = {3, 1, 2};
  check_order("NVIDIA", "device buffers", &nv, all, RT_VK_USE_DEVICE, nv_dev, 2);
  check_order("NVIDIA", "uploads", &nv, all, RT_VK_USE_UPLOAD, nv_up, 3);
  check_order("NVIDIA", "readback", &nv, all, RT_VK_USE_READBACK, nv_rb, 3);
  check_order("NVIDIA", "uniform buffers", &nv, all, RT_VK_USE_UNIFORM, nv_ubo, 3);
  /* a buffer whose memoryTypeBits leave out VRAM falls back to the BAR */
  check_order("NVIDIA", "device buffers without type 0", &nv, all & ~1u, RT_VK_USE_DEVICE,
              nv_dev + 1, 1);
  /* the 32 MiB buffer: a 64 MiB block in VRAM; in the BAR a block is an eighth of it */
  CHECK_MSG(rt_vk_block_bytes(80 * GIB, 0, 32 * MIB, &own) == 64 * MIB && !own,
            "NVIDIA: VRAM block");
  CHECK_MSG(rt_vk_block_bytes(256 * MIB, 0, MIB, &own) == 32 * MIB && !own, "NVIDIA: BAR block");
  /* the BAR only while it has room: then a buffer's own allocation, then none (next type) */
  CHECK_MSG(rt_vk_block_bytes(256 * MIB, 240 * MIB, MIB, &own) == MIB && own,
            "NVIDIA: a nearly full BAR holds a small buffer alone");
  CHECK_MSG(rt_vk_block_bytes(256 * MIB, 240 * MIB, 20 * MIB, &own) == 0,
            "NVIDIA: a full BAR refuses");
  CHECK_MSG(rt_vk_block_bytes(256 * MIB, 0, 300 * MIB, &own) == 0,
            "NVIDIA: a buffer larger than the BAR is refused there");
  CHECK_MSG(rt_vk_block_bytes(80 * GIB, 0, 40 * GIB, &own) == 40 * GIB && own,
            "NVIDIA: a 40 GiB buffer gets its own block");
  CHECK_MSG(rt_vk_block_bytes(80 * GIB, 79 * GIB, 2 * GIB, &own) == 0, "NVIDIA: VRAM full");

  /* the same GPU with resizable BAR: the host-visible heap as big as VRAM still stages (reading
   * device memory through the BAR is uncached) */
  VkPhysicalDeviceMemoryProperties rebar = nv;
  rebar.memoryHeaps[2].size = 80 * GIB;
  CHECK_MSG(!rt_vk_unified(&rebar), "resizable BAR: unified");
  check_order("resizable BAR", "device buffers", &rebar, all, RT_VK_USE_DEVICE, nv_dev, 2);

  /* an H100 SXM with driver 580 and its large BAR (as vulkan:0 reported it): the host-visible
   * device-local type is in the VRAM heap, so buffers are mapped; staging in host memory */
  VkPhysicalDeviceMemoryProperties h100 = {0};
  h100.memoryTypeCount = 5;
  h100.memoryTypes[0] = (VkMemoryType){0, 1};
  h100.memoryTypes[1] = (VkMemoryType){DL, 0};
  h100.memoryTypes[2] = (VkMemoryType){HV | HC, 1};
  h100.memoryTypes[3] = (VkMemoryType){HV | HC | CA, 1};
  h100.memoryTypes[4] = (VkMemoryType){DL | HV | HC, 0};
  h100.memoryHeapCount = 2;
  h100.memoryHeaps[0] = (VkMemoryHeap){81559 * MIB, HDL};
  h100.memoryHeaps[1] = (VkMemoryHeap){96665 * MIB, 0};
  CHECK_MSG(rt_vk_unified(&h100), "H100 with a large BAR: not unified");
  const uint32_t h_dev[] = {4, 1}, h_up[] = {2, 4, 3}, h_rb[] = {3, 2, 4};
  check_order("H100", "device buffers", &h100, all, RT_VK_USE_DEVICE, h_dev, 2);
  check_order("H100", "uploads", &h100, all, RT_VK_USE_UPLOAD, h_up, 3);
  check_order("H100", "readback", &h100, all, RT_VK_USE_READBACK, h_rb, 3);

  /* (c) an integrated GPU: one device-local heap, host-visible */
  VkPhysicalDeviceMemoryProperties igpu = {0};
  igpu.memoryTypeCount = 3;
  igpu.memoryTypes[0] = (VkMemoryType){DL, 0};
  igpu.memoryTypes[1] = (VkMemoryType){DL | HV | HC, 0};
  igpu.memoryTypes[2] = (VkMemoryType){DL | HV | HC | CA, 0};
  igpu.memoryHeapCount = 1;
  igpu.memoryHeaps[0] = (VkMemoryHeap){8 * GIB, HDL};
  CHECK_MSG(rt_vk_unified(&igpu), "integrated GPU: not unified");
  const uint32_t ig_dev[] = {1, 2, 0}, ig_up[] = {1, 2}, ig_rb[] = {2, 1};
  check_order("integrated", "device buffers", &igpu, all, RT_VK_USE_DEVICE, ig_dev, 3);
  check_order("integrated", "uploads", &igpu, all, RT_VK_USE_UPLOAD, ig_up, 2);
  check_order("integrated", "readback", &igpu, all, RT_VK_USE_READBACK, ig_rb, 2);
  /* forced staging there (force_staging): device buffers prefer the type the host cannot see */
  uint32_t got[VK_MAX_MEMORY_TYPES];
  uint32_t n = rt_vk_type_order(&igpu, all, RT_VK_USE_DEVICE, false, got);
  CHECK_MSG(n == 3 && got[0] == 0, "integrated, staging: device buffers in type %u",
            n ? got[0] : 99);

  /* types never chosen: protected memory */
  VkPhysicalDeviceMemoryProperties prot = lvp;
  prot.memoryTypeCount = 2;
  prot.memoryTypes[0] = (VkMemoryType){DL | VK_MEMORY_PROPERTY_PROTECTED_BIT, 0};
  prot.memoryTypes[1] = (VkMemoryType){DL | HV | HC, 0};
  const uint32_t t1[] = {1};
  check_order("protected", "device buffers", &prot, all, RT_VK_USE_DEVICE, t1, 1);
}

/* ---- kernels ---- */
static rx_rt_buffer *upload(rx_rt_device *d, const void *data, size_t bytes) {
  rx_rt_buffer *b = NULL;
  CHECK_OK(rx_rt_buffer_alloc(d, bytes, &b));
  if (b && data) CHECK_OK(rx_rt_buffer_write(b, 0, data, bytes));
  return b;
}

static void test_saxpy(rx_rt_device *d, rx_rt_library *lib) {
  static const int64_t ns[] = {1, 7, 33, 1000, 4099};
  for (size_t t = 0; t < 5; t++) {
    int64_t n = ns[t];
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *c = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) a[i] = (float)i * 0.5f - 3, b[i] = (float)(i % 17);
    rx_rt_buffer *ba = upload(d, a, (size_t)n * 4), *bb = upload(d, b, (size_t)n * 4);
    rx_rt_buffer *bc = upload(d, NULL, (size_t)n * 4);
    const char *names[] = {"n"};
    rx_rt_symbols syms = {names, &n, 1};
    /* the whole program: picks saxpy_n1 at n == 1, saxpy otherwise */
    rx_rt_buffer *params[] = {ba, bb, bc};
    CHECK_OK(rx_rt_buffer_fill(bc, 0, (size_t)n * 4, 0));
    CHECK_OK(rx_rt_library_run(lib, "saxpy", params, 3, &syms));
    CHECK_OK(rx_rt_buffer_read(bc, 0, c, (size_t)n * 4));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += c[i] != 2 * a[i] + b[i];
    CHECK_MSG(bad == 0, "saxpy n=%lld: %d wrong", (long long)n, bad);

    /* the kernel by name: its condition decides whether it runs */
    rx_rt_kernel *k1 = NULL, *k = NULL;
    CHECK_OK(rx_rt_library_kernel(lib, "saxpy_n1", &k1));
    CHECK_OK(rx_rt_library_kernel(lib, "saxpy", &k));
    bool ran1 = true, ran = false;
    CHECK_OK(rx_rt_buffer_fill(bc, 0, (size_t)n * 4, 0));
    if (k1) CHECK_OK(rx_rt_kernel_launch_symbols(k1, params, 3, &syms, &ran1));
    if (k) CHECK_OK(rx_rt_kernel_launch_symbols(k, params, 3, &syms, &ran));
    CHECK_MSG(ran1 == (n == 1) && ran == (n != 1), "n=%lld: variants ran %d %d", (long long)n, ran1,
              ran);
    CHECK_OK(rx_rt_buffer_read(bc, 0, c, (size_t)n * 4));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += c[i] != 2 * a[i] + b[i];
    CHECK_MSG(bad == 0, "saxpy by name n=%lld: %d wrong", (long long)n, bad);

    /* the uniform-buffer kernel: m and n in a std140 block at binding 3 */
    int64_t vals[2] = {n, -3};
    const char *names2[] = {"n", "m"};
    rx_rt_symbols syms2 = {names2, vals, 2};
    rx_rt_buffer *params2[] = {ba, bb, NULL, bc};
    CHECK_OK(rx_rt_library_run(lib, "axpy", params2, 4, &syms2));
    CHECK_OK(rx_rt_buffer_read(bc, 0, c, (size_t)n * 4));
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += c[i] != -3 * a[i] + b[i];
    CHECK_MSG(bad == 0, "uniform-buffer saxpy n=%lld: %d wrong", (long long)n, bad);

    /* a too-small buffer for the program's shape */
    int64_t n2 = n + 1;
    rx_rt_symbols big = {names, &n2, 1};
    CHECK_ERR(rx_rt_library_run(lib, "saxpy", params, 3, &big), RX_ERR_INVALID, "needs");
    rx_rt_buffer_release(ba);
    rx_rt_buffer_release(bb);
    rx_rt_buffer_release(bc);
    free(a), free(b), free(c);
  }
}

/* Several dependent launches, a fill and a copy recorded into one submission. */
static void test_batch(rx_rt_device *d, rx_rt_library *lib) {
  rx_rt_kernel *k = NULL;
  CHECK_OK(rx_rt_library_kernel(lib, "scale_add", &k));
  if (!k) return;
  const int n = 5000;
  int32_t *src = malloc(n * 4), *got = malloc(n * 4), *want = malloc(n * 4);
  for (int i = 0; i < n; i++) src[i] = i % 100 - 50;
  rx_rt_buffer *s = upload(d, src, n * 4), *x = upload(d, NULL, n * 4);
  /* x = 0 everywhere, then src copied into x[10..n) */
  CHECK_OK(rx_rt_buffer_fill(x, 0, n * 4, 0));
  CHECK_OK(rx_rt_buffer_copy(s, 40, x, 40, (n - 10) * 4));
  for (int i = 0; i < n; i++) want[i] = i < 10 ? 0 : src[i];
  rx_rt_buffer *bufs[] = {x};
  for (int step = 1; step <= 6; step++) {
    int32_t vals[2] = {step, n}; /* k, n in the kernel's order */
    rx_rt_launch_params p = {{(n + 127) / 128, 1, 1}, {128, 1, 1}, bufs, 1, vals, 2};
    CHECK_OK(rx_rt_kernel_launch(k, &p));
    for (int i = 0; i < n; i++) want[i] = 2 * want[i] + step;
  }
  CHECK_OK(rx_rt_device_synchronize(d));
  CHECK_OK(rx_rt_buffer_read(x, 0, got, n * 4));
  CHECK_MSG(memcmp(got, want, n * 4) == 0,
            "batch of dependent launches: x[0]=%d want %d, x[4999]=%d "
            "want %d",
            got[0], want[0], got[n - 1], want[n - 1]);
  /* a grid of 0 launches nothing */
  rx_rt_launch_params p0 = {{0, 1, 1}, {128, 1, 1}, bufs, 1, (int32_t[]){1, n}, 2};
  CHECK_OK(rx_rt_kernel_launch(k, &p0));
  CHECK_OK(rx_rt_buffer_read(x, 0, got, n * 4));
  CHECK_MSG(memcmp(got, want, n * 4) == 0, "an empty grid changed the buffer");
  rx_rt_buffer_release(s);
  rx_rt_buffer_release(x);
  free(src), free(got), free(want);
}

static void test_timing(rx_rt_device *d, rx_rt_library *lib) {
  if (!rx_rt_device_get_info(d)->timestamps) {
    CHECK_SKIP("the device has no timestamps");
    return;
  }
  rx_rt_kernel *k = NULL;
  CHECK_OK(rx_rt_library_kernel(lib, "scale_add", &k));
  const int n = 1 << 20;
  rx_rt_buffer *x = upload(d, NULL, (size_t)n * 4);
  rx_rt_timer *t = NULL;
  CHECK_OK(rx_rt_timer_create(d, &t));
  if (!k || !x || !t) {
    rx_rt_buffer_release(x);
    rx_rt_timer_release(t);
    return;
  }
  CHECK_ERR(rx_rt_timer_stop(t), RX_ERR_INVALID, "before it was started");
  CHECK_OK(rx_rt_buffer_fill(x, 0, (size_t)n * 4, 0));
  CHECK_OK(rx_rt_timer_start(t));
  rx_rt_buffer *bufs[] = {x};
  int64_t v[2] = {n, 1};
  const char *names[] = {"n", "k"};
  rx_rt_symbols syms = {names, v, 2};
  for (int i = 0; i < 10; i++) CHECK_OK(rx_rt_kernel_launch_symbols(k, bufs, 1, &syms, NULL));
  CHECK_OK(rx_rt_timer_stop(t));
  double ms = -1;
  CHECK_OK(rx_rt_timer_elapsed_ms(t, &ms));
  printf("10 launches over %d ints: %.3f ms (device timestamps)\n", n, ms);
  CHECK_MSG(ms > 0, "elapsed %f ms", ms);
  int32_t last = 0;
  CHECK_OK(rx_rt_buffer_read(x, (size_t)(n - 1) * 4, &last, 4));
  CHECK_MSG(last == 1023, "x after 10 launches = %d, want 1023", last);
  rx_rt_timer_release(t);
  rx_rt_buffer_release(x);
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = calloc(1, (size_t)n + 1);
  if (fread(p, 1, (size_t)n, f) != (size_t)n) n = 0;
  fclose(f);
  *len = (size_t)n;
  return p;
}

static void test_errors(rx_rt_device *d, rx_rt_library *lib) {
  rx_rt_kernel *k = NULL;
  CHECK_ERR(rx_rt_library_kernel(lib, "no_such_kernel", &k), RX_ERR_NOT_FOUND, "no_such_kernel");
  CHECK_MSG(k == NULL, "out_kernel must stay NULL");
  CHECK_OK(rx_rt_library_kernel(lib, "saxpy", &k));
  if (!k) return;
  CHECK_MSG(rx_rt_kernel_buffer_count(k) == 3 && rx_rt_kernel_scalar_count(k) == 1 &&
                !strcmp(rx_rt_kernel_scalar_name(k, 0), "n"),
            "kernel signature");
  rx_rt_buffer *b = upload(d, NULL, 64);
  rx_rt_buffer *two[] = {b, b};
  int64_t n = 16;
  const char *names[] = {"n"};
  rx_rt_symbols syms = {names, &n, 1};
  CHECK_ERR(rx_rt_kernel_launch_symbols(k, two, 2, &syms, NULL), RX_ERR_INVALID,
            "takes 3 buffers and 1 symbolic values (a, b, c, n), got 2 buffers");
  rx_rt_buffer *three[] = {b, b, b};
  rx_rt_launch_params p = {{1, 1, 1}, {64, 1, 1}, three, 3, NULL, 0};
  CHECK_ERR(rx_rt_kernel_launch(k, &p), RX_ERR_INVALID, "got 3 buffers and 0 values");
  int32_t v = 16;
  rx_rt_launch_params pb = {{1, 1, 1}, {32, 1, 1}, three, 3, &v, 1};
  CHECK_ERR(rx_rt_kernel_launch(k, &pb), RX_ERR_INVALID, "differs from the kernel's");
  int64_t huge = (int64_t)1 << 33;
  rx_rt_symbols hs = {names, &huge, 1};
  CHECK_ERR(rx_rt_kernel_launch_symbols(k, three, 3, &hs, NULL), RX_ERR_INVALID,
            "n = 8589934592 does not fit in int32");
  rx_rt_symbols none = {NULL, NULL, 0};
  CHECK_ERR(rx_rt_kernel_launch_symbols(k, three, 3, &none, NULL), RX_ERR_NOT_FOUND,
            "no value given for the symbolic variable 'n'");
  CHECK_ERR(rx_rt_library_run(lib, "nope", three, 3, &syms), RX_ERR_NOT_FOUND, "nope");
  CHECK_ERR(rx_rt_library_run(lib, "saxpy", three, 2, &syms), RX_ERR_INVALID, "takes 3 param");
  rx_rt_buffer_release(b);

  /* libraries */
  rx_rt_library *l = NULL;
  CHECK_ERR(rx_rt_library_load(d, "/nonexistent/dir", &l), RX_ERR_NOT_FOUND, "kernels.json");
  static const char *bad_json =
      "{\"format\": \"relaxc-kernels\",\n \"version\": 1,\n \"kernels\": [}";
  CHECK_ERR(rx_rt_library_load_memory(d, bad_json, strlen(bad_json), NULL, 0, &l), RX_ERR_INVALID,
            "kernels.json:3:");
  static const char *not_ours = "{\"format\": \"onnx\"}";
  CHECK_ERR(rx_rt_library_load_memory(d, not_ours, strlen(not_ours), NULL, 0, &l), RX_ERR_INVALID,
            "relaxc-kernels");
  static const char *v2 = "{\"format\": \"relaxc-kernels\", \"version\": 2}";
  CHECK_ERR(rx_rt_library_load_memory(d, v2, strlen(v2), NULL, 0, &l), RX_ERR_UNSUPPORTED,
            "version 2");
  static const char *cuda = "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": "
                            "\"cuda-sm_80\", \"kernels\": []}";
  CHECK_ERR(rx_rt_library_load_memory(d, cuda, strlen(cuda), NULL, 0, &l), RX_ERR_INVALID,
            "cannot run on a vulkan device");
  static const char *nogrid =
      "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"vulkan\", \"kernels\": "
      "[{\"name\": \"k\", \"program\": \"p\", \"block\": [1, 1, 1], \"args\": []}]}";
  CHECK_ERR(rx_rt_library_load_memory(d, nogrid, strlen(nogrid), NULL, 0, &l), RX_ERR_INVALID,
            "kernel 'k': 'grid' must be");
  static const char *noblob =
      "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"vulkan\", \"kernels\": "
      "[{\"name\": \"k\", \"program\": \"p\", \"grid\": [\"1\", \"1\", \"1\"], \"block\": [1, 1, "
      "1],"
      " \"binary\": \"k.spv\", \"args\": []}]}";
  CHECK_ERR(rx_rt_library_load_memory(d, noblob, strlen(noblob), NULL, 0, &l), RX_ERR_NOT_FOUND,
            "no blob named 'k.spv'");
  rx_rt_blob junk = {"k.spv", "not spir-v at all, really", 24};
  CHECK_ERR(rx_rt_library_load_memory(d, noblob, strlen(noblob), &junk, 1, &l), RX_ERR_INVALID,
            "is not SPIR-V");
  static const char *badloc =
      "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"vulkan\", \"kernels\": "
      "[{\"name\": \"k\", \"program\": \"p\", \"grid\": [\"1\", \"1\", \"1\"], \"block\": [1, 1, "
      "1],"
      " \"scalars\": {\"location\": \"stack\", \"bytes\": 4}, \"args\": [{\"kind\": \"scalar\", "
      "\"name\": \"n\", \"dtype\": \"i32\", \"offset\": 0}]}]}";
  CHECK_ERR(rx_rt_library_load_memory(d, badloc, strlen(badloc), NULL, 0, &l), RX_ERR_INVALID,
            "scalars.location 'stack'");
  CHECK_MSG(l == NULL, "out_library must stay NULL on error");
}

/* The same library from memory blobs (the path the artifact loader takes). */
static void test_memory_library(rx_rt_device *d) {
  char path[1024];
  size_t jlen = 0, len[3] = {0};
  snprintf(path, sizeof path, "%s/kernels.json", g_dir);
  char *json = read_text(path, &jlen);
  static const char *const files[3] = {"saxpy.spv", "saxpy_ubo.spv", "scale_add.spv"};
  char *data[3];
  rx_rt_blob blobs[3];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", g_dir, files[i]);
    data[i] = read_text(path, &len[i]);
    blobs[i] = (rx_rt_blob){files[i], data[i], len[i]};
  }
  CHECK_MSG(json != NULL, "cannot read kernels.json");
  rx_rt_library *l = NULL;
  if (json) CHECK_OK(rx_rt_library_load_memory(d, json, jlen, blobs, 3, &l));
  if (l) {
    CHECK_MSG(rx_rt_library_kernel_count(l) == 4, "4 kernels, got %zu",
              rx_rt_library_kernel_count(l));
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, c[3] = {0};
    rx_rt_buffer *ba = upload(d, a, 12), *bb = upload(d, b, 12), *bc = upload(d, NULL, 12);
    rx_rt_buffer *params[] = {ba, bb, bc};
    int64_t n = 3;
    const char *names[] = {"n"};
    rx_rt_symbols syms = {names, &n, 1};
    CHECK_OK(rx_rt_library_run(l, "saxpy", params, 3, &syms));
    CHECK_OK(rx_rt_buffer_read(bc, 0, c, 12));
    CHECK_MSG(c[0] == 12 && c[1] == 24 && c[2] == 36, "from memory: %g %g %g", c[0], c[1], c[2]);
    rx_rt_buffer_release(ba);
    rx_rt_buffer_release(bb);
    rx_rt_buffer_release(bc);
  }
  rx_rt_library_release(l);
  free(json);
  for (int i = 0; i < 3; i++) free(data[i]);
}

/* A kernel scheduled for a subgroup size ("subgroup_size" in kernels.json): loaded with the
 * device's own size (pinned where the device has subgroup size control, under the validation
 * layer), refused with the sizes named for a size the device cannot run. */
static void test_subgroup_size(rx_rt_device *d) {
  char path[1024];
  size_t len = 0;
  snprintf(path, sizeof path, "%s/saxpy.spv", g_dir);
  char *spv = read_text(path, &len);
  if (!spv) {
    CHECK_MSG(false, "cannot read %s", path);
    return;
  }
  unsigned own = rx_rt_device_get_info(d)->subgroup_size;
  for (int pass = 0; pass < 2; pass++) {
    unsigned size = pass == 0 ? own : own * 64 > 1024 ? 1024 : own * 64;
    char json[1024];
    snprintf(json, sizeof json,
             "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"vulkan\", "
             "\"kernels\": [{\"name\": \"k\", \"program\": \"p\", \"grid\": [\"1\", \"1\", "
             "\"1\"], \"block\": [64, 1, 1], \"subgroup_size\": %u, \"binary\": \"saxpy.spv\", "
             "\"scalars\": {\"location\": \"push_constant\", \"bytes\": 4}, \"args\": ["
             "{\"kind\": \"buffer\", \"name\": \"a\", \"dtype\": \"f32\", \"param\": 0, "
             "\"binding\": 0}, {\"kind\": \"buffer\", \"name\": \"b\", \"dtype\": \"f32\", "
             "\"param\": 1, \"binding\": 1}, {\"kind\": \"buffer\", \"name\": \"c\", "
             "\"dtype\": \"f32\", \"param\": 2, \"binding\": 2}, {\"kind\": \"scalar\", "
             "\"name\": \"n\", \"dtype\": \"i32\", \"offset\": 0}]}]}",
             size);
    rx_rt_blob blob = {"saxpy.spv", spv, len};
    rx_rt_library *l = NULL;
    rx_status s = rx_rt_library_load_memory(d, json, strlen(json), &blob, 1, &l);
    if (pass == 0) {
      CHECK_MSG(!s, "subgroup size %u (the device's): %s", size, s ? rx_status_message(s) : "");
    } else {
      char want[64];
      snprintf(want, sizeof want, "subgroups of %u threads", size);
      CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_UNSUPPORTED &&
                    strstr(rx_status_message(s), want),
                "subgroup size %u refused with the sizes named: %s", size,
                s ? rx_status_message(s) : "loaded");
    }
    rx_status_free(s);
    rx_rt_library_release(l);
  }
  free(spv);
}

/* The messenger counts: a kernel whose description omits a binding the shader uses is an error
 * of the validation layer. Run on its own device, so the others stay at zero messages. */
static void test_messenger_counts(void) {
  rx_rt_device *d = open_dev(false);
  if (!d) return;
  char path[1024];
  size_t len = 0;
  snprintf(path, sizeof path, "%s/saxpy.spv", g_dir);
  char *spv = read_text(path, &len);
  static const char *json =
      "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"vulkan\", \"kernels\": "
      "[{\"name\": \"k\", \"program\": \"p\", \"grid\": [\"1\", \"1\", \"1\"], \"block\": [64, 1, "
      "1],"
      " \"binary\": \"saxpy.spv\", \"scalars\": {\"location\": \"push_constant\", \"bytes\": 4},"
      " \"args\": [{\"kind\": \"buffer\", \"name\": \"a\", \"dtype\": \"f32\", \"param\": 0,"
      " \"binding\": 0}, {\"kind\": \"scalar\", \"name\": \"n\", \"dtype\": \"i32\", \"offset\": "
      "0}]}]}";
  rx_rt_blob blob = {"saxpy.spv", spv, len};
  rx_rt_library *l = NULL;
  printf("(expected) a validation error follows: bindings 1 and 2 are not in the layout\n");
  fflush(stdout);
  rx_status s = rx_rt_library_load_memory(d, json, strlen(json), &blob, 1, &l);
  rx_status_free(s);
  rx_rt_library_release(l);
  CHECK_MSG(rx_rt_device_validation_messages(d, NULL) > 0,
            "the validation layer reported nothing for a pipeline layout that lacks bindings");
  free(spv);
  rx_rt_device_release(d);
}

int main(int argc, char **argv) {
  g_dir = argc > 1 ? argv[1] : "rt_kernels";
  test_memory_types(); /* pure: no device needed */
  rx_status s = rx_rt_backend_check(RX_RT_BACKEND_VULKAN);
  if (s) {
    CHECK_SKIP("%s", rx_status_message(s));
    rx_status_free(s);
    return check_finish("runtime.vulkan");
  }
  test_enumerate();
  rx_rt_device *d = open_dev(false);
  if (!d) return check_finish("runtime.vulkan");
  test_buffers(d, "host-visible");
  test_block_sizes(d, "host-visible blocks");
  rx_rt_device *ds = open_dev(true);
  if (ds) {
    CHECK_MSG(!rx_rt_device_get_info(ds)->unified_memory, "force_staging ignored");
    test_buffers(ds, "staging");
    test_block_sizes(ds, "staging blocks");
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/saxpy.spv", g_dir);
  FILE *f = fopen(path, "rb");
  if (!f) {
    CHECK_SKIP("no SPIR-V in %s (glslangValidator, Debian glslang-tools, was absent at build time)",
               g_dir);
  } else {
    fclose(f);
    rx_rt_device *devs[2] = {d, ds};
    for (int i = 0; i < 2; i++) {
      if (!devs[i]) continue;
      rx_rt_library *lib = NULL;
      CHECK_OK(rx_rt_library_load(devs[i], g_dir, &lib));
      if (!lib) continue;
      test_saxpy(devs[i], lib);
      test_batch(devs[i], lib);
      if (i == 0) {
        test_timing(devs[i], lib);
        test_errors(devs[i], lib);
      }
      rx_rt_library_release(lib);
    }
    test_memory_library(d);
    test_subgroup_size(d);
    test_messenger_counts();
  }
  CHECK_OK(rx_rt_device_synchronize(d));
  check_no_validation(d, "vulkan:0");
  if (ds) check_no_validation(ds, "vulkan:0 (staging)");
  rx_rt_device_release(ds);
  rx_rt_device_release(d);
  return check_finish("runtime.vulkan");
}
