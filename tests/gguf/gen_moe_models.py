"""GGUF files of the mixture-of-experts models (issue 32) as llama.cpp's convert_hf_to_gguf.py
writes them, with PyPI's `gguf` package (requirements.txt) writing the files, for
tests/unit/test_gguf_archs.c. Run from anywhere: python3 tests/gguf/gen_moe_models.py (after
gen_models.py, whose helpers it uses). CI uses the committed outputs.

Architectures and names (the converter's LlamaModel for Mixtral, Qwen2MoeModel, Qwen3MoeModel):
  tiny-mixtral as "llama" (q/k rows permuted as for every llama), tiny-qwen2-moe as "qwen2moe"
  (q/k/v biases, the shared expert), tiny-qwen3-moe as "qwen3moe" (q/k norms, head_dim 32 as
  attention.key_length). Keys: ARCH.expert_count, ARCH.expert_used_count, for Qwen
  ARCH.expert_feed_forward_length (moe_intermediate_size) and for Qwen2-MoE
  ARCH.expert_shared_feed_forward_length. Tensors of a sparse layer: blk.N.ffn_gate_inp (the
  router, F32 as the converter and llama-quantize keep it), blk.N.ffn_gate_exps, ffn_up_exps and
  ffn_down_exps (each expert's w1 / gate_proj, w3 / up_proj, w2 / down_proj stacked on a leading
  axis: numpy [E, out, in], ggml ne {in, out, E}), Qwen2-MoE's ffn_gate_shexp, ffn_up_shexp,
  ffn_down_shexp and ffn_gate_inp_shexp (the shared expert's gate [1, H] written squeezed, [H]
  F32, as llama.cpp declares it: {n_embd}). A dense layer of these models (Qwen's
  mlp_only_layers and decoder_sparse_step: tiny-qwen2-moe's layer 1, tiny-qwen3-moe's layer 0)
  holds ffn_gate, ffn_up and ffn_down and no router. tiny-qwen2-moe's windows (transformers 5: 32
  on layers 0 and 2) are written with the keys gguf-py defines for per-layer windows
  (attention.sliding_window and its pattern), as gen_models.py does for tiny-qwen3.

models/<model>-f16.gguf: every 2-D and 3-D weight in F16. tiny-qwen3-moe (f16) converts exactly
  (checked here): its reference is the checkpoint's, tests/llm/ref/tiny-qwen3-moe. tiny-mixtral
  (f32) and tiny-qwen2-moe (bf16, some of whose values lie below f16's normal range) do not:
  their references, ref/<model>-f16.json, are transformers on the checkpoint with those weights
  rounded to f16 (the file's exact weights).
models/<model>-256-q4_k.gguf: a true K-quant of each: the model at 256-wide shapes (hidden 256, 4
  heads of 64, vocab 256, 2 layers, 4 experts of intermediate 256, 2 per token; Qwen2-MoE's
  shared expert 256), made here with tests/llm/gen_models.py's random weights (its spec of the
  64-wide model, the sizes overridden; the checkpoint is not kept: the file and its reference
  are the fixture), every 2-D and 3-D weight but the routers in Q4_K (quantize_q4_k of
  gen_models.py), as `llama-quantize --pure <f16> Q4_K_M` writes it. Their references,
  ref/<model>-256-q4_k.json: transformers (f32, eager) on the checkpoint with those weights
  replaced by gguf-py's dequantization of the file's blocks, prompts redrawn until every greedy
  choice and every router choice is clear (MIN_GAP, ROUTER_MIN_GAP).
models/bad-moe-*.gguf: tiny files for tests/lit/run/gguf_moe.test (broken_moe): a 1-layer llama
  with 4 experts, F32 zeros, and one thing wrong; ../fuzz/corpus/gguf_model/moe_llama.gguf the same
  file with nothing wrong, a seed of fuzz_gguf_model."""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_models as G  # noqa: E402

MOE_MODELS = (("tiny-mixtral", "llama"), ("tiny-qwen2-moe", "qwen2moe"),
              ("tiny-qwen3-moe", "qwen3moe"))
# the models whose F16 file rounds the checkpoint: tiny-mixtral (f32), tiny-qwen2-moe (bf16 values
# below f16's normal range lose bits)
F16_OWN_REF = ("tiny-mixtral", "tiny-qwen2-moe")
ATTN = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
        "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
        "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
        "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
        "mlp.shared_expert.up_proj": "ffn_up_shexp",
        "mlp.shared_expert.down_proj": "ffn_down_shexp"}


