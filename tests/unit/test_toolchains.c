/* Toolchains: GLSL -> SPIR-V (shaderc) -> spirv-val (SPIRV-Tools); CUDA C -> PTX / cubin
 * (NVRTC) -> ptxas -v; MSL -> metallib (xcrun metal, macOS). A toolchain absent from this
 * machine or build makes its checks skip with a message, counted as skipped, never as passed.
 *
 * usage: test_toolchains [TESTS_DIR]   (the directory is not used) */
#include "base/base.h"
#include "check.h"
#include "targets/toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void skip(const char *what, const char *why) {
  check_skipped++;
  printf("SKIP %s: %s\n", what, why);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ==== GLSL / SPIR-V ======================================================================= */

/* What the GLSL printer emits: storage buffers, a push-constant block, shared memory, subgroup
 * arithmetic, 16-bit storage and f16 arithmetic. */
static const char glsl_good[] =
    "#version 450\n"
    "#extension GL_KHR_shader_subgroup_arithmetic : require\n"
    "#extension GL_EXT_shader_16bit_storage : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 64) in;\n"
    "layout(std430, set = 0, binding = 0) readonly buffer A { float16_t a[]; };\n"
    "layout(std430, set = 0, binding = 1) writeonly buffer B { float b[]; };\n"
    "layout(push_constant) uniform Args { int n; int m; } args;\n"
    "shared float partial[64];\n"
    "void main() {\n"
    "  uint i = gl_GlobalInvocationID.x;\n"
    "  float16_t x = i < uint(args.n) ? a[i] * float16_t(2.0) : float16_t(0.0);\n"
    "  float s = subgroupAdd(float(x));\n"
    "  if (subgroupElect()) partial[gl_SubgroupID] = s;\n"
    "  barrier();\n"
    "  if (gl_LocalInvocationID.x == 0u) {\n"
    "    float t = 0.0;\n"
    "    for (uint k = 0u; k < gl_NumSubgroups; k++) t += partial[k];\n"
    "    b[gl_WorkGroupID.x] = t * float(args.m);\n"
    "  }\n"
    "}\n";

/* An error on line 7: an undeclared identifier. */
static const char glsl_bad[] = "#version 450\n"
                               "layout(local_size_x = 64) in;\n"
                               "layout(std430, binding = 0) buffer B { float b[]; };\n"
                               "void main() {\n"
                               "  uint i = gl_GlobalInvocationID.x;\n"
                               "  float v = 1.0;\n"
                               "  b[i] = v * undeclared_thing;\n"
                               "}\n";

