/* relaxc/types.h: the types shared by the compiler's and the runtime's public APIs and by the
 * internal headers: statuses and dtypes, each defined once here. */
#ifndef RELAXC_TYPES_H
#define RELAXC_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the version, in this one place: CMakeLists.txt reads it (project VERSION, the shared
 * libraries' SONAME librelaxc*.so.MAJOR, the package files), `relaxc --version` prints it and
 * artifacts record it. A program can compare the header it was built with against the library it
 * runs on through rx_version_string() (below). ---- */
#define RELAXC_VERSION_MAJOR 0
#define RELAXC_VERSION_MINOR 1
#define RELAXC_VERSION_PATCH 0
#define RX_VERSION_STR_(x)   #x
#define RX_VERSION_STR(x)    RX_VERSION_STR_(x)
#define RELAXC_VERSION                                                                             \
  RX_VERSION_STR(RELAXC_VERSION_MAJOR)                                                             \
  "." RX_VERSION_STR(RELAXC_VERSION_MINOR) "." RX_VERSION_STR(RELAXC_VERSION_PATCH)

/* ---- RX_API: on every function of the public headers. The library sources build with
 * -fvisibility=hidden, so the shared libraries (librelaxc.so, librelaxc_runtime.so) export these
 * and nothing else (test tools.exported_symbols). Define it before including to override. ---- */
#ifndef RX_API
#if defined(__GNUC__) || defined(__clang__)
#define RX_API __attribute__((visibility("default")))
#else
#define RX_API
#endif
#endif

/* ---- statuses: NULL is OK, anything else is an error with a message ---- */
typedef enum rx_status_code {
  RX_OK = 0,
  RX_ERR_INVALID,     /* bad user input: text IR, model, arguments */
  RX_ERR_UNSUPPORTED, /* valid but not supported (op, target, feature) */
  RX_ERR_NOT_FOUND,   /* missing file, function, kernel, driver */
  RX_ERR_IO,          /* reading or writing a file failed */
  RX_ERR_OUT_OF_MEMORY,
  RX_ERR_DEVICE, /* a driver reported an error */
  RX_ERR_INTERNAL,
} rx_status_code;
#define RX_STATUS_ENUM_DEFINED /* for code written against the former guarded copies */

typedef struct rx_status_s *rx_status; /* NULL: OK */
RX_API rx_status_code rx_status_code_of(rx_status s);
RX_API const char *rx_status_message(rx_status s); /* "" for OK */
RX_API void rx_status_free(rx_status s);

/* the library's version, RELAXC_VERSION of the headers it was built with ("0.1.0") */
RX_API const char *rx_version_string(void);

/* ---- dtypes: listed once; X(ENUM, text name, bits, is_float, is_signed). Their numbers are
 * stored in artifacts (docs/artifact.md) and used by the C APIs: new ones go at the end. ---- */
#define RX_DTYPES(X)                                                                               \
  X(F32, "f32", 32, 1, 1)                                                                          \
  X(F16, "f16", 16, 1, 1)                                                                          \
  X(BF16, "bf16", 16, 1, 1)                                                                        \
  X(I64, "i64", 64, 0, 1)                                                                          \
  X(I32, "i32", 32, 0, 1)                                                                          \
  X(I16, "i16", 16, 0, 1)                                                                          \
  X(I8, "i8", 8, 0, 1)                                                                             \
  X(U8, "u8", 8, 0, 0)                                                                             \
  X(BOOL, "bool", 8, 0, 0)                                                                         \
  X(F64, "f64", 64, 1, 1)                                                                          \
  X(U16, "u16", 16, 0, 0)                                                                          \
  X(U32, "u32", 32, 0, 0)                                                                          \
  X(U64, "u64", 64, 0, 0)

typedef enum rx_dtype {
  RX_DTYPE_UNKNOWN = 0, /* text: any */
#define RX_DTYPE_ENUM_(e, n, b, f, s) RX_DTYPE_##e,
  RX_DTYPES(RX_DTYPE_ENUM_)
#undef RX_DTYPE_ENUM_
      RX_DTYPE_COUNT
} rx_dtype;
#define RX_DTYPE_ENUM_DEFINED

#ifdef __cplusplus
}
#endif
#endif
