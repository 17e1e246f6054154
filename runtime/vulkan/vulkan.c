/* runtime/vulkan/vulkan.c: the Vulkan backend of the device interface.
 *
 * - The loader (libvulkan.so.1, Android: libvulkan.so) is opened with dlopen; every entry point
 *   is fetched through vkGetInstanceProcAddr / vkGetDeviceProcAddr (VK_NO_PROTOTYPES).
 * - Memory (runtime/vulkan/vk_memory.h chooses): buffers are suballocated from 64 MiB blocks
 *   (an eighth of a heap under 1 GiB; larger buffers get their own block), first fit with
 *   coalescing. With unified memory (lavapipe, integrated GPUs: the largest device-local heap is
 *   host-visible too) buffers are mapped and read and written in place; otherwise (discrete GPUs,
 *   or force_staging, for tests) they live in the largest device-local heap and the host reaches
 *   them through staging buffers in host memory (host-cached for reads). Each use has memory types
 *   in order of preference: a type whose heap is full, or whose allocation fails, gives way to the
 *   next before the allocation reports out of device memory.
 * - Work is batched: launches, fills and copies are recorded into one command buffer, with a
 *   global memory barrier between consecutive commands, and submitted once by synchronize (or by
 *   a buffer read/write, which synchronize first). Objects used by a recorded batch (uniform
 *   buffers, staging, released buffers) are freed after it completed.
 * - Launches are logged (runtime/replay.c, exact mode) and recorded when the batch is submitted:
 *   a batch of launches only that is identical to an earlier one (the same pipelines, buffers,
 *   grids and symbolic values, in order) seen twice is recorded once into a command buffer of its
 *   own (with its descriptor sets and uniform buffers) and from then on submitted again instead
 *   of being recorded; any other batch is recorded as before. Buffers are told apart by a serial
 *   number (a VkBuffer handle may be reused); a batch with a fill, copy or timestamp is not
 *   replayed; destroying a kernel forgets every recorded batch. RX_VULKAN_REPLAY=0 records every
 *   batch (for comparison).
 * - Released buffers are kept in a cache (up to a quarter of the largest heap; RX_VULKAN_CACHE=0:
 *   none) and handed out again, the same VkBuffer with its serial number, to the next buffer of
 *   exactly their size: a decode step's new buffers (the token ids, the KV cache's aux tensors,
 *   the logits: the same sizes in the same order every step) are then the previous step's, so
 *   its batch of launches is identical to the previous one and replayed, and no memory is
 *   allocated per step. The cache is given back when an allocation runs out of memory, and when
 *   the device goes. A buffer reused at once is safe: every command of a batch is ordered after
 *   the previous one (global barriers), and the host reads and writes only after synchronizing.
 * - Kernels: a compute pipeline per kernel from SPIR-V (entry point "main") through one
 *   VkPipelineCache; storage buffers at the bindings of kernels.json, symbolic values in a push
 *   constant block or a uniform buffer (std140) as kernels.json says.
 * - Timers: pairs of timestamp queries of one query pool.
 * - Validation: VK_LAYER_KHRONOS_validation with a VK_EXT_debug_utils messenger that counts
 *   warnings and errors (rx_rt_device_validation_messages) and prints them to stderr. */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "runtime/vulkan/vk_memory.h"

#define NQUERIES     128
#define POOL_SETS    256
#define POOL_STORAGE (POOL_SETS * 16)
#define POOL_UNIFORM POOL_SETS

/* ---- the loader, opened once per process ---- */
static void *g_lib;
static PFN_vkGetInstanceProcAddr g_gipa;
static PFN_vkCreateInstance g_create_instance;
static PFN_vkEnumerateInstanceLayerProperties g_enum_layers;
static PFN_vkEnumerateInstanceExtensionProperties g_enum_exts;
static PFN_vkEnumerateInstanceVersion g_enum_version;

/* Instance- and device-level entry points, listed once. */
// clang-format off
#define VK_INSTANCE_FNS(X)                    \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkGetDeviceProcAddr)
#define VK_DEVICE_FNS(X)           \
  X(vkDestroyDevice)               \
  X(vkGetDeviceQueue)              \
  X(vkDeviceWaitIdle)              \
  X(vkCreateBuffer)                \
  X(vkDestroyBuffer)               \
  X(vkGetBufferMemoryRequirements) \
  X(vkAllocateMemory)              \
  X(vkFreeMemory)                  \
  X(vkMapMemory)                   \
  X(vkBindBufferMemory)            \
  X(vkCreateShaderModule)          \
  X(vkDestroyShaderModule)         \
  X(vkCreatePipelineCache)         \
  X(vkDestroyPipelineCache)        \
  X(vkCreateComputePipelines)      \
  X(vkDestroyPipeline)             \
  X(vkCreateDescriptorSetLayout)   \
  X(vkDestroyDescriptorSetLayout)  \
  X(vkCreatePipelineLayout)        \
  X(vkDestroyPipelineLayout)       \
  X(vkCreateDescriptorPool)        \
  X(vkDestroyDescriptorPool)       \
  X(vkResetDescriptorPool)         \
  X(vkAllocateDescriptorSets)      \
  X(vkUpdateDescriptorSets)        \
  X(vkCreateCommandPool)           \
  X(vkDestroyCommandPool)          \
  X(vkAllocateCommandBuffers)      \
  X(vkFreeCommandBuffers)          \
  X(vkBeginCommandBuffer)          \
  X(vkEndCommandBuffer)            \
  X(vkResetCommandBuffer)          \
  X(vkCreateFence)                 \
  X(vkDestroyFence)                \
  X(vkWaitForFences)               \
  X(vkResetFences)                 \
  X(vkQueueSubmit)                 \
  X(vkCreateQueryPool)             \
  X(vkDestroyQueryPool)            \
  X(vkGetQueryPoolResults)         \
  X(vkCmdBindPipeline)             \
  X(vkCmdBindDescriptorSets)       \
  X(vkCmdPushConstants)            \
  X(vkCmdDispatch)                 \
  X(vkCmdPipelineBarrier)          \
  X(vkCmdFillBuffer)               \
  X(vkCmdCopyBuffer)               \
  X(vkCmdResetQueryPool)           \
  X(vkCmdWriteTimestamp)
// clang-format on

typedef struct vk_fns {
#define X(f) PFN_##f f;
  VK_INSTANCE_FNS(X)
  VK_DEVICE_FNS(X)
#undef X
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
  PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT; /* host import */
} vk_fns;

/* ---- memory ---- */
typedef struct vk_range {
  VkDeviceSize off, size;
} vk_range;

typedef struct vk_block {
  struct vk_block *next;
  VkDeviceMemory mem;
  VkDeviceSize size;
  uint32_t type;
  uint8_t *map;   /* persistently mapped when host-visible */
  bool own;       /* one buffer's own block: freed with it */
  vk_range *free; /* sorted by offset, coalesced */
  size_t nfree, capfree;
  size_t live; /* allocations in the block */
} vk_block;

/* A VkBuffer bound to a piece of a block. */
typedef struct vk_mem {
  VkBuffer buf;
  vk_block *block;
  VkDeviceSize off, size;
  uint8_t *map; /* NULL when not host-visible */
} vk_mem;

typedef struct vk_kernel {
  VkDescriptorSetLayout dsl;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  uint32_t nstorage, nuniform;
} vk_kernel;

typedef struct vk_device {
  rx_rt_device base;
  vk_fns f;
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice phys;
  VkDevice dev;
  VkQueue queue;
  uint32_t qfamily;
  VkPhysicalDeviceLimits limits;
  VkPhysicalDeviceMemoryProperties mem;
  uint32_t api; /* the instance's API version */
  /* subgroup size control (Vulkan 1.3 or VK_EXT_subgroup_size_control), enabled where the
   * device has it for compute: pipelines then require the size their kernels were scheduled for */
  bool sgc, sgc_full;                 /* requiredSubgroupSize; computeFullSubgroups */
  bool coopmat;                       /* VK_NV_cooperative_matrix enabled (query_coopmat) */
  bool float64;                       /* shaderFloat64 enabled: kernels may use f64 */
  bool sg_ext;                        /* shaderSubgroupExtendedTypes enabled */
  uint32_t sg_min, sg_max, sg_max_wg; /* its sizes; maxComputeWorkgroupSubgroups */
  bool staging;                       /* device buffers are not mapped */
  /* VK_EXT_external_memory_host enabled: host memory imported in place (vk_buffer_import) at
   * this alignment (minImportedHostPointerAlignment) */
  VkDeviceSize host_align;
  vk_block *blocks;                            /* of every memory type */
  VkDeviceSize heap_used[VK_MAX_MEMORY_HEAPS]; /* bytes of blocks allocated in each heap */
  VkPipelineCache cache;
  VkCommandPool cmdpool;
  VkCommandBuffer cmd;
  VkFence fence;
  bool recording;     /* a batch is open: launches logged or commands recorded into cmd */
  bool cmd_begun;     /* cmd is being recorded */
  bool mixed;         /* the batch has commands other than launches: never replayed */
  uint32_t ncommands; /* commands recorded into cmd */
  rt_replay replay;   /* the batch's launches, and the batches recorded for replay */
  bool no_replay;     /* RX_VULKAN_REPLAY=0: every batch recorded */
  uint64_t serials;   /* buffer serial numbers handed out */
  /* released buffers kept for reuse (see the top), in no order: picked by size and serial */
  struct vk_spare *cached;
  size_t ncached, capcached;
  VkDeviceSize cached_bytes, cache_limit; /* cache_limit 0: no cache (RX_VULKAN_CACHE=0) */
  /* descriptor pools: pools[0..npools), the current one and what it has handed out */
  VkDescriptorPool *pools;
  size_t npools, cur_pool;
  uint32_t used_sets, used_storage, used_uniform;
  /* freed after the batch completed */
  vk_mem *deferred;
  size_t ndeferred, capdeferred;
  size_t nmems; /* live allocations (mem_alloc): the deferred list has room for all */
  VkQueryPool qpool;
  bool qused[NQUERIES / 2];
  uint64_t ts_mask;
  double ts_period_ns;
} vk_device;

typedef struct vk_buffer {
  rx_rt_buffer base;
  vk_mem m;
  uint64_t serial; /* the device's count of buffers when its VkBuffer was made: a buffer reused
                      from the cache keeps its VkBuffer and serial, a new VkBuffer gets a new one */
  VkDeviceMemory imported; /* host memory imported for it (m.block NULL), freed with it */
} vk_buffer;

/* A released buffer in the device's cache: its memory and serial, for a buffer of size bytes. */
typedef struct vk_spare {
  vk_mem m;
  uint64_t serial;
  size_t size;
} vk_spare;

/* A batch recorded for replay (rt_replay_entry.impl): its command buffer, and the descriptor sets
 * and uniform buffers it uses, which live as long as it does. */
typedef struct vk_replay {
  VkCommandBuffer cmd;
  VkDescriptorPool pool;
  vk_mem *ubos;
  size_t nubos;
} vk_replay;

typedef struct vk_timer {
  rx_rt_timer base;
  uint32_t pair; /* queries 2*pair and 2*pair + 1 */
} vk_timer;

