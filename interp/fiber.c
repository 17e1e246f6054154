/* Fibers on ucontext; see fiber.h. */
#define _GNU_SOURCE /* ucontext, MAP_ANONYMOUS */
#include "fiber.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define RX_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RX_FIBER_ASAN 1
#endif
#endif
#ifdef RX_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* Context switch: on x86-64 and AArch64 Linux a few instructions that save the callee-saved
 * registers on the stack and swap stack pointers (no system call, unlike swapcontext, which
 * saves the signal mask: ~20x faster, which matters when every thread of thousands of blocks
 * passes several barriers). Elsewhere ucontext. */
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#define RX_FIBER_ASM 1
/* Saves the current context's registers on its stack, stores its stack pointer in *save_sp,
 * and continues the context whose stack pointer is new_sp. */
void interp_fiber_switch_(void **save_sp, void *new_sp);
#if defined(__x86_64__)
__asm__(".text\n"
        ".p2align 4\n"
        ".globl interp_fiber_switch_\n"
        ".hidden interp_fiber_switch_\n"
        ".type interp_fiber_switch_, @function\n"
        "interp_fiber_switch_:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size interp_fiber_switch_, .-interp_fiber_switch_\n");
enum { SWITCH_FRAME = 8 * 8 }; /* fpu control, 6 registers, return address */
#else
__asm__(".text\n"
        ".p2align 4\n"
        ".globl interp_fiber_switch_\n"
        ".hidden interp_fiber_switch_\n"
        ".type interp_fiber_switch_, %function\n"
        "interp_fiber_switch_:\n"
        "  sub sp, sp, #176\n"
        "  stp x19, x20, [sp, #0]\n"
        "  stp x21, x22, [sp, #16]\n"
        "  stp x23, x24, [sp, #32]\n"
        "  stp x25, x26, [sp, #48]\n"
        "  stp x27, x28, [sp, #64]\n"
        "  stp x29, x30, [sp, #80]\n"
        "  stp d8, d9, [sp, #96]\n"
        "  stp d10, d11, [sp, #112]\n"
        "  stp d12, d13, [sp, #128]\n"
        "  stp d14, d15, [sp, #144]\n"
        "  mov x9, sp\n"
        "  str x9, [x0]\n"
        "  mov sp, x1\n"
        "  ldp x19, x20, [sp, #0]\n"
        "  ldp x21, x22, [sp, #16]\n"
        "  ldp x23, x24, [sp, #32]\n"
        "  ldp x25, x26, [sp, #48]\n"
        "  ldp x27, x28, [sp, #64]\n"
        "  ldp x29, x30, [sp, #80]\n"
        "  ldp d8, d9, [sp, #96]\n"
        "  ldp d10, d11, [sp, #112]\n"
        "  ldp d12, d13, [sp, #128]\n"
        "  ldp d14, d15, [sp, #144]\n"
        "  add sp, sp, #176\n"
        "  ret\n"
        ".size interp_fiber_switch_, .-interp_fiber_switch_\n");
enum { SWITCH_FRAME = 176 };
#endif
#endif

struct rx_fiber {
#ifdef RX_FIBER_ASM
  void *sp;        /* the fiber's saved stack pointer */
  void *caller_sp; /* the resumer's */
#else
  ucontext_t ctx;    /* the fiber's own context */
  ucontext_t caller; /* where interp_fiber_yield (and the end of fn) returns to */
#endif
  void *map; /* mapping: guard page, then the stack */
  size_t map_size;
  char *stack; /* lowest address of the usable stack */
  size_t stack_size;
  rx_fiber_fn fn;
  void *arg;
  bool done;
#ifdef RX_FIBER_ASAN
  void *fake_stack;          /* ASan's fake stack of the fiber while it is switched out */
  const void *caller_bottom; /* the resumer's stack, for switching back */
  size_t caller_size;
#endif
};

/* The fiber being entered (read by fiber_main on first entry). One per OS thread. */
static _Thread_local rx_fiber *entering;

static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

rx_fiber *interp_fiber_new(size_t stack_size) {
  size_t pg = page_size();
  size_t sz = (stack_size + pg - 1) / pg * pg;
  size_t total = sz + pg;
  void *map =
      mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return NULL;
  /* stacks grow down: the guard page is the lowest page */
  if (mprotect(map, pg, PROT_NONE) != 0) {
    munmap(map, total);
    return NULL;
  }
  rx_fiber *f = base_calloc(1, sizeof *f);
  f->map = map;
  f->map_size = total;
  f->stack = (char *)map + pg;
  f->stack_size = sz;
  f->done = true;
  return f;
}

