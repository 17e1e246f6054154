/* tests/runtime/objc_stub/objc/message.h: the part of Apple's <objc/message.h> that
 * runtime/metal/metal.c uses (see ../README.md). */
#ifndef RX_STUB_OBJC_MESSAGE_H
#define RX_STUB_OBJC_MESSAGE_H

#include <objc/objc.h>
#include <objc/runtime.h>

#ifndef OBJC_OLD_DISPATCH_PROTOTYPES
#define OBJC_OLD_DISPATCH_PROTOTYPES 0 /* objc-api.h: 0 unless Swift; always 0 on arm64 */
#endif

#if !OBJC_OLD_DISPATCH_PROTOTYPES
/* must be cast to the function type of each message before it is called */
void objc_msgSend(void /* id self, SEL op, ... */);
#else
id objc_msgSend(id self, SEL op, ...);
#endif

#endif