static const char *vkres(VkResult r) {
  switch (r) {
  case VK_SUCCESS:
    return "VK_SUCCESS";
  case VK_NOT_READY:
    return "VK_NOT_READY";
  case VK_TIMEOUT:
    return "VK_TIMEOUT";
  case VK_INCOMPLETE:
    return "VK_INCOMPLETE";
  case VK_ERROR_OUT_OF_HOST_MEMORY:
    return "VK_ERROR_OUT_OF_HOST_MEMORY";
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
  case VK_ERROR_INITIALIZATION_FAILED:
    return "VK_ERROR_INITIALIZATION_FAILED";
  case VK_ERROR_DEVICE_LOST:
    return "VK_ERROR_DEVICE_LOST";
  case VK_ERROR_MEMORY_MAP_FAILED:
    return "VK_ERROR_MEMORY_MAP_FAILED";
  case VK_ERROR_LAYER_NOT_PRESENT:
    return "VK_ERROR_LAYER_NOT_PRESENT";
  case VK_ERROR_EXTENSION_NOT_PRESENT:
    return "VK_ERROR_EXTENSION_NOT_PRESENT";
  case VK_ERROR_FEATURE_NOT_PRESENT:
    return "VK_ERROR_FEATURE_NOT_PRESENT";
  case VK_ERROR_INCOMPATIBLE_DRIVER:
    return "VK_ERROR_INCOMPATIBLE_DRIVER";
  case VK_ERROR_TOO_MANY_OBJECTS:
    return "VK_ERROR_TOO_MANY_OBJECTS";
  case VK_ERROR_OUT_OF_POOL_MEMORY:
    return "VK_ERROR_OUT_OF_POOL_MEMORY";
  case VK_ERROR_FRAGMENTED_POOL:
    return "VK_ERROR_FRAGMENTED_POOL";
  case VK_ERROR_INVALID_SHADER_NV:
    return "VK_ERROR_INVALID_SHADER_NV";
  default:
    return "VkResult error";
  }
}

/* A status for a failed call; VK_ERROR_DEVICE_LOST also makes the device's error sticky. */
static rx_status vkfail(vk_device *d, VkResult r, const char *what) {
  rx_status_code code = RX_ERR_DEVICE;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    code = RX_ERR_OUT_OF_MEMORY;
  if (r == VK_ERROR_DEVICE_LOST) {
    rx_status s = base_status_make(RX_ERR_DEVICE, "vulkan:%d (%s): device lost during %s",
                                   d->base.info.index, d->base.info.name, what);
    if (!d->base.lost) d->base.lost = base_status_make(RX_ERR_DEVICE, "%s", rx_status_message(s));
    return s;
  }
  return base_status_make(code, "vulkan:%d (%s): %s failed: %s (%d)", d ? d->base.info.index : 0,
                          d ? d->base.info.name : "", what, vkres(r), (int)r);
}

#define VK_TRY(d, call, what)                                                                      \
  do {                                                                                             \
    VkResult r_ = (call);                                                                          \
    if (r_ != VK_SUCCESS) return vkfail((d), r_, (what));                                          \
  } while (0)

/* ---- loader: opened once, under pthread_once (concurrent first calls are safe), and the
 * answer kept for every later caller ---- */
static pthread_once_t vk_once = PTHREAD_ONCE_INIT;
static rx_status vk_cached; /* why the loader cannot be used, or NULL */

static void vk_load(void) {
  static const char *const names[] = {"libvulkan.so.1", "libvulkan.so", /* Android */
                                      "libvulkan.1.dylib" /* macOS: MoltenVK via the loader */};
  char why[512];
  g_lib = rt_dlopen_first(names, RX_ARRAY_LEN(names), why, sizeof why);
  if (!g_lib) {
    vk_cached = base_status_make(RX_ERR_NOT_FOUND,
                                 "vulkan: libvulkan.so.1 not found: install the "
                                 "Vulkan loader (Debian: libvulkan1) and a driver (dlopen: %s)",
                                 why);
    return;
  }
  g_gipa = (PFN_vkGetInstanceProcAddr)(uintptr_t)dlsym(g_lib, "vkGetInstanceProcAddr");
  if (g_gipa) {
    g_create_instance = (PFN_vkCreateInstance)g_gipa(NULL, "vkCreateInstance");
    g_enum_layers =
        (PFN_vkEnumerateInstanceLayerProperties)g_gipa(NULL, "vkEnumerateInstanceLayerProperties");
    g_enum_exts = (PFN_vkEnumerateInstanceExtensionProperties)g_gipa(
        NULL, "vkEnumerateInstanceExtensionProperties");
    g_enum_version = (PFN_vkEnumerateInstanceVersion)g_gipa(NULL, "vkEnumerateInstanceVersion");
  }
  if (!g_gipa || !g_create_instance || !g_enum_layers || !g_enum_exts)
    vk_cached = base_status_make(RX_ERR_NOT_FOUND,
                                 "vulkan: the Vulkan loader lacks "
                                 "vkGetInstanceProcAddr: install the Vulkan loader (Debian: "
                                 "libvulkan1)");
}

static rx_status vk_check(void) {
  pthread_once(&vk_once, vk_load);
  return vk_cached
             ? base_status_make(rx_status_code_of(vk_cached), "%s", rx_status_message(vk_cached))
             : NULL;
}

static bool has_layer(const char *name) {
  uint32_t n = 0;
  if (g_enum_layers(&n, NULL) != VK_SUCCESS || !n) return false;
  VkLayerProperties props[128];
  if (n > 128) n = 128;
  g_enum_layers(&n, props);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(props[i].layerName, name)) return true;
  return false;
}

static bool has_instance_ext(const char *layer, const char *name) {
  uint32_t n = 0;
  if (g_enum_exts(layer, &n, NULL) != VK_SUCCESS || !n) return false;
  VkExtensionProperties props[256];
  if (n > 256) n = 256;
  g_enum_exts(layer, &n, props);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(props[i].extensionName, name)) return true;
  return false;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
  vk_device *d = user;
  const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
  /* The loader's own reports (its ICD scan: on a multiarch machine the JSON files of another
   * architecture's drivers, which it skips) say nothing of how relaxc uses the API; an instance
   * without any driver fails on its own, with relaxc's message. */
  if (type == VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT && data && data->pMessageIdName &&
      !strcmp(data->pMessageIdName, "Loader Message"))
    return VK_FALSE;
  d->base.validation_count++;
  snprintf(d->base.validation_last, sizeof d->base.validation_last, "%s", msg);
  fprintf(stderr, "[vulkan validation %s] %s\n",
          sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning", msg);
  return VK_FALSE;
}

/* Creates an instance; d (may be NULL for enumeration) receives the messenger. */
static rx_status make_instance(vk_device *d, bool validation, VkInstance *out, vk_fns *f) {
  *out = VK_NULL_HANDLE;
  uint32_t api = VK_API_VERSION_1_1;
  if (g_enum_version) {
    uint32_t v = 0;
    if (g_enum_version(&v) == VK_SUCCESS && v >= VK_API_VERSION_1_3)
      api = VK_API_VERSION_1_3;
    else if (v >= VK_API_VERSION_1_2)
      api = VK_API_VERSION_1_2;
  }
  if (d) d->api = api;
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "relaxc", 1, "relaxc", 1, api};
  const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
  const char *exts[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  VkDebugUtilsMessengerCreateInfoEXT mci = {VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
                                            NULL,
                                            0,
                                            VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                                                VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
                                            VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                                                VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                                VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
                                            on_message,
                                            d};
  VkInstanceCreateInfo ci = {
      VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
  if (validation) {
    if (!has_layer(layers[0]))
      return base_status_make(RX_ERR_NOT_FOUND,
                              "vulkan: validation was asked for but "
                              "VK_LAYER_KHRONOS_validation is not installed (Debian: "
                              "vulkan-validationlayers)");
    if (!has_instance_ext(NULL, exts[0]) && !has_instance_ext(layers[0], exts[0]))
      return base_status_make(RX_ERR_NOT_FOUND,
                              "vulkan: validation needs %s, which the loader "
                              "does not offer",
                              exts[0]);
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = exts;
    ci.pNext = &mci; /* also reports messages of vkCreateInstance/vkDestroyInstance */
  }
  VkResult r = g_create_instance(&ci, NULL, out);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    return base_status_make(RX_ERR_NOT_FOUND,
                            "vulkan: no Vulkan driver found: install one (Debian: "
                            "mesa-vulkan-drivers provides lavapipe, a CPU driver)");
  if (r != VK_SUCCESS) return vkfail(NULL, r, "vkCreateInstance");
#define X(fn) f->fn = (PFN_##fn)g_gipa(*out, #fn);
  VK_INSTANCE_FNS(X)
#undef X
  if (validation) {
    f->vkCreateDebugUtilsMessengerEXT =
        (PFN_vkCreateDebugUtilsMessengerEXT)g_gipa(*out, "vkCreateDebugUtilsMessengerEXT");
    f->vkDestroyDebugUtilsMessengerEXT =
        (PFN_vkDestroyDebugUtilsMessengerEXT)g_gipa(*out, "vkDestroyDebugUtilsMessengerEXT");
    if (d && f->vkCreateDebugUtilsMessengerEXT) {
      r = f->vkCreateDebugUtilsMessengerEXT(*out, &mci, NULL, &d->messenger);
      if (r != VK_SUCCESS) return vkfail(d, r, "vkCreateDebugUtilsMessengerEXT");
    }
  }
  return NULL;
}

static rx_status physical_devices(VkInstance inst, const vk_fns *f, VkPhysicalDevice **out,
                                  uint32_t *out_n, const rx_rt_allocator *a) {
  *out = NULL;
  *out_n = 0;
  uint32_t n = 0;
  VkResult r = f->vkEnumeratePhysicalDevices(inst, &n, NULL);
  if (r != VK_SUCCESS) return vkfail(NULL, r, "vkEnumeratePhysicalDevices");
  if (!n) return NULL;
  VkPhysicalDevice *p = rt_alloc(a, n * sizeof *p);
  if (!p) return rt_oom("physical devices", n * sizeof *p);
  r = f->vkEnumeratePhysicalDevices(inst, &n, p);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    rt_free(a, p);
    return vkfail(NULL, r, "vkEnumeratePhysicalDevices");
  }
  *out = p;
  *out_n = n;
  return NULL;
}

/* The compute queue family: a compute-only one when there is one. -1: none. */
static int compute_family(const vk_fns *f, VkPhysicalDevice p, uint32_t *out_ts_bits) {
  VkQueueFamilyProperties q[64];
  uint32_t n = 64;
  f->vkGetPhysicalDeviceQueueFamilyProperties(p, &n, q);
  int best = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = (int)i;
  }
  *out_ts_bits = best >= 0 ? q[best].timestampValidBits : 0;
  return best;
}

typedef struct vk_feats {
  VkPhysicalDeviceFeatures2 f2;
  VkPhysicalDeviceVulkan11Features v11;
  VkPhysicalDeviceVulkan12Features v12;
  bool has12;
} vk_feats;

static void query_features(const vk_fns *f, VkPhysicalDevice p, uint32_t api, vk_feats *out) {
  memset(out, 0, sizeof *out);
  out->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  out->v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  out->v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  out->has12 = api >= VK_API_VERSION_1_2;
  if (out->has12) {
    out->f2.pNext = &out->v11;
    out->v11.pNext = &out->v12;
    f->vkGetPhysicalDeviceFeatures2(p, &out->f2);
  } else {
    f->vkGetPhysicalDeviceFeatures2(p, &out->f2);
  }
}

