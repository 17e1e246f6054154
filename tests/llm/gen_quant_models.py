#!/usr/bin/env python3
"""Makes the quantized-checkpoint fixtures of issue 32 (tests/llm/README.md, "Quantized
checkpoints"): tiny-llama-gqa's projections written in the formats the quantization tools write,
with their config.json quantization_config, and the transformers references of each.

    pip install -r tests/llm/requirements.txt
    python3 tests/llm/gen_quant_models.py     # about a minute on one core

Models (tests/llm/models/<name>, one model.safetensors each):

    tiny-llama-awq      AutoAWQ GEMM, 4 bits, group 32, zero points: qweight i32 [in, out/8]
                        (AWQ's order [0, 2, 4, 6, 1, 3, 5, 7] in each int32), qzeros i32
                        [in/32, out/8], scales f16 [in/32, out]
    tiny-llama-gptq     GPTQ (AutoGPTQ / GPTQModel's "gptq" checkpoint format: zeros stored
                        minus 1), 4 bits, group 32, desc_act true (g_idx a permuted grouping),
                        sym false: qweight i32 [in/8, out], qzeros i32 [groups, out/8], scales
                        f16 [groups, out], g_idx i32 [in]
    tiny-llama-fp8      compressed-tensors float-quantized FP8 e4m3, one f32 scale per tensor
                        (weight F8_E4M3 [out, in], weight_scale f32 [1]), ignore ["lm_head"]
    tiny-llama-fp8ch    the same with a scale per output channel (weight_scale f32 [out, 1])

The quantizer is round-to-nearest in NumPy (the algorithm does not matter here, the format
does). The reference of each model is transformers (eager, f32) running the *dense* model whose
projections are the NumPy dequantization of the written files (dequantize_* below, written from
the formats' documentation: AutoAWQ's and GPTQ's dequantizers, the OCP FP8 E4M3 definition),
independent of relaxc's reader, so relaxc running the quantized folder must match it to f32
rounding.

Where transformers loads a folder itself, the script checks it against the same references
(check_peer): the FP8 folders with compressed-tensors installed (requirements-quant.txt; 1.9e-7
relative L2 or less at every prompt length, recorded as "peer_rel_l2" in the ref JSON). The AWQ
and GPTQ folders need autoawq or gptqmodel (CUDA extensions, not installed here): not checked.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np
import safetensors.numpy
import safetensors.torch
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_models as gm  # noqa: E402  (prompts, references, their JSON)

SOURCE = "tiny-llama-gqa"
PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]          # AutoAWQ's pack order of the 8 columns of an int32
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]  # its dequantizer's inverse
G = 32


def source_weights():
    out = {}
    folder = os.path.join(gm.MODELS, SOURCE)
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".safetensors"):
            out.update(safetensors.numpy.load_file(os.path.join(folder, fn)))
    return out


def modules(w):
    return [k[:-len(".weight")] for k in w if k.endswith(".weight") and
            any(k.endswith(p + ".weight") for p in PROJ)]


def pack_i32(vals):  # [..., 8] of 0..15 -> int32 [...], value i in bits 4i
    u = np.zeros(vals.shape[:-1], np.uint32)
    for i in range(8):
        u |= vals[..., i].astype(np.uint32) << np.uint32(4 * i)
    return u.view(np.int32)


def unpack_i32(x):  # int32 [...] -> [..., 8] of 0..15, field i = bits 4i
    u = x.view(np.uint32)[..., None]
    return ((u >> (np.arange(8, dtype=np.uint32) * 4)) & 15).astype(np.int64)


def rtn_asym(wg):
    """Round-to-nearest over the last axis: f16 scale, zero in 0..15, q in 0..15."""
    lo = np.minimum(wg.min(-1), 0)
    hi = np.maximum(wg.max(-1), 0)
    s = np.float16((hi - lo) / 15).astype(np.float32)
    s = np.where(s > 0, s, np.float32(1))
    z = np.clip(np.round(-lo / s), 0, 15)
    q = np.clip(np.round(wg / s[..., None]) + z[..., None], 0, 15)
    return q.astype(np.int64), s.astype(np.float16), z.astype(np.int64)


# ---- AWQ ----
def quant_awq(W):
    out, inn = W.shape
    wg = W.T.reshape(inn // G, G, out).transpose(0, 2, 1)  # [groups, out, G]
    q, s, z = rtn_asym(wg)                                  # q [groups, out, G]
    iw = q.transpose(0, 2, 1).reshape(inn, out)             # intweight [in, out]
    qweight = pack_i32(iw.reshape(inn, out // 8, 8)[:, :, AWQ_ORDER])
    qzeros = pack_i32(z.reshape(inn // G, out // 8, 8)[:, :, AWQ_ORDER])
    return {"qweight": qweight, "qzeros": qzeros, "scales": s}


def dequantize_awq(t):
    """AutoAWQ's dequantize_gemm: unpack with shifts [0, 4, ..., 28], reorder the columns by
    AWQ_REVERSE_ORDER, W^T = (iweight - izeros) * scales, the group of row k being k // G."""
    qw, qz, s = t["qweight"], t["qzeros"], t["scales"].astype(np.float32)
    inn = qw.shape[0]
    iw = unpack_i32(qw)[:, :, AWQ_REVERSE_ORDER].reshape(inn, -1)
    iz = unpack_i32(qz)[:, :, AWQ_REVERSE_ORDER].reshape(qz.shape[0], -1)
    g = np.arange(inn) // (inn // qz.shape[0])
    return ((iw - iz[g]) * s[g]).T.astype(np.float32)


