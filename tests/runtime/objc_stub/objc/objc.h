/* tests/runtime/objc_stub/objc/objc.h: the part of Apple's <objc/objc.h> that
 * runtime/metal/metal.c uses (see ../README.md). */
#ifndef RX_STUB_OBJC_OBJC_H
#define RX_STUB_OBJC_OBJC_H

typedef struct objc_class *Class;
typedef struct objc_object *id;
typedef struct objc_selector *SEL;

#ifndef nil
#define nil ((void *)0) /* __DARWIN_NULL in C */
#endif

SEL sel_registerName(const char *str);

#endif
