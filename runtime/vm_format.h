/* The artifact (.rxm) and the host-program bytecode: the format the compiler writes
 * (driver/artifact.c, passes/lower_host.c) and the runtime reads (runtime/artifact.c,
 * runtime/vm.c). Owned by the runtime; the compiler includes this header, never the reverse.
 * docs/artifact.md describes the same format in prose. All integers little-endian.
 *
 * ---- the artifact file ----
 *   u32 magic 'RXM1' (0x314d5852), u32 version (RXM_VERSION), u32 section count, u32 zero,
 *   then per section: char name[64] (NUL-padded), u64 offset, u64 size, u32 crc32 (of the
 *   section's bytes, zlib polynomial), u32 zero; then the sections' bytes.
 * Sections:
 *   "manifest.json"          functions (params, results, facts as text), planned memory,
 *                            targets present, the compiler version
 *   "host.rxvm"              the host program (below)
 *   "<backend>/kernels.json" per backend compiled for ("vulkan", "cuda", "metal"): the kernel
 *                            description of docs/kernel-abi.md, all programs of the module
 *   "<backend>/<file>"       the binaries and sources that kernels.json names
 *   "batch_policy.fsm"       optional: the batcher's FSM table (runtime/autobatch_policy.h,
 *                            RT_ABP_SECTION; relaxc compile --batch-policy), checked at load
 *   "weights.safetensors"    optional: the weights, a safetensors image (RXM_WEIGHTS_SECTION,
 *                            the last section, starting RXM_WEIGHTS_ALIGN-aligned; or a side file
 *                            that manifest.json's "weights" names)
 * A reader rejects a wrong magic, an unknown version, a section outside the file or a CRC
 * mismatch with a clear error.
 *
 * ---- the host program (section host.rxvm) ----
 * A stream of u32 words:
 *   u32 magic 'RXVM' (0x4d565852), u32 version (RXVM_VERSION)
 *   u32 string count, then per string: u32 byte length, the bytes, zero-padded to 4
 *   u32 function count, then per function:
 *     u32 name (string id), u32 nparams, u32 nregs, u32 code length in words, the code,
 *     then (version 3) nregs string ids: the name of each register for messages (the binding
 *     of the source program it holds: "x1", "lv[0]" for a tuple field, "storage 0"; "" for a
 *     temporary)
 * Registers hold values: tensors (device buffer, dtype, shape), tuples, shapes, prims,
 * storages. Symbolic variables are held by NAME in the call's symbol table (names are unique
 * within a graph function); expressions are strings in the text syntax of
 * docs/text-format.md, evaluated over that table. The runtime compiles every expression operand
 * (operand kinds 'x', 'e', the expr dims of 'd', the expressions of 'P') once at load, and gives
 * every name a slot, so a malformed expression is an error at load and a launch parses nothing.
 * Each instruction is its opcode word followed by its operands (words); "expr", "name" and
 * "what" operands are string ids; "-1" in a register operand means none.
 * MATCH_CAST's target may be a tensor or a shape value (a Shape struct info: dtype 0, the
 * shape's values checked and bound like a tensor's dims; a variable bound from a shape value
 * must be >= 0, it is a size). */
#ifndef RX_VM_FORMAT_H
#define RX_VM_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RXM_MAGIC   0x314d5852u /* "RXM1" */
#define RXM_VERSION 1u
#define RXVM_MAGIC  0x4d565852u /* "RXVM" */
#define RXVM_VERSION                                                                               \
  5u /* 2 added TENSOR_TO_SHAPE and RESHAPE, 3 the register names, 4 WEIGHT, 5 TAIL_CALL_FN;       \
       versions 1 to 4 are still read (1 and 2: their messages number registers) */
#define RXVM_VERSION_MIN       1u
#define RXM_SECTION_NAME_BYTES 64
/* The weights: a safetensors image (base/safetensors.h) whose tensors start RXM_WEIGHTS_ALIGN-
 * aligned in the file (the JSON header padded with spaces, tensors padded with zeros): 64 bytes,
 * a cache line of the x86-64 and arm64 hosts relaxc runs on and the widest vector load (AVX-512),
 * so a mapped tensor is read and uploaded without realignment. */
#define RXM_WEIGHTS_SECTION "weights.safetensors"
#define RXM_WEIGHTS_ALIGN   64u

/* Dimension descriptors of CHECK_TENSOR / MATCH_CAST: kind word, then its operand. */
enum {
  RXVM_DIM_CONST = 0, /* operand: the value (u32 lo, u32 hi: two words) */
  RXVM_DIM_BIND = 1,  /* operand: name; binds the variable if unbound, else checks equality */
  RXVM_DIM_EXPR = 2,  /* operand: expr; the dim must equal it */
};

