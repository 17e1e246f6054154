/* targets: the table of target descriptions and the target-string parser.
 *
 * Every number below comes from a public document named in the entry's `source` field and in
 * the comment above it. Where the document gives a range across devices (Adreno, Mali), the
 * entry takes the value that holds on every device of the family it names, so a schedule that
 * fits the description fits every such device. */
#include "target.h"

#include <stdio.h>
#include <string.h>

/* "sync", "wgmma", "coop", "simdgroup". */
static const char *tgt_mma_api_name(rx_mma_api api);

/* The text name of a dtype (ir/ir.h's ir_dtype_name is above this layer). */
static const char *dtype_name(rx_dtype t) {
  switch (t) {
#define X(e, n, b, f, sg)                                                                          \
  case RX_DTYPE_##e:                                                                               \
    return n;
    RX_DTYPES(X)
#undef X
  default:
    return "any";
  }
}

#define KIB 1024
#define GB  ((int64_t)1000 * 1000 * 1000) /* datasheets count decimal gigabytes */

/* ---- the table ------------------------------------------------------------------------- */

/* Matrix-unit shapes, best first within each api.
 * sm_80 (PTX ISA, "Warp-level matrix multiply-accumulate instructions", "Matrix shape" table):
 * mma.sync m16n8k16 with .f16 or .bf16 A and B and an .f32 accumulator (.f16 too for .f16
 * inputs), m16n8k32 with .s8 A and B and an .s32 accumulator; one warp of 32 threads.
 * m16n8k8 .tf32 is left out: it rounds f32 inputs to 10 mantissa bits. */