static void fill_info(const vk_fns *f, VkPhysicalDevice p, int index, rx_rt_device_info *info) {
  memset(info, 0, sizeof *info);
  VkPhysicalDeviceSubgroupProperties sg = {
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, NULL, 0, 0, 0, VK_FALSE};
  VkPhysicalDeviceProperties2 pr = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sg, {0}};
  f->vkGetPhysicalDeviceProperties2(p, &pr);
  const VkPhysicalDeviceProperties *props = &pr.properties;
  info->backend = RX_RT_BACKEND_VULKAN;
  info->index = index;
  snprintf(info->name, sizeof info->name, "%s", props->deviceName);
  VkPhysicalDeviceMemoryProperties mem;
  f->vkGetPhysicalDeviceMemoryProperties(p, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; i++)
    if ((mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        mem.memoryHeaps[i].size > info->memory_bytes)
      info->memory_bytes = mem.memoryHeaps[i].size;
  info->subgroup_size = sg.subgroupSize;
  info->shared_memory_bytes = props->limits.maxComputeSharedMemorySize;
  info->push_constant_bytes = props->limits.maxPushConstantsSize;
  info->max_threads_per_block = props->limits.maxComputeWorkGroupInvocations;
  vk_feats ft;
  query_features(f, p, props->apiVersion, &ft);
  info->fp16 = ft.has12 && ft.v12.shaderFloat16 && ft.v11.storageBuffer16BitAccess;
  info->int8 = ft.has12 && ft.v12.shaderInt8 && ft.v12.storageBuffer8BitAccess;
  uint32_t tsbits = 0;
  compute_family(f, p, &tsbits);
  info->timestamps = tsbits > 0 && props->limits.timestampPeriod > 0;
  info->unified_memory = rt_vk_unified(&mem);
}

static rx_status vk_enumerate(rx_rt_device_info **out_infos, size_t *out_count,
                              const rx_rt_allocator *a) {
  vk_fns f;
  memset(&f, 0, sizeof f);
  VkInstance inst;
  RX_RETURN_IF_ERROR(make_instance(NULL, false, &inst, &f));
  VkPhysicalDevice *p = NULL;
  uint32_t n = 0;
  rx_status s = physical_devices(inst, &f, &p, &n, a);
  if (!s && n) {
    rx_rt_device_info *infos = rt_alloc(a, n * sizeof *infos);
    if (!infos) s = rt_oom("device infos", n * sizeof *infos);
    for (uint32_t i = 0; infos && i < n; i++) fill_info(&f, p[i], (int)i, &infos[i]);
    *out_infos = infos;
    *out_count = infos ? n : 0;
  }
  rt_free(a, p);
  f.vkDestroyInstance(inst, NULL);
  return s;
}

/* ---- memory blocks ---- */
static void block_free(vk_device *d, vk_block *b) {
  if (b->mem) {
    d->f.vkFreeMemory(d->dev, b->mem, NULL);
    d->heap_used[d->mem.memoryTypes[b->type].heapIndex] -= b->size;
  }
  rt_free(&d->base.alloc, b->free);
  rt_free(&d->base.alloc, b);
}

static bool range_insert(vk_device *d, vk_block *b, size_t at, vk_range r) {
  if (b->nfree == b->capfree) {
    size_t cap = b->capfree ? b->capfree * 2 : 8;
    vk_range *nr = rt_alloc(&d->base.alloc, cap * sizeof *nr);
    if (!nr) return false;
    if (b->nfree) memcpy(nr, b->free, b->nfree * sizeof *nr);
    rt_free(&d->base.alloc, b->free);
    b->free = nr;
    b->capfree = cap;
  }
  memmove(&b->free[at + 1], &b->free[at], (b->nfree - at) * sizeof *b->free);
  b->free[at] = r;
  b->nfree++;
  return true;
}

static void range_remove(vk_block *b, size_t at) {
  memmove(&b->free[at], &b->free[at + 1], (b->nfree - at - 1) * sizeof *b->free);
  b->nfree--;
}

/* Takes [off, off + size) out of free range i of b (off inside it). */
static bool block_take(vk_device *d, vk_block *b, size_t i, VkDeviceSize off, VkDeviceSize size) {
  vk_range r = b->free[i];
  VkDeviceSize head = off - r.off, tail = r.off + r.size - (off + size);
  if (head && tail) {
    b->free[i].size = head;
    if (!range_insert(d, b, i + 1, (vk_range){off + size, tail})) {
      b->free[i] = r;
      return false;
    }
  } else if (head) {
    b->free[i].size = head;
  } else if (tail) {
    b->free[i] = (vk_range){off + size, tail};
  } else {
    range_remove(b, i);
  }
  b->live++;
  return true;
}

static void block_give(vk_device *d, vk_block *b, VkDeviceSize off, VkDeviceSize size) {
  size_t i = 0;
  while (i < b->nfree && b->free[i].off < off) i++;
  bool merged = false;
  if (i > 0 && b->free[i - 1].off + b->free[i - 1].size == off) {
    b->free[i - 1].size += size;
    merged = true;
    if (i < b->nfree && b->free[i - 1].off + b->free[i - 1].size == b->free[i].off) {
      b->free[i - 1].size += b->free[i].size;
      range_remove(b, i);
    }
  } else if (i < b->nfree && off + size == b->free[i].off) {
    b->free[i].off = off;
    b->free[i].size += size;
    merged = true;
  }
  /* out of host memory for the free list: the range is lost until the block is freed */
  if (!merged) range_insert(d, b, i, (vk_range){off, size});
  b->live--;
  if (b->live == 0 && b->own) { /* a buffer's own block: give it back now */
    vk_block **pp = &d->blocks;
    while (*pp != b) pp = &(*pp)->next;
    *pp = b->next;
    block_free(d, b);
  }
}

/* Room in the list of frees deferred to the end of a batch for every live allocation and one
 * more, so that freeing never needs host memory. */
static rx_status reserve_deferred(vk_device *d) {
  if (d->nmems + 1 <= d->capdeferred) return NULL;
  size_t cap = d->capdeferred ? 2 * d->capdeferred : 64;
  vk_mem *n = rt_alloc(&d->base.alloc, cap * sizeof *n);
  if (!n) return rt_oom("the list of buffers to free", cap * sizeof *n);
  if (d->ndeferred) memcpy(n, d->deferred, d->ndeferred * sizeof *n);
  rt_free(&d->base.alloc, d->deferred);
  d->deferred = n;
  d->capdeferred = cap;
  return NULL;
}

/* Takes need bytes aligned to align from a block of memory type `type` that has them: into out. */
static bool fit_in_blocks(vk_device *d, uint32_t type, VkDeviceSize need, VkDeviceSize align,
                          vk_mem *out) {
  for (vk_block *b = d->blocks; b; b = b->next) {
    if (b->type != type) continue;
    for (size_t i = 0; i < b->nfree; i++) {
      VkDeviceSize off = (b->free[i].off + align - 1) / align * align;
      if (off + need > b->free[i].off + b->free[i].size) continue;
      if (!block_take(d, b, i, off, need)) return false;
      out->block = b;
      out->off = off;
      return true;
    }
  }
  return false;
}

/* A new block of bsize bytes of memory type `type` (mapped when host-visible), in d->blocks:
 * returned; NULL with r the driver's error, or with r VK_SUCCESS when out of host memory. */
static vk_block *block_new(vk_device *d, uint32_t type, VkDeviceSize bsize, bool own, VkResult *r) {
  *r = VK_SUCCESS;
  vk_block *b = rt_alloc(&d->base.alloc, sizeof *b);
  if (!b) return NULL;
  memset(b, 0, sizeof *b);
  b->size = bsize;
  b->type = type;
  b->own = own;
  VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, bsize, type};
  *r = d->f.vkAllocateMemory(d->dev, &mai, NULL, &b->mem);
  if (*r == VK_SUCCESS) {
    d->heap_used[d->mem.memoryTypes[type].heapIndex] += bsize;
  } else {
    b->mem = VK_NULL_HANDLE;
  }
  if (*r == VK_SUCCESS && (d->mem.memoryTypes[type].propertyFlags & RT_VK_HV)) {
    void *map = NULL;
    *r = d->f.vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &map);
    b->map = map;
  }
  if (*r != VK_SUCCESS || !range_insert(d, b, 0, (vk_range){0, bsize})) {
    block_free(d, b);
    return NULL;
  }
  b->next = d->blocks;
  d->blocks = b;
  return b;
}

static rx_status mem_alloc(vk_device *d, VkDeviceSize size, VkBufferUsageFlags usage, rt_vk_use use,
                           vk_mem *out) {
  memset(out, 0, sizeof *out);
  RX_RETURN_IF_ERROR(reserve_deferred(d));
  size = (size + 3) & ~(VkDeviceSize)3;
  VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                            NULL,
                            0,
                            size,
                            usage,
                            VK_SHARING_MODE_EXCLUSIVE,
                            0,
                            NULL};
  /* refuse sizes no heap can hold before asking the driver */
  VkDeviceSize largest = 0;
  for (uint32_t i = 0; i < d->mem.memoryHeapCount; i++)
    if (d->mem.memoryHeaps[i].size > largest) largest = d->mem.memoryHeaps[i].size;
  if (size > largest)
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "vulkan:%d (%s): out of device memory: %llu "
                            "bytes asked, the largest heap has %llu",
                            d->base.info.index, d->base.info.name, (unsigned long long)size,
                            (unsigned long long)largest);
  VK_TRY(d, d->f.vkCreateBuffer(d->dev, &bci, NULL, &out->buf), "vkCreateBuffer");
  VkMemoryRequirements req;
  d->f.vkGetBufferMemoryRequirements(d->dev, out->buf, &req);
  uint32_t order[VK_MAX_MEMORY_TYPES];
  uint32_t ntypes = rt_vk_type_order(&d->mem, req.memoryTypeBits, use, !d->staging, order);
  VkDeviceSize align = req.alignment ? req.alignment : 1;
  if (align < d->limits.minStorageBufferOffsetAlignment)
    align = d->limits.minStorageBufferOffsetAlignment;
  VkDeviceSize need = req.size, first_try = 0;
  VkResult r = VK_SUCCESS;
  bool no_host_memory = false;
  /* each type in order: first fit over its blocks, else a new block where its heap has room
   * (or the buffer's own block, when a whole block does not fit or the driver refuses one) */
  for (uint32_t t = 0; t < ntypes && !out->block; t++) {
    uint32_t type = order[t], heap = d->mem.memoryTypes[type].heapIndex;
    if (fit_in_blocks(d, type, need, align, out)) break;
    bool own;
    VkDeviceSize bsize =
        rt_vk_block_bytes(d->mem.memoryHeaps[heap].size, d->heap_used[heap], need, &own);
    if (!first_try) first_try = bsize ? bsize : need;
    while (bsize) {
      vk_block *b = block_new(d, type, bsize, own, &r);
      if (b) {
        block_take(d, b, 0, 0, need); /* cannot fail: one range, taken from its start */
        out->block = b;
        out->off = 0;
        break;
      }
      if (r == VK_SUCCESS) no_host_memory = true;
      if (r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY)
        break;                /* not a lack of memory: reported below */
      bsize = own ? 0 : need; /* a block was refused: try the buffer alone */
      own = true;
    }
    if (no_host_memory ||
        (r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY))
      break;
  }
  if (!out->block) {
    d->f.vkDestroyBuffer(d->dev, out->buf, NULL);
    out->buf = VK_NULL_HANDLE;
    if (!ntypes)
      return base_status_make(RX_ERR_UNSUPPORTED, "vulkan:%d (%s): no memory type for a buffer",
                              d->base.info.index, d->base.info.name);
    if (no_host_memory) return rt_oom("a memory block", sizeof(vk_block));
    if (r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY)
      return vkfail(d, r, "vkAllocateMemory");
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "vulkan:%d (%s): out of device memory "
                            "allocating a block of %llu bytes for a buffer of %llu bytes "
                            "(%u memory types tried)",
                            d->base.info.index, d->base.info.name, (unsigned long long)first_try,
                            (unsigned long long)size, ntypes);
  }
  d->nmems++;
  out->size = need;
  /* mapped for the host: staging and uniform buffers, and device buffers with unified memory */
  bool coherent = d->mem.memoryTypes[out->block->type].propertyFlags & RT_VK_HC;
  out->map = out->block->map && coherent && (use != RT_VK_USE_DEVICE || !d->staging)
                 ? out->block->map + out->off
                 : NULL;
  r = d->f.vkBindBufferMemory(d->dev, out->buf, out->block->mem, out->off);
  if (r != VK_SUCCESS) {
    d->f.vkDestroyBuffer(d->dev, out->buf, NULL);
    block_give(d, out->block, out->off, out->size);
    d->nmems--;
    memset(out, 0, sizeof *out);
    return vkfail(d, r, "vkBindBufferMemory");
  }
  return NULL;
}

