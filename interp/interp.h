/* interp: the reference interpreter of tensor programs (the loop IR of ir.h).
 *
 * The oracle for every schedule and every backend: it runs a tensor program, scheduled or not,
 * on host memory, simulating what a GPU does with it, and reports anything a GPU would leave
 * undefined as an error instead of a wrong number.
 *
 *   rx_interp_arg args[3] = {
 *       {.data = a, .ndim = 2, .shape = {n, 4}, .dtype = RX_DTYPE_F32},
 *       {.data = b, .ndim = 2, .shape = {n, 4}, .dtype = RX_DTYPE_F32},
 *       {.data = c, .ndim = 2, .shape = {n, 4}, .dtype = RX_DTYPE_F32},
 *   };
 *   rx_status s = rx_interp_run(m, rx_module_tensor_fn(m, "add"), args, 3, NULL);
 *
 * Semantics (the contract the schedules and code generators are checked against):
 *
 * Arguments. One rx_interp_arg per parameter, in parameter order. A buffer argument gives host
 * memory in the dtype's storage (f32 as float, f16/bf16 as uint16_t bits, integers as their C
 * types, bool as uint8_t 0/1), row-major and contiguous, its extents and its dtype (which must
 * equal the parameter's). A scalar parameter (i64/i32) takes `value` (an i32 parameter must fit
 * in 32 bits). Symbolic variables are bound from the scalar parameters, then from every buffer
 * dimension that is a whole variable (the first such dimension binds it); then every dimension
 * is evaluated and must equal the argument's extent, and every `where` fact must hold. Each
 * violation is an error naming the program, the parameter, the dimension, expected and actual.
 *
 * Values. f32 is computed as C float. f16 and bf16 are computed in float and rounded to the
 * dtype (round to nearest even, subnormals, inf and nan handled) after every operation, as GPU
 * half arithmetic does. f64 is computed as C double. Integers keep their width: arithmetic
 * wraps around (computed in uint64_t, truncated), `//` and `%` are floor division and floor
 * modulo (`/` on integers truncates, as in C; on unsigned dtypes all three are C's unsigned
 * division and modulo); division or modulo by zero is an error. u8/u16/u32/u64 are unsigned in
 * comparisons, min/max and conversions, u64 over its whole range (to 2^64 - 1). Index arithmetic
 * (symbolic expressions: loop and symbolic variables) is 64-bit and reports overflow as an error.
 * `select`, `&&` and `||` evaluate lazily, as the emitted C-like code does (a guarded load in an
 * untaken branch is not executed).
 * Casts: float to integer truncates toward zero and SATURATES to the target's range, NaN gives 0
 * (the behaviour of CUDA's cvt.rzi.sat); integer to integer wraps; anything to bool is `!= 0`;
 * integer to f16/bf16 goes through f32 (exact for |x| < 2^24); f64 to f16/bf16 rounds through
 * f32 (twice, as the printers do).
 * Intrinsics: the C float functions (expf, erff, ...; f64: exp, erf, ...); sigmoid = 1/(1+exp(-x)),
 * rsqrt = 1/sqrt(x); min/max on floats are fminf/fmaxf (a NaN operand loses), abs/min/max on
 * integers are signed (unsigned for the unsigned dtypes and bool; abs of those is the value).
 *
 * Memory. Every load and store is bounds-checked against the buffer's shape; an out-of-bounds
 * access is an error naming the buffer, the indices and the shape. Allocations are zero-filled:
 * `global` and `shared` allocations exist once per block and alloc statement (allocated and
 * zeroed by the first thread that reaches the statement; later executions reuse the memory;
 * outside blockIdx loops the whole program is one block); `local` allocations are per thread and
 * zeroed every time the statement executes.
 *
 * Parallelism. Loops bound to blockIdx.* iterate over blocks in order. The body of an innermost
 * blockIdx loop (or, in a program without blockIdx loops, the whole body) is a block: its
 * threads run concurrently, each executing the whole body with its own variables. The block
 * size along threadIdx.{x,y,z} is the largest extent of the loops bound to that axis in the
 * block (at least 1; those extents may only use symbolic and blockIdx variables); a loop bound
 * to threadIdx.x does not iterate: it binds its variable to lo + the thread's x index and runs
 * its body only when that index is below its extent. Statements outside thread loops run in
 * every thread. At most opts->max_threads_per_block threads per block.
 * `barrier`: a thread waits until every thread of the block is at the same barrier statement;
 * a thread that finishes, or waits at a different barrier, while others wait is a
 * barrier-divergence error (never a hang). Subgroup reductions: lanes are consecutive linear
 * thread ids (x fastest, then y, then z) in groups of opts->subgroup_size; every lane of the
 * subgroup must reach the same subgroup operation (they wait for each other), then each gets the
 * reduction over all lanes in lane order (floats: rounded after each step). A lane that has
 * exited or waits elsewhere is an error. In a one-thread block a subgroup op returns its operand
 * and a barrier does nothing. Threads are scheduled deterministically (round robin by linear id,
 * each running until it blocks); blocks without barriers or subgroup ops run their threads one
 * after the other.
 * Reductions (`reduce`): init runs once, then update for every point of the reduction ranges in
 * row-major order.
 *
 * Threads are fibers (interp/fiber.h: mmap'd stacks with a guard page, a register-saving switch
 * on x86-64/AArch64 Linux and ucontext elsewhere, AddressSanitizer fiber annotations): one OS
 * thread, deterministic, and a suspended thread costs only its stack. The program itself also
 * runs on a fiber whose stack is sized from its nesting depth (so deep expressions cannot
 * overflow the caller's stack), with the default floating-point environment (round to nearest,
 * no flush-to-zero) whatever the caller's is. Programs nested deeper than 16384 levels are
 * rejected with RX_ERR_UNSUPPORTED. */
#ifndef RX_INTERP_H
#define RX_INTERP_H

#include "../ir/ir.h"

#ifndef RX_MAX_NDIM
#define RX_MAX_NDIM 8 /* most dimensions of a buffer */
#endif

typedef struct rx_interp_arg {
  /* buffer parameters */
  void *data;                 /* host memory, row-major, in the dtype's storage; may be NULL
                                 only when the buffer has no elements */
  int64_t shape[RX_MAX_NDIM]; /* extents */
  int ndim;
  rx_dtype dtype; /* must equal the parameter's dtype */
  /* scalar parameters */
  int64_t value;
} rx_interp_arg;

typedef struct rx_interp_opts {
  int subgroup_size;         /* lanes per subgroup (32 on NVIDIA, 8 on lavapipe); 0: 32 */
  int64_t max_steps;         /* statements executed over all threads before giving up with an
                                error; 0: no limit */
  int max_threads_per_block; /* 0: 1024 */
  bool fragments;            /* `if has_fragments(...)` (ir.h) takes its then branch: the
                                matrix-unit form (the interpreter runs fragments of any shape);
                                false: the else branch, the portable form */
} rx_interp_opts;

/* Runs tensor program f of module m on args (nargs must equal f->nparams). opts may be NULL.
 * Output buffers are written in place. On any error (see above) returns a status whose message
 * names the program, the statement's source location and the values involved; buffers may then
 * be partly written. m may be NULL (it is not modified). */
rx_status rx_interp_run(rx_module *m, const rx_tensor_fn *f, rx_interp_arg *args, int nargs,
                        const rx_interp_opts *opts);

#endif
