/* runtime/vulkan/vk_memory.h: which Vulkan memory type holds which buffer, and how big a block
 * to allocate, as pure functions of VkPhysicalDeviceMemoryProperties. Included by
 * runtime/vulkan/vulkan.c (the allocator) and by tests/runtime/vulkan_test.c (which checks them on
 * synthetic layouts: lavapipe, an NVIDIA-like discrete GPU, an integrated GPU); includes only
 * <vulkan/vulkan.h>. Everything here is static: nothing is added to the runtime's symbols.
 *
 * The layouts it is written for (vulkan.gpuinfo.org):
 * - unified memory (lavapipe, integrated GPUs): the largest device-local heap has a type that is
 *   also host-visible and coherent. Buffers live there and the host maps them: no staging.
 * - discrete GPUs: a big device-local heap with device-local types only, a host heap with the
 *   host-visible types (one of them HOST_CACHED), and a small device-local heap (256 MiB: the PCIe
 *   BAR, unless resizable BAR is on) with a DEVICE_LOCAL|HOST_VISIBLE type. Buffers live in the
 *   big heap and the host reaches them through staging buffers in host memory; the BAR type holds
 *   uniform buffers while it has room, and device buffers only when the big heap is full. */
#ifndef RX_RUNTIME_VULKAN_VK_MEMORY_H
#define RX_RUNTIME_VULKAN_VK_MEMORY_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

/* Buffers are suballocated from blocks of this size (VMA's default for heaps of 1 GiB or more);
 * a buffer as large or larger gets a block of its own, freed with it. */
#define RT_VK_BLOCK_SIZE ((VkDeviceSize)64 << 20)
/* A heap smaller than this (a 256 MiB BAR) is cut into blocks of an eighth of it, as VMA does,
 * so that one block never takes most of it. */
#define RT_VK_SMALL_HEAP ((VkDeviceSize)1 << 30)

/* What a buffer is for: decides the memory types it may live in, best first. */
typedef enum rt_vk_use {
  RT_VK_USE_DEVICE,   /* storage buffers: read and written by kernels */
  RT_VK_USE_UPLOAD,   /* staging written by the host, the source of a copy */
  RT_VK_USE_READBACK, /* staging written by a copy, read by the host */
  RT_VK_USE_UNIFORM,  /* a kernel's scalars: written by the host, read by kernels */
  RT_VK_NUSES
} rt_vk_use;

/* One preference: a type with every flag of need and none of avoid. */
typedef struct rt_vk_pref {
  VkMemoryPropertyFlags need, avoid;
} rt_vk_pref;

#define RT_VK_DL  VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
#define RT_VK_HV  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
#define RT_VK_HC  VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
#define RT_VK_HCA VK_MEMORY_PROPERTY_HOST_CACHED_BIT
/* never chosen: protected and lazily allocated memory cannot back a storage buffer; AMD's
 * device-coherent types are slow and meant for debugging */
#define RT_VK_NEVER                                                                                \
  (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT |                    \
   VK_MEMORY_PROPERTY_DEVICE_COHERENT_BIT_AMD | VK_MEMORY_PROPERTY_DEVICE_UNCACHED_BIT_AMD)
#define RT_VK_NPREFS 4

/* The preferences of each use, best first (a zero entry ends a list); [0] on a discrete GPU,
 * [1] with unified memory. Host access always needs HOST_COHERENT: the runtime never flushes. */
static const rt_vk_pref rt_vk_prefs[RT_VK_NUSES][2][RT_VK_NPREFS] = {
    [RT_VK_USE_DEVICE] =
        {
            /* the big device-local heap; then the BAR; then anything device-local */
            {{RT_VK_DL, RT_VK_HV}, {RT_VK_DL | RT_VK_HV | RT_VK_HC, 0}, {RT_VK_DL, 0}},
            /* mapped by the host: the fast path of lavapipe and integrated GPUs */
            {{RT_VK_DL | RT_VK_HV | RT_VK_HC, 0}, {RT_VK_DL, 0}},
        },
    [RT_VK_USE_UPLOAD] =
        {
            /* host memory, write-combined where offered; then the BAR */
            {{RT_VK_HV | RT_VK_HC, RT_VK_DL | RT_VK_HCA},
             {RT_VK_HV | RT_VK_HC, RT_VK_DL},
             {RT_VK_HV | RT_VK_HC, RT_VK_HCA},
             {RT_VK_HV | RT_VK_HC, 0}},
            {{RT_VK_HV | RT_VK_HC, RT_VK_HCA}, {RT_VK_HV | RT_VK_HC, 0}},
        },
    [RT_VK_USE_READBACK] =
        {
            /* host-cached memory: reads of write-combined memory are uncached */
            {{RT_VK_HV | RT_VK_HC | RT_VK_HCA, RT_VK_DL},
             {RT_VK_HV | RT_VK_HC | RT_VK_HCA, 0},
             {RT_VK_HV | RT_VK_HC, RT_VK_DL},
             {RT_VK_HV | RT_VK_HC, 0}},
            {{RT_VK_HV | RT_VK_HC | RT_VK_HCA, 0}, {RT_VK_HV | RT_VK_HC, 0}},
        },
    [RT_VK_USE_UNIFORM] =
        {
            /* the BAR while it has room (kernels read it from device memory); then host memory */
            {{RT_VK_DL | RT_VK_HV | RT_VK_HC, RT_VK_HCA},
             {RT_VK_HV | RT_VK_HC, RT_VK_HCA},
             {RT_VK_HV | RT_VK_HC, 0}},
            {{RT_VK_DL | RT_VK_HV | RT_VK_HC, 0}, {RT_VK_HV | RT_VK_HC, 0}},
        },
};

