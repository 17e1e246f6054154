"""bench/gpu_bench_modules.py: the kernel modules bench/gpu_bench.py measures, each a tiny .rx
module with its cases (sizes), inputs, PyTorch equivalent and bytes moved (decode GEMV, quantized
GEMV, GEMM, rms_norm, silu*mul, softmax, decode and prefill attention), the quantized formats'
reference definitions, and the schedule rules of the kernels a case ran (`relaxc inspect`).
"""

import math
import os
import re

from gpu_bench_env import MODELS, SMOKE_MODELS, F, np, run_cmd, torch

try:  # the backend of the prefill attention peer (torch >= 2.3)
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # no torch, or an older one: SDPA's default backend, said so in the rows
    SDPBackend = sdpa_kernel = None

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
        self.peer = "PyTorch"         # what torch_fn runs, as the rows name it
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


def quant_gemv_module(out_f, in_f, scheme, uses, ns, prefill=False):
    """Decode GEMV on a quantized weight (issue 15): quant_matmul, the dequantization fused into
    the GEMV; bytes counted as the packed weight with its scales, x and y. prefill: the same op
    for any row count (the dequantizing GEMM of prefill), its cases compute-bound (FLOPs)."""
    name = f"q{'gemm' if prefill else 'gemv'}_{scheme}_{out_f}x{in_f}"
    if scheme in ("q4f16_g32", "q8f16"):
        wt = f"u8[{out_f}, {in_f // 2}]" if scheme == "q4f16_g32" else f"i8[{out_f}, {in_f}]"
        params, args = f"w: {wt}, s: f16[{out_f}, {in_f // 32}]", "w, s"
        wbytes = out_f * in_f // (2 if scheme == "q4f16_g32" else 1) + 2 * out_f * in_f // 32
    else:
        nbytes, per = QUANT_SCHEMES[scheme]
        wbytes = out_f * in_f // per * nbytes
        params, args = f"w: u8[{out_f}, {in_f // per * nbytes}]", "w"
    bound = "" if prefill else ", n <= 16"
    text = f"""# {'GEMM' if prefill else 'decode GEMV'} on a {scheme} weight: x[n, in] @ W[out, in]^T ({uses})
graph_fn main(x: f16[n, {in_f}], {params}) -> f16[n, {out_f}]
    where 1 <= n{bound} {{
  dataflow {{
    y = quant_matmul(x, {args}, scheme="{scheme}")
  }}
  return y
}}
"""
    cases = [Case(None, f"{name}_n{n}",
                  f"{scheme} {'gemm' if prefill else 'gemv'} [{n}, {in_f}] x [{out_f}, {in_f}]^T",
                  wbytes + 2 * (n * in_f + n * out_f), {"n": n},
                  flops=2 * n * out_f * in_f if prefill else None) for n in ns]
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

    return Module(name, f"{scheme} {'gemm' if prefill else 'gemv'} {out_f}x{in_f} ({uses})", text,
                  cases, make_inputs,
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


SDPA_FLASH = "SDPA (flash backend)"


def sdpa_flash_peer(q, k, v, gqa):
    """The prefill attention peer: SDPA pinned to its flash backend (FlashAttention-2) where it
    takes the case, else SDPA's own choice, with the reason in the name the rows give."""
    if sdpa_kernel is None:
        return "SDPA (its default backend: this torch has no sdpa_kernel)"
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        return SDPA_FLASH
    except RuntimeError as e:
        return f"SDPA (its default backend; flash refused: {str(e).splitlines()[0][:80]})"


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
        if mod.peer == "PyTorch":  # once: does the flash backend take these shapes?
            mod.peer = sdpa_flash_peer(q, k, v, kvh != h)
        if mod.peer == SDPA_FLASH:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kvh != h)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kvh != h)
        return y[0].permute(1, 0, 2)

    mod = Module(name, f"prefill attention {spec['name']}", text, cases, make_inputs, torch_fn)
    return mod


def gemv_shapes(smoke, models=("7B", "8B")):
    """{(out, in): [uses]}: the decode GEMV's weight shapes of the models named."""
    ms = SMOKE_MODELS if smoke else MODELS
    h = ms["7b"]["hidden"]
    d = h // ms["7b"]["heads"]
    shapes = {}
    for key in models:
        spec = ms[key.lower()]
        kv = spec["kv_heads"] * d
        for (o, i), use in (((h, h), "q/o"), ((kv, h), "k/v"),
                            ((spec["intermediate"], h), "gate/up"),
                            ((h, spec["intermediate"]), "down"), ((spec["vocab"], h), "lm_head")):
            shapes.setdefault((o, i), []).append(f"{key} {use}")
    return shapes


