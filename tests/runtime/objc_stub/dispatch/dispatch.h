/* tests/runtime/objc_stub/dispatch/dispatch.h: the part of Apple's <dispatch/dispatch.h>
 * (object.h, queue.h, data.h) that runtime/metal/metal.c uses, as declared for C
 * (OS_OBJECT_USE_OBJC 0); see ../README.md. */
#ifndef RX_STUB_DISPATCH_DISPATCH_H
#define RX_STUB_DISPATCH_DISPATCH_H

#include <stddef.h>

/* DISPATCH_DECL(name): typedef struct name##_s *name##_t */
typedef struct dispatch_queue_s *dispatch_queue_t;
typedef struct dispatch_data_s *dispatch_data_t;

typedef union {
  struct _os_object_s *_os_obj;
  struct dispatch_object_s *_do;
  struct dispatch_queue_s *_dq;
  struct dispatch_data_s *_ddata;
} dispatch_object_t __attribute__((__transparent_union__));

void dispatch_release(dispatch_object_t object);

#ifdef __BLOCKS__
typedef void (^dispatch_block_t)(void);
#else
/* GCC has no blocks; the SDK then declares no dispatch_data_create at all (see ../README.md) */
typedef struct rx_stub_block *dispatch_block_t;
#endif

#define DISPATCH_DATA_DESTRUCTOR_DEFAULT NULL

__attribute__((__warn_unused_result__)) dispatch_data_t
dispatch_data_create(const void *buffer, size_t size, dispatch_queue_t queue,
                     dispatch_block_t destructor);

#endif
