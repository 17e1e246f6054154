#!/usr/bin/env python3
"""tests/chat/gguf_add_template.py IN.gguf OUT.gguf TEMPLATE: a copy of a GGUF file with the
metadata key tokenizer.chat_template (a string) added, as llama.cpp's converter writes it. Python's
standard library only (lit runs it in CI): the key-value section is walked by the format's value
types (GGUF v2/v3, github.com/ggml-org/ggml docs/gguf.md), the new pair appended, the tensor infos
copied, and the data section re-aligned (tensor offsets are relative to it, so they stay)."""
import struct
import sys

# value type -> size in bytes of a scalar (8: string, 9: array)
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(b, p, t):
    if t in SCALAR:
        return p + SCALAR[t]
    if t == 8:
        (n,) = struct.unpack_from("<Q", b, p)
        return p + 8 + n
    if t == 9:
        et, count = struct.unpack_from("<IQ", b, p)
        p += 12
        for _ in range(count):
            p = skip_value(b, p, et)
        return p
    raise SystemExit(f"unknown GGUF value type {t}")


def main():
    src, dst, template = sys.argv[1], sys.argv[2], sys.argv[3]
    b = open(src, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    assert magic == b"GGUF" and version in (2, 3)
    p = 24
    alignment = 32
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", b, p)
        key = b[p + 8:p + 8 + klen].decode()
        p += 8 + klen
        (t,) = struct.unpack_from("<I", b, p)
        if key == "general.alignment":
            (alignment,) = struct.unpack_from("<I", b, p + 4)
        p = skip_value(b, p + 4, t)
    kv_end = p
    for _ in range(n_tensors):
        (nlen,) = struct.unpack_from("<Q", b, p)
        p += 8 + nlen
        (ndim,) = struct.unpack_from("<I", b, p)
        p += 4 + 8 * ndim + 4 + 8
    infos_end = p
    data_start = (infos_end + alignment - 1) // alignment * alignment
    key = b"tokenizer.chat_template"
    val = template.encode()
    pair = struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, len(val)) + val
    head = struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + 1) + b[24:kv_end] + pair
    head += b[kv_end:infos_end]
    head += b"\0" * ((-len(head)) % alignment)
    open(dst, "wb").write(head + b[data_start:])


if __name__ == "__main__":
    main()