static void test_glsl(void) {
  if (!tgt_shaderc_available()) {
    uint32_t *w = NULL;
    size_t n = 0;
    rx_status s = tgt_glsl_to_spirv(glsl_good, strlen(glsl_good), "good.comp", &w, &n);
    CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_UNSUPPORTED &&
                  strstr(rx_status_message(s), "shaderc"),
              "without shaderc: %s", rx_status_message(s));
    rx_status_free(s);
    skip("GLSL to SPIR-V", "relaxc was built without shaderc (install libshaderc-dev)");
    return;
  }
  uint32_t *words = NULL;
  size_t nwords = 0;
  double t0 = now_ms();
  rx_status s = tgt_glsl_to_spirv(glsl_good, strlen(glsl_good), "good.comp", &words, &nwords);
  double t1 = now_ms();
  CHECK_MSG(s == NULL, "compile good.comp: %s", rx_status_message(s));
  rx_status_free(s);
  if (!words) return;
  printf("info: shaderc compiled good.comp (%zu words) in %.1f ms\n", nwords, t1 - t0);
  CHECK_MSG(nwords > 5 && words[0] == 0x07230203u, "SPIR-V magic %08x", nwords ? words[0] : 0);
  CHECK_MSG(words[1] == 0x00010500u, "SPIR-V version 1.5: %08x", words[1]);

  if (!tgt_spirv_tools_available()) {
    s = tgt_spirv_validate(words, nwords);
    CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_UNSUPPORTED &&
                  strstr(rx_status_message(s), "SPIRV-Tools"),
              "without SPIRV-Tools: %s", rx_status_message(s));
    rx_status_free(s);
    skip("SPIR-V validation", "relaxc was built without SPIRV-Tools (install spirv-tools)");
    free(words);
    return;
  }
  s = tgt_spirv_validate(words, nwords);
  CHECK_MSG(s == NULL, "validate good.comp: %s", rx_status_message(s));
  rx_status_free(s);

  char *text = NULL;
  s = tgt_spirv_disassemble(words, nwords, &text);
  CHECK_MSG(s == NULL && text, "disassemble: %s", rx_status_message(s));
  rx_status_free(s);
  if (text) {
    const char *want[] = {"OpCapability Float16",
                          "OpCapability StorageBuffer16BitAccess",
                          "OpCapability GroupNonUniformArithmetic",
                          "OpGroupNonUniformFAdd",
                          "OpEntryPoint GLCompute",
                          "LocalSize 64 1 1",
                          "PushConstant",
                          "Workgroup"};
    for (size_t i = 0; i < RX_ARRAY_LEN(want); i++)
      CHECK_MSG(strstr(text, want[i]) != NULL, "disassembly lacks '%s'", want[i]);
    free(text);
  }

  /* corruptions the validator must catch, each with a message */
  struct {
    const char *what;
    size_t word;      /* index to overwrite */
    uint32_t value;   /* new value */
    size_t drop;      /* words removed from the end */
    const char *want; /* in the message */
  } bad[] = {
      {"bad magic", 0, 0xdeadbeefu, 0, "magic"},
      {"id bound too small", 3, 2u, 0, "bound"},
      {"truncated", 0, 0x07230203u, 3, ""},
      {"wrong SPIR-V version", 1, 0x00090000u, 0, ""},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(bad); i++) {
    uint32_t *copy = base_malloc(nwords * 4);
    memcpy(copy, words, nwords * 4);
    copy[bad[i].word] = bad[i].value;
    s = tgt_spirv_validate(copy, nwords - bad[i].drop);
    CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID, "%s must fail validation", bad[i].what);
    if (s) {
      const char *msg = rx_status_message(s);
      CHECK_MSG(strstr(msg, "SPIR-V validation (Vulkan 1.2) failed") && strlen(msg) > 40 &&
                    strstr(msg, bad[i].want),
                "%s: message '%s' lacks '%s'", bad[i].what, msg, bad[i].want);
      if (i == 0) printf("info: corrupt SPIR-V gives: %s\n", msg);
    }
    rx_status_free(s);
    free(copy);
  }
  /* a one-word corruption deep in the module: an instruction's opcode made unknown */
  {
    uint32_t *copy = base_malloc(nwords * 4);
    memcpy(copy, words, nwords * 4);
    size_t at = nwords / 2, w = 5; /* walk instructions to find one near the middle */
    while (w < nwords) {
      uint32_t len = copy[w] >> 16;
      if (w >= at || len == 0) break;
      w += len;
    }
    CHECK_MSG(w < nwords, "found an instruction to corrupt");
    if (w < nwords) {
      copy[w] = (copy[w] & 0xffff0000u) | 0xfff0u; /* opcode 65520: none */
      s = tgt_spirv_validate(copy, nwords);
      CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID && strstr(rx_status_message(s), "word"),
                "unknown opcode must fail with a position: %s", rx_status_message(s));
      rx_status_free(s);
    }
    free(copy);
  }
  s = tgt_spirv_validate(words, 2);
  CHECK_MSG(s && strstr(rx_status_message(s), "header"), "2 words: %s", rx_status_message(s));
  rx_status_free(s);
  free(words);

  /* a GLSL error: the message names the file and line and quotes the line */
  words = NULL;
  s = tgt_glsl_to_spirv(glsl_bad, strlen(glsl_bad), "bad.comp", &words, &nwords);
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID, "bad.comp must fail");
  CHECK_MSG(words == NULL && nwords == 0, "no words on error");
  if (s) {
    const char *msg = rx_status_message(s);
    CHECK_MSG(strstr(msg, "bad.comp:7:") != NULL, "message lacks 'bad.comp:7:': %s", msg);
    CHECK_MSG(strstr(msg, "undeclared_thing") != NULL, "message lacks the identifier: %s", msg);
    CHECK_MSG(strstr(msg, "      7 |   b[i] = v * undeclared_thing;") != NULL,
              "message lacks the line: %s", msg);
    printf("info: GLSL error gives:\n%s\n", msg);
  }
  rx_status_free(s);
}

