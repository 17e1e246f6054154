"""bench/gpu_bench_parts.py: the benchmark (Bench) of bench/gpu_bench.py: the time budget split
among the parts, the report and its rows (one unit per row, resumable: bench/gpu_bench_resume.py),
and the copy, gemm, attention, kernels, quant and vulkan parts (each module compiled by `relaxc
compile`, timed by `relaxc run --bench` beside PyTorch); the model part is
bench/gpu_bench_model.py's ModelBench.
"""

import datetime
import gc
import json
import os
import re
import shlex
import shutil
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

from gpu_bench_env import (ALL_PARTS, BENCH_LINE, PART_WEIGHTS, BudgetExceeded, Stop, TorchEnv,
                           compile_problem, cuda_driver_present, fmt_bytes, fmt_frac, fmt_gbs,
                           fmt_us, git_commit, last_lines, log, md_table, np, rel_l2, run_cmd,
                           torch)
from gpu_bench_model import ModelBench
from gpu_bench_modules import (attention_modules, chosen_kernels, chosen_rules, cublaslt_library,
                               gemm_modules, gemv_modules, inspect_rules, kernel_forms,
                               kernel_modules, quant_modules, silu_mul_module)
from gpu_bench_resume import FORMAT, VERSION, Previous, Units, merge_sections

# ---------------------------------------------------------------------------------------------
# the benchmark