#define MMA_SYNC_SM80                                                                              \
  {RX_MMA_SYNC,  16, 8,                                                                            \
   16,           0,  RX_DTYPE_F16,                                                                 \
   RX_DTYPE_F32, 32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"},                         \
      {RX_MMA_SYNC,  16, 8,                                                                        \
       16,           0,  RX_DTYPE_BF16,                                                            \
       RX_DTYPE_F32, 32, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},                   \
      {RX_MMA_SYNC,  16, 8,                                                                        \
       16,           0,  RX_DTYPE_F16,                                                             \
       RX_DTYPE_F16, 32, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"},                     \
  {                                                                                                \
    RX_MMA_SYNC, 16, 8, 32, 0, RX_DTYPE_I8, RX_DTYPE_I32, 32,                                      \
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"                                          \
  }
/* sm_80 and newer, for subgroup matrix fragments (ir/ir.h, RX_STMT_FRAG; lowered by
 * codegen/lower.c, printed by codegen/cuda.c): a 16x16x16 product is two mma.sync m16n8k16 above
 * (columns 0-7 and 8-15 of B and C) over one warp, the fragments held in those instructions'
 * register layouts by the helpers of codegen/mma_cuda.h. Listed after mma.sync so that a lookup
 * by dtype alone (tgt_target_mma with api -1) still finds the instruction; the schedules use
 * gemv_mma / gemm_mma on CUDA, never gemm_frag (passes/schedule/gemm_frag.c asks for api coop or
 * simdgroup only). */
/* clang-format off */
#define MMA_FRAG_SM80                                                                              \
  {RX_MMA_SYNC_FRAG, 16, 16, 16, 0, RX_DTYPE_F16, RX_DTYPE_F32, 32,                                \
   "rx_frag_mma_f16 (2 x mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32)"},                     \
  {RX_MMA_SYNC_FRAG, 16, 16, 16, 0, RX_DTYPE_BF16, RX_DTYPE_F32, 32,                               \
   "rx_frag_mma_bf16 (2 x mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32)"}
/* clang-format on */
static const rx_mma_shape mma_sm80[] = {MMA_SYNC_SM80, MMA_FRAG_SM80};
/* sm_90: mma.sync as sm_80, and wgmma.mma_async (PTX ISA, "Asynchronous Warpgroup Level Matrix
 * Multiply-Accumulate", "Matrix shape" table; needs the arch-specific target sm_90a):
 * m64nNk16 for .f16 / .bf16 with N any multiple of 8 up to 256, m64nNk32 for .s8 with N a
 * multiple of 8 up to 24 and of 16 from 32 to 256 (recorded as multiples of 16); one warpgroup
 * of 128 threads. wgmma first: four warps share one larger tile. */
static const rx_mma_shape mma_sm90[] = {
    {RX_MMA_WGMMA, 64, 256, 16, 8, RX_DTYPE_F16, RX_DTYPE_F32, 128,
     "wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16"},
    {RX_MMA_WGMMA, 64, 256, 16, 8, RX_DTYPE_BF16, RX_DTYPE_F32, 128,
     "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16"},
    {RX_MMA_WGMMA, 64, 256, 16, 8, RX_DTYPE_F16, RX_DTYPE_F16, 128,
     "wgmma.mma_async.sync.aligned.m64nNk16.f16.f16.f16"},
    {RX_MMA_WGMMA, 64, 256, 32, 16, RX_DTYPE_I8, RX_DTYPE_I32, 128,
     "wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s8"},
    MMA_SYNC_SM80,
    MMA_FRAG_SM80,
};
/* NVIDIA through VK_NV_cooperative_matrix (Vulkan registry, "VK_NV_cooperative_matrix";
 * GLSL GL_NV_cooperative_matrix; NVIDIA, "Machine Learning Acceleration in Vulkan with
 * Cooperative Matrices", 2019; the VkCooperativeMatrixPropertiesNV lists of Turing to Hopper
 * drivers on vulkan.gpuinfo.org): fcoopmatNV of 16-bit A and B over one subgroup of 32, 16x16x16
 * and 16x8x16, accumulating in f32 or f16. GL_KHR_cooperative_matrix (any vendor, shapes queried
 * at run time) needs glslang 13 or newer; the glslang 12 of Debian bookworm (shaderc 2023.2)
 * only has the NV extension, so relaxc emits that. */
static const rx_mma_shape mma_vk_nv[] = {
    {RX_MMA_COOP, 16, 16, 16, 0, RX_DTYPE_F16, RX_DTYPE_F32, 32,
     "fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>"},
    {RX_MMA_COOP, 16, 16, 16, 0, RX_DTYPE_F16, RX_DTYPE_F16, 32,
     "fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>"},
    {RX_MMA_COOP, 16, 8, 16, 0, RX_DTYPE_F16, RX_DTYPE_F32, 32,
     "fcoopmatNV<32, gl_ScopeSubgroup, 16, 8>"},
    {RX_MMA_COOP, 16, 8, 16, 0, RX_DTYPE_F16, RX_DTYPE_F16, 32,
     "fcoopmatNV<16, gl_ScopeSubgroup, 16, 8>"},
};
/* Apple7 (Metal Shading Language Specification, "SIMD-group Matrix Functions"):
 * simdgroup_matrix<T, 8, 8> of half or float, multiplied with simdgroup_multiply_accumulate by
 * one SIMD group of 32 threads (bfloat matrices are not assumed on Apple7). */
static const rx_mma_shape mma_apple7[] = {
    {RX_MMA_SIMDGROUP, 8, 8, 8, 0, RX_DTYPE_F16, RX_DTYPE_F32, 32, "simdgroup_float8x8"},
    {RX_MMA_SIMDGROUP, 8, 8, 8, 0, RX_DTYPE_F16, RX_DTYPE_F16, 32, "simdgroup_half8x8"},
    {RX_MMA_SIMDGROUP, 8, 8, 8, 0, RX_DTYPE_F32, RX_DTYPE_F32, 32, "simdgroup_float8x8"},
};

static const rx_target table[] = {
    /* NVIDIA Ampere (A100, RTX 30xx; compute capability 8.0).
     * CUDA C++ Programming Guide, "Compute Capabilities", table "Technical Specifications per
     * Compute Capability": 1024 threads per block, block dims 1024 x 1024 x 64, grid
     * 2^31-1 x 65535 x 65535, warp 32, 64K 32-bit registers per block, 255 per thread,
     * 48 KiB shared memory per block by default and 163 KiB with opt-in
     * (cudaFuncAttributeMaxDynamicSharedMemorySize). Kernel parameters: 4 KiB ("__global__
     * function parameters"; 32764 bytes only from CUDA 12.1 with a recent driver, so not
     * assumed). Widest vector access: 16 bytes (ld.global.v4.b32, PTX ISA). fp16, bf16 and
     * int8 arithmetic and tensor cores (mma.sync) from sm_80 (PTX ISA, "Warp-level matrix
     * instructions"). */
    {
        .name = "cuda -arch=sm_80",
        .kind = RX_TARGET_CUDA,
        .device = "NVIDIA Ampere, compute capability 8.0 (A100)",
        .source = "CUDA C++ Programming Guide, Compute Capabilities table; PTX ISA 8.x",
        .max_threads_per_block = 1024,
        .max_block_dim = {1024, 1024, 64},
        .max_grid_dim = {2147483647, 65535, 65535},
        .subgroup_size = 32,
        .min_subgroup_size = 32,
        .max_subgroup_size = 32,
        .subgroup_arithmetic = true,
        .subgroup_ext_types = true,
        .device_memory = 80 * GB, /* NVIDIA A100 datasheet: 40 or 80 GB of HBM2e */
        .shared_bytes = 48 * KIB,
        .shared_bytes_optin = 163 * KIB,
        .regs_per_thread = 255,
        .regs_per_block = 65536,
        .push_constant_bytes = 4 * KIB,
        .max_storage_buffers = 0,
        .vector_bytes = 16,
        .fp16 = true,
        .bf16 = true,
        .int8 = true,
        .storage16 = true,
        .matrix_units = true,
        .mma = mma_sm80,
        .nmma = (int)RX_ARRAY_LEN(mma_sm80),
        .cuda_arch = "sm_80",
        .sm = 80,
    },
    /* NVIDIA Hopper (H100; compute capability 9.0). Same guide and table: as sm_80 except
     * 227 KiB shared memory per block with opt-in. Tensor cores: mma.sync and wgmma
     * (PTX ISA, "Asynchronous warpgroup level matrix instructions"). */
    {
        .name = "cuda -arch=sm_90",
        .kind = RX_TARGET_CUDA,
        .device = "NVIDIA Hopper, compute capability 9.0 (H100, H200)",
        .source = "CUDA C++ Programming Guide, Compute Capabilities table; PTX ISA 8.x",
        .max_threads_per_block = 1024,
        .max_block_dim = {1024, 1024, 64},
        .max_grid_dim = {2147483647, 65535, 65535},
        .subgroup_size = 32,
        .min_subgroup_size = 32,
        .max_subgroup_size = 32,
        .subgroup_arithmetic = true,
        .subgroup_ext_types = true,
        .device_memory = 141 * GB, /* NVIDIA H200 datasheet: 141 GB of HBM3e (H100: 80 GB) */
        .shared_bytes = 48 * KIB,
        .shared_bytes_optin = 227 * KIB,
        .regs_per_thread = 255,
        .regs_per_block = 65536,
        .push_constant_bytes = 4 * KIB,
        .max_storage_buffers = 0,
        .vector_bytes = 16,
        .fp16 = true,
        .bf16 = true,
        .int8 = true,
        .storage16 = true,
        .matrix_units = true,
        .mma = mma_sm90,
        .nmma = (int)RX_ARRAY_LEN(mma_sm90),
        .cuda_arch = "sm_90",
        .sm = 90,
    },
    /* Any Vulkan 1.2 device: only what the specification guarantees.
     * Vulkan 1.2 specification, "Limits", table "Required Limits": maxComputeWorkGroupInvocations
     * 128, maxComputeWorkGroupSize 128 x 128 x 64, maxComputeWorkGroupCount 65535 on each axis,
     * maxComputeSharedMemorySize 16384, maxPushConstantsSize 128,
     * maxPerStageDescriptorStorageBuffers 4. Subgroups (Vulkan 1.1, "Subgroups"): the size is a
     * power of two from 1 to 128 and only the basic operations are guaranteed, so schedules must
     * not rely on a size or on subgroup arithmetic. shaderFloat16, shaderInt8 and
     * storageBuffer16BitAccess are optional features (VkPhysicalDeviceVulkan12Features,
     * VkPhysicalDevice16BitStorageFeatures), so none is assumed. Widest access: a vec4 of 32-bit
     * components (16 bytes). */
    {
        .name = "vulkan",
        .kind = RX_TARGET_VULKAN,
        /* VK_KHR_cooperative_matrix is optional: a device lists its shapes through
         * vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR, so none is known when compiling */
        .mma_query = true,
        .device = "any Vulkan 1.2 device (the specification's guaranteed minimums)",
        .source = "Vulkan 1.2 specification, Required Limits table and Subgroups chapter",
        .max_threads_per_block = 128,
        .max_block_dim = {128, 128, 64},
        .max_grid_dim = {65535, 65535, 65535},
        .subgroup_size = 0,
        .min_subgroup_size = 1,
        .max_subgroup_size = 128,
        .subgroup_arithmetic = false,
        .subgroup_ext_types = false,
        .device_memory =
            RX_TARGET_DEFAULT_MEMORY, /* no figure in the specification: the documented default */
        .shared_bytes = 16 * KIB,
        .shared_bytes_optin = 16 * KIB,
        .push_constant_bytes = 128,
        .max_storage_buffers = 4,
        .vector_bytes = 16,
        .vulkan = {1, 2},
        .spirv = {1, 5},
    },
    /* Mesa lavapipe (llvmpipe's Vulkan driver: the CPU device CI runs on). Mesa source,
     * src/gallium/frontends/lavapipe/lvp_device.c (lvp_get_properties) and
     * src/gallium/drivers/llvmpipe/lp_screen.c (llvmpipe_get_compute_param):
     * maxComputeWorkGroupInvocations 1024, maxComputeWorkGroupSize 1024 on each axis,
     * maxComputeSharedMemorySize 32768, subgroupSize = minSubgroupSize = maxSubgroupSize =
     * lp_native_vector_width / 32, which is 8 on an AVX2 host (4 with SSE only, 16 with
     * AVX-512: the value here is the AVX2 one); subgroupSupportedOperations include ARITHMETIC;
     * storage buffer descriptors unlimited in practice (MAX_DESCRIPTORS); shaderFloat16,
     * shaderInt8 and 16-bit storage supported. maxPushConstantsSize: 256 in current Mesa
     * (lvp_private.h); 128 is recorded, the guaranteed minimum that the kernel ABI uses anyway
     * and that older releases may report. No cooperative matrix. */
    {
        .name = "vulkan-lavapipe",
        .kind = RX_TARGET_VULKAN,
        .device = "Mesa lavapipe (CPU Vulkan driver) on an AVX2 host",
        .source = "Mesa lavapipe lvp_device.c and llvmpipe lp_screen.c (compute caps)",
        .max_threads_per_block = 1024,
        .max_block_dim = {1024, 1024, 1024},
        .max_grid_dim = {65535, 65535, 65535},
        .subgroup_size = 8,
        .min_subgroup_size = 8,
        .max_subgroup_size = 8,
        .subgroup_arithmetic = true,
        .subgroup_ext_types = true,
        .device_memory = RX_TARGET_DEFAULT_MEMORY, /* the host's memory, of no one size: the
                                                      documented default */
        .shared_bytes = 32 * KIB,
        .shared_bytes_optin = 32 * KIB,
        .push_constant_bytes = 128,
        .max_storage_buffers = 0,
        .vector_bytes = 16,
        .fp16 = true,
        .int8 = true,
        .storage16 = true,
        .vulkan = {1, 2},
        .spirv = {1, 5},
    },
    /* Qualcomm Adreno 6xx / 7xx (Snapdragon 8xx phones). Qualcomm Snapdragon Mobile Platform
     * OpenCL/Vulkan developer guides ("Adreno GPU: waves of 64 or 128 fibers") and the Vulkan
     * driver reports collected on vulkan.gpuinfo.org for Adreno 630-740:
     * maxComputeWorkGroupInvocations 1024, maxComputeWorkGroupSize 1024 x 1024 x 64,
     * maxComputeSharedMemorySize 32768, subgroupSize 64 with subgroup size control from 64 to
     * 128, subgroup arithmetic in compute, maxPushConstantsSize 128,
     * maxPerStageDescriptorStorageBuffers 24, shaderFloat16, shaderInt8 and 16-bit storage.
     * No bf16 and no cooperative matrix in these drivers. */
    {
        .name = "vulkan-adreno",
        .kind = RX_TARGET_VULKAN,
        .device = "Qualcomm Adreno 6xx/7xx (Android)",
        .source = "Qualcomm Adreno GPU developer guide; vulkan.gpuinfo.org Adreno 6xx/7xx reports",
        .max_threads_per_block = 1024,
        .max_block_dim = {1024, 1024, 64},
        .max_grid_dim = {65535, 65535, 65535},
        .subgroup_size = 64,
        .min_subgroup_size = 64,
        .max_subgroup_size = 128,
        .subgroup_arithmetic = true,
        .subgroup_ext_types = false,
        .device_memory =
            RX_TARGET_DEFAULT_MEMORY, /* shared with the phone: 16 GB at most in Snapdragon 8 Gen
                                         2/3 phones (Qualcomm product briefs) */
        .shared_bytes = 32 * KIB,
        .shared_bytes_optin = 32 * KIB,
        .push_constant_bytes = 128,
        .max_storage_buffers = 24,
        .vector_bytes = 16,
        .fp16 = true,
        .int8 = true,
        .storage16 = true,
        .vulkan = {1, 2},
        .spirv = {1, 5},
    },
    /* Arm Mali Valhall (G57, G68, G77, G78, G710 and later). Arm "Mali GPU Best Practices
     * Developer Guide" (workgroup sizes, 16-wide warps on Valhall) and the Arm Mali Valhall
     * Vulkan driver reports on vulkan.gpuinfo.org: subgroupSize 16 (fixed),
     * maxComputeWorkGroupInvocations 512 on G77/G78 (1024 from G710: 512 holds on all),
     * maxComputeWorkGroupSize 512 on each axis, maxComputeSharedMemorySize 32768,
     * maxPushConstantsSize 128, subgroup arithmetic, shaderFloat16, shaderInt8 and 16-bit
     * storage. maxPerStageDescriptorStorageBuffers: the conservative 8 that older Valhall
     * drivers report. No bf16 and no cooperative matrix. */
    {
        .name = "vulkan-mali",
        .kind = RX_TARGET_VULKAN,
        .device = "Arm Mali Valhall (G77, G78, G710 and later)",
        .source = "Arm Mali GPU Best Practices Developer Guide; vulkan.gpuinfo.org Valhall reports",
        .max_threads_per_block = 512,
        .max_block_dim = {512, 512, 512},
        .max_grid_dim = {65535, 65535, 65535},
        .subgroup_size = 16,
        .min_subgroup_size = 16,
        .max_subgroup_size = 16,
        .subgroup_arithmetic = true,
        .subgroup_ext_types = false,
        .device_memory = RX_TARGET_DEFAULT_MEMORY, /* shared with the phone or board: 16 GB at most
                                                      in Valhall devices (Arm, vendor specs) */
        .shared_bytes = 32 * KIB,
        .shared_bytes_optin = 32 * KIB,
        .push_constant_bytes = 128,
        .max_storage_buffers = 8,
        .vector_bytes = 16,
        .fp16 = true,
        .int8 = true,
        .storage16 = true,
        .vulkan = {1, 2},
        .spirv = {1, 5},
    },
    /* NVIDIA Turing to Hopper through the Vulkan driver (vulkan.gpuinfo.org reports of the
     * GeForce RTX 20/30/40 series, A100 and H100): maxComputeWorkGroupInvocations 1024,
     * maxComputeWorkGroupSize 1024 x 1024 x 64, maxComputeWorkGroupCount 2^31-1 x 65535 x
     * 65535, maxComputeSharedMemorySize 49152, subgroupSize 32 (fixed: minSubgroupSize =
     * maxSubgroupSize = 32), subgroup arithmetic, maxPushConstantsSize 256 (128 recorded: the
     * kernel ABI's), storage buffers unlimited in practice (maxPerStageDescriptorStorageBuffers
     * about 2^20), shaderFloat16, shaderInt8, 16-bit storage, and VK_NV_cooperative_matrix
     * (mma_vk_nv above; the runtime checks the extension and its feature when a kernel needs
     * it). */
    {
        .name = "vulkan-nvidia",
        .kind = RX_TARGET_VULKAN,
        .device = "NVIDIA Turing, Ampere, Ada and Hopper GPUs (Vulkan driver)",
        .source = "vulkan.gpuinfo.org NVIDIA reports; Vulkan registry VK_NV_cooperative_matrix",
        .max_threads_per_block = 1024,
        .max_block_dim = {1024, 1024, 64},
        .max_grid_dim = {2147483647, 65535, 65535},
        .subgroup_size = 32,
        .min_subgroup_size = 32,
        .max_subgroup_size = 32,
        .subgroup_arithmetic = true,
        .subgroup_ext_types = true,
        .device_memory = 141 * GB, /* NVIDIA H200 datasheet, the largest device it describes */
        .shared_bytes = 48 * KIB,
        .shared_bytes_optin = 48 * KIB,
        .push_constant_bytes = 128,
        .max_storage_buffers = 0,
        .vector_bytes = 16,
        .fp16 = true,
        .int8 = true,
        .storage16 = true,
        .matrix_units = true,
        .mma = mma_vk_nv,
        .nmma = (int)RX_ARRAY_LEN(mma_vk_nv),
        .vulkan = {1, 2},
        .spirv = {1, 5},
    },
    /* Apple GPU family 7 (M1, A14). Apple "Metal Feature Set Tables": maximum threads per
     * threadgroup 1024, maximum total threadgroup memory 32 KiB, SIMD group width 32 (SIMD-scoped
     * reduction and permute functions), 31 entries in the buffer argument table, simdgroup
     * matrix functions from Apple7, bfloat from MSL 3.1. setBytes: "use for data smaller than
     * 4 KB" (MTLComputeCommandEncoder documentation). Metal Shading Language Specification 3.1.
     * Grid: Metal documents no per-axis threadgroup-count limit below 2^32-1; the CUDA-like
     * 2^31-1 x 65535 x 65535 is recorded so host-side grid arithmetic stays in 32 bits. */
    {
        .name = "metal-apple7",
        .kind = RX_TARGET_METAL,
        .device = "Apple GPU family 7 (M1, A14)",
        .source = "Apple Metal Feature Set Tables; Metal Shading Language Specification 3.1",
        .max_threads_per_block = 1024,
        .max_block_dim = {1024, 1024, 1024},
        .max_grid_dim = {2147483647, 65535, 65535},
        .subgroup_size = 32,
        .min_subgroup_size = 32,
        .max_subgroup_size = 32,
        .subgroup_arithmetic = true,
        .subgroup_ext_types = true,
        .device_memory = 16 * GB, /* Apple M1 technical specifications: 8 or 16 GB unified memory */
        .shared_bytes = 32 * KIB,
        .shared_bytes_optin = 32 * KIB,
        .push_constant_bytes = 4 * KIB,
        .max_storage_buffers = 31,
        .vector_bytes = 16,
        .fp16 = true,
        .bf16 = true,
        .int8 = true,
        .storage16 = true,
        .matrix_units = true,
        .mma = mma_apple7,
        .nmma = (int)RX_ARRAY_LEN(mma_apple7),
        .msl = {3, 1},
    },
};

/* Short names and what they stand for. */
static const struct {
  const char *alias;
  const char *name;
} aliases[] = {
    {"cuda", "cuda -arch=sm_80"},
    {"metal", "metal-apple7"},
};

/* ---- queries --------------------------------------------------------------------------- */

const rx_target *tgt_target_list(size_t *out_count) {
  *out_count = RX_ARRAY_LEN(table);
  return table;
}

const rx_target *tgt_target_find(const char *name) {
  for (size_t i = 0; i < RX_ARRAY_LEN(table); i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

const char *tgt_target_kind_name(rx_target_kind kind) {
  static const char *const names[] = {
#define X(kind, name, ...) [RX_TARGET_##kind] = name,
      RX_TARGET_KINDS(X)
#undef X
  };
  return (unsigned)kind < RX_ARRAY_LEN(names) ? names[kind] : "?";
}

/* The per-kind columns of RX_TARGET_KINDS the toolchains and file names read. */
static const struct {
  const char *entry, *bin, *asm_ext;
} kind_files[] = {
#define X(kind, name, lang, lname, ext, entry, scalars, bound, spill, bin, asm_ext)                \
  [RX_TARGET_##kind] = {entry, bin, asm_ext},
    RX_TARGET_KINDS(X)
#undef X
};

const char *tgt_target_kind_entry(rx_target_kind kind) {
  return (unsigned)kind < RX_ARRAY_LEN(kind_files) ? kind_files[kind].entry : NULL;
}

char *tgt_target_binary_name(rx_arena *a, const rx_target *t, const char *kernel) {
  const char *bin = kind_files[t->kind].bin;
  if (!bin) return NULL;
  if (t->cuda_arch) return base_arena_printf(a, "%s.%s.%s", kernel, t->cuda_arch, bin);
  return base_arena_printf(a, "%s.%s", kernel, bin);
}

char *tgt_target_asm_name(rx_arena *a, const rx_target *t, const char *kernel) {
  const char *ext = kind_files[t->kind].asm_ext;
  return ext ? base_arena_printf(a, "%s.%s", kernel, ext) : NULL;
}

/* ---- parsing --------------------------------------------------------------------------- */

/* "cuda -arch=sm_80, cuda -arch=sm_90, vulkan, ..." */
static void known_names(rx_strbuf *b) {
  for (size_t i = 0; i < RX_ARRAY_LEN(table); i++)
    base_strbuf_printf(b, "%s'%s'", i ? ", " : "", table[i].name);
  for (size_t i = 0; i < RX_ARRAY_LEN(aliases); i++)
    base_strbuf_printf(b, ", '%s' (%s)", aliases[i].alias, aliases[i].name);
}

static void known_archs(rx_strbuf *b) {
  int n = 0;
  for (size_t i = 0; i < RX_ARRAY_LEN(table); i++)
    if (table[i].kind == RX_TARGET_CUDA)
      base_strbuf_printf(b, "%s%s", n++ ? ", " : "", table[i].cuda_arch);
}

static rx_status error_listing(void (*list)(rx_strbuf *), const char *fmt, ...) RX_PRINTF(2, 3);
static rx_status error_listing(void (*list)(rx_strbuf *), const char *fmt, ...) {
  rx_strbuf b = {0};
  va_list ap;
  va_start(ap, fmt);
  base_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  list(&b);
  rx_status s = base_status_make(RX_ERR_INVALID, "%s", b.data);
  base_strbuf_free(&b);
  return s;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Next whitespace-separated word of *p: its start and length; false at the end. */
static bool next_word(const char **p, const char **out_word, size_t *out_len) {
  const char *s = *p;
  while (*s && is_space(*s)) s++;
  if (!*s) return false;
  const char *e = s;
  while (*e && !is_space(*e)) e++;
  *out_word = s;
  *out_len = (size_t)(e - s);
  *p = e;
  return true;
}

static bool word_is(const char *w, size_t n, const char *s) {
  return strlen(s) == n && memcmp(w, s, n) == 0;
}

static rx_status parse_cuda_option(const char *w, size_t n, const rx_target **io_target) {
  static const char prefixes[][8] = {"-arch=", "--arch="};
  for (size_t i = 0; i < RX_ARRAY_LEN(prefixes); i++) {
    size_t pn = strlen(prefixes[i]);
    if (n < pn || memcmp(w, prefixes[i], pn) != 0) continue;
    const char *arch = w + pn;
    size_t an = n - pn;
    for (size_t k = 0; k < RX_ARRAY_LEN(table); k++) {
      if (table[k].kind == RX_TARGET_CUDA && word_is(arch, an, table[k].cuda_arch)) {
        *io_target = &table[k];
        return NULL;
      }
    }
    return error_listing(known_archs,
                         "target 'cuda': unknown architecture '%.*s'; expected one of: ", (int)an,
                         arch);
  }
  return base_status_make(RX_ERR_INVALID,
                          "target 'cuda': unknown option '%.*s'; expected -arch=sm_XX", (int)n, w);
}

rx_status tgt_target_parse(const char *text, const rx_target **out_target) {
  *out_target = NULL;
  if (!text) return base_status_make(RX_ERR_INVALID, "no target given");
  const char *p = text, *w;
  size_t n;
  if (!next_word(&p, &w, &n)) return error_listing(known_names, "empty target; expected one of: ");

  /* the name: an alias or the first word of a canonical name ("cuda -arch=sm_80" -> "cuda") */
  const rx_target *t = NULL;
  for (size_t i = 0; i < RX_ARRAY_LEN(aliases) && !t; i++)
    if (word_is(w, n, aliases[i].alias)) t = tgt_target_find(aliases[i].name);
  for (size_t i = 0; i < RX_ARRAY_LEN(table) && !t; i++) {
    size_t len = strcspn(table[i].name, " ");
    if (len == n && memcmp(table[i].name, w, n) == 0) t = &table[i];
  }
  if (!t) return error_listing(known_names, "unknown target '%.*s'; expected one of: ", (int)n, w);

  /* options */
  const char *name = w;
  size_t name_len = n;
  while (next_word(&p, &w, &n)) {
    if (t->kind != RX_TARGET_CUDA)
      return base_status_make(RX_ERR_INVALID, "target '%.*s' takes no options, got '%.*s'",
                              (int)name_len, name, (int)n, w);
    RX_RETURN_IF_ERROR(parse_cuda_option(w, n, &t));
  }
  *out_target = t;
  return NULL;
}

/* ---- description ----------------------------------------------------------------------- */

static const char *yes(bool b) { return b ? "yes" : "no"; }

void tgt_target_describe(rx_strbuf *out, const rx_target *t) {
  base_strbuf_printf(out, "target: %s\n", t->name);
  base_strbuf_printf(out, "kind: %s\n", tgt_target_kind_name(t->kind));
  base_strbuf_printf(out, "device: %s\n", t->device);
  base_strbuf_printf(out, "source: %s\n", t->source);
  base_strbuf_printf(out, "max threads per block: %d\n", t->max_threads_per_block);
  base_strbuf_printf(out, "max block dims: %d x %d x %d\n", t->max_block_dim[0],
                     t->max_block_dim[1], t->max_block_dim[2]);
  base_strbuf_printf(out, "max grid dims: %d x %d x %d\n", t->max_grid_dim[0], t->max_grid_dim[1],
                     t->max_grid_dim[2]);
  if (t->subgroup_size)
    base_strbuf_printf(out, "subgroup size: %d (hardware %d..%d)\n", t->subgroup_size,
                       t->min_subgroup_size, t->max_subgroup_size);
  else
    base_strbuf_printf(out, "subgroup size: unknown (hardware %d..%d)\n", t->min_subgroup_size,
                       t->max_subgroup_size);
  base_strbuf_printf(out, "subgroup arithmetic: %s\n", yes(t->subgroup_arithmetic));
  base_strbuf_printf(out, "shared memory per block: %d bytes (opt-in %d)\n", t->shared_bytes,
                     t->shared_bytes_optin);
  base_strbuf_printf(out, "device memory: %lld bytes (%.1f GB)%s\n", (long long)t->device_memory,
                     (double)t->device_memory / 1e9,
                     t->device_memory == RX_TARGET_DEFAULT_MEMORY ? ", the documented default"
                                                                  : "");
  if (t->regs_per_thread)
    base_strbuf_printf(out, "registers: %d per thread, %d per block\n", t->regs_per_thread,
                       t->regs_per_block);
  base_strbuf_printf(out, "by-value argument bytes: %d\n", t->push_constant_bytes);
  if (t->max_storage_buffers)
    base_strbuf_printf(out, "max storage buffers: %d\n", t->max_storage_buffers);
  else
    base_strbuf_printf(out, "max storage buffers: no binding limit\n");
  base_strbuf_printf(out, "vector access bytes: %d\n", t->vector_bytes);
  base_strbuf_printf(out, "fp16: %s, bf16: %s, int8: %s, 16-bit storage: %s, matrix units: %s\n",
                     yes(t->fp16), yes(t->bf16), yes(t->int8), yes(t->storage16),
                     yes(t->matrix_units));
  for (int i = 0; i < t->nmma; i++) {
    const rx_mma_shape *x = &t->mma[i];
    base_strbuf_printf(out, "matrix unit: %s m%dn%dk%d%s %s x %s -> %s, %d threads (%s)\n",
                       tgt_mma_api_name(x->api), x->m, x->n, x->k,
                       x->n_step ? " (n: multiples)" : "", dtype_name(x->ab), dtype_name(x->ab),
                       dtype_name(x->acc), x->threads, x->instr);
  }
  if (t->mma_query)
    base_strbuf_printf(out, "matrix units: as the device reports them (cooperative matrix)\n");
  switch (t->kind) {
  case RX_TARGET_CUDA:
    base_strbuf_printf(out, "arch: %s\n", t->cuda_arch);
    break;
  case RX_TARGET_VULKAN:
    base_strbuf_printf(out, "vulkan: %d.%d, spir-v: %d.%d\n", t->vulkan.major, t->vulkan.minor,
                       t->spirv.major, t->spirv.minor);
    break;
  case RX_TARGET_METAL:
    base_strbuf_printf(out, "msl: %d.%d\n", t->msl.major, t->msl.minor);
    break;
  }
}

const rx_mma_shape *tgt_target_mma(const rx_target *t, rx_dtype ab, rx_dtype acc, int api) {
  for (int i = 0; t && i < t->nmma; i++)
    if (t->mma[i].ab == ab && t->mma[i].acc == acc && (api < 0 || (int)t->mma[i].api == api))
      return &t->mma[i];
  return NULL;
}

static const char *tgt_mma_api_name(rx_mma_api api) {
  switch (api) {
  case RX_MMA_SYNC:
    return "sync";
  case RX_MMA_WGMMA:
    return "wgmma";
  case RX_MMA_COOP:
    return "coop";
  case RX_MMA_SIMDGROUP:
    return "simdgroup";
  case RX_MMA_SYNC_FRAG:
    return "sync-frag";
  }
  return "?";
}

bool tgt_target_subgroup_dtype(const rx_target *t, rx_dtype dt) {
  if (!t->subgroup_arithmetic) return false;
  switch (dt) {
  case RX_DTYPE_F32:
  case RX_DTYPE_I32:
  case RX_DTYPE_U32:
    return true;
  case RX_DTYPE_F64: /* GL_KHR_shader_subgroup_arithmetic takes double; MSL has no double */
    return t->kind != RX_TARGET_METAL;
  case RX_DTYPE_I64:
  case RX_DTYPE_U64: /* MSL's simd_sum / simd_max take 8- to 32-bit integers only */
    return t->kind != RX_TARGET_METAL && t->subgroup_ext_types;
  case RX_DTYPE_F16:
  case RX_DTYPE_I16:
  case RX_DTYPE_U16:
  case RX_DTYPE_I8:
  case RX_DTYPE_U8:
    return t->subgroup_ext_types;
  case RX_DTYPE_BF16: /* computed in f32 outside CUDA: the reduction is of an f32 value there */
    return t->kind == RX_TARGET_CUDA;
  default: /* bool, unknown */
    return false;
  }
}

bool tgt_target_has_async_copy(const rx_target *t) {
  return t && t->kind == RX_TARGET_CUDA &&
         tgt_target_mma(t, RX_DTYPE_F16, RX_DTYPE_F32, RX_MMA_SYNC);
}

bool tgt_target_has_mma_sync(const rx_target *t, rx_dtype ab, rx_dtype acc, int m, int n, int k) {
  for (int i = 0; t && i < t->nmma; i++) {
    const rx_mma_shape *x = &t->mma[i];
    if (x->api == RX_MMA_SYNC && x->ab == ab && x->acc == acc && x->m == m && x->n == n &&
        x->k == k && x->n_step == 0)
      return true;
  }
  return false;
}

bool tgt_target_has_wgmma(const rx_target *t, rx_dtype ab, rx_dtype acc, int m, int n, int k) {
  for (int i = 0; t && i < t->nmma; i++) {
    const rx_mma_shape *x = &t->mma[i];
    if (x->api == RX_MMA_WGMMA && x->ab == ab && x->acc == acc && x->m == m && x->k == k &&
        (x->n_step ? n % x->n_step == 0 && n <= x->n : n == x->n))
      return true;
  }
  return false;
}

bool tgt_target_has_frag(const rx_target *t, rx_dtype ab, rx_dtype acc, int m, int n, int k) {
  for (int i = 0; t && i < t->nmma; i++) {
    const rx_mma_shape *x = &t->mma[i];
    if (x->api != RX_MMA_SYNC && x->api != RX_MMA_WGMMA && x->ab == ab && x->acc == acc &&
        x->m == m && x->n == n && x->k == k)
      return true;
  }
  return false;
}