static void mem_free(vk_device *d, vk_mem *m) {
  if (m->buf) d->f.vkDestroyBuffer(d->dev, m->buf, NULL);
  if (m->block) block_give(d, m->block, m->off, m->size);
  if (m->block) d->nmems--;
  memset(m, 0, sizeof *m);
}

/* Frees m now, or after the recorded batch completed when one is recording (the batch's
 * launches are recorded only when it is submitted, and may bind m's buffer). The list has room:
 * mem_alloc reserved one place per live allocation. */
static void mem_free_later(vk_device *d, vk_mem *m) {
  if (!d->recording) {
    mem_free(d, m);
    return;
  }
  RX_ASSERT(d->ndeferred < d->capdeferred);
  d->deferred[d->ndeferred++] = *m;
  memset(m, 0, sizeof *m);
}

/* ---- command batches ---- */
static rx_status record_log(vk_device *d);
static rx_status replay_build(vk_device *d, rt_replay_entry *e);
static void replay_destroy(void *ctx, void *impl);

/* A global barrier between consecutive commands: each sees the previous one's writes. */
static void barrier(vk_device *d, VkCommandBuffer cmd) {
  VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL,
                        VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                            VK_ACCESS_UNIFORM_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                            VK_ACCESS_TRANSFER_WRITE_BIT};
  VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  d->f.vkCmdPipelineBarrier(cmd, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* The end of a batch's commands: its writes made visible to the host. */
static void host_barrier(vk_device *d, VkCommandBuffer cmd) {
  VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL,
                        VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        VK_ACCESS_HOST_READ_BIT};
  d->f.vkCmdPipelineBarrier(cmd,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* Ready to record one more command into the batch's command buffer. */
static rx_status open_cmd(vk_device *d) {
  d->recording = true;
  if (d->cmd_begun) {
    if (d->ncommands) barrier(d, d->cmd);
    return NULL;
  }
  VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                 VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
  VK_TRY(d, d->f.vkBeginCommandBuffer(d->cmd, &bi), "vkBeginCommandBuffer");
  d->cmd_begun = true;
  d->ncommands = 0;
  return NULL;
}

/* Before a command other than a launch (a fill, a copy, a timestamp): the launches logged so far
 * are recorded first, and the batch is not replayed. */
static rx_status begin_cmd(vk_device *d) {
  RX_RETURN_IF_ERROR(record_log(d));
  rt_replay_done(&d->replay, NULL, true);
  d->mixed = true;
  return open_cmd(d);
}

static void end_of_batch(vk_device *d) {
  for (size_t i = 0; i < d->ndeferred; i++) mem_free(d, &d->deferred[i]);
  d->ndeferred = 0;
  for (size_t i = 0; i < d->npools; i++) d->f.vkResetDescriptorPool(d->dev, d->pools[i], 0);
  d->cur_pool = 0;
  d->used_sets = d->used_storage = d->used_uniform = 0;
  d->recording = d->cmd_begun = d->mixed = false;
  d->ncommands = 0;
}

/* Submits cmd and waits for it. */
static rx_status submit(vk_device *d, VkCommandBuffer cmd) {
  VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cmd, 0, NULL};
  VkResult r = d->f.vkQueueSubmit(d->queue, 1, &si, d->fence);
  if (r != VK_SUCCESS) return vkfail(d, r, "vkQueueSubmit");
  r = d->f.vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, UINT64_MAX);
  if (r != VK_SUCCESS) return vkfail(d, r, "vkWaitForFences");
  d->f.vkResetFences(d->dev, 1, &d->fence);
  return NULL;
}

static rx_status vk_synchronize(rx_rt_device *base) {
  vk_device *d = (vk_device *)base;
  if (!d->recording) return NULL;
  rt_replay_entry *e = NULL;
  rt_replay_action act = RT_REPLAY_DIRECT;
  if (!d->mixed && !d->no_replay) act = rt_replay_find(&d->replay, &e);
  if (!d->mixed && d->no_replay && d->replay.log.n) d->replay.stats.direct++; /* as they count */
  rx_status s = act == RT_REPLAY_BUILD ? replay_build(d, e) : NULL;
  bool replayed = act != RT_REPLAY_DIRECT && !s;
  if (s) { /* could not record it for replay (out of memory): recorded as any batch */
    rx_status_free(s);
    s = NULL;
  }
  if (replayed) {
    s = submit(d, ((vk_replay *)e->impl)->cmd);
  } else {
    s = record_log(d);
    if (!s && d->cmd_begun) {
      host_barrier(d, d->cmd);
      VkResult r = d->f.vkEndCommandBuffer(d->cmd);
      s = r != VK_SUCCESS ? vkfail(d, r, "vkEndCommandBuffer") : submit(d, d->cmd);
    }
  }
  if (s) d->f.vkDeviceWaitIdle(d->dev); /* before freeing what the batch used */
  if (d->cmd_begun) d->f.vkResetCommandBuffer(d->cmd, 0);
  rt_replay_done(&d->replay, e, replayed && !s); /* empties the log, whatever happened */
  end_of_batch(d);
  return s;
}

/* ---- devices ---- */
/* Whether d's physical device has the device extension name. */
static bool has_device_ext(vk_device *d, const char *name) {
  uint32_t n = 0;
  bool found = false;
  d->f.vkEnumerateDeviceExtensionProperties(d->phys, NULL, &n, NULL);
  VkExtensionProperties *e = n ? rt_alloc(&d->base.alloc, n * sizeof *e) : NULL;
  if (e && d->f.vkEnumerateDeviceExtensionProperties(d->phys, NULL, &n, e) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(e[i].extensionName, name);
  rt_free(&d->base.alloc, e);
  return found;
}

/* Cooperative matrices (VK_NV_cooperative_matrix, Vulkan registry): d->coopmat where the device
 * has the extension, its cooperativeMatrix feature and the Vulkan memory model (the SPIR-V of
 * GL_NV_cooperative_matrix uses it); then *ext_name names the extension for vkCreateDevice and
 * *feat is the feature to chain. Kernels that need them are refused elsewhere (vk_kernel_create).
 */
static void query_coopmat(vk_device *d, bool memory_model, const char **ext_name,
                          VkPhysicalDeviceCooperativeMatrixFeaturesNV *feat) {
  *ext_name = NULL;
  memset(feat, 0, sizeof *feat);
  feat->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  d->coopmat = false;
  if (!memory_model || !has_device_ext(d, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) return;
  VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, feat, {0}};
  d->f.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
  feat->pNext = NULL;
  feat->cooperativeMatrixRobustBufferAccess = VK_FALSE;
  d->coopmat = feat->cooperativeMatrix;
  if (d->coopmat) *ext_name = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
}

/* Host memory import (VK_EXT_external_memory_host, Vulkan registry): where the device has it (and
 * RX_VULKAN_NO_HOST_IMPORT is unset: testing, as a device without), d->host_align is its
 * minImportedHostPointerAlignment (a power of two) and the extension is to be enabled. */
static bool query_host_import(vk_device *d) {
  d->host_align = 0;
  const char *no = getenv("RX_VULKAN_NO_HOST_IMPORT");
  if ((no && *no && strcmp(no, "0") != 0) ||
      !has_device_ext(d, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME))
    return false;
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT, NULL, 0};
  VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &hp, {0}};
  d->f.vkGetPhysicalDeviceProperties2(d->phys, &p2);
  VkDeviceSize a = hp.minImportedHostPointerAlignment;
  if (!a || (a & (a - 1))) return false; /* not a power of two: not usable */
  d->host_align = a;
  return true;
}

/* Subgroup size control: whether d has it for compute (Vulkan 1.3 core, or the extension, which
 * *ext_name then names for vkCreateDevice), its sizes, and the features to enable (chained into
 * the device's features by the caller through *feat). */
static void query_sgc(vk_device *d, uint32_t device_api, const char **ext_name,
                      VkPhysicalDeviceSubgroupSizeControlFeatures *feat) {
  *ext_name = NULL;
  memset(feat, 0, sizeof *feat);
  feat->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
  bool core = device_api >= VK_API_VERSION_1_3 && d->api >= VK_API_VERSION_1_3;
  bool ext = !core && has_device_ext(d, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
  if (!core && !ext) return;
  VkPhysicalDeviceFeatures2 f2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, feat, {0}};
  d->f.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
  VkPhysicalDeviceSubgroupSizeControlProperties pr = {
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES, NULL, 0, 0, 0, 0};
  VkPhysicalDeviceProperties2 p2 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &pr, {0}};
  d->f.vkGetPhysicalDeviceProperties2(d->phys, &p2);
  d->sgc =
      feat->subgroupSizeControl && (pr.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
  if (!d->sgc) {
    memset(feat, 0, sizeof *feat);
    feat->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
    return;
  }
  feat->pNext = NULL;
  d->sgc_full = feat->computeFullSubgroups;
  d->sg_min = pr.minSubgroupSize;
  d->sg_max = pr.maxSubgroupSize;
  d->sg_max_wg = pr.maxComputeWorkgroupSubgroups;
  if (ext) *ext_name = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
}

