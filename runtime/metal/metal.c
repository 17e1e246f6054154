/* runtime/metal/metal.c: the Metal backend of the device interface, in C over the Objective-C
 * runtime (objc_msgSend cast to the signature of each message), so the runtime stays a C
 * library. Linked into the runtime on Apple platforms only; on Linux runtime/runtime.cmake
 * compiles it (never links it) against tests/runtime/objc_stub, the SDK's declarations it uses,
 * with the usual -Werror, so that it keeps compiling where Metal does not exist.
 *
 * NOT YET RUN: it was written on Linux, where neither Metal nor the Objective-C runtime exists.
 * The first build on macOS must run the Vulkan tests' kernels through it (see the runtime report
 * in issue 4).
 *
 * - Buffers: MTLResourceStorageModeShared (unified memory on Apple GPUs): writes and reads are
 *   memcpy after waiting for queued work; fills and copies are blit commands.
 * - Batching: one command buffer per batch (committed and waited by synchronize), one serial
 *   compute encoder reused across consecutive launches (dispatches of a serial encoder see each
 *   other's writes), a blit encoder for fills and copies.
 * - Kernels: newLibraryWithData (metallib, `binary`) or newLibraryWithSource (MSL, `source`),
 *   a pipeline per kernel; buffers at [[buffer(binding)]], the symbolic values as one struct
 *   set with setBytes at [[buffer(scalars.binding)]].
 * - Timers: Metal has no timestamps inside a command buffer without counter sample buffers; a
 *   timer measures the GPU time (GPUEndTime - GPUStartTime) of the command buffers committed
 *   between start and stop, each of which ends the current batch. */
#if defined(__APPLE__)
#include <TargetConditionals.h>
#endif
#include <dispatch/dispatch.h>
#include <objc/message.h>
#include <objc/runtime.h>
#include <stdio.h>
#include <string.h>

#include "runtime/device.h"

typedef unsigned long NSUInteger;
typedef struct MTLSize {
  NSUInteger width, height, depth;
} MTLSize;
typedef struct NSRange {
  NSUInteger location, length;
} NSRange;

extern id MTLCreateSystemDefaultDevice(void);
/* MTLCopyAllDevices exists on macOS only: iOS, iPadOS, tvOS and visionOS have one GPU, and their
 * Metal.framework has no such symbol (a reference to it fails the link; docs/mobile.md). Not
 * Apple (the compile check against tests/runtime/objc_stub): as on macOS. */
#if !defined(TARGET_OS_OSX) || TARGET_OS_OSX
#define MT_ALL_DEVICES 1
extern id MTLCopyAllDevices(void); /* NSArray<id<MTLDevice>>, retained */
#else
#define MT_ALL_DEVICES 0
#endif
extern void *objc_autoreleasePoolPush(void);
extern void objc_autoreleasePoolPop(void *pool);

/* Typed message sends: MSG(ret, arg types...)(receiver, sel, args...). objc_msgSend is called
 * through a pointer of each message's own type (never its declared one: `void (void)`, or
 * `id (id, SEL, ...)` with OBJC_OLD_DISPATCH_PROTOTYPES). The address comes from a function:
 * GCC warns about a cast-and-call of a function (or a constant holding it) of another type,
 * "function called through a non-compatible type". */
static void (*msg_send(void))(void) { return (void (*)(void))objc_msgSend; }
#define MSG(ret, ...) ((ret(*)(id, SEL, ##__VA_ARGS__))msg_send())
#define SELN(s)       sel_registerName(s)

static void release(id o) {
  if (o) MSG(void)(o, SELN("release"));
}

static const char *ns_utf8(id s) { return s ? MSG(const char *)(s, SELN("UTF8String")) : ""; }

static id ns_string(const char *s) {
  return MSG(id, const char *)((id)objc_getClass("NSString"), SELN("stringWithUTF8String:"), s);
}

static const char *err_text(id err) {
  return err ? ns_utf8(MSG(id)(err, SELN("localizedDescription"))) : "unknown error";
}

