/* tests/runtime/cuda_test.c: the runtime on CUDA through the driver API. Skips (exit 77) with the
 * reason where libcuda.so.1 or a CUDA device is absent. The kernel is PTX (from nvcc -ptx of the
 * CUDA C below, lowered to PTX ISA 6.0 / sm_50 so that any driver since CUDA 10 JIT-compiles it):
 *   extern "C" __global__ void saxpy(const float* a, const float* b, float* c, int n) {
 *     int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = 2.0f * a[i] + b[i]; } */
#include <stdint.h>
#include <stdlib.h>

#include "../unit/check.h"
#include "relaxc/runtime.h"

static const char k_ptx[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry saxpy(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u32 p3)\n{\n"
    "  .reg .pred %p<2>; .reg .f32 %f<4>; .reg .b32 %r<6>; .reg .b64 %rd<11>;\n"
    "  ld.param.u64 %rd1, [p0]; ld.param.u64 %rd2, [p1]; ld.param.u64 %rd3, [p2];\n"
    "  ld.param.u32 %r2, [p3];\n"
    "  mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x;\n"
    "  mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "  setp.ge.s32 %p1, %r1, %r2;\n"
    "  @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd4, %rd1; mul.wide.s32 %rd5, %r1, 4; add.s64 %rd6, %rd4, %rd5;\n"
    "  ld.global.f32 %f1, [%rd6];\n"
    "  cvta.to.global.u64 %rd7, %rd2; add.s64 %rd8, %rd7, %rd5; ld.global.f32 %f2, [%rd8];\n"
    "  fma.rn.f32 %f3, %f1, 0f40000000, %f2;\n"
    "  cvta.to.global.u64 %rd9, %rd3; add.s64 %rd10, %rd9, %rd5; st.global.f32 [%rd10], %f3;\n"
    "DONE:\n  ret;\n}\n";

static const char k_json[] =
    "{\"format\": \"relaxc-kernels\", \"version\": 1, \"target\": \"cuda-sm_80\", \"lang\": "
    "\"cuda\","
    " \"programs\": [{\"name\": \"saxpy\", \"params\": ["
    "{\"name\": \"a\", \"kind\": \"buffer\", \"dtype\": \"f32\", \"shape\": [\"n\"]},"
    "{\"name\": \"b\", \"kind\": \"buffer\", \"dtype\": \"f32\", \"shape\": [\"n\"]},"
    "{\"name\": \"c\", \"kind\": \"buffer\", \"dtype\": \"f32\", \"shape\": [\"n\"], \"output\": "
    "true}],"
    " \"facts\": [], \"kernels\": [\"saxpy\"]}],"
    " \"kernels\": [{\"name\": \"saxpy\", \"program\": \"saxpy\", \"source\": \"saxpy.cu\","
    " \"ptx\": \"saxpy.ptx\", \"condition\": null, \"grid\": [\"(n + 127) // 128\", \"1\", \"1\"],"
    " \"block\": [128, 1, 1], \"shared_bytes\": 0,"
    " \"scalars\": {\"location\": \"parameters\", \"bytes\": 4, \"binding\": -1},"
    " \"args\": [{\"kind\": \"buffer\", \"name\": \"a\", \"dtype\": \"f32\", \"param\": 0, "
    "\"binding\": 0},"
    " {\"kind\": \"buffer\", \"name\": \"b\", \"dtype\": \"f32\", \"param\": 1, \"binding\": 1},"
    " {\"kind\": \"buffer\", \"name\": \"c\", \"dtype\": \"f32\", \"param\": 2, \"binding\": 2, "
    "\"written\": true},"
    " {\"kind\": \"scalar\", \"name\": \"n\", \"dtype\": \"i32\", \"offset\": 0}]}]}";

int main(void) {
  rx_status s = rx_rt_backend_check(RX_RT_BACKEND_CUDA);
  if (s) {
    CHECK_SKIP("no CUDA here: %s", rx_status_message(s));
    /* the runtime still starts and says so: opening fails with that reason */
    rx_rt_device *d = NULL;
    rx_status o = rx_rt_device_open("cuda:0", NULL, &d);
    bool clear = o && strstr(rx_status_message(o), "cuda") && d == NULL;
    if (!clear) {
      check_failed++;
      fprintf(stderr, "FAIL: opening cuda:0 without a driver: '%s'\n", rx_status_message(o));
    }
    rx_status_free(o);
    rx_status_free(s);
    return check_finish("runtime.cuda");
  }
  rx_rt_device_info *infos = NULL;
  size_t n = 0;
  CHECK_OK(rx_rt_enumerate(RX_RT_BACKEND_CUDA, &infos, &n));
  for (size_t i = 0; i < n; i++)
    printf("cuda:%d %s: memory %llu MiB, warp %u, shared %u B, max threads %u, fp16 %d\n",
           infos[i].index, infos[i].name, (unsigned long long)(infos[i].memory_bytes >> 20),
           infos[i].subgroup_size, infos[i].shared_memory_bytes, infos[i].max_threads_per_block,
           infos[i].fp16);
  CHECK_MSG(n >= 1 && infos[0].subgroup_size == 32, "CUDA devices");
  rx_rt_free_device_infos(infos);
  rx_rt_device *d = NULL;
  CHECK_OK(rx_rt_device_open("cuda:0", NULL, &d));
  if (!d) return check_finish("runtime.cuda");

  /* buffers */
  static const size_t sizes[] = {1, 3, 5, 1000, 16397, ((size_t)64 << 20) + 3};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t bytes = sizes[si];
    uint8_t *h = malloc(bytes), *g = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) h[i] = (uint8_t)(i * 7 + 3);
    rx_rt_buffer *a = NULL, *b = NULL;
    CHECK_OK(rx_rt_buffer_alloc(d, bytes, &a));
    CHECK_OK(rx_rt_buffer_alloc(d, bytes, &b));
    if (a && b) {
      CHECK_OK(rx_rt_buffer_write(a, 0, h, bytes));
      CHECK_OK(rx_rt_buffer_fill(b, 0, bytes, 0x7F));
      if (bytes > 2) CHECK_OK(rx_rt_buffer_copy(a, 1, b, 1, bytes - 2));
      CHECK_OK(rx_rt_buffer_read(b, 0, g, bytes));
      if (bytes > 2)
        h[0] = h[bytes - 1] = 0x7F;
      else
        memset(h, 0x7F, bytes);
      CHECK_MSG(memcmp(g, h, bytes) == 0, "fill + copy + round trip of %zu bytes", bytes);
    }
    rx_rt_buffer_release(a);
    rx_rt_buffer_release(b);
    free(h), free(g);
  }
  rx_rt_buffer *z = NULL;
  CHECK_ERR(rx_rt_buffer_alloc(d, (size_t)1 << 50, &z), RX_ERR_OUT_OF_MEMORY, "out of");

  /* the kernel from PTX */
  rx_rt_blob blob = {"saxpy.ptx", k_ptx, sizeof k_ptx - 1};
  rx_rt_library *lib = NULL;
  CHECK_OK(rx_rt_library_load_memory(d, k_json, sizeof k_json - 1, &blob, 1, &lib));
  static const int64_t ns[] = {1, 7, 33, 1000, 4099};
  for (size_t t = 0; lib && t < 5; t++) {
    int64_t m = ns[t];
    float *a = malloc((size_t)m * 4), *b = malloc((size_t)m * 4), *c = malloc((size_t)m * 4);
    for (int64_t i = 0; i < m; i++) a[i] = (float)i - 5, b[i] = (float)(i % 13);
    rx_rt_buffer *ba = NULL, *bb = NULL, *bc = NULL;
    CHECK_OK(rx_rt_buffer_alloc(d, (size_t)m * 4, &ba));
    CHECK_OK(rx_rt_buffer_alloc(d, (size_t)m * 4, &bb));
    CHECK_OK(rx_rt_buffer_alloc(d, (size_t)m * 4, &bc));
    CHECK_OK(rx_rt_buffer_write(ba, 0, a, (size_t)m * 4));
    CHECK_OK(rx_rt_buffer_write(bb, 0, b, (size_t)m * 4));
    rx_rt_buffer *params[] = {ba, bb, bc};
    const char *names[] = {"n"};
    rx_rt_symbols syms = {names, &m, 1};
    CHECK_OK(rx_rt_library_run(lib, "saxpy", params, 3, &syms));
    CHECK_OK(rx_rt_buffer_read(bc, 0, c, (size_t)m * 4));
    int bad = 0;
    for (int64_t i = 0; i < m; i++) bad += c[i] != 2 * a[i] + b[i];
    CHECK_MSG(bad == 0, "saxpy n=%lld: %d wrong", (long long)m, bad);
    if (t == 4) {
      rx_rt_timer *tm = NULL;
      CHECK_OK(rx_rt_timer_create(d, &tm));
      if (tm) {
        CHECK_OK(rx_rt_timer_start(tm));
        for (int r = 0; r < 10; r++) CHECK_OK(rx_rt_library_run(lib, "saxpy", params, 3, &syms));
        CHECK_OK(rx_rt_timer_stop(tm));
        double ms = -1;
        CHECK_OK(rx_rt_timer_elapsed_ms(tm, &ms));
        CHECK_MSG(ms > 0, "elapsed %f ms", ms);
        rx_rt_timer_release(tm);
      }
      rx_rt_kernel *k = NULL;
      CHECK_OK(rx_rt_library_kernel(lib, "saxpy", &k));
      if (k)
        CHECK_ERR(rx_rt_kernel_launch_symbols(k, params, 2, &syms, NULL), RX_ERR_INVALID,
                  "takes 3 buffers");
      CHECK_ERR(rx_rt_library_kernel(lib, "missing", &k), RX_ERR_NOT_FOUND, "missing");
    }
    rx_rt_buffer_release(ba);
    rx_rt_buffer_release(bb);
    rx_rt_buffer_release(bc);
    free(a), free(b), free(c);
  }
  rx_rt_library_release(lib);
  CHECK_OK(rx_rt_device_synchronize(d));
  rx_rt_device_release(d);
  return check_finish("runtime.cuda");
}