/* ==== CUDA C ============================================================================= */

static const char cuda_good[] =
    "#include <cuda_fp16.h>\n"
    "#include <cuda_bf16.h>\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "rx_test_kernel(const __half *__restrict__ a, const __nv_bfloat16 *__restrict__ g,\n"
    "               float *__restrict__ out, int n) {\n"
    "  __shared__ float part[8];\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  float v = 0.0f;\n"
    "  if (i < n) v = __half2float(__hmul(a[i], __float2half(2.0f))) * __bfloat162float(g[i]);\n"
    "  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;\n"
    "  __syncthreads();\n"
    "  if (threadIdx.x == 0) {\n"
    "    float t = 0.0f;\n"
    "    for (int k = 0; k < 8; k++) t += part[k];\n"
    "    out[blockIdx.x] = t;\n"
    "  }\n"
    "}\n";

/* An error on line 3: a missing semicolon. */
static const char cuda_bad[] = "extern \"C\" __global__ void broken(float *x, int n) {\n"
                               "  int i = threadIdx.x;\n"
                               "  if (i < n) x[i] = 1.0f\n"
                               "}\n";

/* A canned `ptxas -v` report with a spilling kernel and a device function. */
static const char ptxas_canned[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Function properties for helper\n"
    "    24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Compiling entry function 'big' for 'sm_80'\n"
    "ptxas info    : Function properties for big\n"
    "    96 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads\n"
    "ptxas info    : Used 255 registers, 4096 bytes smem, 380 bytes cmem[0]\n"
    "ptxas info    : Compiling entry function 'small' for 'sm_80'\n"
    "ptxas info    : Function properties for small\n"
    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 12 registers, used 1 barriers, 368 bytes cmem[0]\n";

static void test_ptxas_parse(void) {
  rx_ptxas_info info;
  rx_status s = tgt_ptxas_parse(ptxas_canned, &info);
  CHECK_MSG(s == NULL, "parse canned report: %s", rx_status_message(s));
  rx_status_free(s);
  if (s) return;
  CHECK_MSG(info.nfuncs == 3, "3 functions, got %d", info.nfuncs);
  if (info.nfuncs == 3) {
    CHECK_MSG(strcmp(info.funcs[0].name, "helper") == 0 && !info.funcs[0].entry &&
                  info.funcs[0].stack_bytes == 24,
              "helper: %s %d %d", info.funcs[0].name, info.funcs[0].entry,
              info.funcs[0].stack_bytes);
    CHECK_MSG(strcmp(info.funcs[1].name, "big") == 0 && info.funcs[1].entry &&
                  info.funcs[1].registers == 255 && info.funcs[1].shared_bytes == 4096 &&
                  info.funcs[1].spill_stores == 40 && info.funcs[1].spill_loads == 36 &&
                  info.funcs[1].stack_bytes == 96,
              "big: regs %d smem %d spills %d/%d", info.funcs[1].registers,
              info.funcs[1].shared_bytes, info.funcs[1].spill_stores, info.funcs[1].spill_loads);
    CHECK_MSG(strcmp(info.funcs[2].name, "small") == 0 && info.funcs[2].registers == 12 &&
                  info.funcs[2].shared_bytes == 0 && info.funcs[2].spill_stores == 0,
              "small: regs %d smem %d", info.funcs[2].registers, info.funcs[2].shared_bytes);
  }
  CHECK_MSG(info.max_registers == 255 && info.spill_bytes == 76, "totals: %d regs, %d spill bytes",
            info.max_registers, info.spill_bytes);
  tgt_ptxas_info_free(&info);
  s = tgt_ptxas_parse("ptxas info    : 0 bytes gmem\n", &info);
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID, "a report without functions is an error");
  rx_status_free(s);
}

/* In a child process (NVRTC is loaded once per process): a bad RX_NVRTC_PATH gives a clear
 * RX_ERR_NOT_FOUND naming what was tried. */
static void test_nvrtc_missing(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("RX_NVRTC_PATH", "/nonexistent/libnvrtc.so", 1);
    rx_status s = tgt_nvrtc_load(NULL, NULL);
    int ok = s && rx_status_code_of(s) == RX_ERR_NOT_FOUND &&
             strstr(rx_status_message(s), "NVRTC not found (tried /nonexistent/libnvrtc.so)") &&
             strstr(rx_status_message(s), "install the CUDA toolkit or set RX_NVRTC_PATH");
    if (!ok) printf("child: %s\n", s ? rx_status_message(s) : "(loaded)");
    rx_status_free(s);
    fflush(stdout);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CHECK_MSG(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0,
            "missing NVRTC message (child status %d)", status);
}

static void test_nvrtc(void) {
  char *bin = NULL, *log = NULL;
  size_t len = 0;
  /* argument checks come before loading, so they hold everywhere */
  rx_status s = tgt_nvrtc_compile(cuda_good, "k.cu", "sm80", true, &bin, &len, &log);
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID && strstr(rx_status_message(s), "'sm80'"),
            "bad arch: %s", rx_status_message(s));
  rx_status_free(s);
  s = tgt_nvrtc_compile(cuda_good, "k.cu", "compute_80", true, &bin, &len, &log);
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID &&
                strstr(rx_status_message(s), "real architecture"),
            "cubin for a virtual arch: %s", rx_status_message(s));
  rx_status_free(s);

  int major = 0, minor = 0;
  s = tgt_nvrtc_load(&major, &minor);
  if (s) {
    CHECK_MSG(rx_status_code_of(s) == RX_ERR_NOT_FOUND &&
                  strstr(rx_status_message(s), "RX_NVRTC_PATH"),
              "missing NVRTC: %s", rx_status_message(s));
    skip("NVRTC compiles (sm_80, sm_90, cubin and PTX), ptxas reports", rx_status_message(s));
    rx_status_free(s);
    return;
  }
  printf("info: NVRTC %d.%d\n", major, minor);

  const char *archs[] = {"sm_80", "sm_90"};
  for (size_t a = 0; a < RX_ARRAY_LEN(archs); a++) {
    /* cubin */
    double t0 = now_ms();
    s = tgt_nvrtc_compile(cuda_good, "good.cu", archs[a], true, &bin, &len, &log);
    double t1 = now_ms();
    CHECK_MSG(s == NULL, "cubin %s: %s", archs[a], rx_status_message(s));
    rx_status_free(s);
    if (bin) {
      CHECK_MSG(len > 64 && memcmp(bin, "\177ELF", 4) == 0, "%s cubin is an ELF file (%zu bytes)",
                archs[a], len);
      printf("info: NVRTC cubin %s: %zu bytes in %.1f ms\n", archs[a], len, t1 - t0);
    }
    free(bin);
    free(log);
    bin = log = NULL;

    /* PTX, then ptxas */
    t0 = now_ms();
    s = tgt_nvrtc_compile(cuda_good, "good.cu", archs[a], false, &bin, &len, &log);
    t1 = now_ms();
    CHECK_MSG(s == NULL, "PTX %s: %s", archs[a], rx_status_message(s));
    rx_status_free(s);
    free(log);
    log = NULL;
    if (!bin) continue;
    char target_line[32];
    snprintf(target_line, sizeof target_line, ".target %s", archs[a]);
    CHECK_MSG(len == strlen(bin) && strstr(bin, target_line) &&
                  strstr(bin, ".entry rx_test_kernel"),
              "%s PTX has '%s' and the entry", archs[a], target_line);
    CHECK_MSG(strstr(bin, "shfl.sync.bfly") != NULL, "%s PTX uses warp shuffles", archs[a]);
    CHECK_MSG(strstr(bin, ".maxntid 256") != NULL, "%s PTX carries __launch_bounds__", archs[a]);
    printf("info: NVRTC PTX %s: %zu bytes in %.1f ms\n", archs[a], len, t1 - t0);

    rx_ptxas_info info;
    s = tgt_ptxas_report(bin, archs[a], &info);
    if (s && rx_status_code_of(s) == RX_ERR_NOT_FOUND) {
      skip("ptxas report", rx_status_message(s));
    } else {
      CHECK_MSG(s == NULL, "ptxas %s: %s", archs[a], rx_status_message(s));
      if (!s) {
        CHECK_MSG(info.nfuncs == 1 && strcmp(info.funcs[0].name, "rx_test_kernel") == 0 &&
                      info.funcs[0].entry,
                  "%s: one entry rx_test_kernel (%d functions)", archs[a], info.nfuncs);
        CHECK_MSG(info.max_registers > 0 && info.max_registers <= 255, "%s registers %d", archs[a],
                  info.max_registers);
        CHECK_MSG(info.spill_bytes == 0, "%s spills %d bytes:\n%s", archs[a], info.spill_bytes,
                  info.log);
        CHECK_MSG(info.nfuncs >= 1 && info.funcs[0].shared_bytes == 32, "%s smem %d (8 floats)",
                  archs[a], info.nfuncs ? info.funcs[0].shared_bytes : -1);
        printf("info: ptxas %s: %d registers, %d spill bytes\n", archs[a], info.max_registers,
               info.spill_bytes);
        tgt_ptxas_info_free(&info);
      }
    }
    rx_status_free(s);
    free(bin);
    bin = NULL;
  }

  /* NVRTC compile time of a small kernel, warm (the first call above paid for loading) */
  {
    const int reps = 5;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
      double t0 = now_ms();
      s = tgt_nvrtc_compile(cuda_good, "good.cu", "sm_80", true, &bin, &len, NULL);
      double t1 = now_ms();
      rx_status_free(s);
      free(bin);
      bin = NULL;
      if (t1 - t0 < best) best = t1 - t0;
    }
    printf("info: NVRTC small kernel to sm_80 cubin: best of %d = %.1f ms\n", reps, best);
  }

  /* ptxas rejects PTX it cannot assemble, with its log */
  {
    rx_ptxas_info info;
    s = tgt_ptxas_report(".version 8.0\n.target sm_80\n.address_size 64\n garbage here\n", "sm_80",
                         &info);
    if (s && rx_status_code_of(s) == RX_ERR_NOT_FOUND) {
      skip("ptxas rejects bad PTX", rx_status_message(s));
    } else {
      CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID &&
                    strstr(rx_status_message(s), "ptxas -arch=sm_80 failed"),
                "bad PTX: %s", s ? rx_status_message(s) : "(accepted)");
      if (!s) tgt_ptxas_info_free(&info);
    }
    rx_status_free(s);
  }

  /* a CUDA syntax error: NVRTC's log with the file and line */
  s = tgt_nvrtc_compile(cuda_bad, "bad.cu", "sm_80", true, &bin, &len, &log);
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_INVALID, "bad.cu must fail");
  CHECK_MSG(bin == NULL && len == 0, "no output on error");
  if (s) {
    const char *msg = rx_status_message(s);
    CHECK_MSG(strstr(msg, "bad.cu(3)") || strstr(msg, "bad.cu(4)"), "message lacks 'bad.cu(3)': %s",
              msg);
    CHECK_MSG(strstr(msg, "error") != NULL, "message lacks 'error': %s", msg);
    CHECK_MSG(log && strstr(log, "bad.cu(") != NULL, "the log is handed out too");
    printf("info: CUDA error gives:\n%s\n", msg);
  }
  rx_status_free(s);
  free(log);
}

