#!/usr/bin/env python3
"""bench/gpu_bench.py: measures relaxc on an NVIDIA GPU against the device and PyTorch.

Run through bench/gpu.sh, which builds relaxc first; see "How to run bench/gpu.sh" in
bench/RESULTS.md. Parts (--parts), each with its share of the time budget (--budget):

  copy       device-to-device copy bandwidth (torch, 1 GiB, CUDA events): the reference that
             every "% of copy" figure divides by
  kernels    relaxc-compiled kernels at Llama-2-7B and Llama-3-8B shapes (decode GEMV, rms_norm,
             silu*mul, softmax), each a tiny .rx module timed by `relaxc run --bench N`, beside the
             same op through PyTorch in the same run; and the decode GEMV on quantized weights
             (quant_matmul: q4f16_g32, q8f16, GGUF Q8_0, Q4_0, Q4_K) at the 7B shapes, its
             bandwidth counting the packed bytes and scales (issue 15's target: >= 85% of copy),
             checked against F.linear on the weight dequantized by the format's definition
  attention  decode attention over a paged KV cache (paged_decode_attention + attention_merge),
             and causal prefill attention over it (paged_attention) at n = 512 ... 8192
             beside torch's scaled_dot_product_attention on the same keys and values, dense
  gemm       the matmul rule beyond decode: x[n, in] @ W[out, in]^T in f16 and bf16 at
             n = 1 ... 4096 for the 7B/8B projection shapes (4096x4096, 11008x4096, 4096x11008,
             128256x4096), beside cuBLAS (F.linear) and the matrix throughput of a large cuBLAS
             GEMM measured in the same run (TFLOP/s); on CUDA a second table times the same
             modules compiled with --dispatch cublas --dispatch-min-rows 1 (relaxc+cuBLASLt:
             every n through the library, docs/dispatch.md), skipped with the reason elsewhere
  model      a random-weight Llama (transformers, f16, on the GPU) compiled by relaxc from its
             Hugging Face folder: decode and prefill tokens per second beside transformers eager
             and torch.compile, and a logits check against transformers in f32; then decode
             tokens per second of the same weights with quantized projections: q4f16_g32
             (--quantize) and GGUF Q4_K (the folder written as a GGUF file here)
  vulkan     the kernels and attention again with --device vulkan:0, against the CUDA rows

Prints a Markdown table per part and writes a report (--out) whose last table holds rows ready
for bench/RESULTS.md (date, device, what, figure, command), rewritten after every part so a run
cut short keeps what it measured. Raw measurements go to the same path with a .json suffix.

--smoke runs every part at tiny shapes on whatever is present (the runtime's default device,
torch on the CPU): a test of the script, not a measurement.

Standard library, numpy, torch and transformers (and safetensors, which transformers needs)
only; never downloads anything (the models are built from local configs with random weights;
HF_HUB_OFFLINE is set).
"""

import argparse
import ctypes
import datetime
import gc
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402  (after the environment, which transformers reads at import)

try:
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
except ImportError:  # the kernel and attention parts still time relaxc alone
    torch = None
    F = None

ALL_PARTS = ("copy", "kernels", "attention", "gemm", "model", "vulkan")
# each part's share of the budget (the time left is split in these proportions among the parts
# still to run, so a part that ends early leaves its time to the later ones)
PART_WEIGHTS = {"copy": 2, "kernels": 18, "attention": 7, "gemm": 14, "model": 46, "vulkan": 13}

# Llama-2-7B and Llama-3-8B (their config.json files, rope scaling left out: it changes no shape)
MODELS = {
    "7b": dict(name="Llama-2-7B", hidden=4096, intermediate=11008, heads=32, kv_heads=32,
               vocab=32000, layers=32, rope_theta=10000.0, max_pos=4096, eps=1e-5),
    "8b": dict(name="Llama-3-8B", hidden=4096, intermediate=14336, heads=32, kv_heads=8,
               vocab=128256, layers=32, rope_theta=500000.0, max_pos=8192, eps=1e-5),
}
# --smoke: the same structure divided down (head dim 64, hidden 256)
SMOKE_MODELS = {
    "7b": dict(name="Llama-2-7B/16", hidden=256, intermediate=688, heads=4, kv_heads=4,
               vocab=2000, layers=2, rope_theta=10000.0, max_pos=512, eps=1e-5),
    "8b": dict(name="Llama-3-8B/16", hidden=256, intermediate=896, heads=4, kv_heads=1,
               vocab=8016, layers=2, rope_theta=500000.0, max_pos=512, eps=1e-5),
}

BENCH_LINE = re.compile(r"^bench: (\d+) calls, ([0-9.]+) ms per call \((.*)\)\s*$", re.M)
GEN_LINE = re.compile(r"prefill: (\d+) tokens in ([0-9.]+) ms \(([0-9.]+) tok/s\); "
                      r"decode: (\d+) tokens in ([0-9.]+) ms \(([0-9.]+) tok/s\)")


class BudgetExceeded(Exception):
    """The part's time is up: the items not yet measured are skipped."""


class Stop(Exception):
    """SIGTERM or SIGINT: write what was measured and leave."""


# ---------------------------------------------------------------------------------------------
# small helpers

def log(msg=""):
    print(msg, flush=True)


def fmt_bytes(b):
    for unit, div in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if b >= div:
            return f"{b / div:.1f} {unit}"
    return f"{b} B"


def fmt_us(seconds):
    return "—" if seconds is None else f"{seconds * 1e6:,.1f}"


def fmt_gbs(bytes_, seconds):
    if not seconds:
        return "—"
    v = bytes_ / seconds / 1e9
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def fmt_frac(bytes_, seconds, ref_bw):
    if not seconds or not ref_bw:
        return "—"
    return f"{100 * bytes_ / seconds / ref_bw:.0f}%"


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        return float("nan")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def run_cmd(cmd, timeout, env=None, cwd=None):
    """Runs cmd (a list); returns (rc, stdout, stderr, seconds). rc None: timed out (the process
    group was killed; stdout and stderr hold what it printed before)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, cwd=cwd, start_new_session=True, errors="replace")
    try:
        out, err = p.communicate(timeout=max(1.0, timeout))
        rc = p.returncode
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        rc = None
    except BaseException:
        kill_group(p)
        p.communicate()
        raise
    return rc, out, err, time.monotonic() - t0


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def last_lines(text, n=6):
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return " / ".join(lines[-n:])


def json_lines(text):
    """The JSON objects among text's lines (a line cut short by a kill is skipped)."""
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def compile_problem(rc, out, err):
    """Why a `relaxc compile` cannot be used, or None. Without NVRTC, relaxc writes CUDA sources
    only (a note, exit 0) and the runtime then has nothing to load."""
    if rc is None:
        return "timed out"
    if rc != 0:
        return last_lines(err or out)
    m = re.search(r"NVRTC not found[^\n]*", (err or "") + (out or ""))
    if m:
        return f"{m.group(0)} (set RX_NVRTC_PATH to a libnvrtc.so)"
    return None


def cuda_driver_present():
    """Whether libcuda loads and sees a device (what the relaxc runtime needs for cuda:0)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return (lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0
                and count.value > 0)
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# torch: the device, timing with CUDA events

class TorchEnv:
    """PyTorch's side: device makes the comparisons (None: no comparison), gen_device makes the
    inputs (the GPU where torch sees one, else the CPU)."""

    def __init__(self, want_cuda, smoke):
        self.device = None
        self.gen_device = None
        self.why_not = None
        self.name = None
        self.l2_bytes = None
        self.capability = None
        if torch is None:
            self.why_not = "PyTorch is not installed"
            return
        cuda = torch.cuda.is_available()
        self.gen_device = torch.device("cuda", 0) if cuda else torch.device("cpu")
        if want_cuda and cuda:
            self.device = torch.device("cuda", 0)
            props = torch.cuda.get_device_properties(0)
            self.name = props.name
            self.l2_bytes = getattr(props, "L2_cache_size", None)
            self.capability = (props.major, props.minor)
            torch.backends.cuda.matmul.allow_tf32 = False
        elif smoke:
            self.device = torch.device("cpu")
            self.gen_device = self.device
            self.name = "CPU (torch, smoke run)"
        else:
            self.why_not = ("PyTorch sees no CUDA device" if want_cuda else
                            "the relaxc device is not CUDA")

    @property
    def ok(self):
        return self.device is not None

    @property
    def is_cuda(self):
        return self.device is not None and self.device.type == "cuda"

    def sync(self):
        if self.is_cuda:
            torch.cuda.synchronize()

    def time_fn(self, fn, min_time=0.1, reps=3, max_iters=10000):
        """Seconds per call: back-to-back calls, timed with CUDA events (perf_counter on the
        CPU), after a warm-up; the best of reps batches sized to last about min_time."""
        fn()
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        once = max(time.perf_counter() - t0, 1e-6)
        iters = int(min(max_iters, max(3, min_time / once)))
        best = None
        for _ in range(reps):
            if self.is_cuda:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(iters):
                    fn()
                end.record()
                end.synchronize()
                t = start.elapsed_time(end) / 1e3 / iters
            else:
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn()
                t = (time.perf_counter() - t0) / iters
            best = t if best is None else min(best, t)
        return best


# ---------------------------------------------------------------------------------------------
# the kernel modules (.rx text, inputs, the PyTorch equivalent, bytes moved)

class Case:
    """One measurement: a module at one size."""

    def __init__(self, module, key, what, bytes_, env, flops=None):
        self.module = module
        self.key = key        # unique, file-name safe
        self.what = what      # e.g. "gemv [4, 4096] x [11008, 4096]^T"
        self.bytes = bytes_   # what the kernel must read and write at least
        self.env = env        # symbolic variables for the rule column: {"n": 4}
        self.flops = flops    # arithmetic of a compute-bound case (GEMM: 2 n out in), or None


class Module:
    """A tiny .rx module whose function main is one op (or the ops of one kernel in the model)."""

    def __init__(self, name, label, text, cases, make_inputs, torch_fn):
        self.name = name              # file stem
        self.label = label            # e.g. "gemv 11008x4096 (7B gate/up)"
        self.text = text
        self.cases = cases            # [Case]
        self.make_inputs = make_inputs  # (Case, torch device, pool) -> {param: tensor}
        self.torch_fn = torch_fn      # inputs -> result tensor
        self.pool = {}                # tensors shared by the cases (a weight, the KV pages)
        self.compile_flags = []       # more `relaxc compile` options (--dispatch cublas)
        for c in cases:
            c.module = self


def gemv_module(out_f, in_f, uses, ns):
    name = f"gemv_{out_f}x{in_f}"
    text = f"""# decode GEMV in the Hugging Face layout: x[n, in] @ W[out, in]^T ({uses})
