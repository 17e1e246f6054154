"""Exports the trained tiny Llama of tests/llm/models/kjv-llama to GGUF the way llama.cpp's
convert_hf_to_gguf.py does, with PyPI's `gguf` package (requirements.txt) writing the files, so
that relaxc's GGUF front end (frontends/hf/gguf.c) is checked on files of the reference writer
against the same model read from safetensors. Run from anywhere: python3 tests/gguf/gen_models.py.
CI uses the committed outputs (deterministic: no randomness).

models/kjv-llama-<type>.gguf for <type> in f16, q8_0, q4_0:
  architecture "llama": llama.* hyperparameters from config.json; tensors named as llama.cpp names
  them (token_embd, blk.N.attn_norm/attn_q/attn_k/attn_v/attn_output/ffn_norm/ffn_gate/ffn_up/
  ffn_down, output_norm, output); the rows of attn_q and attn_k permuted as the converter permutes
  them (each head's rotary pairs (i, i + d/2) made adjacent, for ggml's interleaved rope); norms
  in F32; every 2-D weight (token_embd and output included) in <type>, quantized by
  gguf.quants.quantize; the tokenizer (byte-level BPE) as tokenizer.ggml.model "gpt2" with its
  tokens, token types (3 for the special tokens), merges, bos/eos ids and add_bos_token.

models/tiny-qwen2-f16.gguf: tests/llm/models/tiny-qwen2 (random weights, no tokenizer) as
  architecture "qwen2": q/k/v biases in F32, rows not permuted (llama.cpp runs qwen2 with NEOX
  rope), no output.weight (tied embeddings), 2-D weights in F16.
models/bad-*.gguf: tiny files for the error tests of tests/lit/run/gguf.test, each a 1-layer
  llama (hidden 32, 2 heads, feed-forward 64, vocab 32, F32 zeros) with one thing wrong:
  bad-arch (general.architecture "gptneox"), bad-missing (no blk.0.ffn_down.weight),
  bad-shape (blk.0.ffn_down.weight of [32, 48] instead of [32, 64]).
../fuzz/corpus/gguf/llama_tokenizer.gguf: a seed of fuzz_gguf that reaches the model front end:
  the llama.* keys of a tiny model and a gpt2 tokenizer of 8 tokens (no tensors)."""
import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "llm", "models", "kjv-llama")


