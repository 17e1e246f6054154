/* test_mma_helpers: the CUDA matrix-unit helpers of codegen/mma_cuda.h (issue 14, "Emulated for
 * CI"): rx_mma_16x8x16_{f16,bf16}f32, rx_mma_16x8x32_s8s32, rx_ldmatrix_x{1,2,4}{,_trans},
 * rx_cp_async_16{,_zfill}, rx_cp_async_commit/wait<N>/wait_all, and the subgroup fragment
 * helpers rx_lane_id, rx_frag_load/store/fill/mma_{f16,bf16} (RX_CUDA_FRAG_PRELUDE).
 *
 * The kernels are tests/simt/kernels/mma.cu, compiled behind the helper prelude:
 *   - in the SIMT emulator (tests/simt/simt_cuda.h defines the helpers from the PTX ISA's
 *     fragment layouts), checked against C references: ldmatrix's registers against the layout of
 *     the PTX ISA's ldmatrix figure (written here), then one 16x8 tile of D = A B + C for f16 (with
 *     zero-filled rows), bf16 and s8, and a multi-warp, multi-stage f16 GEMM; the A and B
 *     fragments come only from ldmatrix on row-major shared tiles, and C and D are placed by the
 *     accumulator layout written in mma.cu, so a layout wrong in the emulator shows as a wrong
 *     element of D. Misuse (a partial warp, a misaligned row address, exited lanes, lanes of a warp
 * in different helpers) must fail; the fragment helpers, which the emulator runs as NVRTC
 * compiles them, give each lane its lane id and one 16x16x16 product for f16 and bf16 (loads of
 * every use, row- and column-major, fill, stores);
 *   - with NVRTC for sm_80 and sm_90: the PTX must contain the instructions and ptxas accept it.
 * Exits 77 (skipped) without clang++ 16 for the emulator; the NVRTC part is reported skipped
 * without NVRTC or ptxas. usage: test_mma_helpers [TESTS_DIR] */
#include "check.h"
#include "codegen/mma_cuda.h"
#include "simt_harness.h"
#include "targets/toolchain.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int emu_skipped;

/* ---- inputs: random values exactly representable in the input types ---- */

