#!/usr/bin/env python3
"""Broken copies of tests/llm's quantized checkpoints (tests/lit/hf/quant.test), made with the
standard library alone: mk_quant.py SRC DST CASE copies folder SRC to DST and breaks it as CASE
says (the safetensors header rewritten in place, or config.json's quantization_config)."""
import json
import shutil
import struct
import sys

src, dst, case = sys.argv[1:4]
shutil.copytree(src, dst)
st = dst + "/model.safetensors"
cfg = dst + "/config.json"


def edit_header(fn):
    with open(st, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = bytearray(data[8 + n:])
    fn(header, body)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def edit_config(fn):
    with open(cfg) as f:
        c = json.load(f)
    fn(c["quantization_config"])
    with open(cfg, "w") as f:
        json.dump(c, f)


L0 = "model.layers.0.self_attn.q_proj."
if case == "shape":  # qweight [64, 16] stored as [16, 64]: the same bytes, another shape
    def f(h, b):
        h[L0 + "qweight"]["shape"] = h[L0 + "qweight"]["shape"][::-1]
    edit_header(f)
elif case == "noscales":
    def f(h, b):
        h[L0 + "scalez"] = h.pop(L0 + "scales")
    edit_header(f)
elif case == "gidx":  # g_idx[5] = 99: no such group
    def f(h, b):
        at = h[L0 + "g_idx"]["data_offsets"][0] + 20
        b[at:at + 4] = struct.pack("<i", 99)
    edit_header(f)
elif case == "dtype":  # the FP8 weight's bytes said to be U8
    def f(h, b):
        h[L0 + "weight"]["dtype"] = "U8"
    edit_header(f)
elif case == "method":
    edit_config(lambda q: q.update(quant_method="bitsandbytes"))
elif case == "gemv":
    edit_config(lambda q: q.update(version="gemv"))
elif case == "bits":
    edit_config(lambda q: q.update(bits=8))
elif case == "act":
    edit_config(lambda q: q["config_groups"]["group_0"].update(
        input_activations={"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}))
elif case == "block":
    edit_config(lambda q: q.clear() or q.update(quant_method="fp8", activation_scheme="dynamic",
                                                 weight_block_size=[128, 128]))
elif case in ("ignore", "ignore_f8"):  # layer 1's down_proj kept dense by the config
    edit_config(lambda q: q.update(ignore=["lm_head", "re:.*layers.1.mlp.down_proj$"]))
    if case == "ignore":  # and stored dense (f32 zeros [64, 128]) as a tool leaves it
        def f(h, b):
            name = "model.layers.1.mlp.down_proj."
            del h[name + "weight"], h[name + "weight_scale"]
            h[name + "weight"] = {"dtype": "F32", "shape": [64, 128],
                                  "data_offsets": [len(b), len(b) + 64 * 128 * 4]}
            b.extend(bytes(64 * 128 * 4))
        edit_header(f)
else:
    sys.exit("unknown case " + case)