/* ==== MSL ================================================================================ */

static const char msl_good[] = "#include <metal_stdlib>\n"
                               "using namespace metal;\n"
                               "struct Args { int n; };\n"
                               "kernel void k(device const half *a [[buffer(0)]],\n"
                               "              device float *b [[buffer(1)]],\n"
                               "              constant Args &args [[buffer(2)]],\n"
                               "              uint i [[thread_position_in_grid]]) {\n"
                               "  float v = i < uint(args.n) ? float(a[i]) : 0.0f;\n"
                               "  b[i] = simd_sum(v);\n"
                               "}\n";

static void test_metal(void) {
  char *lib = NULL, *log = NULL;
  size_t len = 0;
  rx_status s = tgt_metal_compile(msl_good, "good.metal", &lib, &len, &log);
#if defined(__APPLE__)
  if (s && rx_status_code_of(s) == RX_ERR_NOT_FOUND) {
    skip("xcrun metal", rx_status_message(s));
  } else {
    CHECK_MSG(s == NULL && lib && len > 16, "xcrun metal: %s", rx_status_message(s));
  }
#else
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_UNSUPPORTED &&
                strstr(rx_status_message(s), "xcrun metal is only available on macOS"),
            "off macOS: %s", rx_status_message(s));
  CHECK_MSG(lib == NULL && len == 0, "no output off macOS");
  skip("MSL to metallib", "xcrun metal is only available on macOS");