class Bench:
    def __init__(self, args):
        self.args = args
        self.t_start = time.monotonic()
        self.deadline = self.t_start + args.budget
        self.date = datetime.date.today().isoformat()
        # --resume: the earlier report whose units this run skips and whose rows it keeps
        self.prev = Previous(args.resume) if args.resume else None
        self.run_index = len(self.prev.runs) if self.prev else 0
        self.units = Units(ALL_PARTS, self.prev, self.run_index)
        self.part = None     # the part running (the unit of a row made outside a case)
        self.sections = []   # (part, title, markdown) for the report
        self.failed = {}     # unit -> record of a case relaxc failed (not done: retried)
        self.unit_section = {}  # unit -> the table of this run that holds it
        self.part_skipped = 0
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
        self.started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        if self.prev:
            self.check_resumable()
            last = self.prev.runs[-1] if self.prev.runs else {}
            if last.get("device_name") and "not seen" not in last["device_name"]:
                self.runtime_name.setdefault(self.kind, last["device_name"])

    def check_resumable(self):
        """An earlier report continues only on the same kind of run: a smoke run's figures, or
        another GPU's, must not be merged into a measurement."""
        p = self.prev
        if p.smoke != bool(self.args.smoke):
            raise SystemExit(f"gpu_bench: error: --resume {p.path}: a {'smoke' if p.smoke else 'real'}"
                             f" run's report cannot be continued by a "
                             f"{'smoke' if self.args.smoke else 'real'} run")
        if p.device and self.torch_name and p.device != self.torch_name:
            raise SystemExit(f"gpu_bench: error: --resume {p.path}: measured on {p.device}, this "
                             f"run is on {self.torch_name}; start a new report (--out) instead")

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

    def add_row(self, what, figure, device=None, unit=None, runs=None):
        """A row of RESULTS.md's table, under unit (default: the part's own unit of this run);
        runs: the indices of the runs whose figures it holds (default: this run), whose
        commands it names."""
        unit = unit or f"{self.part}@run{self.run_index}"
        cmds = [self.run_command(i) for i in sorted(set(runs or [self.run_index]))]
        self.units.add_row(unit, self.part, (self.date, device or self.device_label(), what,
                                             figure, " then ".join(f"`{c}`" for c in cmds)))

    def run_command(self, i):
        if self.prev and i < len(self.prev.runs):
            return self.prev.runs[i]["command"]
        return self.command

    @property
    def rows(self):
        return self.units.rows()

    def add_section(self, title, text):
        self.sections = [x for x in self.sections if x[1] != title]
        self.sections.append((self.part, title, text))
        log(f"\n### {title}\n\n{text}\n")

    def run_header(self, final):
        return {"command": self.command, "date": self.date, "started": self.started,
                "commit": git_commit(), "device": self.device, "device_name": self.device_label(),
                "torch_device": self.torch_name, "target": self.target, "smoke": self.args.smoke,
                "torch": torch.__version__ if self.tenv.ok else None,
                "copy_bw": self.copy_bw, "copy_what": self.copy_what, "mm_peak": self.mm_peak,
                "parts": dict(self.part_status), "final": final}

    def write_report(self, final):
        a = self.args
        runs = (self.prev.runs if self.prev else []) + [self.run_header(final)]
        lines = [f"# bench/gpu.sh results, {self.date}", ""]
        for i, r in enumerate(runs):
            tag = f"run {i + 1} of {len(runs)}: " if len(runs) > 1 else ""
            lines.append(f"- {tag}`{r['command']}`, {r.get('started') or r['date']}, commit "
                         f"{r['commit']}; relaxc device {r['device']} ({r['device_name']}), "
                         f"target `{r['target']}`")
            if r.get("torch"):
                lines.append(f"  - PyTorch {r['torch']} on {r['torch_device']}")
            if r.get("copy_bw"):
                peaks = ", ".join(f"{k} {v / 1e12:,.0f} TFLOP/s" for k, v in
                                  (r.get("mm_peak") or {}).items())
                lines.append(f"  - copy bandwidth (the reference of this run's '% of copy'): "
                             f"{r['copy_bw'] / 1e9:,.0f} GB/s ({r['copy_what']})"
                             + (f"; matrix peak (cuBLAS, this run's '% peak'): {peaks}"
                                if peaks else ""))
            status = ", ".join(f"{p}: {st}" for p, st in r.get("parts", {}).items())
            lines.append(f"  - parts: {status}" + ("" if r.get("final") else
                                                    " (run still going or cut short)"))
        if a.smoke:
            lines.append("- **smoke run**: tiny shapes on whatever device is here; these numbers "
                         "test the script and are not measurements")
        if len(runs) > 1:
            lines.append("- resumed (--resume): each row was measured by the run whose command and "
                         "date it carries, its ratios against that run's references")
        lines.append("")
        sections = merge_sections(ALL_PARTS, self.sections,
                                  self.prev.sections if self.prev else [])
        for _, title, text in sections:
            lines += [f"## {title}", "", text, ""]
        lines += ["## Rows for bench/RESULTS.md", ""]
        lines.append(md_table(("date", "device", "what", "figure", "command"), self.rows))
        lines.append("")
        self.write_atomic(a.out, "\n".join(lines))
        self.write_atomic(os.path.splitext(a.out)[0] + ".json", json.dumps(
            dict(format=FORMAT, version=VERSION, runs=runs, units=self.units.entries,
                 sections=[list(x) for x in sections], raw=self.raw, rows=self.rows,
                 command=self.command, date=self.date, device=self.device, target=self.target,
                 smoke=a.smoke), indent=1, default=str))
        if a.mirror and os.path.isdir(a.mirror):  # $OUT: what a killed call still brings back
            for f in (a.out, os.path.splitext(a.out)[0] + ".json"):
                shutil.copyfile(f, os.path.join(a.mirror, os.path.basename(f)))

    @staticmethod
    def write_atomic(path, text):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)

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
            self.part = part
            try:
                if left < 5:
                    raise BudgetExceeded("no time left")
                self.part_skipped = 0  # cases of a table cut short that the part went past
                getattr(self, "part_" + part)(part_deadline)
                self.part_status[part] = f"done in {time.monotonic() - t0:.0f} s"
                if self.part_skipped:
                    self.part_status[part] = (f"cut short after {time.monotonic() - t0:.0f} s "
                                              f"({self.part_skipped} cases not measured)")
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
        self.add_row(f"device-to-device copy bandwidth: torch `copy_` of {fmt_bytes(nbytes)}, "
                     f"CUDA events, best of 10, bytes read + written over the time",
                     f"{self.copy_bw / 1e9:,.0f} GB/s", device=te.name)
        self.measure_peaks()

    def measure_peaks(self):
        """The matrix throughput of this device, the reference of every '% peak' (GEMM, prefill
        attention, the model's prefill): cuBLAS on a large square GEMM of random data."""
        te = self.tenv
        size = 512 if self.args.smoke else 8192
        for dt, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            a = torch.randn(size, size, device=te.device).to(tdt)
            b = torch.randn(size, size, device=te.device).to(tdt)
            best = te.time_fn(lambda: torch.mm(a, b), min_time=0.05, reps=5)
            a = b = None
            self.mm_peak[dt] = 2 * size ** 3 / best
            self.add_row(f"matrix throughput: torch.mm of two {size}x{size} {dt} matrices "
                         "(cuBLAS, random data), CUDA events, best of 5",
                         f"{self.mm_peak[dt] / 1e12:,.1f} TFLOP/s", device=te.name)
        self.raw["parts"]["copy"]["mm_peak"] = dict(self.mm_peak)
        cp = self.raw["parts"]["copy"]
        rows = [(f"device-to-device copy_ ({te.name})", fmt_bytes(cp["bytes"]),
                 fmt_us(cp["seconds"]), f"{self.copy_bw / 1e9:,.0f} GB/s (read + written)")]
        rows += [(f"torch.mm {size}x{size} {dt} (cuBLAS)", f"{2 * size ** 3 / 1e9:,.1f} GFLOP",
                  fmt_us(2 * size ** 3 / v), f"{v / 1e12:,.1f} TFLOP/s")
                 for dt, v in self.mm_peak.items()]
        # a resumed run's references get a section of their own beside the earlier run's
        title = "references" + (f" of run {self.run_index + 1}" if self.run_index else "")
        self.add_section(title, md_table(("what", "size", "time (µs)", "rate"), rows))

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
        with compare_kind, beside relaxc's earlier run on that device kind (the Vulkan part).
        Each case is a unit (kind/device kind/case key): one that an earlier run measured
        (--resume) keeps its row, one measured in another table of this run is left out, and a
        module whose cases are all such is not compiled."""
        dk = device.split(":")[0]

        def unit(case):  # the Vulkan part's rows (against CUDA) are units of their own
            return f"{kind}/{dk}{'-vs-' + compare_kind if compare_kind else ''}/{case.key}"

        def wanted(case):
            return not case_filter or case_filter(case)

        def here(case):  # met by this run in another table (the 7B GEMV: gemm, then kernels)
            return self.unit_section.get(unit(case), title) != title

        todo = [m for m in mods if any(wanted(c) and not self.units.done(unit(c)) and not here(c)
                                       for c in m.cases)]
        compiled = self.compile_modules(todo, target, f"{kind}-{target.split()[0]}", deadline)
        rules, forms = {}, {}
        for m in todo:
            if compiled[m.name][0]:
                rules[m.name] = inspect_rules(self.relaxc, compiled[m.name][0])
                forms[m.name] = kernel_forms(self.relaxc, compiled[m.name][0],
                                             os.path.join(self.workdir, "extract"))
        state = {"failures": 0, "last_error": None, "successes": 0, "skipped": 0, "carried": 0}
        units = []
        interrupted = True
        try:
            for m in mods:
                log(f"-- {m.label}")
                saved = {}
                for case in m.cases:
                    if not wanted(case) or here(case):
                        continue
                    u = unit(case)
                    self.unit_section[u] = title
                    if self.units.carry(u):
                        state["carried"] += 1
                        units.append(u)
                        continue
                    if self.left(deadline) < 2 or (state["failures"] >= 3
                                                   and not state["successes"]):
                        state["skipped"] += 1
                        continue
                    self.measure_case(m, case, saved, compiled[m.name], rules.get(m.name, {}),
                                      forms.get(m.name, {}), title, kind, device, compare_kind,
                                      u, state, deadline)
                    units.append(u)
                    self.write_report(final=False)  # a call killed now keeps this row
                m.pool.clear()
            interrupted = False
        finally:
            flops = any(c.flops for m in mods for c in m.cases)
            self.finish_table(title, units, compare_kind, dk, interrupted, state, flops)
        if state["failures"] >= 3 and not state["successes"]:
            raise RuntimeError(f"relaxc run fails: {state['last_error']}")
        if state["skipped"]:
            self.part_skipped += state["skipped"]
            raise BudgetExceeded(f"{state['skipped']} cases not measured")

    def measure_case(self, m, case, saved, compiled, rules, forms, title, kind, device,
                     compare_kind, unit, state, deadline):
        """One case: PyTorch's time, relaxc's, the check, the table cells and the row."""
        te = self.tenv
        dk = device.split(":")[0]
        rxm, why = compiled
        rec = {"what": case.what, "module": m.name, "key": case.key, "bytes": case.bytes,
               "flops": case.flops, "device": device, "section": title,
               "copy_bw": self.copy_bw, "mm_peak": dict(self.mm_peak)}
        torch_s = None
        try:
            t = self.prepare_case(case, saved, need_tensors=compare_kind is None and te.ok)
            if t is not None and te.ok and compare_kind is None:
                torch_s = te.time_fn(lambda: m.torch_fn(t),
                                     min_time=0.02 if self.args.smoke else 0.05)
            t = None
        except Exception as e:  # noqa: BLE001 (relaxc may still run on earlier files)
            log(f"  {case.key}: inputs or PyTorch failed: {e}")
        rec["torch_s"] = torch_s
        rec["peer"] = m.peer
        res, fail_why = None, why
        if rxm and os.path.exists(os.path.join(self.case_dir(case), "ok")):
            est = torch_s if torch_s else case.bytes / (self.copy_bw or 1e12) + 20e-6
            res, fail_why, cmd = self.run_relaxc_case(rxm, case, device, self.bench_iters(est),
                                                      deadline)
            rec["command"] = " ".join(shlex.quote(c) for c in cmd)
        elif rxm:
            fail_why = "no inputs"
        rec["relaxc"] = res
        rec["error"] = None if res else fail_why
        rec["rule"] = chosen_rules(rules, case.env) if rxm else "—"
        kernels = chosen_kernels(rules, case.env) if rxm else []
        rec["kernels"] = kernels
        rec["form"] = "; ".join(f"{k}: {forms[k]}" for k in kernels if k in forms) or "—"
        rs = res["seconds"] if res else None
        if res:
            state["successes"] += 1
        elif rxm:
            state["failures"] += 1
            state["last_error"] = fail_why
        ref = (self.kernel_results.get((kind, compare_kind, case.key)) if compare_kind else None)
        if ref is None and compare_kind:  # measured by an earlier run (--resume)
            e = self.units.entries.get(f"{kind}/{compare_kind}/{case.key}")
            r0 = (e or {}).get("record") or {}
            ref = (r0.get("relaxc") or {}).get("seconds")
        if rs and compare_kind is None:
            self.kernel_results[(kind, dk, case.key)] = rs
        check = "—"
        if res and res["rel_l2"] is not None:
            check = f"{res['rel_l2']:.1e}"
            if res["rel_l2"] > 1e-2:
                check += " MISMATCH"
        l2 = self.tenv.l2_bytes or 0
        l2_note = "L2-resident" if l2 and case.bytes < l2 else ""
        relaxc_cells = [fmt_us(rs) if res else f"failed: {(fail_why or '?')[:160]}"
                        ] + self.rate_cells(case, rs)
        if compare_kind is None:
            ratio = f"{rs / torch_s:.2f}×" if rs and torch_s else "—"
            cells = [case.what, self.size_cell(case)] + relaxc_cells + [fmt_us(torch_s)] + \
                self.rate_cells(case, torch_s) + [ratio, check, rec["rule"], rec["form"], l2_note]
        else:
            ratio = f"{100 * ref / rs:.0f}%" if rs and ref else "—"
            cells = [case.what, self.size_cell(case)] + relaxc_cells + [
                fmt_us(ref), ratio, check, rec["rule"]]
        rec["cells"] = cells
        if res:
            self.units.put(unit, self.part, record=rec)
        else:  # a failed case is no unit done: a resumed run tries it again
            self.failed[unit] = rec
        log(f"  {case.what}: relaxc {fmt_us(rs)} µs"
            + (f", PyTorch {fmt_us(torch_s)} µs" if torch_s else "")
            + (f", {compare_kind} {fmt_us(ref)} µs" if ref else "")
            + (f", check {check}" if res else f" ({fail_why})")
            + (f" [{rec['form']}]" if rec["form"] != "—" else ""))
        if rs:
            self.add_case_row(case, rs, torch_s, dk, compare_kind, ref, l2_note, unit,
                              rec["form"])

    def rate_cells(self, case, seconds):
        """A time as a rate: TFLOP/s and the share of the matrix peak for a compute-bound case,
        else GB/s and the share of the copy bandwidth."""
        if case.flops:
            if not seconds:
                return ["—", "—"]
            # the peak of the case's dtype: bf16 GEMM's own, f16 for the rest (f16 GEMM,
            # attention, the dequantizing GEMM, whose matrix work is f16)
            peak = self.mm_peak.get(case.what.split()[0]) or self.mm_peak.get("f16")
            rate = case.flops / seconds
            return [f"{rate / 1e12:,.1f}", f"{100 * rate / peak:.0f}%" if peak else "—"]
        return [fmt_gbs(case.bytes, seconds), fmt_frac(case.bytes, seconds, self.copy_bw)]

    @staticmethod
    def size_cell(case):
        return f"{case.flops / 1e9:,.2f} GFLOP" if case.flops else fmt_bytes(case.bytes)

    def finish_table(self, title, units, compare_kind, dk, interrupted, state, flops=False):
        """The part's section: the table so far (rows of earlier runs in place), how the figures
        were taken, what is missing."""
        recs = [self.failed.get(u) or (self.units.entries.get(u) or {}).get("record") or {}
                for u in units]
        self.raw["parts"][title] = [r for r in recs if r]
        table = [r["cells"] for r in recs if r.get("cells")]
        size, rate, share = ("FLOPs", "TFLOP/s", "% peak") if flops else ("bytes", "GB/s", "% copy")
        if compare_kind is None:
            header = ("kernel", size, "relaxc µs", rate, share, "PyTorch µs", rate, share,
                      "relaxc / PyTorch time", "rel. L2 vs PyTorch", "rule", "kernel: PTX",
                      "note")
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
                 "(`relaxc inspect`); kernel: PTX: that kernel's name and what its PTX holds "
                 "(mma.sync, wgmma, ldmatrix, cp.async, shuffles, local memory; `relaxc inspect "
                 "--extract`), which tells which form ran.")
        if flops:
            text += (" FLOPs: 2 n out in (attention: causal, 4 h d n (n + 1) / 2). % peak: of the "
                     "matrix throughput of the same dtype measured in the same run (a large "
                     "cuBLAS GEMM, see its row).")
        if state["carried"]:
            text += (f"\n\n{state['carried']} rows measured by an earlier run (--resume): each "
                     f"row of RESULTS.md below carries its run's command and date.")
        if interrupted:
            text += "\n\nStopped here (a signal or an error): the cases after these were not run."
        elif state["failures"] >= 3 and not state["successes"]:
            text += (f"\n\nrelaxc failed on the first {state['failures']} cases, the rest "
                     f"({state['skipped']}) were not tried: {state['last_error']}")
        elif state["skipped"]:
            text += (f"\n\n{state['skipped']} cases skipped: the part's time was up (`--resume` "
                     f"measures them).")
        self.add_section(title, text)

    def rate_text(self, case, seconds):
        r, share = self.rate_cells(case, seconds)
        return (f"{r} TFLOP/s ({share} of the matrix peak)" if case.flops
                else f"{r} GB/s ({share} of copy)")

    def add_case_row(self, case, rs, torch_s, dk, compare_kind, ref, l2_note, unit, form):
        extra = " (L2-resident)" if l2_note else ""
        if compare_kind is None:
            fig = f"relaxc {fmt_us(rs)} µs = {self.rate_text(case, rs)}"
            if torch_s:
                fig += (f"; PyTorch {fmt_us(torch_s)} µs = {self.rate_text(case, torch_s)}; "
                        f"relaxc takes {rs / torch_s:.2f}× PyTorch's time")
            if form != "—":  # which form ran: the kernel and what its PTX holds
                fig += f"; kernel {form}"
            self.add_row(f"{case.what}: relaxc on {dk} (`relaxc run --bench`) vs "
                         f"{case.module.peer}{extra}",
                         fig, device=self.device_label(dk), unit=unit)
        else:
            fig = f"{dk} {fmt_us(rs)} µs = {fmt_gbs(case.bytes, rs)} GB/s"
            if ref:
                fig += (f"; {compare_kind} {fmt_us(ref)} µs; {dk} at {100 * ref / rs:.0f}% of "
                        f"{compare_kind}'s speed")
            self.add_row(f"{case.what}, relaxc on {dk} vs {compare_kind}{extra}", fig,
                         device=self.device_label(dk), unit=unit)

    @staticmethod
    def kind_name(device):
        return device.split(":")[0]

    def part_kernels(self, deadline):
        """The per-kernel table: every GEMV shape of both models, rms_norm, silu*mul, softmax
        (the 7B GEMV cases are in the gemm part's first table)."""
        mods = kernel_modules(self.args.smoke)
        self.measure_modules(mods, deadline, f"kernels on {self.device}", "kernels", self.target,
                             self.device)

    def part_quant(self, deadline):
        """The decode GEMV on quantized weights (% of copy, packed bytes counted), then the
        dequantizing GEMM of prefill (% of the matrix peak)."""
        mods = quant_modules(self.args.smoke)
        gemv = [m for m in mods if m.name.startswith("qgemv")]
        gemm = [m for m in mods if m.name.startswith("qgemm")]
        half = time.monotonic() + 0.6 * self.left(deadline)
        try:
            self.measure_modules(gemv, min(half, deadline), f"quantized GEMV on {self.device}",
                                 "quant", self.target, self.device)
        except BudgetExceeded as e:
            log(f"quantized gemv: {e}")
        self.measure_modules(gemm, deadline, f"dequantizing GEMM (prefill) on {self.device}",
                             "quant", self.target, self.device)

    def part_gemm(self, deadline):
        """Issue 31's second rows: the decode GEMV at 1 ... 16 rows as % of copy (7B shapes),
        then the GEMM table (f16, bf16, n = 1 ... 4096 at the projection shapes) as % of the
        matrix peak beside cuBLAS, then the same GEMMs through relaxc's cuBLASLt dispatch."""
        left = self.left(deadline)
        try:
            self.measure_modules(gemv_modules(self.args.smoke), time.monotonic() + 0.25 * left,
                                 f"decode GEMV, 1 to 16 rows (7B shapes) on {self.device}",
                                 "kernels", self.target, self.device)
        except BudgetExceeded as e:
            log(f"gemv: {e}")
        half = time.monotonic() + (0.75 if self.kind == "cuda" else 1.0) * self.left(deadline)
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
            self.measure_modules(mods, min(half, deadline), f"kernels on {vdev} vs {compare}",
                                 "kernels", "vulkan", vdev, compare_kind=compare,
                                 case_filter=subset)
        except BudgetExceeded as e:
            log(f"vulkan kernels: {e}")
        self.measure_modules(att, deadline, f"decode attention on {vdev} vs {compare}",
                             "attention", "vulkan", vdev, compare_kind=compare)

    # model -------------------------------------------------------------------------------------

    def part_model(self, deadline):
        for i, key in enumerate(self.args.models):
            left = self.left(deadline)
            share = left / (len(self.args.models) - i)
            if share < 30:
                raise BudgetExceeded(f"{left:.0f} s left, too little for a model")
            ModelBench(self, key, time.monotonic() + share).run()