static uint32_t rng = 0x2545f491u;
static uint32_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
  return rng;
}
/* f16 with magnitude in [1/16, 2) and either sign (exponent field 11..15), and its value */
static uint16_t rand_f16(void) {
  uint32_t r = next();
  return (uint16_t)((r >> 31) << 15 | (11 + r % 5) << 10 | (r >> 8 & 0x3ff));
}
static float f16_value(uint16_t h) {
  float v = ldexpf(1.0f + (float)(h & 0x3ff) / 1024.0f, (int)(h >> 10 & 0x1f) - 15);
  return h >> 15 ? -v : v;
}
/* bf16 likewise (exponent field 123..127) */
static uint16_t rand_bf16(void) {
  uint32_t r = next();
  return (uint16_t)((r >> 31) << 15 | (123 + r % 5) << 7 | (r >> 8 & 0x7f));
}
static float bf16_value(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static float rand_f32(void) { return (float)(next() % 65536) / 16384.0f - 2.0f; }

/* ---- the f32 check ----
 * The emulator sums c and the K exact products in f32 in a fixed order; the GPU in its own order
 * and precision. Both stay within the bound of a K-term f32 sum: |err| <= (K + 1) 2^-24
 * (|c| + sum |a b|), which is the tolerance (a misplaced element is off by O(|a b|)). */
static int check_f32(const char *what, const float *got, const float *A, const float *B,
                     const float *C, int M, int N, int K) {
  for (int r = 0; r < M; r++)
    for (int c = 0; c < N; c++) {
      double ref = C[r * N + c], mag = fabs(ref);
      for (int k = 0; k < K; k++) {
        ref += (double)A[r * K + k] * B[k * N + c];
        mag += fabs((double)A[r * K + k] * B[k * N + c]);
      }
      double tol = (K + 1) * ldexp(1.0, -24) * mag;
      if (fabs(got[r * N + c] - ref) > tol) {
        CHECK_MSG(0, "%s: D[%d][%d] = %.9g, want %.9g (tolerance %.3g)", what, r, c, got[r * N + c],
                  ref, tol);
        return 1;
      }
    }
  CHECK_MSG(1, "%s", what);
  return 0;
}

/* ---- the emulator ---- */

static int launch(simt_module *m, const char *name, unsigned gx, unsigned gy, unsigned bx,
                  void **args, int nargs) {
  simt_kernel *k = simt_module_kernel(m, name);
  if (!k) {
    CHECK_MSG(0, "no kernel %s", name);
    return -1;
  }
  unsigned grid[3] = {gx, gy, 1}, block[3] = {bx, 1, 1};
  char *err = NULL;
  int rc = simt_launch(k, grid, block, 0, args, nargs, &err);
  if (rc) CHECK_MSG(0, "launch %s: %s", name, err);
  free(err);
  return rc;
}

/* ldmatrix, from the PTX ISA ("Warp-level matrix load instruction: ldmatrix"): lanes 8j..8j+7
 * address the rows of matrix j; "a group of four threads loads an entire row": register j of
 * lane l holds row l/4 of matrix j, elements 2(l%4) (low half) and 2(l%4)+1 (high half); .trans
 * loads the matrix column-major: elements at rows 2(l%4), 2(l%4)+1 of column l/4. */
static void t_ldmatrix(simt_module *m) {
  uint16_t tile[32 * 8];
  for (int i = 0; i < 32 * 8; i++) tile[i] = (uint16_t)(0x100 * (i / 8) + i % 8); /* row, col */
  uint32_t out[6 * 32 * 4];
  memset(out, 0xee, sizeof out);
  uint16_t *pt = tile;
  uint32_t *po = out;
  void *args[] = {&pt, &po};
  if (launch(m, "ldsm_check", 1, 1, 32, args, 2)) return;
  static const int nums[6] = {1, 2, 4, 1, 2, 4};
  for (int v = 0; v < 6; v++) {
    int bad = 0;
    for (int l = 0; l < 32 && !bad; l++)
      for (int j = 0; j < nums[v] && !bad; j++) {
        int g = l / 4, t = l % 4;
        const uint16_t *mat[8]; /* matrix j's rows: the lanes' addresses, rows perm(8j + r) */
        for (int r = 0; r < 8; r++) mat[r] = &tile[((5 * (8 * j + r) + 3) % 32) * 8];
        uint32_t lo = v < 3 ? mat[g][2 * t] : mat[2 * t][g];
        uint32_t hi = v < 3 ? mat[g][2 * t + 1] : mat[2 * t + 1][g];
        uint32_t want = lo | hi << 16, got = out[(v * 32 + l) * 4 + j];
        if (got != want) {
          CHECK_MSG(0, "ldmatrix variant %d: lane %d register %d = 0x%08x, want 0x%08x", v, l, j,
                    got, want);
          bad = 1;
        }
      }
    if (!bad) CHECK_MSG(1, "ldmatrix variant %d", v);
  }
}

/* One 16x8 tile, f16 (A rows from m on are zero-filled by cp.async) or bf16 (B transposed). */
static void t_tile_float(simt_module *m, int bf16, int mrows) {
  uint16_t A[16 * 16], B[16 * 8], Bt[8 * 16];
  float Af[16 * 16], Bf[16 * 8], C[16 * 8], D[16 * 8];
  for (int i = 0; i < 16 * 16; i++) {
    A[i] = bf16 ? rand_bf16() : rand_f16();
    Af[i] = i / 16 >= mrows ? 0.0f : bf16 ? bf16_value(A[i]) : f16_value(A[i]);
  }
  for (int k = 0; k < 16; k++)
    for (int n = 0; n < 8; n++) {
      B[k * 8 + n] = Bt[n * 16 + k] = bf16 ? rand_bf16() : rand_f16();
      Bf[k * 8 + n] = bf16 ? bf16_value(B[k * 8 + n]) : f16_value(B[k * 8 + n]);
    }
  for (int i = 0; i < 16 * 8; i++) C[i] = rand_f32(), D[i] = NAN;
  uint16_t *pa = A, *pb = bf16 ? Bt : B;
  float *pc = C, *pd = D;
  void *args[] = {&pa, &pb, &pc, &pd, &mrows};
  if (launch(m, bf16 ? "mma_bf16_tile" : "mma_f16_tile", 1, 1, 32, args, bf16 ? 4 : 5)) return;
  char what[80];
  snprintf(what, sizeof what, "%s 16x8x16 tile%s", bf16 ? "bf16" : "f16",
           bf16         ? ""
           : mrows < 16 ? " (zero-filled rows)"
                        : "");
  check_f32(what, D, Af, Bf, C, 16, 8, 16);
}

/* The fragment helpers of RX_CUDA_FRAG_PRELUDE over the emulator's mma.sync: rx_lane_id in a
 * block of 64 threads, then one 16x16x16 product for f16 (B and D column-major, C loaded) and
 * for bf16 (B and D row-major, C filled). */
static void t_frag(simt_module *m) {
  unsigned lanes[64];
  memset(lanes, 0xee, sizeof lanes);
  unsigned *pl = lanes;
  void *largs[] = {&pl};
  if (!launch(m, "frag_lanes", 1, 1, 64, largs, 1)) {
    int bad = -1;
    for (int i = 0; i < 64 && bad < 0; i++)
      if (lanes[i] != (unsigned)i % 32) bad = i;
    CHECK_MSG(bad < 0, "rx_lane_id of thread %d is %u", bad, bad < 0 ? 0 : lanes[bad]);
  }
  for (int bf16 = 0; bf16 < 2; bf16++) {
    uint16_t A[16 * 16], B[16 * 16];
    float Af[16 * 16], Bf[16 * 16], C[16 * 16], D[16 * 16], got[16 * 16];
    float c = 0.5f;
    for (int i = 0; i < 16 * 16; i++) {
      A[i] = bf16 ? rand_bf16() : rand_f16();
      Af[i] = bf16 ? bf16_value(A[i]) : f16_value(A[i]);
      D[i] = NAN;
      C[i] = bf16 ? c : rand_f32();
    }
    for (int k = 0; k < 16; k++)
      for (int n = 0; n < 16; n++) { /* f16: B column-major, B[k][n] at n * 16 + k */
        uint16_t v = bf16 ? rand_bf16() : rand_f16();
        B[bf16 ? k * 16 + n : n * 16 + k] = v;
        Bf[k * 16 + n] = bf16 ? bf16_value(v) : f16_value(v);
      }
    uint16_t *pa = A, *pb = B;
    float *pc = C, *pd = D;
    void *args[] = {&pa, &pb, bf16 ? (void *)&c : (void *)&pc, &pd};
    if (launch(m, bf16 ? "frag_bf16_tile" : "frag_f16_tile", 1, 1, 32, args, 4)) continue;
    for (int r = 0; r < 16; r++) /* f16: D column-major */
      for (int n = 0; n < 16; n++) got[r * 16 + n] = bf16 ? D[r * 16 + n] : D[n * 16 + r];
    check_f32(bf16 ? "bf16 16x16x16 fragments" : "f16 16x16x16 fragments (column-major B, D)", got,
              Af, Bf, C, 16, 16, 16);
  }
}

static void t_tile_s8(simt_module *m) {
  int8_t A[16 * 32], Bt[8 * 32];
  int32_t C[16 * 8], D[16 * 8];
  for (int i = 0; i < 16 * 32; i++) A[i] = (int8_t)next();
  for (int i = 0; i < 8 * 32; i++) Bt[i] = (int8_t)next();
  for (int i = 0; i < 16 * 8; i++) C[i] = (int32_t)(next() % (1u << 21)) - (1 << 20), D[i] = 0;
  int8_t *pa = A, *pb = Bt;
  int32_t *pc = C, *pd = D;
  void *args[] = {&pa, &pb, &pc, &pd};
  if (launch(m, "mma_s8_tile", 1, 1, 32, args, 4)) return;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) {
      int32_t want = C[r * 8 + c];
      for (int k = 0; k < 32; k++) want += A[r * 32 + k] * Bt[c * 32 + k];
      if (D[r * 8 + c] != want) {
        CHECK_MSG(0, "s8 16x8x32 tile: D[%d][%d] = %d, want %d", r, c, D[r * 8 + c], want);
        return;
      }
    }
  CHECK_MSG(1, "s8 16x8x32 tile (exact)");
}

