"""bench/gpu_bench_env.py: what every part of bench/gpu_bench.py shares: the environment set before
numpy, torch and transformers load, the parts and the model shapes, the small helpers (logging,
figures, Markdown tables, subprocesses with a time limit) and PyTorch's side (TorchEnv: the
device, timing with CUDA events).

bench/gpu_bench.py is the entry point; bench/gpu_bench_modules.py builds the kernel modules,
bench/gpu_bench_parts.py measures them (Bench) and bench/gpu_bench_model.py holds the model part.
"""

import ctypes
import json
import os
import re
import signal
import subprocess
import time

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

# The parts, most important first (issue 31): a run cut short, or a 15-minute GPU session that ends,
# keeps the model rows and the GEMM table before the rest. copy measures the references that the
# later parts divide by (copy bandwidth, matrix peak); quant is the quantized GEMVs and the
# dequantizing GEMM of prefill.
ALL_PARTS = ("copy", "model", "gemm", "attention", "kernels", "quant", "vulkan")
# each part's share of the budget (the time left is split in these proportions among the parts
# still to run, so a part that ends early leaves its time to the later ones). The model part of a
# 7B shape needs about 270 s on an H100 (torch.compile's four graphs: 160 s of it), the GEMM table
# about 100 s, attention about 40 s.
PART_WEIGHTS = {"copy": 1, "model": 60, "gemm": 20, "attention": 10, "kernels": 5, "quant": 3,
                "vulkan": 2}

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
# the commit the report names

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