def gemv_ns(smoke):
    return (1, 2, 16) if smoke else (1, 2, 4, 8, 16)


def gemv_modules(smoke):
    """The decode GEMV at 1 ... 16 rows (batched decode) for the 7B shapes: the gemm part's first
    table, as % of copy (issue 31: >= 80% at every n <= 16). The same modules and cases as the
    kernels part's, which skips them once measured."""
    return [gemv_module(o, i, ", ".join(u), gemv_ns(smoke))
            for (o, i), u in gemv_shapes(smoke, ("7B",)).items()]


def kernel_modules(smoke):
    """The kernels part's modules, in the order they are measured."""
    ms = SMOKE_MODELS if smoke else MODELS
    ns = gemv_ns(smoke)
    s7, s8 = ms["7b"], ms["8b"]
    h = s7["hidden"]
    mods = [gemv_module(o, i, ", ".join(uses), ns) for (o, i), uses in gemv_shapes(smoke).items()]
    mods.append(rms_norm_module(h, ns))
    mods.append(silu_mul_module(s7["intermediate"], "7B", ns))
    mods.append(silu_mul_module(s8["intermediate"], "8B", ns))
    mods.append(softmax_module(s7["heads"], (1, 16),
                               (16, 256) if smoke else (1024, 4096, 32768)))
    return mods


def quant_modules(smoke):
    """The quant part: the decode GEMV on quantized weights at the 7B shapes (issue 15: >= 85% of
    copy bandwidth counting packed bytes and scales), then the dequantizing GEMM of prefill at
    the same shapes (TFLOP/s beside F.linear on the dequantized weight). The smoke run's shapes
    are whole Q4_K super-blocks too."""
    ms = SMOKE_MODELS if smoke else MODELS
    s7 = ms["7b"]
    h = s7["hidden"]
    ns = gemv_ns(smoke)
    pre = (64, 100) if smoke else (128, 512, 4096)
    shapes = [((o, i), use) for (o, i), use in (((h, h), "7B q/o"), ((s7["intermediate"], h),
                                                                      "7B gate/up"),
                                                 ((h, s7["intermediate"]), "7B down"))
              if i % 256 == 0]
    mods = [quant_gemv_module(o, i, q, use, ns) for (o, i), use in shapes for q in QUANT_SCHEMES]
    mods += [quant_gemv_module(o, i, q, use, pre, prefill=True) for (o, i), use in shapes
             for q in ("q4f16_g32", "Q4_K")]
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


def chosen_kernels(rules, env):
    """The kernels the case's size selects, one per program (None where unknown)."""
    out = []
    for variants in rules.values():
        for kernel, _, cond in variants:
            ok = True if cond is None else eval_condition(cond, env)
            if ok is None:
                break
            if ok:
                out.append(kernel)
                break
    return out


# PTX instructions that tell which form of a kernel ran (the matrix units, the async copies)
PTX_FORMS = (("wgmma", r"\bwgmma\.mma_async"), ("mma.sync", r"\bmma\.sync"),
             ("ldmatrix", r"\bldmatrix"), ("cp.async.bulk", r"\bcp\.async\.bulk"),
             ("cp.async", r"\bcp\.async\.(?:ca|cg)\b"), ("shfl", r"\bshfl\.sync"),
             ("local memory", r"\.local\b"))


def kernel_forms(relaxc, rxm, workdir):
    """{kernel: "mma.sync, ldmatrix, cp.async"}: what each CUDA kernel's PTX holds, from
    `relaxc inspect --extract` (kernels.json names the kernels; {} on other targets)."""
    d = os.path.join(workdir, os.path.basename(rxm) + ".extract")
    rc, _, _, _ = run_cmd([relaxc, "inspect", rxm, "--extract", d], 60)
    forms = {}
    if rc != 0:
        return forms
    for target in sorted(os.listdir(d)):
        tdir = os.path.join(d, target)
        if not os.path.isdir(tdir):
            continue
        for f in os.listdir(tdir):
            if not f.endswith(".ptx"):
                continue
            with open(os.path.join(tdir, f), errors="replace") as fh:
                ptx = fh.read()
            found = [name for name, pat in PTX_FORMS if re.search(pat, ptx)]
            forms[f[:-4]] = ", ".join(found) if found else "plain"
    return forms


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