static void t_gemm(simt_module *m, int M, int N, int K) {
  uint16_t *A = malloc(sizeof *A * M * K), *B = malloc(sizeof *B * K * N);
  float *Af = malloc(sizeof *Af * M * K), *Bf = malloc(sizeof *Bf * K * N);
  float *C = malloc(sizeof *C * M * N), *D = malloc(sizeof *D * M * N);
  if (!A || !B || !Af || !Bf || !C || !D) abort();
  for (int i = 0; i < M * K; i++) A[i] = rand_f16(), Af[i] = f16_value(A[i]);
  for (int i = 0; i < K * N; i++) B[i] = rand_f16(), Bf[i] = f16_value(B[i]);
  for (int i = 0; i < M * N; i++) C[i] = rand_f32(), D[i] = NAN;
  void *args[] = {&A, &B, &C, &D, &M, &N, &K};
  if (!launch(m, "gemm_f16", (unsigned)N / 32, (unsigned)M / 64, 128, args, 7)) {
    char what[80];
    snprintf(what, sizeof what, "f16 GEMM %dx%dx%d (%d blocks of 4 warps)", M, N, K,
             M / 64 * (N / 32));
    check_f32(what, D, Af, Bf, C, M, N, K);
  }
  free(A), free(B), free(Af), free(Bf), free(C), free(D);
}

/* A launch that must fail with a message containing `want`. */
static void t_misuse(simt_module *m, const char *name, unsigned bx, const char *want) {
  simt_kernel *k = simt_module_kernel(m, name);
  uint32_t buf[64];
  void *p = buf, *args[] = {&p};
  unsigned grid[3] = {1, 1, 1}, block[3] = {bx, 1, 1};
  char *err = NULL;
  int rc = k ? simt_launch(k, grid, block, 0, args, 1, &err) : -1;
  CHECK_MSG(rc && err && strstr(err, want), "%s: expected an error containing \"%s\", got: %s",
            name, want, err ? err : "(none)");
  if (rc && err && strstr(err, want)) printf("  %s reported: %s\n", name, err);
  free(err);
}

