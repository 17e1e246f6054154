/* tests/fuzz/fuzz_vm.c: libFuzzer harness of the VM. The input is a host program (the bytes of a
 * host.rxvm section). It replaces the host program of a base artifact (RX_FUZZ_VM_BASE:
 * tests/lit/run/dynshape.rx compiled for vulkan-lavapipe, whose manifest and kernels are kept),
 * goes through the loader's validator and, when it validates, every function runs on the fuzz
 * device (fuzz_device.h: buffers in host memory, launches that do nothing) with small tensors
 * made from its parameters' checks: the dtype and rank they expect (f32 and rank 1 when any),
 * each constant dimension as given (when small) and every symbolic one 2; integer elements are
 * 2, 1, 1, ... (a shape tensor [2, 1] reshapes a tensor of 2 elements), the others zero. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_device.h"

#ifndef RX_FUZZ_VM_BASE
#define RX_FUZZ_VM_BASE "vm_base.rxm"
#endif
#define MAX_ELEMS (1 << 16)

static uint8_t *base;
static size_t base_size;

typedef struct sec {
  char name[64];
  const uint8_t *data;
  size_t size;
} sec;
static sec secs[64];
static size_t nsecs;

static uint64_t rd(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int b = n - 1; b >= 0; b--) v = v << 8 | p[b];
  return v;
}
static void wr(uint8_t *p, uint64_t v, int n) {
  for (int b = 0; b < n; b++) p[b] = (uint8_t)(v >> (8 * b));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *path = getenv("RX_FUZZ_VM_BASE");
  if (!path || !*path) path = RX_FUZZ_VM_BASE;
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "fuzz_vm: cannot open the base artifact '%s' (set RX_FUZZ_VM_BASE)\n", path);
    exit(2);
  }
  base = malloc(1 << 22);
  base_size = fread(base, 1, 1 << 22, f);
  fclose(f);
  size_t count = base_size >= 16 ? (size_t)rd(base + 8, 4) : 0;
  for (size_t i = 0; i < count && nsecs < 64 && 16 + (i + 1) * 88 <= base_size; i++) {
    const uint8_t *e = base + 16 + i * 88;
    uint64_t off = rd(e + 64, 8), n = rd(e + 72, 8);
    if (off > base_size || n > base_size - off) break;
    memcpy(secs[nsecs].name, e, 63);
    secs[nsecs].data = base + off;
    secs[nsecs].size = (size_t)n;
    nsecs++;
  }
  if (!nsecs) {
    fprintf(stderr, "fuzz_vm: '%s' is not an artifact\n", path);
    exit(2);
  }
  return 0;
}

/* The base artifact with its host program replaced by prog. */
static uint8_t *build(const uint8_t *prog, size_t plen, size_t *out_n) {
  size_t n = 16 + nsecs * 88;
  for (size_t i = 0; i < nsecs; i++) n += strcmp(secs[i].name, "host.rxvm") ? secs[i].size : plen;
  uint8_t *img = calloc(n ? n : 1, 1);
  if (!img) return NULL;
  wr(img, 0x314d5852u, 4);
  wr(img + 4, 1, 4);
  wr(img + 8, nsecs, 4);
  size_t off = 16 + nsecs * 88;
  for (size_t i = 0; i < nsecs; i++) {
    uint8_t *e = img + 16 + i * 88;
    bool host = !strcmp(secs[i].name, "host.rxvm");
    const uint8_t *d = host ? prog : secs[i].data;
    size_t len = host ? plen : secs[i].size;
    memcpy(e, secs[i].name, strlen(secs[i].name));
    wr(e + 64, off, 8);
    wr(e + 72, len, 8);
    if (len) memcpy(img + off, d, len);
    off += len;
  }
  fz_fix_crcs(img, n);
  *out_n = n;
  return img;
}

/* Dims from the expected text "f32[n, 4096]": constants as given, symbols 2. */
static int dims_of(const char *expected, int ndim, int64_t *shape) {
  const char *p = expected ? strchr(expected, '[') : NULL;
  int64_t elems = 1;
  for (int k = 0; k < ndim; k++) {
    shape[k] = 2;
    if (p) {
      p++;
      while (*p == ' ') p++;
      if (isdigit((unsigned char)*p)) shape[k] = strtoll(p, NULL, 10);
      p = strpbrk(p, ",]");
      if (p && *p == ']') p = NULL;
    }
    if (shape[k] < 0 || shape[k] > MAX_ELEMS) return -1;
    elems *= shape[k] ? shape[k] : 1;
    if (elems > MAX_ELEMS) return -1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t n = 0;
  uint8_t *img = build(data, size, &n);
  if (!img) return 0;
  rx_rt_device *d = fz_device_new();
  rx_rt_artifact *a = NULL;
  rx_status s = d ? rx_rt_artifact_load_memory(d, img, n, "fuzz.rxm", &a) : NULL;
  rx_status_free(s);
  for (size_t f = 0; a && f < rx_rt_artifact_function_count(a); f++) {
    size_t np = rx_rt_artifact_function_param_count(a, f);
    if (np > 16) continue;
    rx_rt_tensor *in[16] = {0};
    bool ok = true;
    for (size_t p = 0; p < np && ok; p++) {
      rx_rt_param_info info;
      ok = rx_rt_artifact_function_param(a, f, p, &info);
      rx_dtype dt = ok && info.dtype != RX_DTYPE_UNKNOWN ? info.dtype : RX_DTYPE_F32;
      int ndim = ok && info.ndim >= 0 ? info.ndim : 1;
      int64_t shape[RX_RT_MAX_NDIM];
      ok = ok && ndim <= RX_RT_MAX_NDIM && dims_of(info.expected, ndim, shape) == 0;
      if (ok) {
        static uint8_t host[MAX_ELEMS * 8];
        size_t es = rx_rt_dtype_size(dt), count = 1;
        for (int k = 0; k < ndim; k++) count *= (size_t)shape[k];
        memset(host, 0, count * es);
        bool is_int = dt == RX_DTYPE_I64 || dt == RX_DTYPE_I32;
        for (size_t i = 0; is_int && i < count; i++) {
          int64_t v = i == 0 ? 2 : 1;
          memcpy(host + i * es, &v, es); /* little-endian: the low bytes */
        }
        s = rx_rt_tensor_from_host(d, dt, ndim, shape, host, &in[p]);
        ok = !s;
        rx_status_free(s);
      }
    }
    if (ok) {
      rx_rt_value *r = NULL;
      s = rx_rt_vm_call(a, rx_rt_artifact_function_name(a, f), in, np, &r);
      rx_status_free(s);
      rx_rt_value_release(r);
    }
    for (size_t p = 0; p < np; p++) rx_rt_tensor_release(in[p]);
  }
  rx_rt_artifact_release(a);
  rx_rt_device_release(d);
  free(img);
  return 0;
}