# ---- GPTQ (desc_act, v1 zeros) ----
def quant_gptq(W, rng):
    out, inn = W.shape
    perm = rng.permutation(inn)                 # act order: k = perm[i] is quantized i-th
    g_idx = np.empty(inn, np.int32)
    g_idx[perm] = np.arange(inn) // G           # GPTQ's g_idx = invperm // group_size
    ng = (inn + G - 1) // G
    q = np.zeros((inn, out), np.int64)
    s = np.zeros((ng, out), np.float16)
    z = np.zeros((ng, out), np.int64)
    for gi in range(ng):
        ks = np.nonzero(g_idx == gi)[0]
        qq, ss, zz = rtn_asym(W[:, ks])        # over the group's k for each output row
        q[ks] = qq.T
        s[gi], z[gi] = ss, zz
    qweight = pack_i32(q.reshape(inn // 8, 8, out).transpose(0, 2, 1))
    qzeros = pack_i32(((z - 1) & 15).reshape(ng, out // 8, 8))  # v1: zero - 1
    return {"qweight": qweight, "qzeros": qzeros, "scales": s, "g_idx": g_idx}


def dequantize_gptq(t, v1=True):
    """GPTQ's dequantizer (AutoGPTQ / transformers' reference path): weights and zeros unpacked
    with shifts, zeros + 1 (& 15) in the v1 format, W^T[k] = scales[g_idx[k]] (w - zeros[g])."""
    qw, qz, s, g = t["qweight"], t["qzeros"], t["scales"].astype(np.float32), t["g_idx"]
    w = unpack_i32(qw).transpose(0, 2, 1).reshape(-1, qw.shape[1])  # [in, out]
    zz = unpack_i32(qz).reshape(qz.shape[0], -1)
    if v1:
        zz = (zz + 1) & 15
    return (s[g] * (w - zz[g])).T.astype(np.float32)


# ---- FP8 ----
def e4m3_decode(b):
    """OCP FP8 E4M3 (fn: no infinities): sign, exponent of bias 7, 3 mantissa bits."""
    b = b.astype(np.int64)
    sign = np.where(b >= 128, -1.0, 1.0)
    e, m = (b >> 3) & 15, b & 7
    v = np.where(e == 0, m * 2.0 ** -9, (8 + m) * 2.0 ** (e - 10))
    return (sign * v).astype(np.float32)


def quant_fp8(W, per_channel):
    amax = np.abs(W).max(axis=1, keepdims=True) if per_channel else np.abs(W).max().reshape(1)
    scale = (amax / 448.0).astype(np.float32)
    q = torch.from_numpy(W / (scale if per_channel else scale[0])).to(torch.float8_e4m3fn)
    return {"weight": q, "weight_scale": torch.from_numpy(scale)}


def dequantize_fp8(t):
    b = t["weight"].view(torch.uint8).numpy()
    s = t["weight_scale"].numpy().astype(np.float32)
    return e4m3_decode(b) * (s if s.ndim == 2 else s[0])


FORMATS = {
    "tiny-llama-awq": {
        "quant": lambda W, rng: quant_awq(W), "deq": dequantize_awq,
        "config": {"quant_method": "awq", "version": "gemm", "bits": 4, "group_size": G,
                   "zero_point": True, "modules_to_not_convert": None}},
    "tiny-llama-gptq": {
        "quant": quant_gptq, "deq": dequantize_gptq,
        "config": {"quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": True,
                   "sym": False, "static_groups": False, "true_sequential": True,
                   "damp_percent": 0.01, "lm_head": False, "checkpoint_format": "gptq"}},
}


def ct_config(strategy):
    return {"quant_method": "compressed-tensors", "format": "float-quantized",
            "quantization_status": "compressed", "ignore": ["lm_head"], "kv_cache_scheme": None,
            "config_groups": {"group_0": {
                "targets": ["Linear"], "input_activations": None, "output_activations": None,
                "weights": {"num_bits": 8, "type": "float", "strategy": strategy,
                            "symmetric": True, "dynamic": False, "group_size": None,
                            "block_structure": None, "actorder": None, "observer": "minmax",
                            "observer_kwargs": {}}}}}


FORMATS["tiny-llama-fp8"] = {"quant": lambda W, rng: quant_fp8(W, False), "deq": dequantize_fp8,
                             "config": ct_config("tensor"), "torch": True}
FORMATS["tiny-llama-fp8ch"] = {"quant": lambda W, rng: quant_fp8(W, True), "deq": dequantize_fp8,
                               "config": ct_config("channel"), "torch": True}


def write_folder(folder, tensors, config, torch_tensors):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    src = os.path.join(gm.MODELS, SOURCE)
    shutil.copy(os.path.join(src, "generation_config.json"), folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    if torch_tensors:
        tt = {k: (v if isinstance(v, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(v)))
              for k, v in tensors.items()}
        safetensors.torch.save_file(tt, os.path.join(folder, "model.safetensors"),
                                    metadata={"format": "pt"})
    else:
        safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()},
                                    os.path.join(folder, "model.safetensors"),
                                    metadata={"format": "pt"})


def make(name, spec):
    rng = np.random.default_rng(32)
    dense = source_weights()
    with open(os.path.join(gm.MODELS, SOURCE, "config.json")) as f:
        config = json.load(f)
    qtensors, deq = {}, dict(dense)
    for k, v in dense.items():
        if not any(k.endswith(p + ".weight") for p in PROJ):
            qtensors[k] = v
    for mod in modules(dense):
        t = spec["quant"](dense[mod + ".weight"], rng)
        for suffix, v in t.items():
            qtensors[f"{mod}.{suffix}"] = v
        deq[mod + ".weight"] = spec["deq"](t)
        err = np.abs(deq[mod + ".weight"] - dense[mod + ".weight"]).max()
        gm.log(f"  {name} {mod}: max |dequantized - original| {err:.3g}")
    qconfig = dict(config, quantization_config=spec["config"])
    write_folder(os.path.join(gm.MODELS, name), qtensors, qconfig, spec.get("torch", False))
    # the dense model of the dequantized weights, for transformers (not committed)
    tmp = tempfile.mkdtemp()
    try:
        write_folder(tmp, deq, config, False)
        refs(name, tmp)
    finally:
        shutil.rmtree(tmp)


def refs(name, dense_folder):
    model = gm.load_f32(dense_folder)
    out_dir = os.path.join(gm.REFS, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    for attempt in range(100):
        prompts = gm.prompts_for(name, model, attempt)
        results, toks, gaps, min_gap = gm.compute_refs(model, prompts)
        if min_gap >= gm.MIN_GAP:
            break
    else:
        raise RuntimeError(f"{name}: no prompts without near-ties")
    ref = {"model": name, "architecture": "LlamaForCausalLM", "file_dtype": "f32",
           "transformers": gm.transformers.__version__, "torch": torch.__version__,
           "attn_implementation": "eager", "sliding_window": None,
           "reference": "transformers on the NumPy dequantization of the quantized weights",
           "prompts": {str(L): prompts[L] for L in gm.PROMPT_LENGTHS}, "prefill": {},
           "decode": {}}
    for L in gm.PROMPT_LENGTHS:
        prefill, fed, rows, err = results[L]
        np.save(os.path.join(out_dir, f"prefill_{L}.npy"), prefill.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, f"decode_{L}.npy"), rows.numpy().astype(np.float32))
        ref["prefill"][str(L)] = f"prefill_{L}.npy"
        ref["decode"][str(L)] = {"tokens": fed, "logits": f"decode_{L}.npy"}
    ref["greedy"] = {"prompt": prompts[gm.GREEDY_PROMPT], "tokens": toks,
                     "gaps": [round(g, 6) for g in gaps]}
    gm.log(f"  {name}: greedy {toks}; smallest top-2 gap {min_gap:.4f}")
    peer = check_peer(name, prompts, results)
    if peer is not None:
        ref["peer_rel_l2"] = peer
    with open(os.path.join(gm.REFS, f"{name}.json"), "w") as f:
        f.write(gm.dump_ref(ref))


@torch.no_grad()
def check_peer(name, prompts, results):
    """transformers loading the quantized folder itself (FP8 through compressed-tensors), its
    last-token logits after each prefill against the references: the largest relative L2."""
    if not FORMATS[name].get("torch"):
        return None
    try:
        import compressed_tensors  # noqa: F401
    except ImportError:
        gm.log(f"  {name}: compressed-tensors not installed: transformers not run on the folder")
        return None
    model = gm.load_f32(os.path.join(gm.MODELS, name))
    worst = 0.0
    for L in gm.PROMPT_LENGTHS:
        got = model(input_ids=torch.tensor([prompts[L]])).logits[0, -1].double()
        want = results[L][0].double()
        worst = max(worst, float((got - want).norm() / want.norm()))
    gm.log(f"  {name}: transformers on the quantized folder vs the references: {worst:.2e}")
    assert worst < 1e-5, worst
    return gm.sig(worst)


def main():
    gm.setup_determinism()
    only = sys.argv[1:]
    for name, spec in FORMATS.items():
        if not only or name in only:
            make(name, spec)


if __name__ == "__main__":
    main()