typedef struct mt_device {
  rx_rt_device base;
  id dev, queue;
  id cmd;             /* the batch's command buffer (retained), nil when none */
  id compute;         /* the open compute encoder of cmd (retained), or nil */
  id blit;            /* the open blit encoder of cmd (retained), or nil */
  double gpu_seconds; /* GPU time of every completed batch */
} mt_device;

typedef struct mt_buffer {
  rx_rt_buffer base;
  id buf;
  uint8_t *contents;
} mt_buffer;

typedef struct mt_timer {
  rx_rt_timer base;
  double at[2];
} mt_timer;

typedef struct mt_kernel {
  id lib, fn, pipeline;
} mt_kernel;

static rx_status mt_check(void) {
  void *pool = objc_autoreleasePoolPush();
  id dev = MTLCreateSystemDefaultDevice();
  rx_status s = dev ? NULL
                    : base_status_make(RX_ERR_NOT_FOUND, "metal: MTLCreateSystemDefaultDevice "
                                                         "returned no device");
  release(dev);
  objc_autoreleasePoolPop(pool);
  return s;
}

static id device_at(int index) {
  id dev = nil;
#if MT_ALL_DEVICES
  id all = MTLCopyAllDevices();
  if (all && (NSUInteger)index < MSG(NSUInteger)(all, SELN("count"))) {
    dev = MSG(id, NSUInteger)(all, SELN("objectAtIndex:"), (NSUInteger)index);
    MSG(id)(dev, SELN("retain"));
  }
  release(all);
#endif
  if (!dev && index == 0) dev = MTLCreateSystemDefaultDevice(); /* iOS: the one device */
  return dev;
}

static void fill_info(id dev, int index, rx_rt_device_info *info) {
  memset(info, 0, sizeof *info);
  info->backend = RX_RT_BACKEND_METAL;
  info->index = index;
  snprintf(info->name, sizeof info->name, "%s", ns_utf8(MSG(id)(dev, SELN("name"))));
  info->memory_bytes = MSG(uint64_t)(dev, SELN("recommendedMaxWorkingSetSize"));
  info->shared_memory_bytes = (uint32_t)MSG(NSUInteger)(dev, SELN("maxThreadgroupMemoryLength"));
  info->subgroup_size = 32; /* SIMD-group width of Apple GPUs; pipelines report theirs */
  info->max_threads_per_block = 1024;
  info->fp16 = true;
  info->int8 = true;
  info->timestamps = true;
  info->unified_memory = true;
}

static rx_status mt_enumerate(rx_rt_device_info **out_infos, size_t *out_count,
                              const rx_rt_allocator *a) {
  void *pool = objc_autoreleasePoolPush();
  size_t n = 0;
  while (n < 64) {
    id d = device_at((int)n);
    if (!d) break;
    release(d);
    n++;
  }
  rx_status s = NULL;
  if (n) {
    rx_rt_device_info *infos = rt_alloc(a, n * sizeof *infos);
    if (!infos) s = rt_oom("device infos", n * sizeof *infos);
    for (size_t i = 0; infos && i < n; i++) {
      id d = device_at((int)i);
      if (d) fill_info(d, (int)i, &infos[i]);
      release(d);
    }
    *out_infos = infos;
    *out_count = infos ? n : 0;
  }
  objc_autoreleasePoolPop(pool);
  return s;
}

static rx_status mt_device_init(rx_rt_device *base, int index, const rx_rt_device_options *opts) {
  (void)opts;
  mt_device *d = (mt_device *)base;
  d->dev = device_at(index);
  if (!d->dev) return base_status_make(RX_ERR_NOT_FOUND, "metal:%d: no such Metal device", index);
  fill_info(d->dev, index, &d->base.info);
  d->queue = MSG(id)(d->dev, SELN("newCommandQueue"));
  if (!d->queue) return base_status_make(RX_ERR_DEVICE, "metal:%d: newCommandQueue failed", index);
  return NULL;
}

