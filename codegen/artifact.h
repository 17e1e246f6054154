/* codegen/artifact.h: the artifact container (.rxm) of runtime/vm_format.h, written from a
 * compiled module (passes/pipeline.h). docs/artifact.md describes the format. Internal header. */
#ifndef RX_ARTIFACT_H
#define RX_ARTIFACT_H

#include "../passes/pipeline.h"

/* CRC-32 of the zlib/PNG/Ethernet convention (reflected polynomial 0xEDB88320, initial value
 * and final xor 0xFFFFFFFF): rx_crc32("123456789", 9) == 0xCBF43926, what zlib's crc32() gives.
 * Implemented here (no zlib dependency). */
uint32_t rx_crc32(const void *data, size_t n);

/* Builds the bytes of the artifact of a compiled module: manifest.json, host.rxvm, then per
 * target "<backend>/kernels.json" and the kernel files it names. Same input, same bytes.
 * *out_bytes is heap memory (free()). */
void rx_artifact_build(const rx_module *m, const rx_compile_result *r, unsigned char **out_bytes,
                       size_t *out_len);

/* The manifest alone (also used by `relaxc compile` summaries and tests). */
void rx_artifact_manifest(rx_strbuf *out, const rx_module *m, const rx_compile_result *r);

/* Writes bytes to path (created or truncated); the status names the path on error. */
rx_status rx_artifact_write_file(const char *path, const unsigned char *bytes, size_t len);

#endif