static rx_status vk_device_init(rx_rt_device *base, int index, const rx_rt_device_options *opts) {
  vk_device *d = (vk_device *)base;
  RX_RETURN_IF_ERROR(make_instance(d, opts->validation > 0, &d->instance, &d->f));
  VkPhysicalDevice *phys = NULL;
  uint32_t n = 0;
  RX_RETURN_IF_ERROR(physical_devices(d->instance, &d->f, &phys, &n, &d->base.alloc));
  if ((uint32_t)index >= n) {
    rt_free(&d->base.alloc, phys);
    if (!n)
      return base_status_make(RX_ERR_NOT_FOUND,
                              "vulkan: the loader found no Vulkan device: install "
                              "a driver (Debian: mesa-vulkan-drivers provides lavapipe)");
    return base_status_make(RX_ERR_NOT_FOUND, "vulkan:%d: there are %u Vulkan devices", index, n);
  }
  d->phys = phys[index];
  rt_free(&d->base.alloc, phys);
  fill_info(&d->f, d->phys, index, &d->base.info);
  VkPhysicalDeviceProperties props;
  d->f.vkGetPhysicalDeviceProperties(d->phys, &props);
  d->limits = props.limits;
  if (props.apiVersion < VK_API_VERSION_1_1)
    return base_status_make(RX_ERR_UNSUPPORTED, "vulkan:%d (%s): Vulkan 1.1 or newer is needed",
                            index, props.deviceName);
  uint32_t tsbits = 0;
  int fam = compute_family(&d->f, d->phys, &tsbits);
  if (fam < 0)
    return base_status_make(RX_ERR_UNSUPPORTED, "vulkan:%d (%s): no compute queue", index,
                            props.deviceName);
  d->qfamily = (uint32_t)fam;
  d->ts_mask = tsbits >= 64 ? UINT64_MAX : ((uint64_t)1 << tsbits) - 1;
  d->ts_period_ns = props.limits.timestampPeriod;
  d->f.vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem);
  /* testing: heaps of at most RX_VULKAN_HEAP_LIMIT bytes, so that running out of device memory
   * (and the buffer cache given back on it) can be tested on a device with plenty */
  const char *heap_limit = getenv("RX_VULKAN_HEAP_LIMIT");
  unsigned long long limit = heap_limit ? strtoull(heap_limit, NULL, 10) : 0;
  for (uint32_t i = 0; limit && i < d->mem.memoryHeapCount; i++)
    if (d->mem.memoryHeaps[i].size > limit) d->mem.memoryHeaps[i].size = limit;

  /* enable what kernels may use, where the device has it */
  vk_feats have, en;
  query_features(&d->f, d->phys, props.apiVersion, &have);
  memset(&en, 0, sizeof en);
  en.f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  en.v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  en.v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  en.f2.features.shaderInt64 = have.f2.features.shaderInt64;
  en.f2.features.shaderInt16 = have.f2.features.shaderInt16;
  const char *nof64 = getenv("RX_VULKAN_NO_FLOAT64"); /* testing: as a device without f64 */
  d->float64 = have.f2.features.shaderFloat64 && !(nof64 && *nof64 && strcmp(nof64, "0") != 0);
  en.f2.features.shaderFloat64 = d->float64;
  if (have.has12) {
    en.f2.pNext = &en.v11;
    en.v11.pNext = &en.v12;
    en.v11.storageBuffer16BitAccess = have.v11.storageBuffer16BitAccess;
    en.v11.uniformAndStorageBuffer16BitAccess = have.v11.uniformAndStorageBuffer16BitAccess;
    en.v11.storagePushConstant16 = have.v11.storagePushConstant16;
    en.v12.shaderFloat16 = have.v12.shaderFloat16;
    en.v12.shaderInt8 = have.v12.shaderInt8;
    /* subgroup reductions of i64 (row_reduction, gemv: the GLSL requires
     * GL_EXT_shader_subgroup_extended_types_int64), f16, i16 and i8 */
    en.v12.shaderSubgroupExtendedTypes = have.v12.shaderSubgroupExtendedTypes;
    const char *noext = getenv("RX_VULKAN_NO_SUBGROUP_EXTENDED"); /* testing: as a device without */
    if (noext && *noext && strcmp(noext, "0") != 0) en.v12.shaderSubgroupExtendedTypes = VK_FALSE;
    d->sg_ext = en.v12.shaderSubgroupExtendedTypes;
    en.v12.storageBuffer8BitAccess = have.v12.storageBuffer8BitAccess;
    en.v12.uniformAndStorageBuffer8BitAccess = have.v12.uniformAndStorageBuffer8BitAccess;
    en.v12.storagePushConstant8 = have.v12.storagePushConstant8;
    en.v12.vulkanMemoryModel = have.v12.vulkanMemoryModel;
    en.v12.vulkanMemoryModelDeviceScope = have.v12.vulkanMemoryModelDeviceScope;
  }
  const char *sgc_ext = NULL;
  VkPhysicalDeviceSubgroupSizeControlFeatures sgc;
  query_sgc(d, props.apiVersion, &sgc_ext, &sgc);
  if (d->sgc) { /* chained after the others */
    sgc.pNext = en.f2.pNext;
    en.f2.pNext = &sgc;
  }
  const char *cm_ext = NULL, *exts[3];
  uint32_t next = 0;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm;
  query_coopmat(d, have.has12 && have.v12.vulkanMemoryModel, &cm_ext, &cm);
  if (d->coopmat) {
    cm.pNext = en.f2.pNext;
    en.f2.pNext = &cm;
  }
  if (sgc_ext) exts[next++] = sgc_ext;
  if (cm_ext) exts[next++] = cm_ext;
  if (query_host_import(d)) exts[next++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {
      VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, d->qfamily, 1, &prio};
  VkDeviceCreateInfo dci = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            &en.f2,
                            0,
                            1,
                            &qci,
                            0,
                            NULL,
                            next,
                            next ? exts : NULL,
                            NULL};
  VK_TRY(d, d->f.vkCreateDevice(d->phys, &dci, NULL, &d->dev), "vkCreateDevice");
#define X(fn) d->f.fn = (PFN_##fn)d->f.vkGetDeviceProcAddr(d->dev, #fn);
  VK_DEVICE_FNS(X)
#undef X
  d->f.vkGetDeviceQueue(d->dev, d->qfamily, 0, &d->queue);
  if (d->host_align) {
    d->f.vkGetMemoryHostPointerPropertiesEXT =
        (PFN_vkGetMemoryHostPointerPropertiesEXT)d->f.vkGetDeviceProcAddr(
            d->dev, "vkGetMemoryHostPointerPropertiesEXT");
    if (!d->f.vkGetMemoryHostPointerPropertiesEXT) d->host_align = 0;
  }
  d->base.info.host_import_alignment = d->host_align;

  /* buffers: host-visible where it is device-local too, else staging */
  bool unified = d->base.info.unified_memory;
  d->staging = opts->force_staging || !unified;
  d->base.info.unified_memory = !d->staging;

  VkPipelineCacheCreateInfo pcci = {VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, NULL, 0, 0, NULL};
  VK_TRY(d, d->f.vkCreatePipelineCache(d->dev, &pcci, NULL, &d->cache), "vkCreatePipelineCache");
  VkCommandPoolCreateInfo cpci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL,
                                  VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, d->qfamily};
  VK_TRY(d, d->f.vkCreateCommandPool(d->dev, &cpci, NULL, &d->cmdpool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cbai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL,
                                      d->cmdpool, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
  VK_TRY(d, d->f.vkAllocateCommandBuffers(d->dev, &cbai, &d->cmd), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fci = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO, NULL, 0};
  VK_TRY(d, d->f.vkCreateFence(d->dev, &fci, NULL, &d->fence), "vkCreateFence");
  d->replay =
      (rt_replay){.alloc = &d->base.alloc, .exact = true, .destroy = replay_destroy, .ctx = d};
  const char *replay = getenv("RX_VULKAN_REPLAY"), *cache = getenv("RX_VULKAN_CACHE");
  d->no_replay = replay && !strcmp(replay, "0");
  for (uint32_t i = 0; i < d->mem.memoryHeapCount && !(cache && !strcmp(cache, "0")); i++)
    if (d->mem.memoryHeaps[i].size / 4 > d->cache_limit)
      d->cache_limit = d->mem.memoryHeaps[i].size / 4;
  d->base.replay = &d->replay.stats;
  if (d->base.info.timestamps) {
    VkQueryPoolCreateInfo qpci = {
        VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, NULL, 0, VK_QUERY_TYPE_TIMESTAMP, NQUERIES, 0};
    VK_TRY(d, d->f.vkCreateQueryPool(d->dev, &qpci, NULL, &d->qpool), "vkCreateQueryPool");
  }
  return NULL;
}

/* Frees the cached buffers (after the batch that may use them, when one is recording). */
static void release_cache(vk_device *d) {
  for (size_t i = 0; i < d->ncached; i++) mem_free_later(d, &d->cached[i].m);
  d->ncached = 0;
  d->cached_bytes = 0;
}

static void vk_device_destroy(rx_rt_device *base) {
  vk_device *d = (vk_device *)base;
  if (d->dev) {
    if (d->recording) {
      rx_status s = vk_synchronize(base);
      rx_status_free(s);
    }
    d->f.vkDeviceWaitIdle(d->dev);
    end_of_batch(d);
    rt_replay_free(&d->replay);
    release_cache(d);
    for (size_t i = 0; i < d->npools; i++) d->f.vkDestroyDescriptorPool(d->dev, d->pools[i], NULL);
    if (d->qpool) d->f.vkDestroyQueryPool(d->dev, d->qpool, NULL);
    if (d->fence) d->f.vkDestroyFence(d->dev, d->fence, NULL);
    if (d->cmdpool) d->f.vkDestroyCommandPool(d->dev, d->cmdpool, NULL);
    if (d->cache) d->f.vkDestroyPipelineCache(d->dev, d->cache, NULL);
    while (d->blocks) {
      vk_block *b = d->blocks;
      d->blocks = b->next;
      block_free(d, b);
    }
    d->f.vkDestroyDevice(d->dev, NULL);
  }
  rt_free(&d->base.alloc, d->pools);
  rt_free(&d->base.alloc, d->deferred);
  rt_free(&d->base.alloc, d->cached);
  if (d->messenger) d->f.vkDestroyDebugUtilsMessengerEXT(d->instance, d->messenger, NULL);
  if (d->instance) d->f.vkDestroyInstance(d->instance, NULL);
}

/* ---- buffers ---- */
static const VkBufferUsageFlags k_buffer_usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;

static rx_status vk_buffer_init(rx_rt_buffer *base) {
  vk_device *d = (vk_device *)base->device;
  vk_buffer *b = (vk_buffer *)base;
  VkDeviceSize largest = 0;
  for (uint32_t i = 0; i < d->mem.memoryHeapCount; i++)
    if (d->mem.memoryHeaps[i].size > largest) largest = d->mem.memoryHeaps[i].size;
  if (base->size > largest)
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "vulkan:%d (%s): out of device memory: %zu "
                            "bytes asked, the largest heap has %llu",
                            d->base.info.index, d->base.info.name, base->size,
                            (unsigned long long)largest);
  if (base->size > d->limits.maxStorageBufferRange)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "vulkan:%d (%s): a buffer of %zu bytes is larger "
                            "than maxStorageBufferRange (%u)",
                            d->base.info.index, d->base.info.name, base->size,
                            d->limits.maxStorageBufferRange);
  /* of the cached buffers of this size, the oldest (the smallest serial): whatever order a step
   * releases its buffers in, the next step's first buffer of a size gets the same one */
  size_t pick = d->ncached;
  for (size_t i = 0; i < d->ncached; i++)
    if (d->cached[i].size == base->size &&
        (pick == d->ncached || d->cached[i].serial < d->cached[pick].serial))
      pick = i;
  if (pick < d->ncached) {
    vk_spare *c = &d->cached[pick];
    b->m = c->m;
    b->serial = c->serial;
    d->cached_bytes -= c->m.size;
    *c = d->cached[--d->ncached];
    return NULL;
  }
  b->serial = ++d->serials;
  rx_status s = mem_alloc(d, base->size, k_buffer_usage, RT_VK_USE_DEVICE, &b->m);
  if (s && rx_status_code_of(s) == RX_ERR_OUT_OF_MEMORY && d->ncached) {
    /* give the cache back (after the batch, which may use it) and try once more */
    rx_status_free(s);
    RX_RETURN_IF_ERROR(vk_synchronize(&d->base));
    release_cache(d);
    s = mem_alloc(d, base->size, k_buffer_usage, RT_VK_USE_DEVICE, &b->m);
  }
  return s;
}