static void end_encoders(mt_device *d) {
  if (d->compute) {
    MSG(void)(d->compute, SELN("endEncoding"));
    release(d->compute);
    d->compute = nil;
  }
  if (d->blit) {
    MSG(void)(d->blit, SELN("endEncoding"));
    release(d->blit);
    d->blit = nil;
  }
}

static rx_status mt_synchronize(rx_rt_device *base) {
  mt_device *d = (mt_device *)base;
  if (!d->cmd) return NULL;
  end_encoders(d);
  MSG(void)(d->cmd, SELN("commit"));
  MSG(void)(d->cmd, SELN("waitUntilCompleted"));
  long status = MSG(long)(d->cmd, SELN("status"));
  rx_status s = NULL;
  if (status == 5 /* MTLCommandBufferStatusError */) {
    s = base_status_make(RX_ERR_DEVICE, "metal:%d (%s): the command buffer failed: %s",
                         d->base.info.index, d->base.info.name,
                         err_text(MSG(id)(d->cmd, SELN("error"))));
  } else {
    d->gpu_seconds +=
        MSG(double)(d->cmd, SELN("GPUEndTime")) - MSG(double)(d->cmd, SELN("GPUStartTime"));
  }
  release(d->cmd);
  d->cmd = nil;
  return s;
}

static void mt_device_destroy(rx_rt_device *base) {
  mt_device *d = (mt_device *)base;
  rx_status_free(mt_synchronize(base));
  release(d->queue);
  release(d->dev);
}

static rx_status ensure_cmd(mt_device *d) {
  if (d->cmd) return NULL;
  void *pool = objc_autoreleasePoolPush();
  d->cmd = MSG(id)(d->queue, SELN("commandBuffer"));
  if (d->cmd) MSG(id)(d->cmd, SELN("retain"));
  objc_autoreleasePoolPop(pool);
  if (!d->cmd) return base_status_make(RX_ERR_DEVICE, "metal: commandBuffer failed");
  return NULL;
}

static rx_status blit_encoder(mt_device *d) {
  RX_RETURN_IF_ERROR(ensure_cmd(d));
  if (d->blit) return NULL;
  end_encoders(d);
  void *pool = objc_autoreleasePoolPush();
  d->blit = MSG(id)(d->cmd, SELN("blitCommandEncoder"));
  if (d->blit) MSG(id)(d->blit, SELN("retain"));
  objc_autoreleasePoolPop(pool);
  return d->blit ? NULL : base_status_make(RX_ERR_DEVICE, "metal: blitCommandEncoder failed");
}

static rx_status compute_encoder(mt_device *d) {
  RX_RETURN_IF_ERROR(ensure_cmd(d));
  if (d->compute) return NULL;
  end_encoders(d);
  void *pool = objc_autoreleasePoolPush();
  d->compute = MSG(id)(d->cmd, SELN("computeCommandEncoder"));
  if (d->compute) MSG(id)(d->compute, SELN("retain"));
  objc_autoreleasePoolPop(pool);
  return d->compute ? NULL : base_status_make(RX_ERR_DEVICE, "metal: computeCommandEncoder failed");
}

static rx_status mt_buffer_init(rx_rt_buffer *base) {
  mt_device *d = (mt_device *)base->device;
  mt_buffer *b = (mt_buffer *)base;
  b->buf = MSG(id, NSUInteger, NSUInteger)(d->dev, SELN("newBufferWithLength:options:"),
                                           (NSUInteger)base->size, 0 /* StorageModeShared */);
  if (!b->buf)
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "metal:%d (%s): out of device memory allocating "
                            "%zu bytes",
                            d->base.info.index, d->base.info.name, base->size);
  b->contents = MSG(void *)(b->buf, SELN("contents"));
  return NULL;
}

static void mt_buffer_destroy(rx_rt_buffer *base) {
  /* a command buffer retains the buffers it uses: releasing ours is safe while queued */
  release(((mt_buffer *)base)->buf);
}