def hparams(w, cfg):
    """The hyperparameters of config.json as the converter writes them."""
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def permute(w, n_head):
    """llama.cpp's converter: rows (h, 2, d/2) -> (h, d/2, 2)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensors(cfg, st):
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    yield "token_embd.weight", st["model.embed_tokens.weight"]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        yield f"blk.{l}.attn_norm.weight", st[p + "input_layernorm.weight"]
        yield f"blk.{l}.attn_q.weight", permute(st[p + "self_attn.q_proj.weight"], h)
        yield f"blk.{l}.attn_k.weight", permute(st[p + "self_attn.k_proj.weight"], kv)
        yield f"blk.{l}.attn_v.weight", st[p + "self_attn.v_proj.weight"]
        yield f"blk.{l}.attn_output.weight", st[p + "self_attn.o_proj.weight"]
        yield f"blk.{l}.ffn_norm.weight", st[p + "post_attention_layernorm.weight"]
        yield f"blk.{l}.ffn_gate.weight", st[p + "mlp.gate_proj.weight"]
        yield f"blk.{l}.ffn_up.weight", st[p + "mlp.up_proj.weight"]
        yield f"blk.{l}.ffn_down.weight", st[p + "mlp.down_proj.weight"]
    yield "output_norm.weight", st["model.norm.weight"]
    yield "output.weight", st["lm_head.weight"]


def export_qwen2():
    src = os.path.join(HERE, "..", "llm", "models", "tiny-qwen2")
    cfg = json.load(open(os.path.join(src, "config.json")))
    st = load_file(os.path.join(src, "model.safetensors"))
    w = gguf.GGUFWriter(os.path.join(HERE, "models", "tiny-qwen2-f16.gguf"), "qwen2")
    hparams(w, cfg)
    w.add_file_type(1)
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
             "post_attention_layernorm": "ffn_norm"}
    out = [("token_embd.weight", st["model.embed_tokens.weight"])]
    for l in range(cfg["num_hidden_layers"]):
        for hf, gg in names.items():
            for kind in ("weight", "bias"):
                k = f"model.layers.{l}.{hf}.{kind}"
                if k in st:
                    out.append((f"blk.{l}.{gg}.{kind}", st[k]))
    out.append(("output_norm.weight", st["model.norm.weight"]))
    for n, t in out:
        t = np.ascontiguousarray(t.astype(np.float32))
        w.add_tensor(n, t if t.ndim == 1 else t.astype(np.float16))
    finish(w)


def tokenizer(w, cfg):
    tok = json.load(open(os.path.join(SRC, "tokenizer.json")))
    vocab = tok["model"]["vocab"]
    tokens = [None] * cfg["vocab_size"]
    for s, i in vocab.items():
        tokens[i] = s
    special = {a["id"] for a in tok["added_tokens"] if a["special"]}
    for a in tok["added_tokens"]:
        tokens[a["id"]] = a["content"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in special else 1 for i in range(len(tokens))])
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_add_bos_token(True)


def export(qtype, name):
    cfg = json.load(open(os.path.join(SRC, "config.json")))
    st = load_file(os.path.join(SRC, "model.safetensors"))
    path = os.path.join(HERE, "models", f"kjv-llama-{name}.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("kjv-llama")
    hparams(w, cfg)
    w.add_rope_dimension_count(cfg["head_dim"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type({T.F16: 1, T.Q8_0: 7, T.Q4_0: 2}[qtype])
    tokenizer(w, cfg)
    for n, t in tensors(cfg, st):
        t = np.ascontiguousarray(t.astype(np.float32))
        if t.ndim == 1:
            w.add_tensor(n, t)
        elif qtype == T.F16:
            w.add_tensor(n, t.astype(np.float16))
        else:
            w.add_tensor(n, gguf.quants.quantize(t, qtype), raw_dtype=qtype)
    finish(w)


def broken(name, arch="llama", drop=None, reshape=None):
    w = gguf.GGUFWriter(os.path.join(HERE, "models", f"bad-{name}.gguf"), arch)
    for k, v in (("context_length", 64), ("embedding_length", 32), ("block_count", 1),
                 ("feed_forward_length", 64), ("attention.head_count", 2)):
        w.add_uint32(f"{arch}.{k}", v)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    shapes = {"token_embd.weight": (32, 32), "output_norm.weight": (32,)}
    for t, shp in (("attn_norm", (32,)), ("attn_q", (32, 32)), ("attn_k", (32, 32)),
                   ("attn_v", (32, 32)), ("attn_output", (32, 32)), ("ffn_norm", (32,)),
                   ("ffn_gate", (64, 32)), ("ffn_up", (64, 32)), ("ffn_down", (32, 64))):
        shapes[f"blk.0.{t}.weight"] = shp
    if reshape:
        shapes[reshape[0]] = reshape[1]
    for n, shp in shapes.items():
        if n != drop:
            w.add_tensor(n, np.zeros(shp, dtype=np.float32))
    finish(w)


def fuzz_seed():
    w = gguf.GGUFWriter(os.path.join(HERE, "..", "fuzz", "corpus", "gguf", "llama_tokenizer.gguf"),
                        "llama")
    for k, v in (("context_length", 64), ("embedding_length", 32), ("block_count", 1),
                 ("feed_forward_length", 64), ("attention.head_count", 2), ("vocab_size", 8)):
        w.add_uint32(f"llama.{k}", v)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(["<s>", "</s>", "a", "b", "\u0120", "ab", "\u0120a", "\"q\""])
    w.add_token_types([3, 3, 1, 1, 1, 1, 1, 4])
    w.add_token_merges(["a b", "\u0120 a"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_add_bos_token(True)
    finish(w)


if __name__ == "__main__":
    os.makedirs(os.path.join(HERE, "models"), exist_ok=True)
    for q, n in ((T.F16, "f16"), (T.Q8_0, "q8_0"), (T.Q4_0, "q4_0")):
        export(q, n)
    export_qwen2()
    broken("arch", arch="gptneox")
    broken("missing", drop="blk.0.ffn_down.weight")
    broken("shape", reshape=("blk.0.ffn_down.weight", (32, 48)))
    fuzz_seed()