void interp_fiber_free(rx_fiber *f) {
  if (!f) return;
#ifdef RX_FIBER_ASAN
  /* frames abandoned on this stack leave poisoned shadow behind; clear it before the memory
   * goes back to the system and is mapped again elsewhere */
  ASAN_UNPOISON_MEMORY_REGION(f->stack, f->stack_size);
#endif
  munmap(f->map, f->map_size);
  free(f);
}

static void fiber_main(void) {
  rx_fiber *f = entering;
#ifdef RX_FIBER_ASAN
  __sanitizer_finish_switch_fiber(NULL, &f->caller_bottom, &f->caller_size);
#endif
  f->fn(f->arg);
  f->done = true;
#ifdef RX_FIBER_ASAN
  /* NULL: this fiber's fake stack is not needed any more */
  __sanitizer_start_switch_fiber(NULL, f->caller_bottom, f->caller_size);
#endif
#ifdef RX_FIBER_ASM
  interp_fiber_switch_(&f->sp, f->caller_sp);
#else
  setcontext(&f->caller);
#endif
  /* a finished fiber is never resumed */
  base_panic(__FILE__, __LINE__, "finished fiber resumed");
}

void interp_fiber_start(rx_fiber *f, rx_fiber_fn fn, void *arg) {
#ifdef RX_FIBER_ASAN
  ASAN_UNPOISON_MEMORY_REGION(f->stack, f->stack_size);
  f->fake_stack = NULL;
#endif
#ifdef RX_FIBER_ASM
  /* a frame as interp_fiber_switch_ leaves it, "returning" into fiber_main with the stack aligned
   * as right after a call */
  uintptr_t top = ((uintptr_t)f->stack + f->stack_size) & ~(uintptr_t)15;
  void (*entry)(void) = fiber_main;
#if defined(__x86_64__)
  /* sp[0]: mxcsr and x87 control word, sp[8..48]: r15 r14 r13 r12 rbx rbp, sp[56]: return
   * address; fiber_main then starts with rsp = top - 8 (rsp + 8 16-byte aligned) */
  char *sp = (char *)(top - SWITCH_FRAME - 8);
  memset(sp, 0, SWITCH_FRAME + 8);
  uint32_t mxcsr = 0x1f80; /* all exceptions masked, round to nearest */
  uint16_t fpucw = 0x037f;
  memcpy(sp, &mxcsr, 4);
  memcpy(sp + 4, &fpucw, 2);
  memcpy(sp + 56, &entry, sizeof entry);
#else
  /* x19..x28, x29 (frame pointer 0: end of the chain), x30 = fiber_main, d8..d15 */
  char *sp = (char *)(top - SWITCH_FRAME);
  memset(sp, 0, SWITCH_FRAME);
  memcpy(sp + 88, &entry, sizeof entry);
#endif
  f->sp = sp;
#else
  RX_ASSERT(getcontext(&f->ctx) == 0);
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = f->stack_size;
  f->ctx.uc_link = NULL;
  makecontext(&f->ctx, fiber_main, 0);
#endif
  f->fn = fn;
  f->arg = arg;
  f->done = false;
}

void interp_fiber_resume(rx_fiber *f) {
  RX_ASSERT(!f->done);
#ifdef RX_FIBER_ASAN
  void *fake = NULL;
  __sanitizer_start_switch_fiber(&fake, f->stack, f->stack_size);
#endif
  entering = f;
#ifdef RX_FIBER_ASM
  interp_fiber_switch_(&f->caller_sp, f->sp);
#else
  RX_ASSERT(swapcontext(&f->caller, &f->ctx) == 0);
#endif
#ifdef RX_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

void interp_fiber_yield(rx_fiber *f) {
#ifdef RX_FIBER_ASAN
  __sanitizer_start_switch_fiber(&f->fake_stack, f->caller_bottom, f->caller_size);
#endif
#ifdef RX_FIBER_ASM
  interp_fiber_switch_(&f->sp, f->caller_sp);
#else
  RX_ASSERT(swapcontext(&f->ctx, &f->caller) == 0);
#endif
#ifdef RX_FIBER_ASAN
  __sanitizer_finish_switch_fiber(f->fake_stack, &f->caller_bottom, &f->caller_size);
#endif
}

bool interp_fiber_done(const rx_fiber *f) { return f->done; }