/* Operand kinds, listed once: X(ENUM, letter, what). An opcode's operands are a string of these
 * letters (RXVM_OPS); rxvm_walk (runtime/vm_walk.c) decodes any instruction from it, and the
 * loader's validator, both disassemblers and the interpreter walk instructions with it. */
#define RXVM_OPERANDS(X)                                                                           \
  X(REG, 'r', "a register")                                                                        \
  X(REG_OPT, 'o', "a register, or -1: none")                                                       \
  X(PARAM, 'p', "a parameter index")                                                               \
  X(STR, 's', "a string id: a name or a message")                                                  \
  X(EXPR, 'x', "a string id: a symbolic expression (text syntax), compiled at load")               \
  X(VAR, 'v', "a string id: the name of a symbolic variable the instruction binds")                \
  X(DTYPE, 't', "an rx_dtype, 0 (any) allowed")                                                    \
  X(DTYPE_KNOWN, 'T', "an rx_dtype, not 0")                                                        \
  X(DIMS, 'd', "ndim (-1: any rank), then ndim dimension descriptors (RXVM_DIM_*)")                \
  X(EXPRS, 'e', "ndim, then ndim string ids (dimension expressions)")                              \
  X(REGS, 'R', "a count, then that many registers")                                                \
  X(REGS_OPT, 'O', "a count, then that many registers or -1")                                      \
  X(PAIRS, 'P', "a count, then that many (name, expr) pairs of string ids")                        \
  X(FN, 'f', "a function index")                                                                   \
  X(INDEX, 'i', "an unsigned number")                                                              \
  X(TARGET, 'j', "a jump target: a word offset in the function's code")

typedef enum rxvm_operand {
#define RXVM_OPERAND_ENUM_(e, c, d) RXVM_OPND_##e,
  RXVM_OPERANDS(RXVM_OPERAND_ENUM_)
#undef RXVM_OPERAND_ENUM_
      RXVM_OPND_COUNT
} rxvm_operand;

/* Opcodes: listed once; X(ENUM, name, operand layout in words, operand kinds (RXVM_OPERANDS
 * letters)). */
#define RXVM_OPS(X)                                                                                \
  /* reg, param index, name (parameter), expected (text of the struct info), dtype (rx_dtype),     \
   * ndim (-1: any rank), then ndim dimension descriptors: the parameter's check at entry */       \
  X(CHECK_TENSOR, "check_tensor", "reg param name expected dtype ndim dims...", "rpsstd")          \
  /* dst, src, expected text, dtype, ndim, dims...: match_cast (binds new variables) */            \
  X(MATCH_CAST, "match_cast", "dst src expected dtype ndim dims...", "rrstd")                      \
  /* expr, message: a function fact; fails naming it and the values of its variables */            \
  X(ASSERT, "assert", "expr message", "xs")                                                        \
  /* name, expr: defines a symbolic variable from an expression (e.g. after a call) */             \
  X(DEFINE, "define", "name expr", "vx")                                                           \
  /* st, bytes expr: a planned storage, sized for the function's upper bounds (taken from a pool   \
   * kept across calls) */                                                                         \
  X(ALLOC_STORAGE, "alloc_storage", "st bytes", "rx")                                              \
  /* dst, st (-1: a dynamic allocation from the pool), offset expr, dtype, ndim, dim exprs... */   \
  X(ALLOC_TENSOR, "alloc_tensor", "dst st offset dtype ndim dims...", "roxTe")                     \
  /* program name, nargs, regs..., nsyms, (name expr)...: runs every kernel of the program         \
   * whose condition holds. regs are the program's parameters in order (-1 for its scalar          \
   * parameters); each (name expr) gives one of the PROGRAM's symbolic variables as an             \
   * expression over the CALLER's symbol table (the program's names may differ from the            \
   * caller's: a program over n called with a tensor of shape [m * 2, 4]) */                       \
  X(CALL_KERNELS, "call_kernels", "program nargs regs... nsyms (name expr)...", "sOP")             \
  /* name, nargs, regs...: a library function (destination-passing) */                             \
  X(CALL_EXTERN, "call_extern", "name nargs regs...", "sO")                                        \
  /* dst, function index, nargs, regs...: another graph function of the program */                 \
  X(CALL_FN, "call_fn", "dst fn nargs regs...", "ofR")                                             \
  X(PRIM, "prim", "dst dtype expr", "rTx")     /* a scalar from a symbolic expression */           \
  X(SHAPE, "shape", "dst ndim exprs...", "re") /* a shape value */                                 \
  X(TUPLE, "tuple", "dst n regs...", "rR")                                                         \
  X(GET_ITEM, "get_item", "dst src index", "rri")                                                  \
  X(MOVE, "move", "dst src", "rr")                                                                 \
  X(JUMP, "jump", "target", "j")                     /* target: word offset in the function */     \
  X(JUMP_IF_NOT, "jump_if_not", "cond target", "rj") /* cond: a Prim(bool) or bool[] register */   \
  X(FREE, "free", "reg", "o")                        /* the register's value is dead */            \
  X(RET, "ret", "reg", "o")                                                                        \
  /* version 2: */                                                                                 \
  /* dst, src, what: a shape value from a 1-D (or 0-d: one value) i64/i32 tensor, copied from      \
   * the device (tensor_to_shape); what names the binding for messages */                          \
  X(TENSOR_TO_SHAPE, "tensor_to_shape", "dst src what", "rrs")                                     \
  /* dst, src, shape, what: src viewed with the dims of the shape register (one -1 inferred),      \
   * same buffer; the element counts must agree (reshape to or from an unknown shape) */           \
  X(RESHAPE, "reshape", "dst src shape what", "rrrs")                                              \
  /* version 4: */                                                                                 \
  /* dst, name: the weight of that name (a tensor constant of the source program), uploaded at     \
   * load; the loader checks that the artifact holds it */                                         \
  X(WEIGHT, "weight", "dst name", "rs")                                                            \
  /* version 5: */                                                                                 \
  /* function index, nargs, regs...: a proper tail call (Lua's OP_TAILCALL): the callee's result   \
   * is this function's, so the callee runs in this call's place: its registers and symbols are    \
   * released first, the nesting depth does not grow (a loop lowered to self recursion, ONNX       \
   * Loop and Scan, runs any number of steps in constant frames) */                                \
  X(TAIL_CALL_FN, "tail_call_fn", "fn nargs regs...", "fR")

