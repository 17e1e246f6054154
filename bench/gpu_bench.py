#!/usr/bin/env python3
"""bench/gpu_bench.py: measures relaxc on an NVIDIA GPU against the device and PyTorch.

Run through bench/gpu.sh, which builds relaxc first; see "How to run bench/gpu.sh" in
bench/RESULTS.md and bench/gpu-plan.md. Parts (--parts), most important first (issue 31), each
with its share of the time budget (--budget):

  copy       device-to-device copy bandwidth (torch, 1 GiB, CUDA events) and the matrix peak
             (cuBLAS, 8192^3, f16 and bf16): the references that every "% of copy" and "% peak"
             figure of the run divides by (always run, first)
  model      a random-weight Llama (transformers, f16, on the GPU) compiled by relaxc from its
             Hugging Face folder: decode (batch 1) and prefill (128, 1024, 4096 tokens) tokens
             per second beside transformers eager and torch.compile, with the ratio and the % of
             the floor (decode: the weights read once over the copy bandwidth; prefill: that or
             the FLOPs over the matrix peak), kernel launches per decode step (`relaxc inspect`),
             CUDA graph replay confirmed (the runtime's replay counters, and decode again with
             RX_CUDA_GRAPHS=0), a logits check against transformers in f32; then (if time is
             left) `relaxc generate` and decode with quantized projections (q4f16_g32, Q4_K)
  gemm       the decode GEMV at 1 ... 16 rows (7B shapes, % of copy), then x[n, in] @ W[out, in]^T
             in f16 and bf16 at n = 1 ... 4096 for the projection shapes (4096x4096, 11008x4096,
             4096x11008, 128256x4096) beside cuBLAS (F.linear), as % of the matrix peak measured
             in the same run; on CUDA a third table times the same modules compiled with
             --dispatch cublas --dispatch-min-rows 1 (relaxc+cuBLASLt, docs/dispatch.md)
  attention  decode attention over a paged KV cache (paged_decode_attention + attention_merge)
             at cache 128 ... 32768 (Llama 2 heads and Llama 3's GQA), and causal prefill
             attention over it (paged_attention) at n = 512 ... 8192, beside torch's
             scaled_dot_product_attention on the same keys and values, dense; each row names the
             kernel that ran and what its PTX holds (mma.sync, wgmma, cp.async, ...)
  kernels    the per-kernel table: decode GEMV for every weight shape of Llama-2-7B and
             Llama-3-8B, rms_norm, silu*mul, softmax, each a tiny .rx module timed by
             `relaxc run --bench N` beside the same op through PyTorch
  quant      the decode GEMV on quantized weights (quant_matmul: q4f16_g32, q8f16, GGUF Q8_0,
             Q4_0, Q4_K) at the 7B shapes, bandwidth counting packed bytes and scales (issue 15:
             >= 85% of copy), and the dequantizing GEMM of prefill (q4f16_g32, Q4_K at 128 ...
             4096 rows), checked against F.linear on the weight dequantized by the format's
             definition
  vulkan     the kernels and decode attention again with --device vulkan:0, against the CUDA rows

Prints a Markdown table per part and writes a report (--out) whose last table holds rows ready
for bench/RESULTS.md (date, device, what, figure, command), rewritten after every row so a run
cut short keeps what it measured (--mirror copies it to $OUT each time). The .json beside it
holds the raw measurements and the units done: --resume REPORT continues that report, measuring
only what it lacks (bench/gpu_bench_resume.py).

--smoke runs every part at tiny shapes on whatever is present (the runtime's default device,
torch on the CPU): a test of the script, not a measurement.

Standard library, numpy, torch and transformers (and safetensors, which transformers needs)
only; never downloads anything (the models are built from local configs with random weights;
HF_HUB_OFFLINE is set).

This file is the entry point: the command line and main (and --compile-worker, the torch.compile
worker that the model part runs as a subprocess of this script). The rest lies beside it:
gpu_bench_env.py (the environment, the parts and model shapes, the small helpers, TorchEnv),
gpu_bench_modules.py (the kernel modules and their rules), gpu_bench_parts.py (Bench: the budget,
the report and the copy, gemm, attention, kernels, quant and vulkan parts), gpu_bench_model.py
(ModelBench, the GGUF writer and the torch.compile worker) and gpu_bench_resume.py (--resume).
"""

import argparse
import os
import shutil
import signal
import sys
import time

from gpu_bench_env import ALL_PARTS, MODELS, Stop, log, md_table
from gpu_bench_model import compile_worker
from gpu_bench_parts import Bench


# ---------------------------------------------------------------------------------------------
# the command line

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
    p.add_argument("--resume", default=None, metavar="REPORT",
                   help="continue an earlier report (its directory, .md or .json): the units it "
                        "measured are kept, not measured again; the rest are, and --out gets "
                        "both")
    p.add_argument("--mirror", default=None, metavar="DIR",
                   help="also copy the report and its .json into DIR after every row ($OUT on "
                        "the GPU machine: a call killed at its time limit still brings them back)")
    p.add_argument("--keep", action="store_true", help="keep the scratch files")
    p.add_argument("--compile-worker", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.compile_worker:
        return a
    a.parts = [x.strip() for x in a.parts.split(",") if x.strip()]
    bad = [x for x in a.parts if x not in ALL_PARTS]
    if bad:
        p.error(f"unknown part(s) {', '.join(bad)}; expected {', '.join(ALL_PARTS)}")
    # always in the order above (most important first), and copy always: its references (copy
    # bandwidth, matrix peak) are what every later row of this run divides by
    a.parts = [x for x in ALL_PARTS if x in a.parts or x == "copy"]
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
    if b.prev:
        done = ", ".join(f"{p} {n}" for p, n in sorted(b.prev.summary().items()))
        log(f"gpu_bench: --resume {b.prev.path}: {len(b.prev.runs)} earlier run(s), units done: "
            f"{done or 'none'}; those are kept, the rest measured")
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
