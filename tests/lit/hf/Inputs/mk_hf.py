# Writes a tiny Hugging Face model folder (config.json + model.safetensors, zero weights) with one
# thing wrong, for the importer's error tests; no NumPy or torch needed.
#   python3 mk_hf.py OUT_DIR good|arch|missing|shape|key|headdim|noweights|rope|syntax|inftheta|
#                            geneos|badtok|badindex|moe|moemissing|moedtype
# (moe*: a MixtralForCausalLM of 3 experts, 2 per token; moemissing lacks expert 1's w3, moedtype
# holds expert 2's w2 in f16)
import json
import os
import struct
import sys

out, mode = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
H, I, L, NH, KV, D, V = 16, 32, 1, 2, 1, 8, 32
config = {"architectures": ["LlamaForCausalLM"], "hidden_size": H, "intermediate_size": I,
          "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KV,
          "head_dim": D, "vocab_size": V, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
          "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
          "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2}
if mode == "arch":
    config["architectures"] = ["GPT2LMHeadModel"]
if mode == "key":
    config["num_attention_heads"] = 0
if mode == "headdim":  # no head_dim, and hidden_size / heads = 0 (found by fuzz_hf_config)
    config["hidden_size"] = 1
    del config["head_dim"]
if mode == "rope":
    config["rope_scaling"] = {"rope_type": "dynamic", "factor": 4.0}
tensors = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
for l in range(L):
    p = "model.layers.%d." % l
    tensors.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                    p + "self_attn.q_proj.weight": [NH * D, H],
                    p + "self_attn.k_proj.weight": [KV * D, H],
                    p + "self_attn.v_proj.weight": [KV * D, H],
                    p + "self_attn.o_proj.weight": [H, NH * D], p + "mlp.gate_proj.weight": [I, H],
                    p + "mlp.up_proj.weight": [I, H], p + "mlp.down_proj.weight": [H, I]})
dtypes = {}
if mode.startswith("moe"):
    config.update(architectures=["MixtralForCausalLM"], num_local_experts=3, num_experts_per_tok=2)
    for l in range(L):
        p = "model.layers.%d." % l
        for k in ("gate", "up", "down"):
            del tensors[p + "mlp.%s_proj.weight" % k]
        tensors[p + "block_sparse_moe.gate.weight"] = [3, H]
        for e in range(3):
            q = p + "block_sparse_moe.experts.%d." % e
            tensors.update({q + "w1.weight": [I, H], q + "w3.weight": [I, H], q + "w2.weight": [H, I]})
if mode == "moemissing":
    del tensors["model.layers.0.block_sparse_moe.experts.1.w3.weight"]
if mode == "moedtype":
    dtypes["model.layers.0.block_sparse_moe.experts.2.w2.weight"] = "F16"
if mode == "missing":
    del tensors["model.layers.0.mlp.down_proj.weight"]
if mode == "shape":
    tensors["model.layers.0.self_attn.k_proj.weight"] = [NH * D, H]
with open(os.path.join(out, "config.json"), "w") as f:
    text = json.dumps(config, indent=1)
    if mode == "syntax":  # a missing comma at the end of line 5: the error at 6:2
        text = text.replace('"hidden_size": 16,', '"hidden_size": 16')
    if mode == "inftheta":  # beyond a double: cJSON reads infinity
        text = text.replace('"rope_theta": 10000.0', '"rope_theta": 1e999')
    f.write(text)
if mode == "geneos":  # an end-of-sequence id outside the vocabulary of 32
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": [2, 32]}, f)
if mode == "badtok":  # a merge naming a token the vocabulary lacks
    tok = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
           "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a c"]}}
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
if mode == "badindex":  # a shard index with a trailing comma on line 2
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        f.write('{"weight_map": {"lm_head.weight": "model-00001-of-00001.safetensors",\n}}')
if mode not in ("noweights", "badindex"):
    header, offset = {}, 0
    for name, shape in tensors.items():
        dt = dtypes.get(name, "F32")
        n = 2 if dt == "F16" else 4
        for d in shape:
            n *= d
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header).encode()
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(offset))
