#!/usr/bin/env python3
"""tests/arm64/check.py: the aarch64 relaxc, run under qemu-user on Debian's arm64 lavapipe, against
the x86-64 relaxc on the x86-64 lavapipe and against independent references (scripts/arm64.sh
builds both and calls this; docs/install.md "aarch64").

The arm64 relaxc is built without shaderc (no arm64 copy in the cross sysroot), so the x86-64 relaxc
compiles every artifact and both run it:
  - tests/e2e (MLP, decoder layer, conv net; every case of tests/e2e/data/manifest.txt, at n/s/b =
    1, 7, 33, 1024 / 1, 7, 33, 256 / 1, 3, 10): `relaxc run --output` on both machines; each output
    is within the NumPy reference's tolerance (normalized max error <= 1e-4, as test_e2e) and the
    two machines' outputs within 1e-5 of each other (lavapipe's JIT may contract a*b+c into an FMA
    on aarch64 and not on x86-64: the figure printed says whether they are bitwise equal);
  - `relaxc inspect` of each artifact prints the same text on both;
  - `relaxc generate` on the trained tiny Llama (tests/llm/models/kjv-llama, f32): greedy from
    transformers' 7-token prompt gives transformers' first 16 tokens (tests/llm/ref/kjv-llama.json)
    on both; greedy from text (the tokenizer: ASCII and UTF-8 bytes >= 0x80, where a signed or
    unsigned char differs) and seeded sampling (the sampler's float arithmetic and RNG) give the
    same text and ids on both (8 tokens each: qemu is slow).
The cases run --jobs at a time (default: the CPUs).
Exit status 0 when all agree, 1 with a line per disagreement.

usage: check.py --src ROOT --host-relaxc PATH --arm-relaxc PATH --emu qemu-aarch64
                --work DIR
"""
import argparse
import ast
import json
import os
import re
import shlex
import struct
import subprocess
import sys
import threading
import time
from array import array
from concurrent.futures import ThreadPoolExecutor

ICD_DIR = "/usr/share/vulkan/icd.d"
TOL_REF = 1e-4  # against the NumPy reference (tests/unit/test_e2e.c's TOL)
TOL_X86 = 1e-5  # arm64 against x86-64, both through lavapipe


