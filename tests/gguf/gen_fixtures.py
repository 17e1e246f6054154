"""Writes the GGUF fixtures of tests/unit/test_gguf.c and tests/lit/cli/inspect_gguf.test with
PyPI's `gguf` package (llama.cpp's own gguf-py, requirements.txt), so relaxc's reader
(frontends/gguf/gguf.c) is checked against the format's reference writer and its dequantization
against the reference dequantization. Run from anywhere: python3 tests/gguf/gen_fixtures.py. CI uses the
committed outputs (deterministic: a fixed seed).

all_types.gguf (version 3, alignment 32): metadata of every value type (test.u8 ... test.f64,
  test.string, an empty string, arrays of every element type, a 300-entry tokenizer.ggml.tokens)
  and a tensor of each type relaxc reads at awkward shapes (NumPy order, outermost first):
    f32 [3, 5]           f16 [7] (with -0, inf, nan, subnormals)   bf16 [2, 3, 5]
    f32_4d [2, 1, 3, 2]  q8_0 [1, 64]   q4_0 [3, 32]   q4_1 [5, 64]   q5_0 [3, 96]
    q4_k [3, 256]        q5_k [1, 512]  q6_k [3, 256]
  Q8_0 ... Q5_0 come from gguf.quants.quantize of random values; gguf-py cannot quantize the
  K-quants, so their blocks are random bytes with random finite f16 scales (one subnormal).
v2_align64.gguf: the same writer's output with general.alignment = 64 and the version field set
  to 2 (v2 and v3 differ only in v3 allowing big-endian files): f32 [1, 3], q8_0 [2, 32].
unsupported.gguf: a Q3_K tensor (a type relaxc does not read), q3_k [1, 256].
ref/<file>.<tensor>.npy: gguf.quants.dequantize of each tensor's bytes, float32, NumPy shape (Q3_K's
  too, unused until relaxc reads the type)."""
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(15)


def f16_scales(n, scale):
    """n random finite f16 values (as uint8 pairs) of magnitude about scale."""
    return (rng.standard_normal(n) * scale).astype(np.float16).view(np.uint8).reshape(n, 2)


def kquant(qtype, rows, cols):
    """Random blocks of a K-quant with finite f16 scales where the format puts them."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block
    b = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    if qtype in (T.Q4_K, T.Q5_K):  # d, dmin first
        b[:, 0:2] = f16_scales(nb, 0.05)
        b[:, 2:4] = f16_scales(nb, 0.02)
        b[0, 0:2] = np.array([3], dtype=np.uint16).view(np.uint8)  # a subnormal d
    elif qtype == T.Q6_K:  # d last
        b[:, size - 2:] = f16_scales(nb, 0.01)
        b[0, size - 2:] = np.array([5], dtype=np.uint16).view(np.uint8)
    else:  # Q3_K: d last
        b[:, size - 2:] = f16_scales(nb, 0.01)
    return b.reshape(rows, cols // block * size)


def metadata(w):
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo w\u00f6rld")
    w.add_key_value("test.empty", "", V.STRING)
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62) - 3)
    w.add_float64("test.f64", 1 / 3)
    arrays = [
        ("u8", V.UINT8, [0, 1, 255]), ("i8", V.INT8, [-128, 0, 127]),
        ("u16", V.UINT16, [65535, 7]), ("i16", V.INT16, [-32768, 32767]),
        ("u32", V.UINT32, [4294967295, 0, 1]), ("i32", V.INT32, [-5, 5, -2147483648]),
        ("f32", V.FLOAT32, [0.5, -2.25, 1e-3]), ("bool", V.BOOL, [True, False, True]),
        ("u64", V.UINT64, [2**64 - 1]), ("i64", V.INT64, [-(2**63), 42]),
        ("f64", V.FLOAT64, [2.5, -1 / 7]), ("str", V.STRING, ["a", "", "\u00fcn\u00ef", "x y"]),
    ]
    for name, sub, vals in arrays:
        w.add_key_value("test.arr_" + name, vals, V.ARRAY, sub_type=sub)
    w.add_array("tokenizer.ggml.tokens", ["<unk>", "<s>", "</s>"] + ["t%d" % i for i in range(297)])


def add(w, refs, fname, name, qtype, shape):
    """Adds tensor name of qtype and NumPy shape; records its reference dequantization."""
    if qtype in (T.Q4_K, T.Q5_K, T.Q6_K, T.Q3_K):
        raw = kquant(qtype, shape[0], shape[1])
    elif qtype == T.F16:
        v = rng.standard_normal(shape).astype(np.float16)
        v.flat[:6] = [-0.0, np.inf, np.nan, 6e-8, -3e-5, 65504]
        raw = v
    elif qtype == T.F32:
        raw = rng.standard_normal(shape).astype(np.float32)
    else:
        raw = gguf.quants.quantize(rng.standard_normal(shape).astype(np.float32), qtype)
    if qtype in (T.F32, T.F16):
        w.add_tensor(name, raw)
        ref = gguf.quants.dequantize(raw.view(np.uint8), qtype).reshape(shape)
    else:
        w.add_tensor(name, raw, raw_dtype=qtype)
        ref = gguf.quants.dequantize(raw, qtype)
    ref = np.ascontiguousarray(ref, dtype=np.float32)
    assert ref.shape == tuple(shape), (name, ref.shape, shape)
    refs[fname[: -len(".gguf")] + "." + name] = ref


def write(fname, tensors, meta=None, alignment=None, version=None):
    refs = {}
    path = os.path.join(HERE, fname)
    w = gguf.GGUFWriter(path, arch="llama")
    if alignment:
        w.add_custom_alignment(alignment)
    if meta:
        meta(w)
    for name, qtype, shape in tensors:
        add(w, refs, fname, name, qtype, shape)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if version is not None:
        with open(path, "r+b") as f:
            f.seek(4)
            f.write(np.array([version], dtype="<u4").tobytes())
    os.makedirs(os.path.join(HERE, "ref"), exist_ok=True)
    for k, v in refs.items():
        np.save(os.path.join(HERE, "ref", k + ".npy"), v)


def main():
    write("all_types.gguf", [
        ("f32", T.F32, [3, 5]), ("f16", T.F16, [7]), ("bf16", T.BF16, [2, 3, 5]),
        ("f32_4d", T.F32, [2, 1, 3, 2]), ("q8_0", T.Q8_0, [1, 64]), ("q4_0", T.Q4_0, [3, 32]),
        ("q4_1", T.Q4_1, [5, 64]), ("q5_0", T.Q5_0, [3, 96]), ("q4_k", T.Q4_K, [3, 256]),
        ("q5_k", T.Q5_K, [1, 512]), ("q6_k", T.Q6_K, [3, 256]),
    ], meta=metadata)
    write("v2_align64.gguf", [("f32", T.F32, [1, 3]), ("q8_0", T.Q8_0, [2, 32])], alignment=64,
          version=2)
    write("unsupported.gguf", [("q3_k", T.Q3_K, [1, 256])])


if __name__ == "__main__":
    main()