def rope_theta(cfg):
    return cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"]


def hparams(w, arch, cfg):
    """TextModel's keys, then the MoE classes' (LlamaModel, Qwen2MoeModel, Qwen3MoeModel)."""
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(rope_theta(cfg))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if cfg.get("head_dim"):
        w.add_key_length(cfg["head_dim"])
        w.add_value_length(cfg["head_dim"])
    w.add_expert_count(cfg.get("num_local_experts") or cfg["num_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    if arch == "llama":
        w.add_vocab_size(cfg["vocab_size"])
        w.add_rope_dimension_count(cfg["hidden_size"] // cfg["num_attention_heads"])
    else:
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    if arch == "qwen2moe":
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
        if cfg.get("use_sliding_window"):  # transformers 5's Qwen2MoeConfig.layer_types
            w.add_sliding_window(cfg["sliding_window"])
            w.add_sliding_window_pattern([(l + 1) % 2 == 1 and l < cfg["max_window_layers"]
                                          for l in range(cfg["num_hidden_layers"])])


def tensors(arch, cfg, st):
    """(gguf name, checkpoint names, array): the stacked experts name their E checkpoint
    tensors; the router and the shared expert's gate are F32 by the converter."""
    E = cfg.get("num_local_experts") or cfg["num_experts"]
    h, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    out = [("token_embd.weight", ["model.embed_tokens.weight"], st["model.embed_tokens.weight"])]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        for hf, gg in ATTN.items():
            for kind in ("weight", "bias"):
                k = f"{p}{hf}.{kind}"
                if k not in st:
                    continue
                t = st[k]
                if arch == "llama" and gg in ("attn_q", "attn_k"):
                    t = G.permute(t, h if gg == "attn_q" else kv)
                out.append((f"blk.{l}.{gg}.{kind}", [k], t))
        mix = p + "block_sparse_moe.gate.weight" in st
        router = p + ("block_sparse_moe.gate.weight" if mix else "mlp.gate.weight")
        if router not in st:
            continue  # a dense layer
        out.append((f"blk.{l}.ffn_gate_inp.weight", [router], st[router]))
        for gg, (m, q) in (("ffn_gate_exps", ("w1", "gate_proj")), ("ffn_up_exps", ("w3", "up_proj")),
                           ("ffn_down_exps", ("w2", "down_proj"))):
            names = [f"{p}block_sparse_moe.experts.{e}.{m}.weight" if mix else
                     f"{p}mlp.experts.{e}.{q}.weight" for e in range(E)]
            out.append((f"blk.{l}.{gg}.weight", names, np.stack([st[n] for n in names])))
        k = p + "mlp.shared_expert_gate.weight"
        if k in st:
            out.append((f"blk.{l}.ffn_gate_inp_shexp.weight", [k], st[k].reshape(-1)))
    out.append(("output_norm.weight", ["model.norm.weight"], st["model.norm.weight"]))
    if "lm_head.weight" in st:
        out.append(("output.weight", ["lm_head.weight"], st["lm_head.weight"]))
    return [(n, hf, np.ascontiguousarray(t, dtype=np.float32)) for n, hf, t in out]


def keeps_f32(name, t):
    return t.ndim == 1 or "ffn_gate_inp" in name


def load_checkpoint(folder):
    from safetensors.torch import load_file as load_torch
    return {k: v.float().numpy() for k, v in load_torch(os.path.join(folder, "model.safetensors")).items()}


def write(path, arch, cfg, name, tensors_out, qtype):
    """The file, and {checkpoint name: the file's exact weights} of what it rounds or quantizes."""
    w = gguf.GGUFWriter(path, arch)
    w.add_name(name)
    hparams(w, arch, cfg)
    w.add_file_type({T.F16: 1, T.Q4_K: 15}[qtype])
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    exact = {}
    for n, hf, t in tensors_out:
        if keeps_f32(n, t):
            w.add_tensor(n, t)
            continue
        if qtype == T.F16:
            back = t.astype(np.float16)
            w.add_tensor(n, back)
            back = back.astype(np.float32)
        else:
            assert t.shape[-1] % 256 == 0, (n, t.shape)
            blocks = G.quantize_q4_k(t.reshape(-1, t.shape[-1])).reshape(*t.shape[:-1], -1)
            back = gguf.quants.dequantize(blocks, T.Q4_K).reshape(t.shape).astype(np.float32)
            err = np.abs(back - t).max() / np.abs(t).max()
            assert err < 0.1, (n, err)  # gguf-py reads the blocks as quantize_q4_k meant them
            w.add_tensor(n, blocks, raw_dtype=T.Q4_K)
        if arch == "llama" and (".attn_q." in n or ".attn_k." in n):  # the checkpoint's rows
            h = cfg["num_attention_heads"] if ".attn_q." in n else cfg["num_key_value_heads"]
            back = unpermute(back, h)
        for i, k in enumerate(hf):
            exact[k] = back[i] if len(hf) > 1 else back
    G.finish(w)
    return exact


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def refs(llm, folder, name, exact, what):
    """ref/<name>.json and ref/<name>/*.npy in the format of tests/llm/ref: transformers (f32,
    eager) on the checkpoint of folder with the weights `exact` in place of its own."""
    import torch
    from safetensors.torch import save_file
    tmp = tempfile.mkdtemp()
    try:
        for f in os.listdir(folder):
            if f.endswith(".json"):
                shutil.copy(os.path.join(folder, f), tmp)
        st = load_checkpoint(folder)
        st.update(exact)
        save_file({k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in st.items()},
                  os.path.join(tmp, "model.safetensors"))
        model = llm.load_f32(tmp)
        best = None
        for attempt in range(100):
            prompts = llm.prompts_for(name, model, attempt)
            results, toks, gaps, min_gap = llm.compute_refs(model, prompts)
            rgap = llm.router_gap(model, [prompts[L] + results[L][1] for L in llm.PROMPT_LENGTHS] +
                                  [prompts[llm.GREEDY_PROMPT] + toks])
            if best is None or min(min_gap, rgap * 5) > min(best[4], best[5] * 5):
                best = (prompts, results, toks, gaps, min_gap, rgap)
            if min_gap >= llm.MIN_GAP and rgap >= llm.ROUTER_MIN_GAP:
                break
        prompts, results, toks, gaps, min_gap, rgap = best
        assert min_gap >= 0.005 and rgap >= 1e-3, (name, min_gap, rgap)
        moe = llm.check_moe_routing(model, name, prompts, rgap)
    finally:
        shutil.rmtree(tmp)
    out_dir = os.path.join(HERE, "ref", name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    ref = {"model": name, "architecture": model.config.architectures[0], "weights": what,
           "transformers": llm.transformers.__version__, "torch": torch.__version__,
           "attn_implementation": "eager",
           "prompts": {str(L): prompts[L] for L in llm.PROMPT_LENGTHS}, "prefill": {}, "decode": {}}
    for L in llm.PROMPT_LENGTHS:
        prefill, fed, rows, err = results[L]
        np.save(os.path.join(out_dir, f"prefill_{L}.npy"), prefill.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, f"decode_{L}.npy"), rows.numpy().astype(np.float32))
        ref["prefill"][str(L)] = f"prefill_{L}.npy"
        ref["decode"][str(L)] = {"tokens": fed, "logits": f"decode_{L}.npy"}
    ref["greedy"] = {"prompt": prompts[llm.GREEDY_PROMPT], "tokens": toks,
                     "gaps": [round(g, 6) for g in gaps]}
    ref["moe"] = moe
    with open(os.path.join(HERE, "ref", f"{name}.json"), "w") as f:
        f.write(llm.dump_ref(ref))
    print(name, "greedy", toks, "min gap", round(min_gap, 4), "router gap", round(rgap, 4))


def make_256(llm, model, tmp):
    """The 256-wide variant of model (random weights of tests/llm/gen_models.py) in tmp."""
    import torch
    common = dict(llm.COMMON, vocab_size=256, hidden_size=256, intermediate_size=256)
    cls, cfg, dtype = llm.random_spec_of(model, common, 64)
    cfg.num_hidden_layers = 2
    if model == "tiny-qwen3-moe":
        cfg.head_dim = 64  # its spec's 32: 4 heads of 64 read the 256-wide hidden state
    if model == "tiny-mixtral":
        cfg.num_local_experts = 4
    else:
        cfg.num_experts = 4
        cfg.moe_intermediate_size = 256
    if model == "tiny-qwen2-moe":
        cfg.shared_expert_intermediate_size = 256
        cfg.mlp_only_layers = [1]
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = cfg.layer_types[:2]
    torch.manual_seed(256)
    m = cls._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    llm.randomize(m, 256)
    m.eval()
    m.to(dtype).save_pretrained(tmp, safe_serialization=True)
    llm.write_legacy_config(tmp)
    return tmp


def broken_moe(name, used=2, count=4, drop=None, reshape=None, path=None):
    """models/bad-moe-<name>.gguf for tests/lit/run/gguf_moe.test: a 1-layer llama with 4 experts
    (hidden 16, 2 heads, feed-forward 32, vocab 16, F32 zeros; no tokenizer) with one thing
    wrong: a tensor dropped, a tensor's shape, expert_used_count, or no expert_count."""
    w = gguf.GGUFWriter(path or os.path.join(HERE, "models", f"bad-moe-{name}.gguf"), "llama")
    for k, v in (("context_length", 64), ("embedding_length", 16), ("block_count", 1),
                 ("feed_forward_length", 32), ("attention.head_count", 2), ("expert_count", count),
                 ("expert_used_count", used)):
        if v is not None:
            w.add_uint32(f"llama.{k}", v)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    shapes = {"token_embd.weight": (16, 16), "output_norm.weight": (16,)}
    for t, shp in (("attn_norm", (16,)), ("attn_q", (16, 16)), ("attn_k", (16, 16)),
                   ("attn_v", (16, 16)), ("attn_output", (16, 16)), ("ffn_norm", (16,)),
                   ("ffn_gate_inp", (4, 16)), ("ffn_gate_exps", (4, 32, 16)),
                   ("ffn_up_exps", (4, 32, 16)), ("ffn_down_exps", (4, 16, 32))):
        shapes[f"blk.0.{t}.weight"] = shp
    if reshape:
        shapes[reshape[0]] = reshape[1]
    for n, shp in shapes.items():
        if n != drop:
            w.add_tensor(n, np.zeros(shp, dtype=np.float32))
    G.finish(w)


def main():
    only = sys.argv[1:]  # models (tiny-mixtral ...) and kinds (f16, q4_k) to make; none: all
    broken_moe("missing", drop="blk.0.ffn_up_exps.weight")
    broken_moe("shape", reshape=("blk.0.ffn_down_exps.weight", (4, 16, 24)))
    broken_moe("used", used=5)
    broken_moe("count", count=None)
    # nothing wrong: the seed of fuzz_gguf_model that reaches the experts' reader
    broken_moe("seed", path=os.path.join(HERE, "..", "fuzz", "corpus", "gguf_model", "moe_llama.gguf"))
    llm = G.load_llm_script()
    llm.setup_determinism()
    for model, arch in MOE_MODELS:
        if only and (model not in only or "f16" not in only):
            continue
        folder = os.path.join(G.LLM, model)
        cfg = json.load(open(os.path.join(folder, "config.json")))
        st = load_checkpoint(folder)
        ts = tensors(arch, cfg, st)
        exact = write(os.path.join(HERE, "models", f"{model}-f16.gguf"), arch, cfg, model, ts, T.F16)
        diff = max(float(np.abs(v - st[k]).max()) for k, v in exact.items())
        print(model, "F16 vs the checkpoint: largest difference", diff)
        if model in F16_OWN_REF:
            refs(llm, folder, f"{model}-f16", exact, "the checkpoint's weights rounded to f16 "
                 "(the file's), norms and routers f32")
        else:
            assert diff == 0, model  # the reference is tests/llm/ref's
    for model, arch in MOE_MODELS:
        if only and (model not in only or "q4_k" not in only):
            continue
        tmp = tempfile.mkdtemp()
        try:
            make_256(llm, model, tmp)
            cfg = json.load(open(os.path.join(tmp, "config.json")))
            ts = tensors(arch, cfg, load_checkpoint(tmp))
            name = f"{model}-256-q4_k"
            exact = write(os.path.join(HERE, "models", f"{name}.gguf"), arch, cfg, model + "-256",
                          ts, T.Q4_K)
            refs(llm, tmp, name, exact, "gguf-py's dequantization of the file's Q4_K blocks "
                 "(2-D and 3-D), checkpoint (norms, routers)")
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
