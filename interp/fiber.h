/* fiber: cooperative user-level threads for the interpreter (interp.c runs a program on one,
 * exec.c the threads of a block).
 *
 * A fiber runs a function on its own mmap'd stack (with a PROT_NONE guard page below it) and is
 * switched to and from explicitly: interp_fiber_resume runs it until it calls interp_fiber_yield or
 * its function returns. Everything happens on the calling OS thread, so scheduling is
 * deterministic. A fiber may be abandoned while suspended (never resumed again) and restarted with
 * interp_fiber_start: its stack is simply reused. On x86-64 and AArch64 Linux a switch is a few
 * instructions (callee-saved registers and the stack pointer; no system call); elsewhere
 * ucontext. A new fiber starts with the default floating-point control state. Under
 * AddressSanitizer every switch is announced with __sanitizer_start/finish_switch_fiber and
 * reused stacks are unpoisoned, so ASan builds report no false positives. Fibers may resume
 * fibers (nesting). */
#ifndef RX_FIBER_H
#define RX_FIBER_H

#include "../base/base.h"

typedef struct rx_fiber rx_fiber;
typedef void (*rx_fiber_fn)(void *arg);

/* A fiber with a stack of stack_size bytes (rounded up to pages) plus a guard page. Returns
 * NULL when the stack cannot be mapped. */
rx_fiber *interp_fiber_new(size_t stack_size);
void interp_fiber_free(rx_fiber *f);
/* Prepares f to run fn(arg) from the start on its next resume (abandoning any suspended run). */
void interp_fiber_start(rx_fiber *f, rx_fiber_fn fn, void *arg);
/* Runs f (from outside any fiber) until it yields or its function returns. */
void interp_fiber_resume(rx_fiber *f);
/* From inside f: back to whoever resumed it. */
void interp_fiber_yield(rx_fiber *f);
/* True once f's function has returned (until the next interp_fiber_start). */
bool interp_fiber_done(const rx_fiber *f);

#endif