static rx_status mt_buffer_write(rx_rt_buffer *base, size_t off, const void *src, size_t n) {
  RX_RETURN_IF_ERROR(mt_synchronize(base->device));
  memcpy(((mt_buffer *)base)->contents + off, src, n);
  return NULL;
}

static rx_status mt_buffer_read(rx_rt_buffer *base, size_t off, void *dst, size_t n) {
  RX_RETURN_IF_ERROR(mt_synchronize(base->device));
  memcpy(dst, ((mt_buffer *)base)->contents + off, n);
  return NULL;
}

static rx_status mt_buffer_fill(rx_rt_buffer *base, size_t off, size_t n, uint8_t value) {
  mt_device *d = (mt_device *)base->device;
  RX_RETURN_IF_ERROR(blit_encoder(d));
  NSRange r = {off, n};
  MSG(void, id, NSRange, uint8_t)
  (d->blit, SELN("fillBuffer:range:value:"), ((mt_buffer *)base)->buf, r, value);
  return NULL;
}

static rx_status mt_buffer_copy(rx_rt_buffer *src, size_t so, rx_rt_buffer *dst, size_t dof,
                                size_t n) {
  mt_device *d = (mt_device *)src->device;
  RX_RETURN_IF_ERROR(blit_encoder(d));
  MSG(void, id, NSUInteger, id, NSUInteger, NSUInteger)
  (d->blit, SELN("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:"),
   ((mt_buffer *)src)->buf, so, ((mt_buffer *)dst)->buf, dof, n);
  return NULL;
}

static void mt_kernel_destroy(rx_rt_device *base, rx_rt_kernel *k) {
  mt_kernel *mk = k->impl;
  if (!mk) return;
  release(mk->pipeline);
  release(mk->fn);
  release(mk->lib);
  rt_free(&base->alloc, mk);
  k->impl = NULL;
}

static rx_status mt_kernel_create(rx_rt_device *base, rx_rt_kernel *k) {
  mt_device *d = (mt_device *)base;
  if (k->scalar_location != RT_SCALARS_NONE && k->scalar_location != RT_SCALARS_BUFFER)
    return base_status_make(RX_ERR_INVALID, "scalars.location must be buffer for Metal");
  mt_kernel *mk = rt_alloc(&base->alloc, sizeof *mk);
  if (!mk) return rt_oom("a kernel", sizeof *mk);
  k->impl = mk;
  void *pool = objc_autoreleasePoolPush();
  id err = nil;
  rx_status s = NULL;
  if (k->binary) {
    dispatch_data_t data =
        dispatch_data_create(k->binary, k->binary_size, NULL, DISPATCH_DATA_DESTRUCTOR_DEFAULT);
    mk->lib = MSG(id, dispatch_data_t, id *)(d->dev, SELN("newLibraryWithData:error:"), data, &err);
    dispatch_release(data);
  } else {
    mk->lib = MSG(id, id, id, id *)(d->dev, SELN("newLibraryWithSource:options:error:"),
                                    ns_string((const char *)k->source), nil, &err);
  }
  if (!mk->lib) {
    s = base_status_make(RX_ERR_INVALID, "Metal library: %s", err_text(err));
  } else {
    mk->fn = MSG(id, id)(mk->lib, SELN("newFunctionWithName:"), ns_string(k->name));
    if (!mk->fn) {
      s = base_status_make(RX_ERR_NOT_FOUND, "the Metal library has no kernel function '%s'",
                           k->name);
    } else {
      mk->pipeline = MSG(id, id, id *)(d->dev, SELN("newComputePipelineStateWithFunction:error:"),
                                       mk->fn, &err);
      if (!mk->pipeline)
        s = base_status_make(RX_ERR_DEVICE, "Metal pipeline: %s", err_text(err));
      else if (MSG(NSUInteger)(mk->pipeline, SELN("maxTotalThreadsPerThreadgroup")) <
               (NSUInteger)k->block[0] * k->block[1] * k->block[2])
        s = base_status_make(RX_ERR_UNSUPPORTED,
                             "block of %u threads exceeds the pipeline's "
                             "maxTotalThreadsPerThreadgroup",
                             k->block[0] * k->block[1] * k->block[2]);
      else if (k->subgroup_size && /* its simd_* operations assume that SIMD-group width */
               MSG(NSUInteger)(mk->pipeline, SELN("threadExecutionWidth")) != k->subgroup_size)
        s = base_status_make(
            RX_ERR_UNSUPPORTED,
            "kernel '%s' was scheduled for SIMD groups of %u threads; the "
            "pipeline's threadExecutionWidth is %lu",
            k->name, k->subgroup_size,
            (unsigned long)MSG(NSUInteger)(mk->pipeline, SELN("threadExecutionWidth")));
    }
  }
  objc_autoreleasePoolPop(pool);
  if (s) mt_kernel_destroy(base, k);
  return s;
}