/* Into the cache, where it has room (see the top); else freed after the recorded batch. An
 * imported buffer is freed at once, after the recorded batch ran: the caller's memory is the
 * caller's again when the release returns. */
static void vk_buffer_destroy(rx_rt_buffer *base) {
  vk_device *d = (vk_device *)base->device;
  vk_buffer *b = (vk_buffer *)base;
  if (b->imported) {
    if (d->recording) rx_status_free(vk_synchronize(&d->base)); /* an error stays in d->lost */
    d->f.vkDestroyBuffer(d->dev, b->m.buf, NULL);
    d->f.vkFreeMemory(d->dev, b->imported, NULL);
    memset(&b->m, 0, sizeof b->m);
    b->imported = VK_NULL_HANDLE;
    return;
  }
  if (b->m.buf && d->cached_bytes + b->m.size <= d->cache_limit) {
    if (rt_grow(&d->base.alloc, (void **)&d->cached, &d->capcached, d->ncached + 1,
                sizeof *d->cached)) {
      d->cached[d->ncached++] = (vk_spare){b->m, b->serial, base->size};
      d->cached_bytes += b->m.size;
      memset(&b->m, 0, sizeof b->m);
      return;
    }
  }
  mem_free_later(d, &b->m);
}

/* Imports the pages holding [ptr, ptr + size) (VK_EXT_external_memory_host) and binds a buffer
 * at ptr's offset in them. Declines (*kind, NULL) where the device has no import, where ptr or
 * the size is not aligned as the buffer needs (a kernel may write whole 4-byte words), and where
 * the driver refuses the range as memory it cannot import; a pointer the driver reports as
 * invalid is an error. */
static rx_status vk_buffer_import(rx_rt_buffer *base, void *ptr, rx_rt_import *kind) {
  vk_device *d = (vk_device *)base->device;
  vk_buffer *b = (vk_buffer *)base;
  *kind = RX_RT_IMPORT_COPY_UNSUPPORTED;
  if (!d->host_align) return NULL;
  if (base->size > d->limits.maxStorageBufferRange)
    return base_status_make(
        RX_ERR_INVALID, "vulkan:%d (%s): %zu bytes is larger than maxStorageBufferRange (%u)",
        d->base.info.index, d->base.info.name, base->size, d->limits.maxStorageBufferRange);
  VkDeviceSize a = d->host_align;
  uintptr_t p = (uintptr_t)ptr, page = p & ~(uintptr_t)(a - 1);
  VkDeviceSize head = p - page, size = ((VkDeviceSize)base->size + 3) & ~(VkDeviceSize)3;
  VkDeviceSize total = (head + size + a - 1) & ~(a - 1);
  *kind = RX_RT_IMPORT_COPY_UNALIGNED;
  if (base->size % 4) return NULL;
  VkExternalMemoryBufferCreateInfo ebci = {VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
                                           NULL,
                                           VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT};
  VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                            &ebci,
                            0,
                            size,
                            k_buffer_usage,
                            VK_SHARING_MODE_EXCLUSIVE,
                            0,
                            NULL};
  VkBuffer buf;
  VK_TRY(d, d->f.vkCreateBuffer(d->dev, &bci, NULL, &buf), "vkCreateBuffer");
  VkMemoryRequirements req;
  d->f.vkGetBufferMemoryRequirements(d->dev, buf, &req);
  VkDeviceSize balign = req.alignment > d->limits.minStorageBufferOffsetAlignment
                            ? req.alignment
                            : d->limits.minStorageBufferOffsetAlignment;
  if (balign && head % balign) {
    d->f.vkDestroyBuffer(d->dev, buf, NULL);
    return NULL;
  }
  VkMemoryHostPointerPropertiesEXT hp = {VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT, NULL,
                                         0};
  VkResult r = d->f.vkGetMemoryHostPointerPropertiesEXT(
      d->dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, (void *)page, &hp);
  if (r == VK_ERROR_INVALID_EXTERNAL_HANDLE) {
    d->f.vkDestroyBuffer(d->dev, buf, NULL);
    return base_status_make(RX_ERR_INVALID,
                            "vulkan:%d (%s): %p is not host memory the driver can import "
                            "(vkGetMemoryHostPointerPropertiesEXT)",
                            d->base.info.index, d->base.info.name, ptr);
  }
  /* of the types both allow, a host-visible coherent one (every type is, where import works) */
  uint32_t bits = r == VK_SUCCESS ? hp.memoryTypeBits & req.memoryTypeBits : 0, type = UINT32_MAX;
  for (uint32_t i = 0; i < d->mem.memoryTypeCount && type == UINT32_MAX; i++)
    if ((bits >> i & 1) &&
        (d->mem.memoryTypes[i].propertyFlags & (RT_VK_HV | RT_VK_HC)) == (RT_VK_HV | RT_VK_HC))
      type = i;
  for (uint32_t i = 0; i < d->mem.memoryTypeCount && type == UINT32_MAX; i++)
    if (bits >> i & 1) type = i;
  VkDeviceMemory mem = VK_NULL_HANDLE;
  if (type != UINT32_MAX) {
    VkImportMemoryHostPointerInfoEXT imp = {
        VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT, NULL,
        VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, (void *)page};
    VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &imp, total, type};
    r = d->f.vkAllocateMemory(d->dev, &mai, NULL, &mem);
    if (r == VK_SUCCESS) r = d->f.vkBindBufferMemory(d->dev, buf, mem, head);
  }
  if (type == UINT32_MAX || r != VK_SUCCESS) {
    if (mem) d->f.vkFreeMemory(d->dev, mem, NULL);
    d->f.vkDestroyBuffer(d->dev, buf, NULL);
    if (r == VK_ERROR_DEVICE_LOST) return vkfail(d, r, "vkAllocateMemory (host import)");
    *kind = RX_RT_IMPORT_COPY_REFUSED;
    return NULL;
  }
  b->imported = mem;
  b->m = (vk_mem){buf, NULL, head, size, (uint8_t *)ptr};
  b->serial = ++d->serials;
  *kind = RX_RT_IMPORT_IN_PLACE;
  return NULL;
}

static rx_status vk_buffer_map(rx_rt_buffer *base, void **out_ptr) {
  vk_device *d = (vk_device *)base->device;
  vk_buffer *b = (vk_buffer *)base;
  if (!b->m.map)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "vulkan:%d (%s): the buffer is in device memory the host cannot map "
                            "(read it with rx_rt_buffer_read)",
                            d->base.info.index, d->base.info.name);
  RX_RETURN_IF_ERROR(vk_synchronize(&d->base));
  *out_ptr = b->m.map;
  return NULL;
}

static void copy_cmd(vk_device *d, VkBuffer src, VkDeviceSize so, VkBuffer dst, VkDeviceSize dof,
                     VkDeviceSize n) {
  VkBufferCopy region = {so, dof, n};
  d->f.vkCmdCopyBuffer(d->cmd, src, dst, 1, &region);
  d->ncommands++;
}

static rx_status vk_buffer_write(rx_rt_buffer *base, size_t off, const void *src, size_t n) {
  vk_device *d = (vk_device *)base->device;
  vk_buffer *b = (vk_buffer *)base;
  RX_RETURN_IF_ERROR(vk_synchronize(&d->base));
  if (b->m.map) {
    memmove(b->m.map + off, src, n); /* an imported buffer may be written from itself */
    return NULL;
  }
  vk_mem st;
  RX_RETURN_IF_ERROR(mem_alloc(d, n, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, RT_VK_USE_UPLOAD, &st));
  memcpy(st.map, src, n);
  rx_status s = begin_cmd(d);
  if (!s) {
    copy_cmd(d, st.buf, 0, b->m.buf, off, n);
    s = vk_synchronize(&d->base);
  }
  mem_free_later(d, &st);
  return s;
}

static rx_status vk_buffer_read(rx_rt_buffer *base, size_t off, void *dst, size_t n) {
  vk_device *d = (vk_device *)base->device;
  vk_buffer *b = (vk_buffer *)base;
  RX_RETURN_IF_ERROR(vk_synchronize(&d->base));
  if (b->m.map) {
    memmove(dst, b->m.map + off, n);
    return NULL;
  }
  vk_mem st;
  RX_RETURN_IF_ERROR(mem_alloc(d, n, VK_BUFFER_USAGE_TRANSFER_DST_BIT, RT_VK_USE_READBACK, &st));
  rx_status s = begin_cmd(d);
  if (!s) {
    copy_cmd(d, b->m.buf, off, st.buf, 0, n);
    s = vk_synchronize(&d->base);
  }
  if (!s) memcpy(dst, st.map, n);
  mem_free_later(d, &st);
  return s;
}

static rx_status vk_buffer_fill(rx_rt_buffer *base, size_t off, size_t n, uint8_t value) {
  vk_device *d = (vk_device *)base->device;
  vk_buffer *b = (vk_buffer *)base;
  if (off % 4 == 0 && n % 4 == 0) {
    RX_RETURN_IF_ERROR(begin_cmd(d));
    d->f.vkCmdFillBuffer(d->cmd, b->m.buf, off, n, value * 0x01010101u);
    d->ncommands++;
    return NULL;
  }
  /* vkCmdFillBuffer wants 4-byte alignment: copy from a filled staging buffer instead */
  vk_mem st;
  RX_RETURN_IF_ERROR(mem_alloc(d, n, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, RT_VK_USE_UPLOAD, &st));
  memset(st.map, value, n);
  rx_status s = begin_cmd(d);
  if (!s) copy_cmd(d, st.buf, 0, b->m.buf, off, n);
  mem_free_later(d, &st);
  return s;
}

static rx_status vk_buffer_copy(rx_rt_buffer *src, size_t so, rx_rt_buffer *dst, size_t dof,
                                size_t n) {
  vk_device *d = (vk_device *)src->device;
  RX_RETURN_IF_ERROR(begin_cmd(d));
  copy_cmd(d, ((vk_buffer *)src)->m.buf, so, ((vk_buffer *)dst)->m.buf, dof, n);
  return NULL;
}

