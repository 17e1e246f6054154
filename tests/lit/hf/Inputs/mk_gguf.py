# Writes a GGUF file of metadata only (no tensors): a tiny llama's hyperparameters with the
# overrides given, for the bounds tests of the GGUF path; no gguf-py needed.
#   python3 mk_gguf.py OUT.gguf [KEY=TYPE:VALUE ...]   TYPE: u32, f32 or str; VALUE nan, inf ok
import struct
import sys

kvs = {"general.architecture": ("str", "llama"), "llama.embedding_length": ("u32", 16),
       "llama.feed_forward_length": ("u32", 32), "llama.block_count": ("u32", 1),
       "llama.attention.head_count": ("u32", 2), "llama.attention.head_count_kv": ("u32", 1),
       "llama.context_length": ("u32", 64), "llama.vocab_size": ("u32", 32),
       "llama.attention.layer_norm_rms_epsilon": ("f32", 1e-5),
       "llama.rope.freq_base": ("f32", 10000.0)}
for arg in sys.argv[2:]:
    key, tv = arg.split("=", 1)
    t, v = tv.split(":", 1)
    kvs[key] = (t, int(v) if t == "u32" else float(v) if t == "f32" else v)


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
for key, (t, v) in kvs.items():
    out += string(key)
    if t == "u32":
        out += struct.pack("<II", 4, v)
    elif t == "f32":
        out += struct.pack("<If", 6, v)
    else:
        out += struct.pack("<I", 8) + string(v)
out += bytes(-len(out) % 32)
with open(sys.argv[1], "wb") as f:
    f.write(out)