static void run_emulated(const char *src) {
  simt_module *m = NULL;
  char *err = NULL;
  if (simt_module_compile(NULL, SIMT_CUDA, src, "mma.cu", &m, &err)) {
    if (err && strstr(err, "cannot run")) {
      emu_skipped = 1;
      printf("SKIP emulator: %s\n", err);
    } else {
      CHECK_MSG(0, "mma.cu does not compile for the emulator: %s", err ? err : "");
    }
    free(err);
    return;
  }
  t_ldmatrix(m);
  t_tile_float(m, 0, 16);
  t_tile_float(m, 0, 13);
  t_tile_float(m, 1, 16);
  t_tile_s8(m);
  t_frag(m);
  t_gemm(m, 64, 32, 64);
  t_gemm(m, 128, 64, 256);
  t_misuse(m, "bad_partial_warp", 16, "needs all 32 lanes");
  t_misuse(m, "bad_ldsm_align", 32, "not 16-byte aligned");
  t_misuse(m, "bad_exited_lanes", 32, "has exited");
  t_misuse(m, "bad_mixed_ops", 32, "every lane of the warp must execute the same instruction");
  simt_module_free(m);
}

/* ---- NVRTC and ptxas ---- */

static void run_nvrtc(const char *src) {
  rx_status s = tgt_nvrtc_load(NULL, NULL);
  if (s) {
    printf("SKIP NVRTC: %s\n", rx_status_message(s));
    rx_status_free(s);
    return;
  }
  static const char *const archs[] = {"sm_80", "sm_90"};
  static const char *const want[] = {
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
      "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
      "cp.async.cg.shared.global",
      "cp.async.commit_group",
      "cp.async.wait_group 1",
      "cp.async.wait_all",
      "%laneid",
  };
  for (int a = 0; a < 2; a++) {
    char *ptx = NULL, *log = NULL;
    size_t len = 0;
    s = tgt_nvrtc_compile(src, "mma.cu", archs[a], false, &ptx, &len, &log);
    CHECK_MSG(!s, "NVRTC %s: %s\n%s", archs[a], s ? rx_status_message(s) : "", log ? log : "");
    rx_status_free(s);
    free(log);
    if (!ptx) continue;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
      CHECK_MSG(strstr(ptx, want[i]), "PTX for %s lacks %s", archs[a], want[i]);
    rx_ptxas_info info;
    s = tgt_ptxas_report(ptx, archs[a], &info);
    if (rx_status_code_of(s) == RX_ERR_NOT_FOUND) {
      printf("SKIP ptxas: %s\n", rx_status_message(s));
    } else {
      CHECK_MSG(!s, "ptxas %s rejects the PTX: %s", archs[a], s ? rx_status_message(s) : "");
      if (!s) {
        printf("  %s: ptxas accepts the PTX (%d functions, at most %d registers, %d spill "
               "bytes)\n",
               archs[a], info.nfuncs, info.max_registers, info.spill_bytes);
        tgt_ptxas_info_free(&info);
      }
    }
    rx_status_free(s);
    free(ptx);
  }
}

/* The kernels' text as the printer would emit it: headers, the helper prelude, the kernels. */
static char *kernel_source(const char *tests_dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/simt/kernels/mma.cu", tests_dir);
  FILE *f = fopen(path, "rb");
  if (!f) {
    printf("FAIL: cannot open %s\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  static const char head[] = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n";
  static const char line[] = "#line 1 \"mma.cu\"\n";
  size_t at =
      strlen(head) + strlen(RX_CUDA_MMA_PRELUDE) + strlen(RX_CUDA_FRAG_PRELUDE) + strlen(line);
  char *src = malloc(at + (size_t)n + 1);
  if (!src) abort();
  snprintf(src, at + 1, "%s%s%s%s", head, RX_CUDA_MMA_PRELUDE, RX_CUDA_FRAG_PRELUDE, line);
  size_t got = fread(src + at, 1, (size_t)n, f);
  src[at + got] = 0;
  fclose(f);
  return src;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  char *src = kernel_source(argc > 1 ? argv[1] : "tests");
  if (!src) return 1;
  run_emulated(src);
  run_nvrtc(src);
  free(src);
  printf("mma helpers: %d passed, %d failed%s\n", check_passed, check_failed,
         emu_skipped ? " (emulator skipped: no clang++ 16)" : "");
  return check_failed ? 1 : emu_skipped ? 77 : 0;
}