/* ---- kernels ---- */
static void vk_kernel_destroy(rx_rt_device *base, rx_rt_kernel *k) {
  vk_device *d = (vk_device *)base;
  vk_kernel *vk = k->impl;
  if (!vk) return;
  if (d->recording) { /* the batch may use the pipeline */
    rx_status s = vk_synchronize(base);
    rx_status_free(s);
  }
  rt_replay_clear(&d->replay); /* recorded batches may use it, and its address may come back */
  if (vk->pipeline) d->f.vkDestroyPipeline(d->dev, vk->pipeline, NULL);
  if (vk->layout) d->f.vkDestroyPipelineLayout(d->dev, vk->layout, NULL);
  if (vk->dsl) d->f.vkDestroyDescriptorSetLayout(d->dev, vk->dsl, NULL);
  rt_free(&d->base.alloc, vk);
  k->impl = NULL;
}

/* How kernel k runs with the subgroup size it was scheduled for (kernels.json "subgroup_size"):
 * pinned by its pipeline (*pin; *full: full subgroups required too) where the device allows
 * that size for compute; else on a device whose default size it is (SPIR-V before 1.6 runs
 * with the default size when no size is required); else an error naming the sizes. */
static rx_status subgroup_plan(vk_device *d, const rx_rt_kernel *k, bool *pin, bool *full) {
  uint32_t S = k->subgroup_size, threads = k->block[0] * k->block[1] * k->block[2];
  *pin = *full = false;
  if (!S) return NULL;
  if (d->sgc && S >= d->sg_min && S <= d->sg_max && threads <= (uint64_t)d->sg_max_wg * S) {
    *pin = true;
    *full = d->sgc_full && k->block[0] % S == 0;
    return NULL;
  }
  if (d->base.info.subgroup_size == S) return NULL;
  char range[64] = "";
  if (d->sgc) snprintf(range, sizeof range, ", or %u..%u when required", d->sg_min, d->sg_max);
  return base_status_make(RX_ERR_UNSUPPORTED,
                          "vulkan:%d (%s): kernel '%s' was scheduled for subgroups of %u threads; "
                          "the device runs subgroups of %u%s%s: compile for the target that "
                          "describes this device",
                          d->base.info.index, d->base.info.name, k->name, S,
                          d->base.info.subgroup_size, range,
                          d->sgc ? "" : " (no VK_EXT_subgroup_size_control to pin another)");
}

/* Does SPIR-V module w (n words, the header checked) declare OpCapability cap? The capabilities
 * come first after the 5-word header (SPIR-V 1.6 section 2.4, "Logical Layout of a Module"). */
static bool spirv_has_capability(const uint32_t *w, size_t n, uint32_t cap) {
  enum { OP_CAPABILITY = 17 };
  for (size_t i = 5; i < n;) {
    uint32_t words = w[i] >> 16, op = w[i] & 0xffffu;
    if (op != OP_CAPABILITY || words != 2 || i + 1 >= n) return false;
    if (w[i + 1] == cap) return true;
    i += 2;
  }
  return false;
}

/* Does SPIR-V module w (n words, the header checked) apply a subgroup operation (broadcast,
 * shuffle, arithmetic: OpGroupNonUniformBroadcast.. and ..Shuffle..BitwiseXor, SPIR-V 1.6 section
 * 3.52.36) to an 8-, 16- or 64-bit integer or a 16-bit float, scalar or vector? Those need the
 * device's shaderSubgroupExtendedTypes (Vulkan 1.2, VkPhysicalDeviceVulkan12Features). */
static bool spirv_subgroup_ext_types(const uint32_t *w, size_t n) {
  enum { OP_TYPE_INT = 21, OP_TYPE_FLOAT = 22, OP_TYPE_VECTOR = 23, MAX_EXT = 64 };
  uint32_t ext[MAX_EXT]; /* the ids of such types, in declaration order */
  int next = 0;
  for (size_t i = 5; i < n;) {
    uint32_t words = w[i] >> 16, op = w[i] & 0xffffu;
    if (!words || i + words > n) return false; /* malformed: vkCreateShaderModule says so */
    bool is_ext = false;
    if (op == OP_TYPE_INT && words >= 3) is_ext = w[i + 2] != 32;
    if (op == OP_TYPE_FLOAT && words >= 3) is_ext = w[i + 2] == 16;
    if (op == OP_TYPE_VECTOR && words >= 3)
      for (int e = 0; e < next; e++) is_ext |= ext[e] == w[i + 2];
    if (is_ext && next < MAX_EXT) ext[next++] = w[i + 1];
    bool group_op = (op >= 337 && op <= 338) || (op >= 345 && op <= 361);
    if (group_op && words >= 2)
      for (int e = 0; e < next; e++)
        if (ext[e] == w[i + 1]) return true;
    i += words;
  }
  return false;
}

static rx_status vk_kernel_create(rx_rt_device *base, rx_rt_kernel *k) {
  vk_device *d = (vk_device *)base;
  if (k->binary_size < 20 || k->binary_size % 4 || ((const uint32_t *)k->binary)[0] != 0x07230203u)
    return base_status_make(RX_ERR_INVALID, "'%s' is not SPIR-V (bad size or magic number)",
                            k->binary_name ? k->binary_name : "binary");
  enum { CAP_FLOAT64 = 10 }; /* SPIR-V's Capability Float64 */
  if (!d->float64 &&
      spirv_has_capability((const uint32_t *)k->binary, k->binary_size / 4, CAP_FLOAT64))
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "vulkan:%d (%s): kernel '%s' uses f64 (SPIR-V capability Float64); the "
                            "device has no shaderFloat64: compute in f32 (cast the model's f64 "
                            "tensors) or run it on a device that has double precision",
                            d->base.info.index, d->base.info.name, k->name);
  if (!d->sg_ext && spirv_subgroup_ext_types((const uint32_t *)k->binary, k->binary_size / 4))
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "vulkan:%d (%s): kernel '%s' applies subgroup operations to 8-, 16- or "
                            "64-bit types; the device has no shaderSubgroupExtendedTypes: compile "
                            "for the target that describes this device (or the generic 'vulkan')",
                            d->base.info.index, d->base.info.name, k->name);
  if (k->scalar_location == RT_SCALARS_PARAMETERS || k->scalar_location == RT_SCALARS_BUFFER)
    return base_status_make(RX_ERR_INVALID, "scalars.location must be push_constant or "
                                            "uniform_buffer for Vulkan");
  if (k->coop_matrix && !d->coopmat)
    return base_status_make(
        RX_ERR_UNSUPPORTED,
        "vulkan:%d (%s): kernel '%s' uses cooperative matrices "
        "(GL_NV_cooperative_matrix); the device has no VK_NV_cooperative_matrix "
        "with its cooperativeMatrix feature and the Vulkan memory model: "
        "compile for the target that describes this device",
        d->base.info.index, d->base.info.name, k->name);
  bool pin = false, full = false;
  RX_RETURN_IF_ERROR(subgroup_plan(d, k, &pin, &full));
  uint32_t pc_bytes =
      k->scalar_location == RT_SCALARS_PUSH_CONSTANT ? (k->scalar_bytes + 3) & ~3u : 0;
  if (pc_bytes > d->limits.maxPushConstantsSize)
    return base_status_make(RX_ERR_UNSUPPORTED, "%u bytes of push constants, the device allows %u",
                            pc_bytes, d->limits.maxPushConstantsSize);
  vk_kernel *vk = rt_alloc(&d->base.alloc, sizeof *vk);
  if (!vk) return rt_oom("a kernel", sizeof *vk);
  k->impl = vk;
  VkDescriptorSetLayoutBinding binds[65];
  uint32_t nb = 0;
  for (size_t i = 0; i < k->nbuffers && nb < 64; i++)
    binds[nb++] = (VkDescriptorSetLayoutBinding){(uint32_t)k->buffers[i].binding,
                                                 VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                                 VK_SHADER_STAGE_COMPUTE_BIT, NULL};
  vk->nstorage = nb;
  if (k->nbuffers > 64 || k->nbuffers > d->limits.maxPerStageDescriptorStorageBuffers) {
    vk_kernel_destroy(base, k);
    return base_status_make(RX_ERR_UNSUPPORTED, "%zu storage buffers, the device allows %u",
                            k->nbuffers, d->limits.maxPerStageDescriptorStorageBuffers);
  }
  if (k->scalar_location == RT_SCALARS_UNIFORM_BUFFER) {
    binds[nb++] = (VkDescriptorSetLayoutBinding){(uint32_t)k->scalar_binding,
                                                 VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1,
                                                 VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    vk->nuniform = 1;
  }
  VkDescriptorSetLayoutCreateInfo dci = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL,
                                         0, nb, binds};
  VkResult r = d->f.vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &vk->dsl);
  VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes};
  VkPipelineLayoutCreateInfo plci = {
      VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &vk->dsl, pc_bytes ? 1 : 0, &pcr};
  if (r == VK_SUCCESS) r = d->f.vkCreatePipelineLayout(d->dev, &plci, NULL, &vk->layout);
  VkShaderModule mod = VK_NULL_HANDLE;
  VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0,
                                   k->binary_size, (const uint32_t *)k->binary};
  if (r == VK_SUCCESS) r = d->f.vkCreateShaderModule(d->dev, &smci, NULL, &mod);
  if (r == VK_SUCCESS) {
    VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                        NULL,
                                        0,
                                        {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL,
                                         0, VK_SHADER_STAGE_COMPUTE_BIT, mod, "main", NULL},
                                        vk->layout,
                                        VK_NULL_HANDLE,
                                        -1};
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo req = {
        VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO, NULL,
        k->subgroup_size};
    if (pin) {
      cpci.stage.pNext = &req;
      if (full) cpci.stage.flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
    }
    r = d->f.vkCreateComputePipelines(d->dev, d->cache, 1, &cpci, NULL, &vk->pipeline);
  }
  if (mod) d->f.vkDestroyShaderModule(d->dev, mod, NULL);
  if (r != VK_SUCCESS) {
    vk_kernel_destroy(base, k);
    return vkfail(d, r, "creating the compute pipeline");
  }
  return NULL;
}

static rx_status alloc_set(vk_device *d, vk_kernel *vk, VkDescriptorSet *out) {
  if (d->npools == 0 || d->used_sets + 1 > POOL_SETS ||
      d->used_storage + vk->nstorage > POOL_STORAGE ||
      d->used_uniform + vk->nuniform > POOL_UNIFORM) {
    if (d->npools) d->cur_pool++;
    d->used_sets = d->used_storage = d->used_uniform = 0;
    if (d->cur_pool >= d->npools) {
      VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, POOL_STORAGE},
                                       {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, POOL_UNIFORM}};
      VkDescriptorPoolCreateInfo ci = {
          VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, POOL_SETS, 2, sizes};
      VkDescriptorPool pool;
      VK_TRY(d, d->f.vkCreateDescriptorPool(d->dev, &ci, NULL, &pool), "vkCreateDescriptorPool");
      VkDescriptorPool *np = rt_alloc(&d->base.alloc, (d->npools + 1) * sizeof *np);
      if (!np) {
        d->f.vkDestroyDescriptorPool(d->dev, pool, NULL);
        return rt_oom("descriptor pools", d->npools + 1);
      }
      if (d->npools) memcpy(np, d->pools, d->npools * sizeof *np);
      rt_free(&d->base.alloc, d->pools);
      d->pools = np;
      d->pools[d->npools++] = pool;
      d->cur_pool = d->npools - 1;
    }
  }
  VkDescriptorSetAllocateInfo ai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL,
                                    d->pools[d->cur_pool], 1, &vk->dsl};
  VK_TRY(d, d->f.vkAllocateDescriptorSets(d->dev, &ai, out), "vkAllocateDescriptorSets");
  d->used_sets++;
  d->used_storage += vk->nstorage;
  d->used_uniform += vk->nuniform;
  return NULL;
}