def read_npy_f32(path):
    """(shape, values) of a little-endian float32 .npy file (format 1.0/2.0, C order)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        (hlen,) = struct.unpack_from("<H", data, 8)
        off = 10
    else:
        (hlen,) = struct.unpack_from("<I", data, 8)
        off = 12
    header = ast.literal_eval(data[off:off + hlen].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        raise ValueError(f"{path}: expected C-order <f4, got {header}")
    vals = array("f")
    vals.frombytes(data[off + hlen:])
    n = 1
    for d in header["shape"]:
        n *= d
    if len(vals) != n:
        raise ValueError(f"{path}: {len(vals)} values for shape {header['shape']}")
    return tuple(header["shape"]), vals


def norm_err(got, want):
    """max|got - want| / max(1, max|want|)"""
    scale = max([1.0] + [abs(w) for w in want])
    return max([0.0] + [abs(g - w) for g, w in zip(got, want)]) / scale


class Runner:
    def __init__(self, args):
        self.host = [args.host_relaxc]
        self.arm = shlex.split(args.emu) + [args.arm_relaxc]
        base = dict(os.environ, RX_VULKAN_VALIDATION="0")
        self.env = {
            "x86": dict(base, VK_ICD_FILENAMES=f"{ICD_DIR}/lvp_icd.x86_64.json",
                        VK_DRIVER_FILES=f"{ICD_DIR}/lvp_icd.x86_64.json"),
            "arm": dict(base, VK_ICD_FILENAMES=f"{ICD_DIR}/lvp_icd.aarch64.json",
                        VK_DRIVER_FILES=f"{ICD_DIR}/lvp_icd.aarch64.json"),
        }
        self.seconds = {"x86": 0.0, "arm": 0.0}
        self.lock = threading.Lock()

    def run(self, which, argv):
        cmd = (self.host if which == "x86" else self.arm) + argv
        t = time.monotonic()
        p = subprocess.run(cmd, env=self.env[which], capture_output=True, text=True)
        with self.lock:
            self.seconds[which] += time.monotonic() - t
        if p.returncode != 0:
            raise RuntimeError(f"{which}: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
        return p.stdout


def params_of(rx_path):
    """The parameter names of `graph_fn main(...)` in a .rx file, in order."""
    text = open(rx_path).read()
    m = re.search(r"graph_fn\s+main\s*\((.*?)\)\s*->", text, re.S)
    return re.findall(r"(\w+)\s*:", m.group(1))


def check_e2e(r, src, work, pool, fails, models):
    data = os.path.join(src, "tests/e2e/data")
    cases = [line.strip().split("|") for line in open(os.path.join(data, "manifest.txt"))
             if line.strip() and not line.startswith("#")]
    cases = [c for c in cases if not models or c[0] in models]
    compiled = {}
    for model in dict.fromkeys(c[0] for c in cases):
        rx = os.path.join(src, "tests/e2e", model + ".rx")
        art = os.path.join(work, model + ".rxm")
        r.run("x86", ["compile", rx, "--target", "vulkan", "-o", art])
        compiled[model] = (art, params_of(rx))
        a, b = r.run("x86", ["inspect", art]), r.run("arm", ["inspect", art])
        if a != b:
            fails.append(f"e2e {model}: relaxc inspect differs:\n x86: {a}\n arm: {b}")

    def one(case):
        model, label, ins, out = case
        art, params = compiled[model]
        files = ins.split(",")
        if len(files) != len(params):
            return [], f"e2e {model} {label}: {len(files)} inputs for {len(params)} parameters"
        argv = ["run", art, "--device", "vulkan:0"]
        for p, f in zip(params, files):
            argv += ["--input", f"{p}={os.path.join(data, f)}"]
        got = {}
        for which in ("x86", "arm"):
            path = os.path.join(work, f"{model}_{label.replace('=', '')}.{which}.npy")
            r.run(which, argv + ["--output", path])
            got[which] = read_npy_f32(path)
        ref_shape, ref = read_npy_f32(os.path.join(data, out))
        line, bad = f"e2e {model} {label:6}", []
        for which in ("x86", "arm"):
            shape, vals = got[which]
            if shape != ref_shape:
                bad.append(f"{line}: {which} shape {shape}, reference {ref_shape}")
                continue
            e = norm_err(vals, ref)
            line += f" {which}-vs-ref {e:.2e}"
            if e > TOL_REF:
                bad.append(f"{line}: {which} off the reference by {e:.3g} > {TOL_REF}")
        if got["x86"][0] == got["arm"][0]:
            e = norm_err(got["arm"][1], got["x86"][1])
            same = got["arm"][1].tobytes() == got["x86"][1].tobytes()
            line += f" arm-vs-x86 {e:.2e}" + (" (bitwise equal)" if same else "")
            if e > TOL_X86:
                bad.append(f"{line}: arm64 off x86-64 by {e:.3g} > {TOL_X86}")
        return bad, line

    for bad, line in pool.map(one, cases):
        fails.extend(bad)
        print(line, flush=True)


def check_generate(r, src, work, pool, fails):
    model = os.path.join(src, "tests/llm/models/kjv-llama")
    ref = json.load(open(os.path.join(src, "tests/llm/ref/kjv-llama.json")))
    art = os.path.join(work, "kjv.rxm")
    r.run("x86", ["compile", model, "--target", "vulkan", "--dtype", "f32", "-o", art])
    greedy = ref["greedy"]
    runs = [
        ("greedy, transformers' prompt ids",
         ["--prompt-ids", ",".join(map(str, greedy["prompt"])), "--temperature", "0",
          "--max-tokens", "16"], greedy["tokens"][:16]),
        # the tokenizer on ASCII and on UTF-8 bytes >= 0x80 (where char's sign shows)
        ("greedy, UTF-8 text", ["--prompt", "In the beginning \u00e9t\u00e9 \u2014 \u03bb\u00f6",
                                "--temperature", "0", "--max-tokens", "8"], None),
        # the sampler's float arithmetic and RNG
        ("sampled, seed 7", ["--prompt", "And God said", "--temperature", "0.9", "--top-k", "40",
                             "--top-p", "0.95", "--seed", "7", "--max-tokens", "8"], None),
    ]

    def one(run):
        name, opts, want = run
        out = {w: r.run(w, ["generate", art] + opts + ["--print-ids"]) for w in ("x86", "arm")}
        ids = {w: out[w].rstrip("\n").split("\n")[-1] for w in out}
        line, bad = f"generate {name}: {ids['arm']}", []
        if out["x86"] != out["arm"]:
            bad.append(f"{line}: x86-64 and arm64 differ:\n x86: {out['x86']!r}\n"
                       f" arm: {out['arm']!r}")
        if want is not None and ids["arm"] != ",".join(map(str, want)):
            bad.append(f"{line}: transformers' greedy tokens are {want}")
        return bad, line

    for bad, line in pool.map(one, runs):
        fails.extend(bad)
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--host-relaxc", required=True)
    ap.add_argument("--arm-relaxc", required=True)
    ap.add_argument("--emu", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", choices=["e2e", "generate"])
    ap.add_argument("--models", nargs="*", help="only these models of tests/e2e (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2,
                    help="cases run at once (qemu runs one program on one core)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    r = Runner(args)
    fails = []
    t = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            if args.only != "generate":
                check_e2e(r, args.src, args.work, pool, fails, args.models)
            if args.only != "e2e":
                check_generate(r, args.src, args.work, pool, fails)
    except (RuntimeError, ValueError, OSError) as e:
        fails.append(str(e))
    print(f"{time.monotonic() - t:.0f} s with {args.jobs} jobs; time in relaxc: x86-64 "
          f"{r.seconds['x86']:.0f} s, arm64 under qemu {r.seconds['arm']:.0f} s")
    for f in fails:
        print("FAIL " + f, file=sys.stderr)
    print("arm64 check: " + ("FAILED" if fails else "all agree"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
