/* runtime/vm.h: private to the artifact loader (artifact.c) and the VM (vm.c): the loaded
 * artifact, its decoded host program and the values the VM's registers hold.
 *
 * The host program's words are kept as decoded (host-order u32) and executed in place: the loader
 * validates every instruction (known opcode, operands inside the code, registers below nregs,
 * string ids below the string count, dtypes, ranks, dimension kinds, jump targets at instruction
 * starts, function indices and argument counts of CALL_FN), so the VM reads operands without
 * checking their bounds again. What can only be known at run time (the kind of value in a
 * register, the result of an expression) is checked by the VM and reported as a status. */
#ifndef RX_RUNTIME_VM_H
#define RX_RUNTIME_VM_H

#include "runtime/device.h"
#include "runtime/vm_format.h"

#define VM_NONE 0xffffffffu /* "-1" in a register or ndim operand */

typedef struct vm_section {
  char name[RXM_SECTION_NAME_BYTES + 1];
  const uint8_t *data; /* into the artifact's copy of the file */
  size_t size;
} vm_section;

/* One slot of a planned storage: the buffer that holds the tensors placed at one offset. The
 * runtime has no buffer sub-views (a kernel binds whole buffers), so each (storage, offset) pair
 * gets its own buffer of (storage bytes - offset) bytes: tensors placed at the same offset share
 * it (views and reuse across lifetimes), tensors at different offsets never alias. */
typedef struct vm_slot {
  int64_t offset;
  rx_rt_buffer *buffer;
} vm_slot;

/* A planned storage: one per ALLOC_STORAGE instruction, sized by its first execution and kept
 * across calls; a size expression that is not a constant (a storage the compiler could not bound:
 * sized at run time) grows it when a later call needs more. */
typedef struct vm_storage {
  uint32_t fn, pc;
  int64_t bytes; /* -1: not sized yet */
  size_t nslots, cap;
  vm_slot *slots;
} vm_storage;

typedef struct vm_weights vm_weights; /* an artifact's weights (runtime/weights.c) */

/* A CALL_KERNELS instruction resolved at load (vm_prepare): its program in the device's library
 * (NULL without a device, or when the library lacks it: an error when it runs) and, per
 * (name, expression) pair, the program's slot of the name (RT_NO_SLOT: the program has no such
 * variable). */
typedef struct vm_call {
  rt_program *prog;
  uint32_t *slots;
} vm_call;

typedef struct vm_fn {
  const char *name;
  uint32_t nparams, nregs, len;
  const uint32_t *code;      /* len words, into the artifact's word array */
  const uint32_t *reg_names; /* nregs string ids (version >= 3), or NULL */
  /* for inspection: per parameter its CHECK_TENSOR (word offset of the instruction, or VM_NONE) */
  uint32_t *param_check;
  /* per parameter its name and struct info text from the manifest's "params" (heap, NULL where
   * the manifest lacks them): what a parameter without a CHECK_TENSOR (a Prim, a Shape, an
   * Object) is described by */
  char **param_name, **param_sinfo;
  size_t nfacts, nstorages;
  const char **facts;    /* ASSERT expressions, program order */
  const char **storages; /* ALLOC_STORAGE size expressions */
  uint32_t *call_at;     /* per word: at a CALL_KERNELS, its index in the artifact's calls */
  /* the runtime batcher's measurements of this function (runtime/autobatch.c, cost-aware
   * batching: the samples and the crossover they give), [0] over its batched form, [1] its
   * index-array form; NULL until a batcher of this artifact measured it; kept here so that later
   * batchers do not time calls again; freed with the artifact */
  void *batch_cost[2];
} vm_fn;