static rx_status mt_launch(rx_rt_device *base, rx_rt_kernel *k, const rx_rt_launch_params *p) {
  mt_device *d = (mt_device *)base;
  mt_kernel *mk = k->impl;
  RX_RETURN_IF_ERROR(compute_encoder(d));
  MSG(void, id)(d->compute, SELN("setComputePipelineState:"), mk->pipeline);
  for (size_t i = 0; i < k->nbuffers; i++) MSG(void, id, NSUInteger, NSUInteger)
  (d->compute, SELN("setBuffer:offset:atIndex:"), ((mt_buffer *)p->buffers[i])->buf, 0,
   (NSUInteger)k->buffers[i].binding);
  if (k->scalar_location == RT_SCALARS_BUFFER && k->scalar_bytes) {
    uint8_t block[4096];
    if (k->scalar_bytes > sizeof block)
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "kernel '%s': more than 4 KiB of symbolic values "
                              "(setBytes)",
                              k->name);
    memset(block, 0, k->scalar_bytes);
    for (size_t i = 0; i < k->nscalars; i++)
      memcpy(block + k->scalars[i].offset, &p->scalars[i], sizeof(int32_t));
    MSG(void, const void *, NSUInteger, NSUInteger)
    (d->compute, SELN("setBytes:length:atIndex:"), block, k->scalar_bytes,
     (NSUInteger)k->scalar_binding);
  }
  MTLSize grid = {p->grid[0], p->grid[1], p->grid[2]};
  MTLSize block = {p->block[0], p->block[1], p->block[2]};
  MSG(void, MTLSize, MTLSize)
  (d->compute, SELN("dispatchThreadgroups:threadsPerThreadgroup:"), grid, block);
  return NULL;
}

static rx_status mt_timer_init(rx_rt_timer *base) {
  (void)base;
  return NULL;
}
static void mt_timer_destroy(rx_rt_timer *base) { (void)base; }

static rx_status mt_timer_record(rx_rt_timer *base, int which) {
  mt_device *d = (mt_device *)base->device;
  RX_RETURN_IF_ERROR(mt_synchronize(&d->base)); /* the batch ends at the timer */
  ((mt_timer *)base)->at[which] = d->gpu_seconds;
  return NULL;
}

static rx_status mt_timer_elapsed(rx_rt_timer *base, double *out_ms) {
  mt_timer *t = (mt_timer *)base;
  *out_ms = (t->at[1] - t->at[0]) * 1e3;
  return NULL;
}

const rt_backend rt_metal_backend = {
    mt_check,
    mt_enumerate,
    sizeof(mt_device),
    sizeof(mt_buffer),
    sizeof(mt_timer),
    mt_device_init,
    mt_device_destroy,
    mt_synchronize,
    mt_buffer_init,
    mt_buffer_destroy,
    mt_buffer_write,
    mt_buffer_read,
    mt_buffer_fill,
    mt_buffer_copy,
    mt_kernel_create,
    mt_kernel_destroy,
    mt_launch,
    mt_timer_init,
    mt_timer_destroy,
    mt_timer_record,
    mt_timer_elapsed,
    NULL,
    NULL,
};
