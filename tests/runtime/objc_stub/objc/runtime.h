/* tests/runtime/objc_stub/objc/runtime.h: the part of Apple's <objc/runtime.h> that
 * runtime/metal/metal.c uses (see ../README.md). */
#ifndef RX_STUB_OBJC_RUNTIME_H
#define RX_STUB_OBJC_RUNTIME_H

#include <objc/objc.h>

id objc_getClass(const char *name); /* returns id, not Class, in the SDK */

#endif