struct rx_rt_artifact {
  int refs;
  rx_rt_device *device; /* NULL: loaded for inspection */
  rx_rt_allocator alloc;
  char *name;
  uint8_t *data; /* the file: mapped (rx_rt_artifact_load) or a heap copy (load_memory) */
  size_t size;
  bool mapped;         /* data is a read-only mapping of the file (vm_unmap at the end) */
  vm_weights *weights; /* its weights (runtime/weights.c); NULL before they are parsed */
  size_t nsections;
  vm_section *sections;
  char *manifest; /* NUL-terminated copy */
  char *targets;  /* "cuda, vulkan" */
  rx_rt_library *library;
  /* the host program */
  uint32_t vm_version; /* RXVM_VERSION_MIN..RXVM_VERSION */
  uint32_t *words;
  size_t nwords;
  size_t nstrings;
  char **strings; /* NUL-terminated */
  size_t nfns;
  vm_fn *fns;
  size_t nstorages;
  vm_storage *storages;
  /* the host program compiled at load (vm_prepare): every symbolic variable a slot, every
   * expression an rt_expr, every CALL_KERNELS its program */
  rt_names syms;      /* the symbolic variables of all functions (each call its own values) */
  rt_expr **exprs;    /* per string: compiled where an instruction evaluates it, else NULL */
  uint32_t *sym_slot; /* per string: its slot where an instruction binds it (bind, define) */
  size_t ncalls;
  vm_call *calls;
  int depth; /* CALL_FN nesting of the running call */
  /* RX_PROFILE=1 in the environment at load: device time per program (vm_profile_*) */
  struct vm_profile *profile;
  struct rx_rt_comm
      *comm; /* the collectives' communicator (rx_rt_artifact_set_comm); NULL: one rank */
};

struct rx_rt_tensor {
  int refs;
  rx_rt_buffer *buffer; /* one reference; the tensor starts at byte 0 (kernels bind whole
                           buffers, so the runtime has no sub-buffer views) */
  rx_dtype dtype;
  int ndim;
  int64_t shape[RX_RT_MAX_NDIM];
};

struct rx_rt_value {
  int refs;
  rx_rt_value_kind kind;
  rx_rt_allocator alloc;          /* the device's (or the default) allocator, copied */
  rx_rt_tensor *tensor;           /* TENSOR */
  size_t count;                   /* TUPLE: items; SHAPE: ndim */
  rx_rt_value **items;            /* TUPLE */
  int64_t *dims;                  /* SHAPE */
  rx_dtype dtype;                 /* PRIM */
  int64_t prim;                   /* PRIM */
  vm_storage *storage;            /* STORAGE (owned by the artifact) */
  const rx_rt_object_type *otype; /* OBJECT: its type */
  void *object;                   /* OBJECT (owned) */
};

/* Operand layout helpers shared by the loader's validator and the VM. */
const char *vm_op_name(uint32_t op);

/* Values (vm.c). */
rx_rt_value *vm_value_new(const rx_rt_allocator *a, rx_rt_value_kind kind);
/* A tensor holding a new reference to b (NULL when out of host memory). */
rx_rt_tensor *vm_tensor_new(rx_rt_buffer *b, rx_dtype dtype, int ndim, const int64_t *shape);
/* Compiles the host program's expressions, gives its variables slots and resolves its
 * CALL_KERNELS in the library (after the loader validated every instruction and loaded the
 * kernels): a malformed expression is an error at load naming the function and the word. */
rx_status vm_prepare(rx_rt_artifact *a);
void vm_prepare_free(rx_rt_artifact *a); /* what vm_prepare made (artifact destruction) */
/* Frees the buffers of the artifact's planned storages (artifact destruction). */
void vm_storages_free(rx_rt_artifact *a);
/* How messages name register r of f: "'x1'" (its binding), "a temporary" (no name), "r4" (a
 * host program older than version 3). */
void vm_reg_name(char *buf, size_t size, const rx_rt_artifact *a, const vm_fn *f, uint32_t r);
/* "a tensor", "a shape", ..., an object's type name: what a register holds, for messages. */
const char *vm_kind_name(const rx_rt_value *v);