/* The largest DEVICE_LOCAL heap (the first of equal ones), or the largest heap where none is
 * device-local (the spec requires one); -1 when there are no heaps. */
static inline int rt_vk_main_heap(const VkPhysicalDeviceMemoryProperties *mp) {
  int best = -1;
  for (int pass = 0; pass < 2 && best < 0; pass++)
    for (uint32_t i = 0; i < mp->memoryHeapCount; i++) {
      if (pass == 0 && !(mp->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
      if (best < 0 || mp->memoryHeaps[i].size > mp->memoryHeaps[best].size) best = (int)i;
    }
  return best;
}

/* Unified memory: the main heap has a device-local, host-visible, coherent type, so buffers can
 * live there and be mapped. A small BAR heap beside a big device-local one does not count. */
static inline bool rt_vk_unified(const VkPhysicalDeviceMemoryProperties *mp) {
  int heap = rt_vk_main_heap(mp);
  VkMemoryPropertyFlags want = RT_VK_DL | RT_VK_HV | RT_VK_HC;
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
    if ((int)mp->memoryTypes[i].heapIndex == heap &&
        (mp->memoryTypes[i].propertyFlags & (want | RT_VK_NEVER)) == want)
      return true;
  return false;
}

/* The memory types a buffer of `use` may live in, best first, among type_bits
 * (VkMemoryRequirements.memoryTypeBits): into out, returning how many. Each preference adds the
 * types that match it and are not in out yet, those of bigger heaps first. */
static inline uint32_t rt_vk_type_order(const VkPhysicalDeviceMemoryProperties *mp,
                                        uint32_t type_bits, rt_vk_use use, bool unified,
                                        uint32_t out[VK_MAX_MEMORY_TYPES]) {
  uint32_t n = 0, taken = 0;
  const rt_vk_pref *prefs = rt_vk_prefs[use][unified ? 1 : 0];
  for (int p = 0; p < RT_VK_NPREFS && prefs[p].need; p++) {
    for (;;) { /* the matching type of the biggest heap not taken yet */
      int best = -1;
      for (uint32_t i = 0; i < mp->memoryTypeCount && i < 32; i++) {
        VkMemoryPropertyFlags fl = mp->memoryTypes[i].propertyFlags;
        if (!(type_bits & (1u << i)) || (taken & (1u << i))) continue;
        if ((fl & prefs[p].need) != prefs[p].need || (fl & (prefs[p].avoid | RT_VK_NEVER)))
          continue;
        if (best < 0 || mp->memoryHeaps[mp->memoryTypes[i].heapIndex].size >
                            mp->memoryHeaps[mp->memoryTypes[best].heapIndex].size)
          best = (int)i;
      }
      if (best < 0) break;
      taken |= 1u << best;
      out[n++] = (uint32_t)best;
    }
  }
  return n;
}

/* How many bytes to ask vkAllocateMemory for, to place a buffer of `need` bytes (its
 * VkMemoryRequirements.size) in a heap of heap_size bytes of which heap_used are allocated: a
 * block (RT_VK_BLOCK_SIZE, or an eighth of a small heap) to suballocate from; a block of its own
 * (need bytes) when the buffer is as large as a block, or when a block no longer fits; 0 when the
 * heap has no room for it. *out_own says the block is the buffer's own. */
static inline VkDeviceSize rt_vk_block_bytes(VkDeviceSize heap_size, VkDeviceSize heap_used,
                                             VkDeviceSize need, bool *out_own) {
  VkDeviceSize block = heap_size < RT_VK_SMALL_HEAP ? heap_size / 8 : RT_VK_BLOCK_SIZE;
  VkDeviceSize left = heap_used < heap_size ? heap_size - heap_used : 0;
  *out_own = true;
  if (need > left) return 0;
  if (need >= block || block > left) return need;
  *out_own = false;
  return block;
}

#endif /* RX_RUNTIME_VULKAN_VK_MEMORY_H */