typedef enum rxvm_op {
#define RXVM_OP_ENUM_(e, n, l, k) RXVM_OP_##e,
  RXVM_OPS(RXVM_OP_ENUM_)
#undef RXVM_OP_ENUM_
      RXVM_OP_COUNT
} rxvm_op;

/* ---- walking instructions (runtime/vm_walk.c) ----
 * rxvm_walk decodes the instruction at code[pc] from its opcode's operand kinds: for each
 * operand it checks that its words lie inside the code (counts and ranks too) and hands them to
 * visit (NULL: none) in order: kind, the operand's first word's offset, and its count (REGS,
 * REGS_OPT, PAIRS, EXPRS: the count; DIMS: ndim, RXVM_NONE for any rank; otherwise 1). A visit
 * that returns false stops the walk (its own error). Returns the offset after the instruction,
 * or 0 with *out_error set to a message (at most 128 bytes) on a malformed instruction. What
 * the words mean (register ranges, string ids, jump targets) is the visitor's to check. */
#define RXVM_NONE     0xffffffffu /* "-1" in a register or ndim operand */
#define RXVM_MAX_NDIM 16          /* ranks above this are malformed (RX_RT_MAX_NDIM) */
typedef bool (*rxvm_visit_fn)(void *ctx, rxvm_operand kind, uint32_t at, uint32_t count);
uint32_t rxvm_walk(const uint32_t *code, uint32_t len, uint32_t pc, rxvm_visit_fn visit, void *ctx,
                   char *out_error, size_t error_size);
const char *rxvm_op_name(uint32_t op);     /* "check_tensor"; "?" when unknown */
const char *rxvm_op_operands(uint32_t op); /* its operand letters; NULL when unknown */

/* Appends the disassembly of one function of a host program to out: a header line, one line
 * per instruction ("  %4u: op operands"), and (reg_names non-NULL: version 3) the name of each
 * register. strings: the program's string table. Returns false, after printing what it could,
 * when the code is malformed. The one disassembler: `relaxc compile --dump-after lower_host`
 * (passes/lower_host.c) and `relaxc inspect --code` (runtime/artifact.c) print with it. */
typedef struct rx_strbuf rx_strbuf;
bool rxvm_disasm_fn(rx_strbuf *out, const char *name, uint32_t nparams, const uint32_t *code,
                    uint32_t len, const uint32_t *reg_names, uint32_t nregs,
                    const char *const *strings, uint32_t nstrings);

#endif