/* ---- builtins reached by CALL_EXTERN (runtime/externs.c) ----
 * A destination-passing builtin gets its arguments and then its outputs (tensors allocated by
 * the host program) in args; a returning builtin (`-> SINFO` in its extern_fn) gets its
 * arguments and sets *result. Errors name the builtin; the VM adds the function. */
typedef struct vm_extern_call {
  rx_rt_artifact *artifact;
  rx_rt_device *device;
  const char *name; /* the builtin's */
} vm_extern_call;
typedef rx_status (*vm_extern_fn)(const vm_extern_call *c, rx_rt_value *const *args, size_t nargs,
                                  rx_rt_value **result);
typedef struct vm_extern {
  const char *name;
  vm_extern_fn fn;
  bool returning; /* sets *result; otherwise destination-passing */
} vm_extern;
/* The builtin named name, or NULL. */
const vm_extern *vm_extern_find(const char *name);
/* "rx_kv_create, rx_kv_extend, ...": the builtins, for messages (static storage). */
const char *vm_extern_names(void);
/* Argument i of a builtin call as an integer in lo..hi (an integer Prim: a float Prim or
 * another kind is refused), errors naming the builtin and what the argument is (runtime/ccl,
 * runtime/llm/kv_cache.c). */
rx_status vm_extern_arg_int(const vm_extern_call *c, rx_rt_value *const *args, size_t i,
                            const char *what, int64_t lo, int64_t hi, int64_t *out);

/* ---- weights (runtime/weights.c) ---- */
/* A read-only mapping of the file at path (*out NULL for an empty file); statuses name it, and a
 * directory is "PATH: is a directory, not WHAT". */
rx_status vm_map_file(const char *path, const char *what, uint8_t **out, size_t *out_size);
void vm_unmap(void *p, size_t size);
/* runtime/artifact.c: the artifact over data[size], which it owns from here (a mapping when
 * mapped: vm_unmap at the end), as rx_rt_artifact_load does after mapping a file; used by
 * runtime/artifact_ranks.c for one rank of a multi-rank artifact. */
rx_status rt_artifact_load_owned(rx_rt_device *d, uint8_t *data, size_t size, bool mapped,
                                 const char *name, rx_rt_artifact **out_artifact);
/* The loader's steps: the safetensors header of the section or the side file (after the
 * manifest), the parameters bound to weights (after the host program), the upload (with a
 * device); then vm_weights_free at destruction. */
rx_status vm_weights_parse(rx_rt_artifact *a);
rx_status vm_weights_bind(rx_rt_artifact *a);
rx_status vm_weights_upload(rx_rt_artifact *a);
void vm_weights_free(rx_rt_artifact *a);
/* Weight name's index in *out (out may be NULL); false when the artifact has none of that name. */
bool vm_weight_find(const rx_rt_artifact *a, const char *name, uint32_t *out);
/* The number of parameters of function fi bound to weights, and the weight bound to one (its
 * value on the device; NULL when unbound or loaded without a device). */
uint32_t vm_weights_bound(const rx_rt_artifact *a, uint32_t fi);
rx_rt_value *vm_param_weight(const rx_rt_artifact *a, uint32_t fi, uint32_t param);
/* The uploaded weight named name (WEIGHT), or NULL. */
rx_rt_value *vm_weight_value(const rx_rt_artifact *a, const char *name);

/* ---- profiling (vm.c): with RX_PROFILE=1 each program's calls are timed, synchronized, and
 * the table printed on stderr when the artifact is released (a developer's view of where a
 * call's time goes; it serializes the device, so whole-call timings are not to be taken then). */
void vm_profile_init(rx_rt_artifact *a);
void vm_profile_report(rx_rt_artifact *a); /* prints and frees */

/* "f32[3, 4095]" into buf. */
void vm_format_type(char *buf, size_t size, rx_dtype dtype, int ndim, const int64_t *shape);

#endif