/* ---- launches: logged, recorded at the end of the batch ---- */
/* A launch's words in the log: per buffer its serial and its VkBuffer, then the kernel's block of
 * symbolic values (push constants or uniform buffer contents), 8 bytes a word. */
static uint32_t launch_words(const rx_rt_kernel *k) {
  return (uint32_t)(2 * k->nbuffers + ((k->scalar_bytes + 15) & ~15u) / 8);
}

static rx_status vk_launch(rx_rt_device *base, rx_rt_kernel *k, const rx_rt_launch_params *p) {
  vk_device *d = (vk_device *)base;
  for (int i = 0; i < 3; i++)
    if (p->grid[i] > d->limits.maxComputeWorkGroupCount[i])
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "kernel '%s': grid[%d] = %u exceeds the device's "
                              "maxComputeWorkGroupCount (%u)",
                              k->name, i, p->grid[i], d->limits.maxComputeWorkGroupCount[i]);
  if (k->scalar_bytes > 65536)
    return base_status_make(RX_ERR_UNSUPPORTED, "kernel '%s': scalar block too large", k->name);
  uint64_t stack[64], *w = stack;
  uint32_t n = launch_words(k);
  if (n > RX_ARRAY_LEN(stack) && !(w = rt_alloc(&d->base.alloc, n * sizeof *w)))
    return rt_oom("a launch", n * sizeof *w);
  memset(w, 0, n * sizeof *w);
  for (size_t i = 0; i < k->nbuffers; i++) {
    const vk_buffer *b = (const vk_buffer *)p->buffers[i];
    w[2 * i] = b->serial;
    memcpy(&w[2 * i + 1], &b->m.buf, sizeof b->m.buf);
  }
  uint8_t *block = (uint8_t *)(w + 2 * k->nbuffers);
  for (size_t i = 0; i < k->nscalars; i++)
    memcpy(block + k->scalars[i].offset, &p->scalars[i], sizeof(int32_t));
  rx_status s = rt_replay_add(&d->replay, k, p->grid, w, n);
  if (w != stack) rt_free(&d->base.alloc, w);
  if (!s) d->recording = true;
  return s;
}

/* Records launch i of the log into cmd: descriptor sets from pool (a batch recorded for replay)
 * or from the device's pools (NULL), a uniform buffer kept by rep (or freed after the batch). */
static rx_status record_launch(vk_device *d, VkCommandBuffer cmd, size_t i, VkDescriptorPool pool,
                               vk_replay *rep) {
  const rt_replay_launch *l = &d->replay.log.launches[i];
  const uint64_t *w = d->replay.log.words + l->off;
  rx_rt_kernel *k = l->k;
  vk_kernel *vk = k->impl;
  const uint8_t *block = (const uint8_t *)(w + 2 * k->nbuffers);
  uint32_t bytes = (k->scalar_bytes + 15) & ~15u;
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (pool) {
    VkDescriptorSetAllocateInfo ai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, pool, 1,
                                      &vk->dsl};
    VK_TRY(d, d->f.vkAllocateDescriptorSets(d->dev, &ai, &set), "vkAllocateDescriptorSets");
  } else {
    RX_RETURN_IF_ERROR(alloc_set(d, vk, &set));
  }
  vk_mem ubo = {0};
  if (k->scalar_location == RT_SCALARS_UNIFORM_BUFFER) {
    RX_RETURN_IF_ERROR(mem_alloc(d, bytes ? bytes : 16, VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT,
                                 RT_VK_USE_UNIFORM, &ubo));
    memcpy(ubo.map, block, bytes);
  }
  VkDescriptorBufferInfo infos[65];
  VkWriteDescriptorSet writes[65];
  uint32_t nw = 0;
  for (size_t b = 0; b < k->nbuffers + (ubo.buf != VK_NULL_HANDLE); b++) {
    bool is_ubo = b == k->nbuffers;
    VkBuffer buf = ubo.buf;
    if (!is_ubo) memcpy(&buf, &w[2 * b + 1], sizeof buf);
    infos[nw] = (VkDescriptorBufferInfo){buf, 0, VK_WHOLE_SIZE};
    writes[nw] = (VkWriteDescriptorSet){
        VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
        NULL,
        set,
        (uint32_t)(is_ubo ? k->scalar_binding : k->buffers[b].binding),
        0,
        1,
        is_ubo ? VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        NULL,
        &infos[nw],
        NULL};
    nw++;
  }
  d->f.vkUpdateDescriptorSets(d->dev, nw, writes, 0, NULL);
  d->f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipeline);
  d->f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk->layout, 0, 1, &set, 0,
                               NULL);
  if (k->scalar_location == RT_SCALARS_PUSH_CONSTANT && k->scalar_bytes)
    d->f.vkCmdPushConstants(cmd, vk->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                            (k->scalar_bytes + 3) & ~3u, block);
  d->f.vkCmdDispatch(cmd, l->grid[0], l->grid[1], l->grid[2]);
  if (ubo.buf && rep)
    rep->ubos[rep->nubos++] = ubo;
  else if (ubo.buf)
    mem_free_later(d, &ubo);
  return NULL;
}

/* Records the logged launches into the batch's command buffer (the log is kept: its owner
 * empties it). */
static rx_status record_log(vk_device *d) {
  for (size_t i = 0; i < d->replay.log.n; i++) {
    RX_RETURN_IF_ERROR(open_cmd(d));
    RX_RETURN_IF_ERROR(record_launch(d, d->cmd, i, VK_NULL_HANDLE, NULL));
    d->ncommands++;
  }
  return NULL;
}

/* ---- batches recorded for replay ---- */
static void replay_destroy(void *ctx, void *impl) {
  vk_device *d = ctx;
  vk_replay *rep = impl;
  if (rep->cmd) d->f.vkFreeCommandBuffers(d->dev, d->cmdpool, 1, &rep->cmd);
  if (rep->pool) d->f.vkDestroyDescriptorPool(d->dev, rep->pool, NULL);
  for (size_t i = 0; i < rep->nubos; i++) mem_free(d, &rep->ubos[i]);
  rt_free(&d->base.alloc, rep->ubos);
  rt_free(&d->base.alloc, rep);
}

/* Records the log into a command buffer of its own, e->impl (nothing of it is pending: the
 * device waits for every batch it submits). */
static rx_status replay_build_into(vk_device *d, vk_replay *rep) {
  const rt_replay_log *log = &d->replay.log;
  uint32_t nstorage = 0, nuniform = 0;
  for (size_t i = 0; i < log->n; i++) {
    const vk_kernel *vk = log->launches[i].k->impl;
    nstorage += vk->nstorage;
    nuniform += vk->nuniform;
  }
  rep->ubos = rt_alloc(&d->base.alloc, (nuniform + 1) * sizeof *rep->ubos);
  if (!rep->ubos) return rt_oom("a recorded batch", nuniform * sizeof *rep->ubos);
  VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, nstorage ? nstorage : 1},
                                   {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, nuniform}};
  VkDescriptorPoolCreateInfo pci = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                    NULL,
                                    0,
                                    (uint32_t)log->n,
                                    nuniform ? 2 : 1,
                                    sizes};
  VK_TRY(d, d->f.vkCreateDescriptorPool(d->dev, &pci, NULL, &rep->pool), "vkCreateDescriptorPool");
  VkCommandBufferAllocateInfo cbai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL,
                                      d->cmdpool, VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
  VK_TRY(d, d->f.vkAllocateCommandBuffers(d->dev, &cbai, &rep->cmd), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL, 0, NULL};
  VK_TRY(d, d->f.vkBeginCommandBuffer(rep->cmd, &bi), "vkBeginCommandBuffer");
  for (size_t i = 0; i < log->n; i++) {
    if (i) barrier(d, rep->cmd);
    RX_RETURN_IF_ERROR(record_launch(d, rep->cmd, i, rep->pool, rep));
  }
  host_barrier(d, rep->cmd);
  VK_TRY(d, d->f.vkEndCommandBuffer(rep->cmd), "vkEndCommandBuffer");
  return NULL;
}

static rx_status replay_build(vk_device *d, rt_replay_entry *e) {
  vk_replay *rep = rt_alloc(&d->base.alloc, sizeof *rep);
  if (!rep) return rt_oom("a recorded batch", sizeof *rep);
  rx_status s = replay_build_into(d, rep);
  if (s)
    replay_destroy(d, rep);
  else
    e->impl = rep;
  return s;
}

/* ---- timers ---- */
static rx_status vk_timer_init(rx_rt_timer *base) {
  vk_device *d = (vk_device *)base->device;
  for (uint32_t i = 0; i < NQUERIES / 2; i++)
    if (!d->qused[i]) {
      d->qused[i] = true;
      ((vk_timer *)base)->pair = i;
      return NULL;
    }
  return base_status_make(RX_ERR_OUT_OF_MEMORY, "vulkan: more than %d timers at once",
                          NQUERIES / 2);
}

static void vk_timer_destroy(rx_rt_timer *base) {
  vk_device *d = (vk_device *)base->device;
  if (d->recording) { /* the batch may still write the queries */
    rx_status s = vk_synchronize(&d->base);
    rx_status_free(s);
  }
  d->qused[((vk_timer *)base)->pair] = false;
}

static rx_status vk_timer_record(rx_rt_timer *base, int which) {
  vk_device *d = (vk_device *)base->device;
  uint32_t q = 2 * ((vk_timer *)base)->pair + (uint32_t)which;
  RX_RETURN_IF_ERROR(begin_cmd(d));
  d->f.vkCmdResetQueryPool(d->cmd, d->qpool, q, 1);
  d->f.vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->qpool, q);
  return NULL;
}

static rx_status vk_timer_elapsed(rx_rt_timer *base, double *out_ms) {
  vk_device *d = (vk_device *)base->device;
  RX_RETURN_IF_ERROR(vk_synchronize(&d->base));
  uint64_t ts[2] = {0, 0};
  VK_TRY(d,
         d->f.vkGetQueryPoolResults(d->dev, d->qpool, 2 * ((vk_timer *)base)->pair, 2, sizeof ts,
                                    ts, sizeof ts[0],
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
         "vkGetQueryPoolResults");
  uint64_t delta = ((ts[1] & d->ts_mask) - (ts[0] & d->ts_mask)) & d->ts_mask;
  *out_ms = (double)delta * d->ts_period_ns * 1e-6;
  return NULL;
}

const rt_backend rt_vulkan_backend = {
    vk_check,          vk_enumerate,      sizeof(vk_device), sizeof(vk_buffer), sizeof(vk_timer),
    vk_device_init,    vk_device_destroy, vk_synchronize,    vk_buffer_init,    vk_buffer_destroy,
    vk_buffer_write,   vk_buffer_read,    vk_buffer_fill,    vk_buffer_copy,    vk_kernel_create,
    vk_kernel_destroy, vk_launch,         vk_timer_init,     vk_timer_destroy,  vk_timer_record,
    vk_timer_elapsed,  vk_buffer_import,  vk_buffer_map,
};