graph_fn main(x: f16[n, {in_f}], w: f16[{out_f}, {in_f}]) -> f16[n, {out_f}]
    where 1 <= n, n <= 16 {{
  dataflow {{
    y = matmul(x, permute(w, axes=[1, 0]))
  }}
  return y
}}
"""
    cases = [Case(None, f"{name}_n{n}", f"gemv [{n}, {in_f}] x [{out_f}, {in_f}]^T",
                  2 * (out_f * in_f + n * in_f + n * out_f), {"n": n}) for n in ns]

    def make_inputs(case, dev, pool):
        n = case.env["n"]
        g = torch.Generator(device=dev).manual_seed(out_f * 7 + in_f + n)
        if "w" not in pool:
            pool["w"] = (torch.randn(out_f, in_f, generator=g, device=dev) * 0.02).half()
        return {"x": torch.randn(n, in_f, generator=g, device=dev).half(), "w": pool["w"]}

    return Module(name, f"gemv {out_f}x{in_f} ({uses})", text, cases, make_inputs,
                  lambda t: F.linear(t["x"], t["w"]))


# bytes per block and weights per block of the quantized schemes timed here (docs/ops.md)
QUANT_SCHEMES = {"q4f16_g32": None, "q8f16": None, "Q8_0": (34, 32), "Q4_0": (18, 32),
                 "Q4_K": (144, 256)}


def q4k_dequant(blocks):
    """GGUF Q4_K blocks [rows, nb, 144] (uint8) -> float32 [rows, nb * 256], by the format's
    definition: f16 d and dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, then
    128 bytes of nibbles (each 32 bytes hold two sub-blocks: low nibbles, then high)."""
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    dmin = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    sc = blocks[..., 4:16].astype(np.int32)
    qs = blocks[..., 16:144].astype(np.int32)
    out = []
    for j in range(8):
        if j < 4:
            scale, mn = sc[..., j] & 63, sc[..., j + 4] & 63
        else:
            scale = (sc[..., j + 4] & 0xF) | ((sc[..., j - 4] >> 6) << 4)
            mn = (sc[..., j + 4] >> 4) | ((sc[..., j] >> 6) << 4)
        q = qs[..., (j // 2) * 32:(j // 2) * 32 + 32]
        q = (q & 0xF) if j % 2 == 0 else (q >> 4)
        out.append((d * scale)[..., None] * q - (dmin * mn)[..., None])
    return np.concatenate(out, axis=-1).reshape(blocks.shape[0], -1)


def q4k_quantize(w):
    """float32 W [rows, cols] (cols a multiple of 256) -> GGUF Q4_K blocks [rows, cols / 256 *
    144] (uint8), round to nearest as q4k_dequant reads them: per sub-block of 32 a scale and a
    min (the range [min(0, lo), hi] over 15 steps), both 6-bit multiples of the super-block's f16
    d and dmin. Not llama.cpp's search for the best scales: the decode timing needs valid blocks,
    which q4k_dequant (the format's definition) reads back within a step."""
    rows = w.shape[0]
    x = w.reshape(rows, -1, 8, 32).astype(np.float32)
    lo = np.minimum(x.min(axis=-1), 0)
    step = (x.max(axis=-1) - lo) / 15
    d = (step.max(axis=-1) / 63).astype(np.float16)
    dmin = (-lo.min(axis=-1) / 63).astype(np.float16)
    df, dmf = d.astype(np.float32)[..., None], dmin.astype(np.float32)[..., None]
    sc = np.clip(np.round(np.divide(step, df, out=np.zeros_like(step), where=df > 0)), 0, 63)
    mn = np.clip(np.round(np.divide(-lo, dmf, out=np.zeros_like(lo), where=dmf > 0)), 0, 63)
    scale, off = (df * sc)[..., None], (dmf * mn)[..., None]
    q = np.clip(np.round(np.divide(x + off, scale, out=np.zeros_like(x), where=scale > 0)), 0, 15)
    q = q.astype(np.uint8).reshape(rows, -1, 4, 2, 32)  # pairs of sub-blocks share 32 bytes
    qs = (q[..., 0, :] | (q[..., 1, :] << 4)).reshape(rows, -1, 128)
    sc, mn = sc.astype(np.uint8), mn.astype(np.uint8)
    packed = np.empty((rows, sc.shape[1], 12), np.uint8)
    packed[..., 0:4] = sc[..., 0:4] | ((sc[..., 4:8] >> 4) << 6)
    packed[..., 4:8] = mn[..., 0:4] | ((mn[..., 4:8] >> 4) << 6)
    packed[..., 8:12] = (sc[..., 4:8] & 0xF) | ((mn[..., 4:8] & 0xF) << 4)
    blocks = np.concatenate([d[..., None].view(np.uint8), dmin[..., None].view(np.uint8), packed,
                             qs], axis=-1)
    return blocks.reshape(rows, -1)


def write_gguf_llama(path, spec, layers, hf_dir):
    """The Hugging Face folder's Llama (f16 safetensors) as a GGUF v3 file of llama.cpp's layout
    (docs/gguf.md): the projections in Q4_K where their input is whole super-blocks (else F16,
    as llama.cpp falls back), attn_q / attn_k rows permuted as its converter does, norms F32,
    embeddings and output F16; no tokenizer (relaxc then takes prompt ids). Returns the bytes of
    weights per format."""
    import struct
    from safetensors import safe_open
    tensors = {}
    for name in sorted(os.listdir(hf_dir)):
        if name.endswith(".safetensors"):
            with safe_open(os.path.join(hf_dir, name), framework="np") as f:
                for k in f.keys():
                    tensors[k] = f.get_tensor(k)

    def permute(w, heads):
        return w.reshape(heads, 2, w.shape[0] // heads // 2, w.shape[1]).swapaxes(1, 2).reshape(
            w.shape)

    out = [("token_embd.weight", tensors["model.embed_tokens.weight"], "f16")]
    proj = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
            "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
            "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for l in range(layers):
        hf = f"model.layers.{l}."
        out.append((f"blk.{l}.attn_norm.weight", tensors[hf + "input_layernorm.weight"], "f32"))
        out.append((f"blk.{l}.ffn_norm.weight", tensors[hf + "post_attention_layernorm.weight"],
                    "f32"))
        for k, g in proj.items():
            w = tensors[hf + k + ".weight"]
            if g in ("attn_q", "attn_k"):
                w = permute(w, spec["heads"] if g == "attn_q" else spec["kv_heads"])
            out.append((f"blk.{l}.{g}.weight", w, "q4_k" if w.shape[1] % 256 == 0 else "f16"))
    out.append(("output_norm.weight", tensors["model.norm.weight"], "f32"))
    out.append(("output.weight", tensors["lm_head.weight"], "f16"))

    def string(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b

    u32 = lambda k, v: string(k) + struct.pack("<II", 4, v)  # noqa: E731
    f32 = lambda k, v: string(k) + struct.pack("<If", 6, v)  # noqa: E731
    kv = [string("general.architecture") + struct.pack("<I", 8) + string("llama"),
          u32("llama.context_length", spec["max_pos"]),
          u32("llama.embedding_length", spec["hidden"]), u32("llama.block_count", layers),
          u32("llama.feed_forward_length", spec["intermediate"]),
          u32("llama.attention.head_count", spec["heads"]),
          u32("llama.attention.head_count_kv", spec["kv_heads"]),
          f32("llama.attention.layer_norm_rms_epsilon", spec["eps"]),
          f32("llama.rope.freq_base", spec["rope_theta"]),
          u32("llama.vocab_size", spec["vocab"])]
    types = {"f32": 0, "f16": 1, "q4_k": 12}
    data, infos, offset, nbytes = [], [], 0, {}
    for name, w, fmt in out:
        raw = (q4k_quantize(w.astype(np.float32)) if fmt == "q4_k" else
               w.astype(np.float32 if fmt == "f32" else np.float16)).tobytes()
        pad = -offset % 32
        data.append(b"\0" * pad + raw)
        offset += pad
        dims = list(reversed(w.shape))  # ggml's ne: innermost first
        infos.append(string(name) + struct.pack("<I", len(dims)) +
                     struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", types[fmt], offset))
        offset += len(raw)
        nbytes[fmt] = nbytes.get(fmt, 0) + len(raw)
    with open(path, "wb") as f:
        head = b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(kv)) + b"".join(kv) + b"".join(
            infos)
        f.write(head + b"\0" * (-len(head) % 32))
        for chunk in data:
            f.write(chunk)
    return nbytes


def quant_weight(scheme, out_f, in_f, rng):
    """({param: numpy array} of the packed weight, W [out, in] float32 it stands for)."""
    def f16_scales(shape):
        return (rng.random(shape, dtype=np.float32) * 0.004 + 0.001).astype(np.float16)
    if scheme == "q4f16_g32":
        w = rng.integers(0, 256, (out_f, in_f // 2), dtype=np.uint8)
        s = f16_scales((out_f, in_f // 32))
        q = np.stack([w & 0xF, w >> 4], axis=-1).reshape(out_f, in_f).astype(np.float32) - 8
        return {"w": w, "s": s}, q * np.repeat(s.astype(np.float32), 32, axis=1)
    if scheme == "q8f16":
        w = rng.integers(-127, 128, (out_f, in_f), dtype=np.int8)
        s = f16_scales((out_f, in_f // 32))
        return {"w": w, "s": s}, w.astype(np.float32) * np.repeat(s.astype(np.float32), 32, 1)
    nbytes, per = QUANT_SCHEMES[scheme]
    nb = in_f // per
    blocks = rng.integers(0, 256, (out_f, nb, nbytes), dtype=np.uint8)
    d = f16_scales((out_f, nb))
    blocks[..., 0:2] = d[..., None].view(np.uint8).reshape(out_f, nb, 2)
    if scheme == "Q4_K":
        blocks[..., 2:4] = f16_scales((out_f, nb))[..., None].view(np.uint8).reshape(out_f, nb, 2)
        ref = q4k_dequant(blocks)
    elif scheme == "Q8_0":
        q = blocks[..., 2:34].copy().view(np.int8).astype(np.float32)
        ref = (q * d.astype(np.float32)[..., None]).reshape(out_f, in_f)
    else:  # Q4_0: low nibbles are weights 0..15 of the block, high nibbles 16..31
        qs = blocks[..., 2:18].astype(np.int32)
        q = np.concatenate([qs & 0xF, qs >> 4], axis=-1).astype(np.float32) - 8
        ref = (q * d.astype(np.float32)[..., None]).reshape(out_f, in_f)
    return {"w": blocks.reshape(out_f, nb * nbytes)}, ref


def quant_gemv_module(out_f, in_f, scheme, uses, ns):
    """Decode GEMV on a quantized weight (issue 15): quant_matmul, the dequantization fused into
    the GEMV; bytes counted as the packed weight with its scales, x and y."""
    name = f"qgemv_{scheme}_{out_f}x{in_f}"
    if scheme in ("q4f16_g32", "q8f16"):
        wt = f"u8[{out_f}, {in_f // 2}]" if scheme == "q4f16_g32" else f"i8[{out_f}, {in_f}]"
        params, args = f"w: {wt}, s: f16[{out_f}, {in_f // 32}]", "w, s"
        wbytes = out_f * in_f // (2 if scheme == "q4f16_g32" else 1) + 2 * out_f * in_f // 32
    else:
        nbytes, per = QUANT_SCHEMES[scheme]
        wbytes = out_f * in_f // per * nbytes
        params, args = f"w: u8[{out_f}, {in_f // per * nbytes}]", "w"
    text = f"""# decode GEMV on a {scheme} weight: x[n, in] @ W[out, in]^T ({uses})
graph_fn main(x: f16[n, {in_f}], {params}) -> f16[n, {out_f}]
    where 1 <= n, n <= 16 {{
  dataflow {{
    y = quant_matmul(x, {args}, scheme="{scheme}")
  }}
  return y
}}
"""
    cases = [Case(None, f"{name}_n{n}", f"{scheme} gemv [{n}, {in_f}] x [{out_f}, {in_f}]^T",
                  wbytes + 2 * (n * in_f + n * out_f), {"n": n}) for n in ns]
    state = {}

    def make_inputs(case, dev, pool):
        n = case.env["n"]
        if "w" not in pool:
            packed, ref = quant_weight(scheme, out_f, in_f, np.random.default_rng(out_f + in_f))
            for k, v in packed.items():
                pool[k] = torch.from_numpy(v).to(dev)
            state["W"] = torch.from_numpy(ref).to(dev).half()
        g = torch.Generator(device=dev).manual_seed(out_f * 7 + in_f + n)
        t = {"x": torch.randn(n, in_f, generator=g, device=dev).half()}
        t.update({k: v for k, v in pool.items()})
        return t

    return Module(name, f"{scheme} gemv {out_f}x{in_f} ({uses})", text, cases, make_inputs,
                  lambda t: F.linear(t["x"], state["W"]))


def gemm_module(out_f, in_f, dt, uses, ns):
    name = f"gemm_{dt}_{out_f}x{in_f}"
    text = f"""# GEMM in the Hugging Face layout: x[n, in] @ W[out, in]^T ({uses}), any row count
graph_fn main(x: {dt}[n, {in_f}], w: {dt}[{out_f}, {in_f}]) -> {dt}[n, {out_f}] where 1 <= n {{
  dataflow {{
    y = matmul(x, permute(w, axes=[1, 0]))
  }}
  return y
}}
"""
    cases = [Case(None, f"{name}_n{n}", f"{dt} [{n}, {in_f}] x [{out_f}, {in_f}]^T",
                  2 * (out_f * in_f + n * in_f + n * out_f), {"n": n},
                  flops=2 * n * out_f * in_f) for n in ns]

    def make_inputs(case, dev, pool):
        n = case.env["n"]
        tdt = torch.float16 if dt == "f16" else torch.bfloat16
        g = torch.Generator(device=dev).manual_seed(out_f * 7 + in_f + n)
        if "w" not in pool:
            pool["w"] = (torch.randn(out_f, in_f, generator=g, device=dev) * 0.02).to(tdt)
        return {"x": torch.randn(n, in_f, generator=g, device=dev).to(tdt), "w": pool["w"]}

    return Module(name, f"gemm {dt} {out_f}x{in_f} ({uses})", text, cases, make_inputs,
                  lambda t: F.linear(t["x"], t["w"]))


def cublaslt_library():
    """The libcublasLt the dispatched GEMMs open: $RX_CUBLASLT_LIBRARY, else the one of
    PyTorch's nvidia-cublas wheel, else None (the runtime tries libcublasLt.so.13, 12, 11)."""
    if os.environ.get("RX_CUBLASLT_LIBRARY"):
        return os.environ["RX_CUBLASLT_LIBRARY"]
    try:
        import nvidia.cublas  # noqa: F401 (the wheel PyTorch's CUDA builds depend on)
        for d in nvidia.cublas.__path__:
            libs = sorted(f for f in os.listdir(os.path.join(d, "lib"))
                          if f.startswith("libcublasLt.so"))
            if libs:
                return os.path.join(d, "lib", libs[-1])
    except (ImportError, OSError):
        pass
    return None


def gemm_modules(smoke):
    """The gemm part's modules: the projection shapes of issue 14, f16 then bf16."""
    ms = SMOKE_MODELS if smoke else MODELS
    s7, s8 = ms["7b"], ms["8b"]
    h = s7["hidden"]
    ns = (1, 16, 64, 100) if smoke else (1, 16, 64, 128, 512, 1024, 4096)
    shapes = (((h, h), "7B q/o"), ((s7["intermediate"], h), "7B gate/up"),
              ((h, s7["intermediate"]), "7B down"), ((s8["vocab"], h), "8B lm_head"))
    return [gemm_module(o, i, dt, use, ns) for dt in ("f16", "bf16") for (o, i), use in shapes]


def rms_norm_module(h, ns):
    name = f"rms_norm_{h}"
    text = f"""# rms_norm as the model computes it: the f32 residual stream in, f16 out
graph_fn main(x: f32[n, {h}], w: f32[{h}]) -> f16[n, {h}] where 1 <= n, n <= 16 {{
  dataflow {{
    y = cast(rms_norm(x, w, axes=[-1], epsilon=1e-05), dtype=f16)
  }}
  return y
}}
"""
    cases = [Case(None, f"{name}_n{n}", f"rms_norm f32[{n}, {h}] -> f16",
                  n * h * 4 + h * 4 + n * h * 2, {"n": n}) for n in ns]

    def make_inputs(case, dev, pool):
        n = case.env["n"]
        g = torch.Generator(device=dev).manual_seed(h + 1)
        return {"x": torch.randn(n, h, generator=g, device=dev),
                "w": 1 + 0.1 * torch.randn(h, generator=g, device=dev)}

    def torch_fn(t):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(t["x"], (h,), t["w"], eps=1e-5).half()
        x = t["x"]
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * t["w"]).half()

    return Module(name, f"rms_norm [n, {h}]", text, cases, make_inputs, torch_fn)


def silu_mul_module(i, uses, ns):
    name = f"silu_mul_{i}"
    text = f"""# the MLP's gate: silu(g) * u ({uses})
graph_fn main(g: f16[n, {i}], u: f16[n, {i}]) -> f16[n, {i}] where 1 <= n, n <= 16 {{
  dataflow {{
    y = multiply(silu(g), u)
  }}
  return y
}}
"""
    cases = [Case(None, f"{name}_n{n}", f"silu(g) * u f16[{n}, {i}]", 3 * n * i * 2, {"n": n})
             for n in ns]

    def make_inputs(case, dev, pool):
        n = case.env["n"]
        gen = torch.Generator(device=dev).manual_seed(i)
        return {"g": torch.randn(n, i, generator=gen, device=dev).half(),
                "u": torch.randn(n, i, generator=gen, device=dev).half()}

    return Module(name, f"silu*mul [n, {i}] ({uses})", text, cases, make_inputs,
                  lambda t: F.silu(t["g"]) * t["u"])


def softmax_module(heads, ns, lengths):
    name = "softmax"
    text = f"""# softmax over rows of attention scores: [{heads} x n, cache]
graph_fn main(x: f16[r, m]) -> f16[r, m] where 1 <= r, r <= {heads * 16}, 1 <= m, m <= 65536 {{
  dataflow {{
    y = softmax(x, axis=-1)
  }}
  return y
}}
"""
    cases = [Case(None, f"softmax_n{n}_m{m}", f"softmax f16[{heads} x {n}, {m}]",
                  2 * heads * n * m * 2, {"r": heads * n, "m": m, "n": n})
             for n in ns for m in lengths]

    def make_inputs(case, dev, pool):
        g = torch.Generator(device=dev).manual_seed(case.env["m"])
        return {"x": torch.randn(case.env["r"], case.env["m"], generator=g, device=dev).half()}

    return Module(name, f"softmax [{heads}n, cache]", text, cases, make_inputs,
                  lambda t: torch.softmax(t["x"], dim=-1))


def attention_module(key, spec, lengths):
    h, kvh = spec["heads"], spec["kv_heads"]
    d = spec["hidden"] // h
    name = f"decode_attention_{key}"
    scale = f"{1 / math.sqrt(d):.9g}"
    text = f"""# decode attention over the paged KV cache ({spec['name']}: {h} query heads,
# {kvh} kv heads, head dim {d}), as the model's decode function calls it: split over the cache
# in chunks of 256 keys, merged by log-sum-exp
graph_fn main(q: f16[1, {h}, {d}], pages: f16[p, 2, {kvh}, 16, {d}], page_table: i32[1, mp],
              kv_len: i32[1]) -> f16[1, {h}, {d}] {{
  dataflow {{
    t = paged_decode_attention(q, pages, page_table, kv_len, scale={scale}, chunk=256)
    y = attention_merge(t.0, t.1, dtype=f16)
  }}
  return y
}}
"""
    pool_pages = max(lengths) // 16
    cases = []
    for L in lengths:
        mp = (L + 15) // 16
        cases.append(Case(None, f"{name}_L{L}",
                          f"decode attention {spec['name']} ({h}/{kvh} heads x {d}), cache {L}",
                          2 * L * kvh * d * 2 + 2 * h * d * 2 + mp * 4,
                          {"p": pool_pages, "mp": mp, "L": L}))

    def make_inputs(case, dev, pool):
        L, mp = case.env["L"], case.env["mp"]
        if "pages" not in pool:  # one pool for every length: [P, 2, KVH, 16, D]
            g = torch.Generator(device=dev).manual_seed(17)
            pool["pages"] = torch.randn(pool_pages, 2, kvh, 16, d, generator=g, device=dev).half()
        g = torch.Generator(device=dev).manual_seed(L)
        table = torch.randperm(pool_pages, generator=g, device=dev)[:mp].to(torch.int32)
        q = torch.randn(1, h, d, generator=g, device=dev).half()
        return {"q": q, "pages": pool["pages"], "page_table": table.reshape(1, mp),
                "kv_len": torch.tensor([L], dtype=torch.int32, device=dev)}

    def torch_fn(t):
        # the dense keys and values of the same cache: built outside the timed call
        if "dense" not in t:
            pages, table, L = t["pages"], t["page_table"][0].long(), int(t["kv_len"][0])
            kv = pages[table]  # [mp, 2, KVH, 16, D]
            kv = kv.permute(1, 2, 0, 3, 4).reshape(2, kvh, -1, d)[:, :, :L].contiguous()
            t["dense"] = (kv[0].unsqueeze(0), kv[1].unsqueeze(0), t["q"].reshape(1, h, 1, d))
        k, v, q = t["dense"]
        if kvh != h:
            y = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v)
        return y.reshape(1, h, d)

    return Module(name, f"decode attention {spec['name']}", text, cases, make_inputs, torch_fn)


def prefill_attention_module(key, spec, lengths):
    """Causal prefill attention of one prompt of n tokens over the paged KV cache that holds its
    keys and values (the model's prefill calls paged_attention so), beside PyTorch's
    scaled_dot_product_attention on the same keys as dense tensors (is_causal)."""
    h, kvh = spec["heads"], spec["kv_heads"]
    d = spec["hidden"] // h
    name = f"prefill_attention_{key}"
    scale = f"{1 / math.sqrt(d):.9g}"
    text = f"""# prefill attention over the paged KV cache ({spec['name']}: {h} query heads, {kvh} kv
# heads, head dim {d}): n query tokens of one sequence at positions 0 .. n - 1, causal
graph_fn main(q: f16[n, {h}, {d}], pages: f16[p, 2, {kvh}, 16, {d}], page_table: i32[1, mp],
              kv_len: i32[1], q_seq: i32[n], q_pos: i32[n]) -> f16[n, {h}, {d}] {{
  dataflow {{
    y = paged_attention(q, pages, page_table, kv_len, q_seq, q_pos, scale={scale})
  }}
  return y
}}
"""
    cases = []
    for n in lengths:
        mp = (n + 15) // 16
        cases.append(Case(None, f"{name}_n{n}",
                          f"prefill attention {spec['name']} ({h}/{kvh} heads x {d}), {n} tokens",
                          2 * n * h * d * 2 + 2 * n * kvh * d * 2, {"n": n, "p": mp, "mp": mp},
                          flops=2 * 2 * h * d * n * (n + 1) // 2))

    def make_inputs(case, dev, pool):
        n, mp = case.env["n"], case.env["mp"]
        g = torch.Generator(device=dev).manual_seed(n)
        pages = torch.randn(mp, 2, kvh, 16, d, generator=g, device=dev).half()
        table = torch.randperm(mp, generator=g, device=dev).to(torch.int32)
        return {"q": torch.randn(n, h, d, generator=g, device=dev).half(), "pages": pages,
                "page_table": table.reshape(1, mp),
                "kv_len": torch.tensor([n], dtype=torch.int32, device=dev),
                "q_seq": torch.zeros(n, dtype=torch.int32, device=dev),
                "q_pos": torch.arange(n, dtype=torch.int32, device=dev)}

    def torch_fn(t):
        if "dense" not in t:  # the dense keys and values: built outside the timed call
            pages, table, n = t["pages"], t["page_table"][0].long(), t["q"].shape[0]
            kv = pages[table].permute(1, 2, 0, 3, 4).reshape(2, kvh, -1, d)[:, :, :n]
            t["dense"] = (kv[0].unsqueeze(0).contiguous(), kv[1].unsqueeze(0).contiguous(),
                          t["q"].permute(1, 0, 2).unsqueeze(0).contiguous())
        k, v, q = t["dense"]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kvh != h)
        return y[0].permute(1, 0, 2)

    return Module(name, f"prefill attention {spec['name']}", text, cases, make_inputs, torch_fn)


def kernel_modules(smoke):
    """The kernels part's modules, in the order they are measured."""
    ms = SMOKE_MODELS if smoke else MODELS
    ns = (1, 2, 16) if smoke else (1, 2, 4, 8, 16)
    s7, s8 = ms["7b"], ms["8b"]
    h = s7["hidden"]
    d = h // s7["heads"]
    shapes = {}  # (out, in) -> uses
    for key, spec in (("7B", s7), ("8B", s8)):
        kv = spec["kv_heads"] * d
        for (o, i), use in (((h, h), "q/o"), ((kv, h), "k/v"),
                            ((spec["intermediate"], h), "gate/up"),
                            ((h, spec["intermediate"]), "down"), ((spec["vocab"], h), "lm_head")):
            shapes.setdefault((o, i), []).append(f"{key} {use}")
    mods = [gemv_module(o, i, ", ".join(uses), ns) for (o, i), uses in shapes.items()]
    # quantized decode GEMV at the 7B shapes (issue 15: >= 85% of copy bandwidth counting packed
    # bytes and scales); the smoke run's shapes are whole Q4_K super-blocks too
    for (o, i), use in (((h, h), "7B q/o"), ((s7["intermediate"], h), "7B gate/up"),
                        ((h, s7["intermediate"]), "7B down")):
        if i % 256 == 0:
            mods += [quant_gemv_module(o, i, q, use, ns) for q in QUANT_SCHEMES]
    mods.append(rms_norm_module(h, ns))
    mods.append(silu_mul_module(s7["intermediate"], "7B", ns))
    mods.append(silu_mul_module(s8["intermediate"], "8B", ns))
    mods.append(softmax_module(s7["heads"], (1, 16),
                               (16, 256) if smoke else (1024, 4096, 32768)))
    return mods


def attention_modules(smoke, prefill=True):
    """Decode attention at cache lengths, then prefill attention at prompt lengths (issue 14:
    n = 512 ... 8192 beside scaled_dot_product_attention)."""
    ms = SMOKE_MODELS if smoke else MODELS
    lengths = (16, 100, 256) if smoke else (128, 1024, 4096, 32768)
    mods = [attention_module(k, ms[k], lengths) for k in ("7b", "8b")]
    if prefill:
        ns = (16, 64) if smoke else (512, 1024, 2048, 4096, 8192)
        mods += [prefill_attention_module(k, ms[k], ns) for k in ("7b", "8b")]
    return mods


# ---------------------------------------------------------------------------------------------
# rules of the kernels a case ran (relaxc inspect), for the table

def inspect_rules(relaxc, rxm):
    """{program: [(kernel, rule, condition or None)]} from `relaxc inspect`."""
    rc, out, _, _ = run_cmd([relaxc, "inspect", rxm], 60)
    rules = {}
    if rc != 0:
        return rules
    in_targets = False
    for line in out.splitlines():
        if line.startswith("targets:"):
            in_targets = True
            continue
        if in_targets and line.startswith("sections:"):
            break
        m = re.match(r"^    (\w+): (.*)$", line)
        if in_targets and m:
            items = re.findall(r"(\w+) \(([\w-]+)(?:, when (.*?))?\)(?=, \w+ \(|$)", m.group(2))
            rules[m.group(1)] = [(k, r, c or None) for k, r, c in items]
    return rules


def eval_condition(cond, env):
    """A variant's condition (relaxc's symbolic expression syntax) at env, or None if unknown."""
    py = cond.replace("&&", " and ").replace("||", " or ")
    py = re.sub(r"!(?!=)", " not ", py)
    try:
        return bool(eval(py, {"__builtins__": {}},  # noqa: S307 (our own compiler's output)
                         dict(env, min=min, max=max, select=lambda c, a, b: a if c else b)))
    except Exception:  # noqa: BLE001 (a variable we do not know: say so)
        return None


def chosen_rules(rules, env):
    chosen = []
    for prog, variants in rules.items():
        pick = "?"
        for _, rule, cond in variants:
            ok = True if cond is None else eval_condition(cond, env)
            if ok is None:
                break
            if ok:
                pick = rule
                break
        chosen.append(pick if len(rules) == 1 else f"{prog}:{pick}")
    return "+".join(chosen) or "?"


# ---------------------------------------------------------------------------------------------
# the benchmark

class Bench:
    def __init__(self, args):
        self.args = args
        self.t_start = time.monotonic()
        self.deadline = self.t_start + args.budget
        self.date = datetime.date.today().isoformat()
        self.rows = []       # (date, device, what, figure, command) for RESULTS.md
        self.sections = []   # (title, markdown) for the report
        self.raw = {"parts": {}}
        self.copy_bw = None  # bytes per second, read + written
        self.mm_peak = {}    # "f16" / "bf16" -> FLOP per second of a large cuBLAS GEMM
        self.copy_what = None
        self.part_status = {}
        self.relaxc = args.relaxc
        self.workdir = os.path.abspath(args.workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.command = args.command or " ".join(shlex.quote(a) for a in sys.argv)
        self.runtime_name = {}  # relaxc device -> name the runtime reports
        self.kernel_results = {}  # (device kind, case key) -> seconds
        # the relaxc device of the kernel/attention/model parts
        dev = args.device
        if dev == "auto":
            dev = "cuda:0" if cuda_driver_present() else "vulkan:0"
        self.device = dev
        self.kind = dev.split(":")[0]
        self.tenv = TorchEnv(self.kind == "cuda", args.smoke)
        self.target = self.target_for(self.kind)
        self.torch_name = self.tenv.name

    # -- setup ----------------------------------------------------------------------------------

    def target_for(self, kind):
        if kind == "vulkan":
            return "vulkan"
        if kind == "metal":
            return "metal"
        if self.args.cuda_target:
            return self.args.cuda_target
        cap = getattr(self.tenv, "capability", None)
        if cap is None:
            query = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]
            rc, out, _, _ = run_cmd(query, 20) if shutil.which("nvidia-smi") else (1, "", "", 0)
            m = re.match(r"\s*(\d+)\.(\d+)", out or "") if rc == 0 else None
            cap = (int(m.group(1)), int(m.group(2))) if m else None
        # relaxc knows sm_80 and sm_90; an sm_80 cubin runs on 8.x, its PTX on later GPUs
        return "cuda -arch=sm_90" if cap and cap[0] == 9 else "cuda"

    def device_label(self, kind=None):
        kind = kind or self.kind
        if kind in self.runtime_name:
            return self.runtime_name[kind]
        if kind == "cuda" and self.tenv.is_cuda:
            return self.torch_name
        return f"{kind} device not seen"

    # -- time -----------------------------------------------------------------------------------

    def left(self, deadline=None):
        return (deadline or self.deadline) - time.monotonic()

    # -- report ---------------------------------------------------------------------------------

    def add_row(self, what, figure, device=None):
        self.rows.append((self.date, device or self.device_label(), what, figure,
                          f"`{self.command}`"))

    def add_section(self, title, text):
        self.sections.append((title, text))
        log(f"\n### {title}\n\n{text}\n")

    def write_report(self, final):
        a = self.args
        lines = [f"# bench/gpu.sh results, {self.date}", ""]
        lines.append(f"- command: `{self.command}`")
        lines.append(f"- relaxc device: {self.device} ({self.device_label()}), "
                     f"target `{self.target}`")
        if self.tenv.ok:
            lines.append(f"- PyTorch {torch.__version__} on {self.tenv.device} ({self.tenv.name})")
        else:
            lines.append(f"- PyTorch: not used ({self.tenv.why_not})")
        if self.copy_bw:
            lines.append(f"- copy bandwidth (the reference of every '% of copy'): "
                         f"{self.copy_bw / 1e9:,.0f} GB/s ({self.copy_what})")
        lines.append(f"- commit: {git_commit()}")
        if a.smoke:
            lines.append("- **smoke run**: tiny shapes on whatever device is here; these numbers "
                         "test the script and are not measurements")
        status = ", ".join(f"{p}: {s}" for p, s in self.part_status.items())
        lines.append(f"- parts: {status}" + ("" if final else " (run still going or cut short)"))
        lines.append("")
        for title, text in self.sections:
            lines += [f"## {title}", "", text, ""]
        lines += ["## Rows for bench/RESULTS.md", ""]
        lines.append(md_table(("date", "device", "what", "figure", "command"), self.rows))
        lines.append("")
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines))
        os.replace(tmp, a.out)
        with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
            json.dump(dict(self.raw, rows=self.rows, command=self.command, date=self.date,
                           device=self.device, target=self.target, smoke=a.smoke), f, indent=1,
                      default=str)

    # -- parts ----------------------------------------------------------------------------------

    def run_parts(self, parts):
        weights_left = sum(PART_WEIGHTS[p] for p in parts)
        for i, part in enumerate(parts):
            left = self.left()
            share = left * PART_WEIGHTS[part] / weights_left
            weights_left -= PART_WEIGHTS[part]
            part_deadline = time.monotonic() + share
            log(f"\n=== part {part}: {share:.0f} s of the {left:.0f} s left "
                f"({time.monotonic() - self.t_start:.0f} s elapsed) ===")
            t0 = time.monotonic()
            try:
                if left < 5:
                    raise BudgetExceeded("no time left")
                getattr(self, "part_" + part)(part_deadline)
                self.part_status[part] = f"done in {time.monotonic() - t0:.0f} s"
            except BudgetExceeded as e:
                self.part_status[part] = f"cut short after {time.monotonic() - t0:.0f} s ({e})"
                log(f"part {part}: cut short: {e}")
            except Stop:
                self.part_status[part] = "stopped by a signal"
                raise
            except Exception as e:  # noqa: BLE001 (a failing part must not stop the others)
                self.part_status[part] = f"failed after {time.monotonic() - t0:.0f} s: {e}"
                log(f"part {part}: FAILED: {e}")
                traceback.print_exc(file=sys.stdout)
            finally:
                if self.tenv.is_cuda:
                    gc.collect()
                    torch.cuda.empty_cache()
            log(f"=== part {part}: {self.part_status[part]} ===")
            self.write_report(final=(i == len(parts) - 1))

    # copy ------------------------------------------------------------------------------------

    def part_copy(self, deadline):
        te = self.tenv
        if not te.ok:
            raise RuntimeError(f"no copy reference: {te.why_not}")
        nbytes = (64 << 20) if self.args.smoke else (1 << 30)
        src = torch.empty(nbytes, dtype=torch.uint8, device=te.device)
        src.random_(0, 255)
        dst = torch.empty_like(src)
        best = te.time_fn(lambda: dst.copy_(src), min_time=0.02, reps=10, max_iters=5)
        src = dst = None
        self.copy_bw = 2 * nbytes / best
        self.copy_what = (f"torch copy_ of {fmt_bytes(nbytes)} on {te.name}, "
                          f"(read + written) / time, best of 10")
        self.raw["parts"]["copy"] = {"bytes": nbytes, "seconds": best, "bw": self.copy_bw}
        self.add_section("copy", md_table(
            ("what", "bytes", "time (µs)", "GB/s (read + written)"),
            [(f"device-to-device copy_ ({te.name})", fmt_bytes(nbytes), fmt_us(best),
              f"{self.copy_bw / 1e9:,.0f}")]))
        self.add_row(f"device-to-device copy bandwidth: torch `copy_` of {fmt_bytes(nbytes)}, "
                     f"CUDA events, best of 10, bytes read + written over the time",
                     f"{self.copy_bw / 1e9:,.0f} GB/s", device=te.name)

    # kernels and attention -------------------------------------------------------------------

    def compile_modules(self, mods, target, subdir, deadline):
        """Writes and compiles every module for target (in parallel); {name: rxm or None}."""
        d = os.path.join(self.workdir, subdir)
        os.makedirs(d, exist_ok=True)

        def one(m):
            rx = os.path.join(d, m.name + ".rx")
            rxm = os.path.join(d, m.name + ".rxm")
            with open(rx, "w") as f:
                f.write(m.text)
            cmd = [self.relaxc, "compile", rx, "--target", target, "-o", rxm] + m.compile_flags
            rc, out, err, secs = run_cmd(cmd, min(300, max(10, self.left(deadline))))
            why = compile_problem(rc, out, err)
            if why:
                log(f"  compile {m.name} for {target}: FAILED ({why})")
                return m.name, None, why
            log(f"  compiled {m.name} for {target} in {secs:.1f} s")
            return m.name, rxm, None

        workers = max(1, min(8, (os.cpu_count() or 2)))
        with ThreadPoolExecutor(workers) as ex:
            res = list(ex.map(one, mods))
        return {n: (rxm, why) for n, rxm, why in res}

    def case_dir(self, case):
        return os.path.join(self.workdir, "inputs", case.key)

    def prepare_case(self, case, saved, need_tensors):
        """Writes the case's inputs as .npy files, and PyTorch's result as ref.npy, unless an
        earlier part did; returns the inputs as tensors when need_tensors (else None). A tensor
        that several cases share (a weight, the KV pages) is written once and hard-linked."""
        d = self.case_dir(case)
        done = os.path.join(d, "ok")
        if os.path.exists(done) and not need_tensors:
            return None
        if torch is None:
            raise RuntimeError("PyTorch makes the inputs, and it is not installed")
        t = case.module.make_inputs(case, self.tenv.gen_device, case.module.pool)
        if not os.path.exists(done):
            os.makedirs(d, exist_ok=True)
            for name, v in t.items():
                path = os.path.join(d, name + ".npy")
                if os.path.exists(path):
                    os.remove(path)
                if name in saved and saved[name][0] is v:  # the same tensor (kept alive there)
                    try:
                        os.link(saved[name][1], path)
                        continue
                    except OSError:
                        pass
                np.save(path, v.cpu().numpy())
                saved[name] = (v, path)
            ref = case.module.torch_fn(t)
            np.save(os.path.join(d, "ref.npy"), ref.float().cpu().numpy())
            open(done, "w").close()
        return t

    def run_relaxc_case(self, rxm, case, device, iters, deadline):
        """relaxc run --bench on the case's files: ({seconds, iters, rel_l2}, None, cmd) or
        (None, why, cmd)."""
        d = self.case_dir(case)
        params = sorted(f[:-4] for f in os.listdir(d)
                        if f.endswith(".npy") and f != "ref.npy" and not f.startswith("out-"))
        out = os.path.join(d, f"out-{device.replace(':', '')}.npy")
        cmd = [self.relaxc, "run", rxm, "--device", device, "--bench", str(iters), "--output", out]
        for p in params:
            cmd += ["--input", f"{p}={os.path.join(d, p + '.npy')}"]
        rc, so, se, secs = run_cmd(cmd, min(120, max(5, self.left(deadline) + 5)))
        m = BENCH_LINE.search(so or "")
        if rc != 0 or not m:
            return None, ("timed out" if rc is None else last_lines(se or so)), cmd
        self.runtime_name[device.split(":")[0]] = m.group(3)
        err = None
        try:
            err = rel_l2(np.load(out).astype(np.float32), np.load(os.path.join(d, "ref.npy")))
        except (OSError, ValueError) as e:
            log(f"  {case.key}: no check ({e})")
        return {"seconds": float(m.group(2)) / 1e3, "iters": int(m.group(1)), "rel_l2": err,
                "wall": secs}, None, cmd

    def bench_iters(self, est_seconds):
        """--bench N: about a quarter of a second of calls if relaxc took 4 times est_seconds
        (PyTorch's time), so a slow kernel cannot eat the part's time (3 in a smoke run)."""
        if self.args.smoke:
            return 3
        return int(min(2000, max(10, 0.25 / max(4 * est_seconds, 1e-6))))

    def measure_modules(self, mods, deadline, title, kind, target, device, compare_kind=None,
                        case_filter=None):
        """Compiles mods for target and times every case on device: relaxc beside PyTorch, or,
        with compare_kind, beside relaxc's earlier run on that device kind (the Vulkan part)."""
        te = self.tenv
        dk = device.split(":")[0]
        compiled = self.compile_modules(mods, target, f"{kind}-{target.split()[0]}", deadline)
        rules = {m.name: inspect_rules(self.relaxc, compiled[m.name][0])
                 for m in mods if compiled[m.name][0]}
        table, raw, skipped = [], [], 0
        l2 = te.l2_bytes or 0
        failures, last_error, successes = 0, None, 0
        interrupted = True
        try:
            for m in mods:
                rxm, why = compiled[m.name]
                log(f"-- {m.label}")
                saved = {}
                for case in m.cases:
                    if case_filter and not case_filter(case):
                        continue
                    if self.left(deadline) < 2 or (failures >= 3 and not successes):
                        skipped += 1
                        continue
                    rec = {"what": case.what, "module": m.name, "bytes": case.bytes,
                           "device": device}
                    torch_s = None
                    try:
                        t = self.prepare_case(case, saved,
                                              need_tensors=compare_kind is None and te.ok)
                        if t is not None and te.ok and compare_kind is None:
                            torch_s = te.time_fn(lambda: m.torch_fn(t),
                                                 min_time=0.02 if self.args.smoke else 0.05)
                        t = None
                    except Exception as e:  # noqa: BLE001 (relaxc may still run on earlier files)
                        log(f"  {case.key}: inputs or PyTorch failed: {e}")
                    rec["torch_s"] = torch_s
                    res, fail_why = None, why
                    if rxm and os.path.exists(os.path.join(self.case_dir(case), "ok")):
                        est = torch_s if torch_s else case.bytes / (self.copy_bw or 1e12) + 20e-6
                        res, fail_why, cmd = self.run_relaxc_case(rxm, case, device,
                                                                  self.bench_iters(est), deadline)
                        rec["command"] = " ".join(shlex.quote(c) for c in cmd)
                    elif rxm:
                        fail_why = "no inputs"
                    rec["relaxc"] = res
                    rec["error"] = None if res else fail_why
                    rec["rule"] = chosen_rules(rules.get(m.name, {}), case.env) if rxm else "—"
                    raw.append(rec)
                    rs = res["seconds"] if res else None
                    if res:
                        successes += 1
                    elif rxm:
                        failures, last_error = failures + 1, fail_why
                    ref = (self.kernel_results.get((kind, compare_kind, case.key))
                           if compare_kind else None)
                    if rs:
                        self.kernel_results[(kind, dk, case.key)] = rs
                    check = "—"
                    if res and res["rel_l2"] is not None:
                        check = f"{res['rel_l2']:.1e}"
                        if res["rel_l2"] > 1e-2:
                            check += " MISMATCH"
                    l2_note = "L2-resident" if l2 and case.bytes < l2 else ""
                    relaxc_cells = [fmt_us(rs) if res else f"failed: {(fail_why or '?')[:160]}"
                                    ] + self.rate_cells(case, rs)
                    if compare_kind is None:
                        ratio = f"{rs / torch_s:.2f}×" if rs and torch_s else "—"
                        table.append([case.what, self.size_cell(case)] + relaxc_cells + [
                            fmt_us(torch_s)] + self.rate_cells(case, torch_s) + [
                            ratio, check, rec["rule"], l2_note])
                    else:
                        ratio = f"{100 * ref / rs:.0f}%" if rs and ref else "—"
                        table.append([case.what, self.size_cell(case)] + relaxc_cells + [
                            fmt_us(ref), ratio, check, rec["rule"]])
                    log(f"  {case.what}: relaxc {fmt_us(rs)} µs"
                        + (f", PyTorch {fmt_us(torch_s)} µs" if torch_s else "")
                        + (f", {compare_kind} {fmt_us(ref)} µs" if ref else "")
                        + (f", check {check}" if res else f" ({fail_why})"))
                    if rs:
                        self.add_case_row(case, rs, torch_s, dk, compare_kind, ref, l2_note)
                m.pool.clear()
            interrupted = False
        finally:
            flops = any(c.flops for m in mods for c in m.cases)
            self.finish_table(title, table, raw, compare_kind, dk, interrupted, skipped,
                              failures if not successes else 0, last_error, flops)
        if failures >= 3 and not successes:
            raise RuntimeError(f"relaxc run fails: {last_error}")
        if skipped:
            raise BudgetExceeded(f"{skipped} cases not measured")

    def rate_cells(self, case, seconds):
        """A time as a rate: TFLOP/s and the share of the matrix peak for a compute-bound case,
        else GB/s and the share of the copy bandwidth."""
        if case.flops:
            if not seconds:
                return ["—", "—"]
            peak = self.mm_peak.get(case.what.split()[0])
            rate = case.flops / seconds
            return [f"{rate / 1e12:,.1f}", f"{100 * rate / peak:.0f}%" if peak else "—"]
        return [fmt_gbs(case.bytes, seconds), fmt_frac(case.bytes, seconds, self.copy_bw)]

    @staticmethod
    def size_cell(case):
        return f"{case.flops / 1e9:,.2f} GFLOP" if case.flops else fmt_bytes(case.bytes)

    def finish_table(self, title, table, raw, compare_kind, dk, interrupted, skipped, failures,
                     last_error, flops=False):
        """The part's section: the table so far, how the figures were taken, what is missing."""
        self.raw["parts"].setdefault(title, []).extend(raw)
        size, rate, share = ("FLOPs", "TFLOP/s", "% peak") if flops else ("bytes", "GB/s", "% copy")
        if compare_kind is None:
            header = ("kernel", size, "relaxc µs", rate, share, "PyTorch µs", rate, share,
                      "relaxc / PyTorch time", "rel. L2 vs PyTorch", "rule", "note")
        else:
            header = ("kernel", size, f"{dk} µs", rate, share, f"{compare_kind} µs",
                      f"{dk} speed / {compare_kind}", "rel. L2 vs PyTorch", "rule")
        text = md_table(header, table)
        text += ("\n\nrelaxc µs: `relaxc run --bench N`, the mean of N back-to-back calls timed "
                 "by the wall clock with one synchronize at the end, so it includes each call's "
                 "host-side launch cost (the VM, argument setup); PyTorch µs: CUDA events around "
                 "back-to-back calls, best of 3. Bytes: what the kernel must read and write at "
                 "least (weights, activations in and out). 'L2-resident': the data fits in the L2 "
                 "cache, which back-to-back calls reuse, so bandwidth can exceed the copy figure. "
                 "rule: the schedule rule of the kernel variant that the size selects "
                 "(`relaxc inspect`).")
        if flops:
            text += (" FLOPs: 2 n out in. % peak: of the matrix throughput of the same dtype "
                     "measured in this run (a large cuBLAS GEMM, see its row).")
        if interrupted:
            text += "\n\nStopped here (a signal or an error): the cases after these were not run."
        elif failures >= 3:
            text += (f"\n\nrelaxc failed on the first {failures} cases, the rest ({skipped}) were "
                     f"not tried: {last_error}")
        elif skipped:
            text += f"\n\n{skipped} cases skipped: the part's time was up."
        self.add_section(title, text)

    def rate_text(self, case, seconds):
        r, share = self.rate_cells(case, seconds)
        return (f"{r} TFLOP/s ({share} of the matrix peak)" if case.flops
                else f"{r} GB/s ({share} of copy)")

    def add_case_row(self, case, rs, torch_s, dk, compare_kind, ref, l2_note):
        extra = " (L2-resident)" if l2_note else ""
        if compare_kind is None:
            fig = f"relaxc {fmt_us(rs)} µs = {self.rate_text(case, rs)}"
            if torch_s:
                fig += (f"; PyTorch {fmt_us(torch_s)} µs = {self.rate_text(case, torch_s)}; "
                        f"relaxc takes {rs / torch_s:.2f}× PyTorch's time")
            self.add_row(f"{case.what}: relaxc on {dk} (`relaxc run --bench`) vs PyTorch{extra}",
                         fig, device=self.device_label(dk))
        else:
            fig = f"{dk} {fmt_us(rs)} µs = {fmt_gbs(case.bytes, rs)} GB/s"
            if ref:
                fig += (f"; {compare_kind} {fmt_us(ref)} µs; {dk} at {100 * ref / rs:.0f}% of "
                        f"{compare_kind}'s speed")
            self.add_row(f"{case.what}, relaxc on {dk} vs {compare_kind}{extra}", fig,
                         device=self.device_label(dk))

    @staticmethod
    def kind_name(device):
        return device.split(":")[0]

    def part_kernels(self, deadline):
        mods = kernel_modules(self.args.smoke)
        self.measure_modules(mods, deadline, f"kernels on {self.device}", "kernels", self.target,
                             self.device)

    def part_gemm(self, deadline):
        te = self.tenv
        if te.ok:  # the matrix throughput of this device: cuBLAS on a large square GEMM
            size = 512 if self.args.smoke else 8192
            for dt, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
                a = torch.randn(size, size, device=te.device).to(tdt)
                b = torch.randn(size, size, device=te.device).to(tdt)
                best = te.time_fn(lambda: torch.mm(a, b), min_time=0.05, reps=5)
                a = b = None
                self.mm_peak[dt] = 2 * size ** 3 / best
                self.add_row(f"matrix throughput: torch.mm of two {size}x{size} {dt} matrices "
                             "(cuBLAS), CUDA events, best of 5", f"{self.mm_peak[dt] / 1e12:,.0f}"
                             " TFLOP/s", device=te.name)
        half = time.monotonic() + (0.6 if self.kind == "cuda" else 1.0) * self.left(deadline)
        try:
            self.measure_modules(gemm_modules(self.args.smoke), min(half, deadline),
                                 f"gemm on {self.device}", "gemm", self.target, self.device)
        except BudgetExceeded as e:
            log(f"gemm: {e}")
        self.part_gemm_dispatched(deadline)

    def part_gemm_dispatched(self, deadline):
        """The same GEMMs sent to cuBLASLt by relaxc (--dispatch cublas), every n through the
        library (--dispatch-min-rows 1), beside the generated table above: CUDA only."""
        title = f"gemm relaxc+cuBLASLt (--dispatch cublas --dispatch-min-rows 1) on {self.device}"
        if self.kind != "cuda":
            self.add_section(title, f"skipped: the device is {self.device}; library dispatch "
                             "(--dispatch cublas) sends matmuls to cuBLASLt, which runs on CUDA "
                             "devices only")
            return
        lib = cublaslt_library()
        if lib:
            os.environ["RX_CUBLASLT_LIBRARY"] = lib  # the runs below open this one
        log(f"gemm relaxc+cuBLASLt: libcublasLt {lib or 'by its default names (libcublasLt.so.13, 12, 11)'}")
        mods = gemm_modules(self.args.smoke)
        for m in mods:
            m.compile_flags = ["--dispatch", "cublas", "--dispatch-min-rows", "1"]
        self.measure_modules(mods, deadline, title, "gemm-cublaslt", self.target, self.device)

    def part_attention(self, deadline):
        mods = attention_modules(self.args.smoke)
        decode = [m for m in mods if not m.name.startswith("prefill")]
        prefill = [m for m in mods if m.name.startswith("prefill")]
        half = time.monotonic() + 0.5 * self.left(deadline)
        try:  # two tables: decode is bound by bytes (GB/s), prefill by arithmetic (TFLOP/s)
            self.measure_modules(decode, min(half, deadline), f"decode attention on {self.device}",
                                 "attention", self.target, self.device)
        except BudgetExceeded as e:
            log(f"decode attention: {e}")
        self.measure_modules(prefill, deadline, f"prefill attention on {self.device}",
                             "attention", self.target, self.device)

    def vulkan_device(self, deadline):
        """The first Vulkan device that runs a probe kernel: vulkan:N, its name. A software
        rasterizer (lavapipe, SwiftShader) is passed over unless --smoke."""
        probe = [silu_mul_module(64, "probe", (1,))]
        compiled = self.compile_modules(probe, "vulkan", "vulkan-probe", deadline)
        rxm, why = compiled[probe[0].name]
        if not rxm:
            raise RuntimeError(f"relaxc cannot compile for vulkan here: {why}")
        seen = []
        for i in range(4):
            dev = f"vulkan:{i}"
            rc, out, err, _ = run_cmd([self.relaxc, "run", rxm, "--device", dev, "--bench", "1",
                                       "--input", "g=random:1x64", "--input", "u=random:1x64"], 60)
            m = BENCH_LINE.search(out or "")
            if rc != 0 or not m:
                seen.append(f"{dev}: {last_lines(err or out, 2)}")
                break
            name = m.group(3)
            if self.args.smoke or not re.search(r"llvmpipe|lavapipe|SwiftShader", name, re.I):
                return dev, name
            seen.append(f"{dev}: {name} (software)")
        raise RuntimeError(f"no Vulkan GPU: {'; '.join(seen)}")

    def part_vulkan(self, deadline):
        vdev, vname = self.vulkan_device(deadline)
        log(f"vulkan: {vdev} is {vname}")
        compare = self.kind
        subset = (lambda c: c.env.get("n", 1) in (1, 16)) if not self.args.smoke else None
        mods = kernel_modules(self.args.smoke)
        att = attention_modules(self.args.smoke, prefill=False)
        half = time.monotonic() + 0.6 * self.left(deadline)
        try:
            self.measure_modules(mods, min(half, deadline), f"kernels on {vdev}", "kernels",
                                 "vulkan", vdev, compare_kind=compare, case_filter=subset)
        except BudgetExceeded as e:
            log(f"vulkan kernels: {e}")
        self.measure_modules(att, deadline, f"decode attention on {vdev}", "attention", "vulkan",
                             vdev, compare_kind=compare)

    # model -------------------------------------------------------------------------------------

    def part_model(self, deadline):
        for i, key in enumerate(self.args.models):
            left = self.left(deadline)
            share = left / (len(self.args.models) - i)
            if share < 30:
                raise BudgetExceeded(f"{left:.0f} s left, too little for a model")
            ModelBench(self, key, time.monotonic() + share).run()


def git_commit():
    if os.environ.get("RX_BENCH_COMMIT"):  # where the checkout was copied without .git
        return os.environ["RX_BENCH_COMMIT"]
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "") if rev else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


# ---------------------------------------------------------------------------------------------
# the model part

def llama_config(spec, layers):
    from transformers import LlamaConfig
    return LlamaConfig(
        vocab_size=spec["vocab"], hidden_size=spec["hidden"],
        intermediate_size=spec["intermediate"], num_hidden_layers=layers,
        num_attention_heads=spec["heads"], num_key_value_heads=spec["kv_heads"],
        max_position_embeddings=spec["max_pos"], rms_norm_eps=spec["eps"],
        rope_theta=spec["rope_theta"], tie_word_embeddings=False,
        # no end-of-sequence token: a random model must not stop generating early
        bos_token_id=None, eos_token_id=None, pad_token_id=None)


def make_llama(spec, layers, device, dtype):
    """A random-weight LlamaForCausalLM made directly on device in dtype (no CPU copy)."""
    from transformers import LlamaForCausalLM
    cfg = llama_config(spec, layers)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    model.eval()
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.eos_token_id = None
        model.generation_config.pad_token_id = None
    return model


def forward_kwargs(model):
    """Keyword arguments the installed transformers takes: logits of the last token only."""
    import inspect
    params = inspect.signature(model.forward).parameters
    if "logits_to_keep" in params:
        return {"logits_to_keep": 1}
    if "num_logits_to_keep" in params:
        return {"num_logits_to_keep": 1}
    return {}


class ModelBench:
    def __init__(self, bench, key, deadline):
        self.b = bench
        self.key = key
        self.deadline = deadline
        smoke = bench.args.smoke
        self.spec = dict((SMOKE_MODELS if smoke else MODELS)[key])
        self.layers = bench.args.layers or self.spec["layers"]
        self.prefill_lengths = (16, 64) if smoke else (128, 1024, 4096)
        self.decode_prompt = 16 if smoke else 128
        self.decode_tokens = 16 if smoke else 128
        self.dir = os.path.join(bench.workdir, f"model-{key}")
        self.label = (f"{self.spec['name']} shapes, {self.layers} layers, random weights, f16")
        self.res = {"model": self.label}
        bench.raw["parts"].setdefault("model", []).append(self.res)
        self.eager_tokens = []
        self.model = None

    def left(self):
        return self.deadline - time.monotonic()

    def need(self, seconds, what):
        if self.left() < seconds:
            raise BudgetExceeded(f"{self.left():.0f} s left, {what} needs about {seconds:.0f}")

    def step(self, what):
        log(f"[{time.monotonic() - self.b.t_start:6.0f} s] model {self.key}: {what}")

    def run(self):
        b, te = self.b, self.b.tenv
        if not te.ok:
            raise RuntimeError(f"the model part needs PyTorch: {te.why_not}")
        try:
            import transformers
        except ImportError as e:
            raise RuntimeError(f"the model part needs transformers: {e}") from e
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        hf_dir = os.path.join(self.dir, "hf")
        rxm = os.path.join(self.dir, "model.rxm")
        compile_proc = None
        try:
            compile_proc = self.make_and_compile(hf_dir, rxm, transformers.__version__)
            ids = self.prompt_ids()
            hf = self.transformers_eager(ids)
            self.wait_compile(compile_proc, hf_dir, rxm)
            compile_proc = None
            rx = self.relaxc_driver(rxm)
            self.check_logits(rx, hf)
            self.torch_compile()
            self.relaxc_generate(rxm, ids)  # a cross-check of the CLI's own figures
            self.quantized_decode(hf_dir, rxm)  # last: it removes the f16 artifact
        finally:
            shutil.rmtree(hf_dir, ignore_errors=True)
            if compile_proc is not None:
                kill_group(compile_proc)
            self.model = None
            self.report()
            if not b.args.keep:
                shutil.rmtree(self.dir, ignore_errors=True)

    # building ------------------------------------------------------------------------------------

    def parameters(self, layers):
        spec = self.spec
        d = spec["hidden"] // spec["heads"]
        per_layer = (2 * spec["hidden"] * spec["hidden"] + 2 * spec["hidden"] * spec["kv_heads"] * d
                     + 3 * spec["hidden"] * spec["intermediate"])
        return 2 * spec["vocab"] * spec["hidden"] + layers * per_layer

    def make_and_compile(self, hf_dir, rxm, tf_version):
        b, te, spec = self.b, self.b.tenv, self.spec
        # the folder and the artifact are each the size of the f16 weights: fewer layers where
        # the disk cannot hold both (said in the label)
        free = shutil.disk_usage(self.dir).free
        fits = self.layers
        # (and the quantized models' files, a third of that, once the f16 artifact is gone)
        while fits > 1 and 2 * 2.05 * self.parameters(fits) + (1 << 30) > free:
            fits -= 1
        if fits < self.layers:
            self.step(f"{fmt_bytes(free)} free under {self.dir}: {fits} layers instead of "
                      f"{self.layers}")
            self.label = (f"{spec['name']} shapes, {fits} layers (not {self.layers}: disk space), "
                          f"random weights, f16")
            self.layers = fits
        params = self.parameters(self.layers)
        nbytes = 2 * params
        self.need(40 if not b.args.smoke else 10, "building the model")
        self.step(f"building {self.label} on {te.device} (transformers {tf_version}, "
                  f"{params / 1e6:,.0f} M parameters, {fmt_bytes(nbytes)})")
        t0 = time.monotonic()
        torch.manual_seed(0)  # the torch.compile worker makes the same weights
        self.model = make_llama(spec, self.layers, te.device, torch.float16)
        te.sync()
        self.res["create_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        self.model.save_pretrained(hf_dir)
        self.res["save_s"] = time.monotonic() - t0
        self.step(f"built in {self.res['create_s']:.1f} s, saved in {self.res['save_s']:.1f} s")
        # a kernel cache of this run's own, emptied first: the compile time reported is a cold one
        kcache = os.path.join(self.dir, "kernel-cache")
        shutil.rmtree(kcache, ignore_errors=True)
        cmd = [b.relaxc, "compile", hf_dir, "--target", b.target, "-o", rxm, "--cache-dir", kcache]
        self.res["compile_command"] = " ".join(shlex.quote(c) for c in cmd)
        self.step(f"relaxc compile (in the background): {self.res['compile_command']}")
        self.compile_t0 = time.monotonic()
        self.compile_log = open(os.path.join(self.dir, "compile.log"), "w+")
        return subprocess.Popen(cmd, stdout=self.compile_log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def wait_compile(self, proc, hf_dir, rxm):
        self.step("waiting for relaxc compile")
        try:
            rc = proc.wait(timeout=max(5, self.left() - 20))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
            raise BudgetExceeded("relaxc compile did not finish in the model's time")
        finally:
            self.compile_log.seek(0)
            text = self.compile_log.read()
            self.compile_log.close()
        self.res["compile_s"] = time.monotonic() - self.compile_t0
        why = compile_problem(rc, text, "")
        if why:
            raise RuntimeError(f"relaxc compile failed: {why}")
        self.res["artifact_bytes"] = os.path.getsize(rxm)
        self.step(f"relaxc compile done in {self.res['compile_s']:.1f} s "
                  f"({fmt_bytes(self.res['artifact_bytes'])}): {last_lines(text, 2)}")
        # the folder stays for the quantized models (quantized_decode)

    def prompt_ids(self):
        n = max(max(self.prefill_lengths), self.decode_prompt)
        rng = np.random.default_rng(1234)
        ids = rng.integers(0, self.spec["vocab"], size=n).astype("<i4")
        ids.tofile(os.path.join(self.dir, "prompt.i32"))
        return ids

    # transformers eager --------------------------------------------------------------------------

    def transformers_eager(self, ids):
        te, model = self.b.tenv, self.model
        kw = forward_kwargs(model)
        dev = te.device
        out = {"prefill": {}}
        self.res["eager"] = out

        def timed(fn):
            te.sync()
            t0 = time.perf_counter()
            r = fn()
            te.sync()
            return time.perf_counter() - t0, r

        with torch.inference_mode():
            x = torch.tensor(ids[:16], dtype=torch.long, device=dev)[None]
            model(x, use_cache=True, **kw)  # warm-up: kernels, allocator
            for n in self.prefill_lengths:
                if self.left() < 60 and n > 1024:
                    out["prefill"][n] = "skipped: time"
                    continue
                x = torch.tensor(ids[:n], dtype=torch.long, device=dev)[None]
                best = min(timed(lambda: model(x, use_cache=True, **kw))[0] for _ in range(2))
                out["prefill"][n] = best
                self.step(f"transformers eager prefill {n}: {n / best:,.0f} tok/s")
            # decode: prefill the prompt, then one token at a time (greedy, each token read back
            # to the host as a generation loop does)
            x = torch.tensor(ids[:self.decode_prompt], dtype=torch.long, device=dev)[None]
            r = model(x, use_cache=True, **kw)
            logits16 = r.logits[0, -1].float().cpu().numpy()
            past = r.past_key_values
            nxt = int(r.logits[0, -1].argmax())
            tokens = [nxt]
            te.sync()
            t0 = time.perf_counter()
            for _ in range(self.decode_tokens - 1):
                r = model(torch.tensor([[nxt]], device=dev), past_key_values=past, use_cache=True)
                past = r.past_key_values
                nxt = int(r.logits[0, -1].argmax())
                tokens.append(nxt)
            te.sync()
            secs = time.perf_counter() - t0
            out["decode"] = {"tokens": self.decode_tokens - 1, "seconds": secs}
            self.step(f"transformers eager decode: {(self.decode_tokens - 1) / secs:.1f} tok/s")
            del past, r
            # the f32 reference of the last-token logits
            logits32 = None
            try:
                model.float()
                r = model(x, use_cache=False, **kw)
                logits32 = r.logits[0, -1].float().cpu().numpy()
                del r
            except RuntimeError as e:  # out of memory on a small GPU
                self.step(f"no f32 reference: {e}")
        self.model = model = None
        gc.collect()
        if te.is_cuda:
            torch.cuda.empty_cache()
        self.eager_tokens = tokens
        return {"logits16": logits16, "logits32": logits32, "tokens": tokens}

    # relaxc ------------------------------------------------------------------------------------

    def relaxc_driver(self, rxm):
        b = self.b
        driver = b.args.driver
        if not driver or not os.path.exists(driver):
            self.step("no llm_bench driver (bench/gpu.sh builds it): relaxc generate only")
            self.res["driver"] = "missing"
            return None
        logits = os.path.join(self.dir, "logits.f32")
        cmd = [driver, rxm, "--device", b.device, "--prompt", os.path.join(self.dir, "prompt.i32"),
               "--decode-prompt", str(self.decode_prompt),
               "--decode-tokens", str(self.decode_tokens - 1),
               "--prefill", ",".join(map(str, self.prefill_lengths)), "--logits", logits,
               "--budget-s", str(max(1, int(self.left() * 0.5)))]
        self.res["driver_command"] = " ".join(shlex.quote(c) for c in cmd)
        self.step(f"relaxc (C API): {self.res['driver_command']}")
        rc, out, err, secs = run_cmd(cmd, max(10, self.left() - 10))
        ev = json_lines(out)
        self.res["driver"] = ev
        if rc != 0:
            self.res["driver_error"] = ("timed out" if rc is None else
                                        f"failed ({rc}): {last_lines(err)}")
            self.step(f"llm_bench {self.res['driver_error']}")
        for e in ev:
            self.step(f"relaxc: {json.dumps({k: v for k, v in e.items() if k != 'ids'})}")
            if e.get("event") == "load":
                b.runtime_name[b.kind] = e.get("device", "").rsplit(" (", 1)[0]
        rx = {"events": ev}
        if os.path.exists(logits):
            rx["logits"] = np.fromfile(logits, dtype="<f4")
        dec = [e for e in ev if e.get("event") == "decode"]
        rx["tokens"] = dec[0]["ids"] if dec else None
        return rx

    def relaxc_generate(self, rxm, ids):
        b = self.b
        if self.left() < 40 and not b.args.smoke:
            self.res["generate"] = "skipped: time"
            return
        cmd = [b.relaxc, "generate", rxm, "--device", b.device, "--prompt-ids",
               ",".join(str(int(i)) for i in ids[:self.decode_prompt]), "--max-tokens",
               str(self.decode_tokens), "--temperature", "0", "--print-ids"]
        shown = cmd[:6] + [f"<{self.decode_prompt} ids>"] + cmd[7:]
        self.step(f"relaxc generate: {' '.join(shlex.quote(c) for c in shown)}")
        rc, out, err, secs = run_cmd(cmd, max(10, self.left() - 10))
        m = GEN_LINE.search(err or "")
        if rc != 0 or not m:
            self.res["generate"] = f"failed: {'timed out' if rc is None else last_lines(err)}"
            self.step(self.res["generate"])
            return
        self.res["generate"] = {"prefill_tokens": int(m.group(1)), "prefill_ms": float(m.group(2)),
                                "prefill_tok_s": float(m.group(3)),
                                "decode_tokens": int(m.group(4)),
                                "decode_ms": float(m.group(5)), "decode_tok_s": float(m.group(6)),
                                "wall_s": secs, "line": m.group(0)}
        self.step(f"relaxc generate: {m.group(0)} ({secs:.1f} s with the load)")

    def quantized_decode(self, hf_dir, rxm):
        """Decode tokens per second of the same model with quantized projections (issue 15):
        q4f16_g32 (`relaxc compile DIR --quantize q4f16_g32`) and GGUF Q4_K (the folder written
        as a GGUF file, write_gguf_llama), each compiled and run by llm_bench (decode only)."""
        b = self.b
        out = {}
        self.res["quantized"] = out
        driver = b.args.driver
        if not driver or not os.path.exists(driver):
            out["note"] = "no llm_bench driver"
            return
        if os.path.exists(rxm):
            os.remove(rxm)  # room for the quantized files
        for scheme in ("q4f16_g32", "Q4_K"):
            if self.left() < (20 if b.args.smoke else 120):
                out[scheme] = "skipped: time"
                continue
            qrxm = os.path.join(self.dir, f"model-{scheme}.rxm")
            src, extra = hf_dir, ["--quantize", scheme]
            try:
                if scheme == "Q4_K":
                    src, extra = os.path.join(self.dir, "model-q4_k.gguf"), []
                    self.step(f"writing {src} (Q4_K projections)")
                    fmts = write_gguf_llama(src, self.spec, self.layers, hf_dir)
                    out["gguf_bytes"] = fmts
                cmd = [b.relaxc, "compile", src, "--target", b.target, "-o", qrxm] + extra
                self.step(f"relaxc compile ({scheme}): {' '.join(shlex.quote(c) for c in cmd)}")
                rc, cout, cerr, secs = run_cmd(cmd, max(10, self.left() - 30))
                why = compile_problem(rc, cout, cerr)
                if why:
                    out[scheme] = f"compile failed: {why}"
                    continue
                cmd = [driver, qrxm, "--device", b.device, "--prompt",
                       os.path.join(self.dir, "prompt.i32"), "--decode-prompt",
                       str(self.decode_prompt), "--decode-tokens", str(self.decode_tokens - 1),
                       "--budget-s", str(max(1, int(self.left() * 0.5)))]
                rc, dout, derr, dsecs = run_cmd(cmd, max(10, self.left() - 10))
                dec = next((e for e in json_lines(dout) if e.get("event") == "decode"), None)
                if rc != 0 or not dec or not dec.get("ms"):
                    out[scheme] = f"llm_bench failed: {last_lines(derr)}"
                    continue
                out[scheme] = {"tokens": dec["tokens"], "ms": dec["ms"], "compile_s": secs,
                               "artifact_bytes": os.path.getsize(qrxm)}
                self.step(f"relaxc decode, {scheme}: {dec['tokens'] / dec['ms'] * 1e3:.1f} tok/s "
                          f"(compiled in {secs:.1f} s, {fmt_bytes(os.path.getsize(qrxm))})")
            finally:
                for f in (qrxm, os.path.join(self.dir, "model-q4_k.gguf")):
                    if os.path.exists(f):
                        os.remove(f)
            if isinstance(out[scheme], str):
                self.step(f"{scheme}: {out[scheme]}")

    def check_logits(self, rx, hf):
        out = {}
        self.res["check"] = out
        if rx is None or rx.get("logits") is None:
            out["note"] = "no relaxc logits"
            return
        ref = hf["logits32"] if hf["logits32"] is not None else hf["logits16"]
        out["reference"] = "transformers f32" if hf["logits32"] is not None else "transformers f16"
        out["relaxc_rel_l2"] = rel_l2(rx["logits"], ref)
        if hf["logits32"] is not None:
            out["transformers_f16_rel_l2"] = rel_l2(hf["logits16"], hf["logits32"])
        if rx.get("tokens") and hf.get("tokens"):
            a, c = rx["tokens"], hf["tokens"]
            same = 0
            while same < min(len(a), len(c)) and a[same] == c[same]:
                same += 1
            out["greedy_prefix"] = same
            out["greedy_total"] = min(len(a), len(c))
        self.step(f"logits check: {out}")

    # torch.compile (a subprocess, killed at its time limit) -------------------------------------

    def torch_compile(self):
        b = self.b
        # leave relaxc generate (the last step) its 40 s where that still gives this a minute
        limit = self.left() - 40 if self.left() > 100 else self.left() - 5
        if limit < 45:
            self.res["compile"] = f"skipped: {limit:.0f} s left"
            self.step(self.res["compile"])
            return
        spec = {"spec": self.spec, "layers": self.layers, "device": str(b.tenv.device),
                "prompt": os.path.join(self.dir, "prompt.i32"),
                "decode_prompt": self.decode_prompt, "decode_tokens": self.decode_tokens,
                "prefill": list(self.prefill_lengths), "mode": b.args.compile_mode,
                "backend": b.args.compile_backend,
                "eager_tokens": self.eager_tokens}
        cmd = [sys.executable, os.path.abspath(__file__), "--compile-worker", json.dumps(spec)]
        self.step(f"torch.compile (backend {b.args.compile_backend}, mode {b.args.compile_mode}) "
                  f"in a subprocess, at most {limit:.0f} s")
        rc, out, err, secs = run_cmd(cmd, limit)
        ev = json_lines(out)
        for e in ev:
            self.step(f"torch.compile: {json.dumps(e)}")
        self.res["compile"] = {"events": ev, "rc": rc, "seconds": secs}
        if rc != 0:
            why = (f"stopped at the time limit ({limit:.0f} s)" if rc is None
                   else f"failed: {last_lines(err, 3)}")
            self.res["compile"]["why"] = why
            self.step(f"torch.compile {why}")

    # report ------------------------------------------------------------------------------------

    def report(self):
        b, r = self.b, self.res
        dev = b.device_label()
        driver = r.get("driver") if isinstance(r.get("driver"), list) else []
        load = next((e for e in driver if e.get("event") == "load"), None)
        dec = next((e for e in driver if e.get("event") == "decode"), None)
        pre = {e["tokens"]: e for e in driver if e.get("event") == "prefill" and e.get("ms")}
        gen = r.get("generate")
        eager = r.get("eager", {})
        comp = r.get("compile") if isinstance(r.get("compile"), dict) else {}
        comp_ev = comp.get("events", [])
        comp_dec = next((e for e in comp_ev if e.get("event") == "decode"), None)
        comp_pre = {e["tokens"]: e for e in comp_ev if e.get("event") == "prefill"}

        def tok_s(n, secs):
            return f"{n / secs:,.1f}" if secs else "—"

        rows = [(f"decode, batch 1, prompt {self.decode_prompt}, {self.decode_tokens - 1} steps "
                 f"(tok/s)",
                 tok_s(dec["tokens"], dec["ms"] / 1e3) if dec else "—",
                 f"{gen['decode_tok_s']:,.1f}" if isinstance(gen, dict) else "—",
                 tok_s(eager["decode"]["tokens"], eager["decode"]["seconds"])
                 if "decode" in eager else "—",
                 tok_s(comp_dec["tokens"], comp_dec["seconds"]) if comp_dec else "—")]
        for n in self.prefill_lengths:
            e_p = eager.get("prefill", {}).get(n)
            rows.append((
                f"prefill {n} tokens (tok/s)",
                tok_s(n, min(pre[n]["ms"]) / 1e3) if n in pre else "—",
                f"{gen['prefill_tok_s']:,.1f}" if isinstance(gen, dict)
                and gen["prefill_tokens"] == n else "—",
                tok_s(n, e_p) if isinstance(e_p, float) else "—",
                tok_s(n, comp_pre[n]["seconds"]) if n in comp_pre else "—"))
        quant = r.get("quantized") if isinstance(r.get("quantized"), dict) else {}
        for scheme in ("q4f16_g32", "Q4_K"):
            q = quant.get(scheme)
            if isinstance(q, dict):
                rows.append((f"decode, batch 1, prompt {self.decode_prompt}, {q['tokens']} steps, "
                             f"{scheme} projections (tok/s)", tok_s(q["tokens"], q["ms"] / 1e3),
                             "—", "—", "—"))
        mode = (b.args.compile_mode if b.args.compile_backend == "inductor"
                else b.args.compile_backend)
        text = md_table(("what", "relaxc (C API, llm_bench)", "relaxc generate",
                         "transformers eager", f"torch.compile ({mode})"), rows)

        notes = [f"Model: {self.label}; relaxc target `{b.target}` on {b.device}."]
        if "create_s" in r:
            s = (f"Built on {b.tenv.device} in {r['create_s']:.1f} s, saved in {r['save_s']:.1f} s")
            if "compile_s" in r:
                s += (f"; `relaxc compile` took {r['compile_s']:.1f} s (beside the transformers "
                      f"measurements), artifact {fmt_bytes(r['artifact_bytes'])}")
            notes.append(s + ".")
        if load:
            notes.append(f"relaxc load (map, upload, warm-up): {load['ms'] / 1e3:.1f} s; KV cache "
                         f"{load.get('kv_bytes_per_token', 0) / 1024:.0f} KiB per token.")
        if isinstance(r.get("driver"), str):
            notes.append(f"relaxc C API: {r['driver']}.")
        if r.get("driver_error"):
            notes.append(f"relaxc C API (llm_bench): {r['driver_error']}.")
        if isinstance(gen, str):
            notes.append(f"relaxc generate: {gen}.")
        chk = r.get("check", {})
        if "relaxc_rel_l2" in chk:
            s = (f"Logits check (the last token of the {self.decode_prompt}-token prompt, relative "
                 f"L2 vs {chk['reference']}): relaxc {chk['relaxc_rel_l2']:.2e}")
            if "transformers_f16_rel_l2" in chk:
                s += f", transformers f16 {chk['transformers_f16_rel_l2']:.2e}"
            if "greedy_prefix" in chk:
                s += (f"; greedy tokens: relaxc and transformers f16 agree on the first "
                      f"{chk['greedy_prefix']} of {chk['greedy_total']} (random weights: near-ties "
                      f"make later ones diverge)")
            notes.append(s + ".")
        elif chk:
            notes.append(f"Logits check: {chk.get('note')}.")
        for scheme in ("q4f16_g32", "Q4_K"):
            q = quant.get(scheme)
            if isinstance(q, str):
                notes.append(f"relaxc decode with {scheme} projections: {q}.")
            elif q:
                notes.append(f"{scheme}: compiled in {q['compile_s']:.1f} s, artifact "
                             f"{fmt_bytes(q['artifact_bytes'])}.")
        if quant:
            notes.append("Quantized rows: the same weights with their projections quantized "
                         "(q4f16_g32 by `relaxc compile --quantize`; Q4_K by the bench's own round-"
                         "to-nearest quantizer into a GGUF file, projections whose input is no "
                         "multiple of 256 left F16), decode through llm_bench; no transformers "
                         "or torch.compile counterpart.")
        if comp.get("why") or isinstance(r.get("compile"), str):
            notes.append(f"torch.compile: {comp.get('why') or r.get('compile')}.")
        if comp_dec and "tokens_agree" in comp_dec:
            notes.append(f"torch.compile's greedy tokens agree with eager's on the first "
                         f"{comp_dec['tokens_agree']} of {comp_dec.get('of', '?')} (the same "
                         f"weights; a check of the static-cache loop).")
        if b.args.compile_backend != "inductor":
            notes.append(f"torch.compile backend {b.args.compile_backend}: not a performance "
                         f"figure.")
        notes.append("relaxc (C API): bench/llm_bench.c over relaxc/llm.h, one load, greedy "
                     "argmax on the host each step; prefill best of 2 on a fresh sequence. relaxc "
                     "generate: its own stderr line. transformers eager: a manual loop with "
                     "past_key_values (DynamicCache), each token read back to the host, CUDA-"
                     "synchronized wall clock, prefill best of 2, only the last token's logits. "
                     "torch.compile: the same loop over a StaticCache with model.forward compiled "
                     "(the prefill of the decode row eager, as transformers' generate does), timed "
                     "after warm-up runs; each prompt length compiles its own graph.")
        b.add_section(f"model: {self.label}", text + "\n\n" + "\n".join(f"- {n}" for n in notes))

        for what, rx_v, gen_v, eg_v, cp_v in rows:
            if rx_v == "—" and eg_v == "—":
                continue
            fig = f"relaxc {rx_v}"
            if gen_v != "—":
                fig += f" (relaxc generate {gen_v})"
            fig += f"; transformers eager {eg_v}; torch.compile {cp_v}"
            b.add_row(f"{self.label}: {what}", fig, device=dev)
        if "relaxc_rel_l2" in chk:
            fig = f"relaxc {chk['relaxc_rel_l2']:.2e}"
            if "transformers_f16_rel_l2" in chk:
                fig += f" (transformers f16: {chk['transformers_f16_rel_l2']:.2e})"
            b.add_row(f"{self.label}: relative L2 of the last-token logits vs {chk['reference']}, "
                      f"{self.decode_prompt}-token prompt", fig, device=dev)


# ---------------------------------------------------------------------------------------------
# the torch.compile worker (its own process, so a hang or a long compile can be killed)

def compile_worker(spec_json):
    s = json.loads(spec_json)
    dev = torch.device(s["device"])

    def emit(**kw):
        print(json.dumps(kw), flush=True)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    import inspect
    from transformers import StaticCache
    t0 = time.monotonic()
    torch.manual_seed(0)  # the weights of the parent's model: the tokens must agree
    model = make_llama(s["spec"], s["layers"], dev, torch.float16)
    emit(event="ready", create_s=time.monotonic() - t0)
    ids = np.fromfile(s["prompt"], dtype="<i4")
    forward_params = inspect.signature(type(model.model).forward).parameters
    takes_cache_position = "cache_position" in forward_params
    if s["backend"] == "inductor":
        compiled = torch.compile(model.forward, mode=s["mode"], dynamic=False)
    else:
        compiled = torch.compile(model.forward, backend=s["backend"], dynamic=False)
    kw = forward_kwargs(model)

    def call(fn, x, past, start):
        pos = torch.arange(start, start + x.shape[1], device=dev)
        extra = {"cache_position": pos} if takes_cache_position else {}
        return fn(input_ids=x, position_ids=pos[None], past_key_values=past, use_cache=True,
                  **extra, **kw)

    def cache(length):
        """A StaticCache of length tokens, its tensors made outside the compiled code (an eager
        call), so their addresses are static for CUDA graphs."""
        try:
            c = StaticCache(config=model.config, max_cache_len=length, device=dev,
                            dtype=torch.float16)
        except TypeError:
            c = StaticCache(config=model.config, max_cache_len=length)
        call(model.forward, torch.tensor([[int(ids[0])]], device=dev), c, 0)
        c.reset()
        return c

    def run_decode(past, prompt, steps):
        """Seconds for steps compiled decode steps after an eager prefill (as transformers'
        generate does), and the greedy tokens."""
        past.reset()
        r = call(model.forward, prompt, past, 0)
        nxt = int(r.logits[0, -1].argmax())
        tokens = [nxt]
        sync()
        t = time.perf_counter()
        for i in range(steps):
            r = call(compiled, torch.tensor([[nxt]], device=dev), past, prompt.shape[1] + i)
            nxt = int(r.logits[0, -1].argmax())
            tokens.append(nxt)
        sync()
        return time.perf_counter() - t, tokens

    with torch.inference_mode():
        p = s["decode_prompt"]
        steps = s["decode_tokens"] - 1
        prompt = torch.tensor(ids[:p], dtype=torch.long, device=dev)[None]
        past = cache(p + steps + 1)
        t0 = time.monotonic()
        run_decode(past, prompt, 3)   # compiles the decode step
        run_decode(past, prompt, 3)   # records the CUDA graphs (reduce-overhead)
        warm = time.monotonic() - t0
        secs, tokens = run_decode(past, prompt, steps)
        eager = s.get("eager_tokens") or []
        agree = 0
        while agree < min(len(eager), len(tokens)) and eager[agree] == tokens[agree]:
            agree += 1
        emit(event="decode", tokens=steps, seconds=secs, compile_s=warm, tokens_agree=agree,
             of=min(len(eager), len(tokens)))
        for n in s["prefill"]:
            past = cache(n)
            x = torch.tensor(ids[:n], dtype=torch.long, device=dev)[None]
            t0 = time.monotonic()
            for _ in range(2):  # compile, then a warm call
                past.reset()
                call(compiled, x, past, 0)
                sync()
            warm = time.monotonic() - t0
            best = None
            for _ in range(2):
                past.reset()
                sync()
                t = time.perf_counter()
                call(compiled, x, past, 0)
                sync()
                t = time.perf_counter() - t
                best = t if best is None else min(best, t)
            emit(event="prefill", tokens=n, seconds=best, compile_s=warm)
            past = None


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny shapes, any device: tests the script")
    p.add_argument("--out", default="bench/gpu-results.md", help="the report (Markdown)")
    p.add_argument("--device", default=None,
                   help="relaxc's device (default cuda:0; --smoke: auto, CUDA if its driver "
                        "loads, else vulkan:0)")
    p.add_argument("--parts", default=",".join(ALL_PARTS), help="comma-separated, of: "
                   + ", ".join(ALL_PARTS))
    p.add_argument("--models", default="7b", help="model part: 7b, 8b or 7b,8b")
    p.add_argument("--layers", type=int, default=None,
                   help="decoder layers of the model part (default 32; --smoke 2)")
    p.add_argument("--relaxc", default="build-gpu/relaxc")
    p.add_argument("--driver", default=None, help="bench/llm_bench.c built (bench/gpu.sh does it)")
    p.add_argument("--workdir", default=None, help="scratch space (default: next to --relaxc)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for all parts (default 500; --smoke 900)")
    p.add_argument("--cuda-target", default=None,
                   help="relaxc target for CUDA (default from the compute capability: "
                        "'cuda -arch=sm_90' on 9.x, else 'cuda')")
    p.add_argument("--compile-mode", default="reduce-overhead",
                   help="torch.compile mode of the model part (reduce-overhead, default, "
                        "max-autotune-no-cudagraphs)")
    p.add_argument("--compile-backend", default=None,
                   help="torch.compile backend of the model part (default inductor; --smoke "
                        "aot_eager, which compiles in seconds and tests only the plumbing)")
    p.add_argument("--command", default=None, help="the command shown in the rows")
    p.add_argument("--keep", action="store_true", help="keep the scratch files")
    p.add_argument("--compile-worker", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.compile_worker:
        return a
    a.parts = [x.strip() for x in a.parts.split(",") if x.strip()]
    bad = [x for x in a.parts if x not in ALL_PARTS]
    if bad:
        p.error(f"unknown part(s) {', '.join(bad)}; expected {', '.join(ALL_PARTS)}")
    a.parts = [x for x in ALL_PARTS if x in a.parts]  # always in the order above
    a.models = [x.strip().lower() for x in a.models.split(",") if x.strip()]
    if any(m not in MODELS for m in a.models):
        p.error(f"--models takes {', '.join(MODELS)}")
    if a.device is None:
        a.device = "auto" if a.smoke else "cuda:0"
    if a.compile_backend is None:
        a.compile_backend = "aot_eager" if a.smoke else "inductor"
    if a.budget is None:
        a.budget = 900 if a.smoke else 500
    if a.workdir is None:
        a.workdir = os.path.join(os.path.dirname(os.path.abspath(a.relaxc)), "bench-work")
    return a


def main(argv):
    args = parse_args(argv)
    if args.compile_worker:
        compile_worker(args.compile_worker)
        return 0
    if not os.path.exists(args.relaxc):
        print(f"gpu_bench: error: no relaxc at {args.relaxc} (bench/gpu.sh builds it)",
              file=sys.stderr)
        return 1

    def stop(signum, _frame):
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    b = Bench(args)
    log(f"gpu_bench: relaxc {args.relaxc}, device {b.device}, target '{b.target}', "
        f"PyTorch: {b.tenv.name or b.tenv.why_not}, parts {','.join(args.parts)}, "
        f"budget {args.budget:.0f} s, scratch {b.workdir}")
    if args.smoke:
        log("gpu_bench: --smoke: tiny shapes; the figures test the script, they measure nothing")
    try:
        b.run_parts(args.parts)
    except Stop as e:
        log(f"gpu_bench: stopped ({e}): writing what was measured")
        b.write_report(final=False)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(os.path.join(b.workdir, "inputs"), ignore_errors=True)
    log(f"\n## Rows for bench/RESULTS.md\n\n"
        f"{md_table(('date', 'device', 'what', 'figure', 'command'), b.rows)}\n")
    log(f"gpu_bench: {len(b.rows)} rows in {args.out} (raw: "
        f"{os.path.splitext(args.out)[0]}.json), {time.monotonic() - b.t_start:.0f} s")
    failed = [p for p, s in b.part_status.items() if s.startswith("failed")]
    return 1 if failed and len(failed) == len(args.parts) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