#endif
  rx_status_free(s);
  free(lib);
  free(log);
}

/* ==== helpers ============================================================================ */

static void test_helpers(void) {
  char *dir = NULL;
  rx_status s = tgt_tc_temp_dir(&dir);
  CHECK_MSG(s == NULL && dir, "temp dir: %s", rx_status_message(s));
  rx_status_free(s);
  if (dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/x.txt", dir);
    s = tgt_tc_write_file(path, "hello", 5);
    CHECK_MSG(s == NULL, "write: %s", rx_status_message(s));
    rx_status_free(s);
    char *out = NULL;
    int code = -1;
    char *argv[] = {"cat", path, NULL};
    s = tgt_tc_run(argv, &out, &code);
    CHECK_MSG(s == NULL && code == 0 && out && strcmp(out, "hello") == 0, "run cat: %s",
              out ? out : "");
    rx_status_free(s);
    free(out);
    tgt_tc_remove_dir(dir);
    CHECK_MSG(access(dir, F_OK) != 0, "temp dir removed");
    free(dir);
  }
  char *argv[] = {"/nonexistent/tool", NULL};
  int code = 0;
  s = tgt_tc_run(argv, NULL, &code);
  CHECK_MSG(s && rx_status_code_of(s) == RX_ERR_NOT_FOUND &&
                strstr(rx_status_message(s), "/nonexistent/tool"),
            "missing tool: %s", rx_status_message(s));
  rx_status_free(s);
  char *sh = tgt_tc_find_tool("sh", NULL, NULL);
  CHECK_MSG(sh != NULL, "sh is on PATH");
  free(sh);
  CHECK_MSG(tgt_tc_find_tool("no-such-tool-relaxc", "RX_NO_SUCH_VAR", NULL) == NULL, "absent tool");
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_helpers();
  test_glsl();
  test_ptxas_parse();
  test_nvrtc_missing();
  test_nvrtc();
  test_metal();
  return check_finish("test_toolchains");
}
