"""bench/gpu_bench_model.py: the model part of bench/gpu_bench.py (ModelBench): a random-weight
Llama built by transformers, compiled by relaxc from its Hugging Face folder and timed beside
transformers eager and torch.compile, with its quantized variants (the GGUF writer,
write_gguf_llama); and the torch.compile worker, which bench/gpu_bench.py runs in its own process
(--compile-worker) so that a hang or a long compile can be killed.
"""

import base64
import gc
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from gpu_bench_env import (GEN_LINE, MODELS, SMOKE_MODELS, BudgetExceeded, compile_problem,
                           fmt_bytes, json_lines, kill_group, last_lines, log, md_table, np,
                           rel_l2, run_cmd, torch)
from gpu_bench_modules import q4k_quantize

# ---------------------------------------------------------------------------------------------
# the model part

def b64(a):
    return base64.b64encode(np.asarray(a, dtype="<f4").tobytes()).decode()


def unb64(text):
    return np.frombuffer(base64.b64decode(text), dtype="<f4")


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
    """One model's measurements, each a sub-unit of the report's unit model/KEY (res["done"]):
    relaxc (llm_bench: decode, prefill, launch replay counters, launches per step), eager
    (transformers), graphs_off (decode with RX_CUDA_GRAPHS=0), compile:decode and
    compile:prefill-N (torch.compile, one graph each), generate, quant:SCHEME. A resumed run
    (--resume) starts from the earlier res and measures only the sub-units it lacks."""

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
        self.unit = f"model/{key}"
        prev = bench.units.carry(self.unit)
        self.res = json.loads(json.dumps(prev["record"])) if prev and prev.get("record") else {}
        self.res.setdefault("done", [])
        self.res.setdefault("runs", {})  # sub-unit -> index of the run that measured it
        self.res["model"] = self.res.get("model", self.label)
        self.label = self.res["model"]
        bench.raw["parts"].setdefault("model", []).append(self.res)
        self.eager_tokens = self.res.get("eager", {}).get("tokens", [])
        self.model = None

    def done(self, sub):
        return sub in self.res["done"]

    def mark(self, sub):
        """sub measured by this run: saved at once (a call killed later keeps it)."""
        if sub not in self.res["done"]:
            self.res["done"].append(sub)
        self.res["runs"][sub] = self.b.run_index
        # the references of the run that measured sub (its % of the floor divides by them)
        self.res.setdefault("refs", {})[sub] = {"copy_bw": self.b.copy_bw,
                                                "mm_peak": dict(self.b.mm_peak)}
        self.b.units.put(self.unit, "model", record=self.res)
        self.b.write_report(final=False)

    def left(self):
        return self.deadline - time.monotonic()

    def need(self, seconds, what):
        if self.left() < seconds:
            raise BudgetExceeded(f"{self.left():.0f} s left, {what} needs about {seconds:.0f}")

    def step(self, what):
        log(f"[{time.monotonic() - self.b.t_start:6.0f} s] model {self.key}: {what}")

    def compile_todo(self):
        return [t for t in ["decode"] + [f"prefill-{n}" for n in self.prefill_lengths]
                if not self.done(f"compile:{t}")]

    def run(self):
        b, te = self.b, self.b.tenv
        if not te.ok:
            raise RuntimeError(f"the model part needs PyTorch: {te.why_not}")
        try:
            import transformers
        except ImportError as e:
            raise RuntimeError(f"the model part needs transformers: {e}") from e
        if self.res["done"]:
            self.step(f"--resume: done earlier: {', '.join(self.res['done'])}")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        hf_dir = os.path.join(self.dir, "hf")
        rxm = os.path.join(self.dir, "model.rxm")
        compile_proc = None
        need_rx = not self.done("relaxc") or not self.done("graphs_off")
        need_hf = need_rx or not all(self.done(f"quant:{q}") for q in ("q4f16_g32", "Q4_K"))
        try:
            ids = self.prompt_ids()
            if need_hf or not self.done("eager"):
                compile_proc = self.make_and_compile(hf_dir, rxm, transformers.__version__,
                                                     save=need_hf)
            hf = self.transformers_eager(ids) if not self.done("eager") else None
            self.model = None
            if compile_proc is not None:
                self.wait_compile(compile_proc, hf_dir, rxm)
                compile_proc = None
            rx = None
            if not self.done("relaxc"):
                self.launches(rxm)
                rx = self.relaxc_driver(rxm)
            self.check_logits(rx, hf)
            if not self.done("graphs_off"):
                self.graphs_off(rxm)
            if self.compile_todo():
                self.torch_compile()
            if not self.done("generate") and os.path.exists(rxm):
                self.relaxc_generate(rxm, ids)  # a cross-check of the CLI's own figures
            self.quantized_decode(hf_dir, rxm)  # last: it removes the f16 artifact
            missing = [u for u in ["relaxc", "eager", "graphs_off"] if not self.done(u)] + [
                f"compile:{t}" for t in self.compile_todo()]
            if missing:  # the part's status says so; --resume measures them
                raise BudgetExceeded(f"not measured: {', '.join(missing)}")
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

    def make_and_compile(self, hf_dir, rxm, tf_version, save=True):
        """Builds the model on the GPU (self.model, for transformers eager); with save, writes its
        folder and starts `relaxc compile` of it in the background (returned)."""
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
        if not save:
            return None
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
                    out["prefill"][str(n)] = "skipped: time"
                    continue
                x = torch.tensor(ids[:n], dtype=torch.long, device=dev)[None]
                best = min(timed(lambda: model(x, use_cache=True, **kw))[0] for _ in range(2))
                out["prefill"][str(n)] = best
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
        out["tokens"] = tokens
        self.mark("eager")
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
        if dec and rc == 0:
            self.mark("relaxc")
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
        self.mark("generate")

    def quantized_decode(self, hf_dir, rxm):
        """Decode tokens per second of the same model with quantized projections (issue 15):
        q4f16_g32 (`relaxc compile DIR --quantize q4f16_g32`) and GGUF Q4_K (the folder written
        as a GGUF file, write_gguf_llama), each compiled and run by llm_bench (decode only)."""
        b = self.b
        out = self.res.get("quantized") if isinstance(self.res.get("quantized"), dict) else {}
        self.res["quantized"] = out
        if all(self.done(f"quant:{q}") for q in ("q4f16_g32", "Q4_K")):
            return
        driver = b.args.driver
        if not driver or not os.path.exists(driver):
            out["note"] = "no llm_bench driver"
            return
        if os.path.exists(rxm):
            os.remove(rxm)  # room for the quantized files
        for scheme in ("q4f16_g32", "Q4_K"):
            if self.done(f"quant:{scheme}"):
                continue
            if not os.path.isdir(hf_dir):
                out[scheme] = "no model folder"
                continue
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
                self.mark(f"quant:{scheme}")
            finally:
                for f in (qrxm, os.path.join(self.dir, "model-q4_k.gguf")):
                    if os.path.exists(f):
                        os.remove(f)
            if isinstance(out[scheme], str):
                self.step(f"{scheme}: {out[scheme]}")

    def check_logits(self, rx, hf):
        """relaxc's last-token logits against transformers f32 (and f16's own error). Where the
        two were measured by different runs (--resume), the first side's logits wait in res
        (base64 float32) for the other."""
        out = self.res.get("check") or {}
        if "relaxc_rel_l2" in out:
            return
        keep = self.res.setdefault("logits", {})
        if rx is not None and rx.get("logits") is not None:
            keep["relaxc"] = b64(rx["logits"])
            keep["relaxc_tokens"] = rx.get("tokens")
        if hf is not None:
            for k in ("logits16", "logits32"):
                if hf[k] is not None:
                    keep[k] = b64(hf[k])
            keep["eager_tokens"] = hf.get("tokens")
        self.res["check"] = out
        if "relaxc" not in keep or not ({"logits16", "logits32"} & set(keep)):
            out["note"] = ("no relaxc logits" if "relaxc" not in keep else
                           "no transformers logits")
            return
        rlog = unb64(keep["relaxc"])
        l16 = unb64(keep["logits16"]) if "logits16" in keep else None
        l32 = unb64(keep["logits32"]) if "logits32" in keep else None
        ref = l32 if l32 is not None else l16
        out.pop("note", None)
        out["reference"] = "transformers f32" if l32 is not None else "transformers f16"
        out["relaxc_rel_l2"] = rel_l2(rlog, ref)
        if l32 is not None and l16 is not None:
            out["transformers_f16_rel_l2"] = rel_l2(l16, l32)
        a, c = keep.get("relaxc_tokens"), keep.get("eager_tokens")
        if a and c:
            same = 0
            while same < min(len(a), len(c)) and a[same] == c[same]:
                same += 1
            out["greedy_prefix"] = same
            out["greedy_total"] = min(len(a), len(c))
        self.res.pop("logits", None)
        self.step(f"logits check: {out}")

    # launches per step and CUDA graph replay ------------------------------------------------------

    def launches(self, rxm):
        """Kernel launches per decode step and per layer, from `relaxc inspect` (its LLM section:
        'per step: N kernel launches', 'per layer (cuda): L kernel launches x K layers + M')."""
        rc, out, err, _ = run_cmd([self.b.relaxc, "inspect", rxm], 120)
        if rc != 0:
            self.res["launches"] = f"relaxc inspect failed: {last_lines(err or out)}"
            return
        text = out.split("per step:", 1)
        lm = {}
        if len(text) == 2:
            m = re.match(r"\s*(\d+) kernel launches", text[1])
            lm["per_step"] = int(m.group(1)) if m else None
            m = re.search(r"per layer \((\S+)\): (\d+) kernel launches x (\d+) layers \+ (\d+) "
                          r"outside", text[1])
            if m:
                lm.update(target=m.group(1), per_layer=int(m.group(2)), layers=int(m.group(3)),
                          outside=int(m.group(4)))
        self.res["launches"] = lm or "not in `relaxc inspect`'s output"
        self.step(f"launches per decode step (relaxc inspect): {self.res['launches']}")

    def graphs_off(self, rxm):
        """Decode again with RX_CUDA_GRAPHS=0 (every launch issued one by one): beside the
        graph-replay figure and the replay counters of the relaxc run, this confirms that the
        replay runs on the real driver and what it is worth."""
        b = self.b
        driver = b.args.driver
        if b.kind != "cuda":
            self.res["graphs_off"] = (f"not applicable on {b.kind} (RX_CUDA_GRAPHS is the CUDA "
                                      f"backend's)")
            self.mark("graphs_off")
            return
        if not driver or not os.path.exists(driver) or not os.path.exists(rxm):
            self.res["graphs_off"] = "no llm_bench driver or artifact"
            return
        if self.left() < (15 if b.args.smoke else 45):
            self.res["graphs_off"] = "skipped: time"
            return
        cmd = [driver, rxm, "--device", b.device, "--prompt", os.path.join(self.dir, "prompt.i32"),
               "--decode-prompt", str(self.decode_prompt),
               "--decode-tokens", str(self.decode_tokens - 1)]
        env = dict(os.environ, RX_CUDA_GRAPHS="0")
        self.step(f"relaxc decode with RX_CUDA_GRAPHS=0: {' '.join(shlex.quote(c) for c in cmd)}")
        rc, out, err, _ = run_cmd(cmd, max(10, self.left() - 10), env=env)
        ev = json_lines(out)
        dec = next((e for e in ev if e.get("event") == "decode"), None)
        if rc != 0 or not dec:
            self.res["graphs_off"] = f"failed: {'timed out' if rc is None else last_lines(err)}"
            return
        self.res["graphs_off"] = {"tokens": dec["tokens"], "ms": dec["ms"],
                                  "replay": next((e for e in ev if e.get("event") == "replay"),
                                                 None)}
        self.step(f"decode with graphs off: {dec['tokens'] / dec['ms'] * 1e3:.1f} tok/s")
        self.mark("graphs_off")

    # torch.compile (a subprocess, killed at its time limit) -------------------------------------

    def torch_compile(self):
        """torch.compile of the same model in a subprocess killed at the part's deadline: the
        graphs not measured yet (compile:decode, compile:prefill-N), each compiled, warmed up and
        timed; the events of an earlier run (--resume) are kept."""
        b = self.b
        todo = self.compile_todo()
        limit = self.left() - 5
        prev = self.res.get("compile") if isinstance(self.res.get("compile"), dict) else {}
        kept = [e for e in prev.get("events", []) if e.get("event") != "ready"]
        if limit < 45:
            self.res["compile"] = dict(prev, why=f"skipped: {limit:.0f} s left", events=kept)
            self.step(self.res["compile"]["why"])
            return
        spec = {"spec": self.spec, "layers": self.layers, "device": str(b.tenv.device),
                "prompt": os.path.join(self.dir, "prompt.i32"),
                "decode_prompt": self.decode_prompt, "decode_tokens": self.decode_tokens,
                "prefill": list(self.prefill_lengths), "mode": b.args.compile_mode,
                "backend": b.args.compile_backend, "todo": todo,
                "eager_tokens": self.eager_tokens}
        entry = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_bench.py")
        cmd = [sys.executable, entry, "--compile-worker", json.dumps(spec)]
        self.step(f"torch.compile (backend {b.args.compile_backend}, mode {b.args.compile_mode}) "
                  f"of {', '.join(todo)} in a subprocess, at most {limit:.0f} s")
        rc, out, err, secs = run_cmd(cmd, limit)
        ev = json_lines(out)
        for e in ev:
            self.step(f"torch.compile: {json.dumps(e)}")
        new = [e for e in ev if e.get("event") in ("decode", "prefill")]
        self.res["compile"] = {"events": kept + new, "rc": rc, "seconds": secs}
        if rc != 0:
            why = (f"stopped at the time limit ({limit:.0f} s)" if rc is None
                   else f"failed: {last_lines(err, 3)}")
            self.res["compile"]["why"] = why
            self.step(f"torch.compile {why}")
        for e in new:
            self.mark("compile:decode" if e["event"] == "decode"
                      else f"compile:prefill-{e['tokens']}")

    # report ------------------------------------------------------------------------------------

    def table_rows(self):
        """The model table's rows: (what, relaxc, % of the floor, eager, torch.compile, relaxc /
        torch.compile, relaxc / eager, relaxc generate), as text cells."""
        b, r = self.b, self.res
        driver = r.get("driver") if isinstance(r.get("driver"), list) else []
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

        def ratio(a, c):
            return f"{c / a:.2f}×" if a and c else "—"

        refs = (r.get("refs") or {}).get("relaxc") or {}
        copy_bw = refs.get("copy_bw") or b.copy_bw
        peak = (refs.get("mm_peak") or b.mm_peak or {}).get("f16")
        wbytes = self.step_bytes()

        def floor_cell(secs, n=None):
            """% of the floor (decode: weights over copy; prefill: that or FLOPs over peak)."""
            if not secs or not copy_bw:
                return "—"
            fl = wbytes / copy_bw
            if n:
                fl = max(fl, self.prefill_flops(n) / peak) if peak else fl
            return f"{100 * fl / secs:.0f}% of {fl * 1e3:,.2f} ms"

        rx_dec = dec["ms"] / 1e3 / dec["tokens"] if dec and dec.get("tokens") else None
        cp_dec = comp_dec["seconds"] / comp_dec["tokens"] if comp_dec else None
        eg_dec = (eager["decode"]["seconds"] / eager["decode"]["tokens"]
                  if "decode" in eager else None)
        rows = [(f"decode, batch 1, prompt {self.decode_prompt}, {self.decode_tokens - 1} steps "
                 f"(tok/s)", tok_s(1, rx_dec), floor_cell(rx_dec), tok_s(1, eg_dec),
                 tok_s(1, cp_dec), ratio(rx_dec, cp_dec), ratio(rx_dec, eg_dec),
                 f"{gen['decode_tok_s']:,.1f}" if isinstance(gen, dict) else "—")]
        for n in self.prefill_lengths:
            e_p = eager.get("prefill", {}).get(str(n))
            e_p = e_p if isinstance(e_p, float) else None
            rx_p = min(pre[n]["ms"]) / 1e3 if n in pre else None
            cp_p = comp_pre[n]["seconds"] if n in comp_pre else None
            rows.append((f"prefill {n} tokens (tok/s)", tok_s(n, rx_p), floor_cell(rx_p, n),
                         tok_s(n, e_p), tok_s(n, cp_p), ratio(rx_p, cp_p), ratio(rx_p, e_p),
                         f"{gen['prefill_tok_s']:,.1f}" if isinstance(gen, dict)
                         and gen["prefill_tokens"] == n else "—"))
        quant = r.get("quantized") if isinstance(r.get("quantized"), dict) else {}
        for scheme in ("q4f16_g32", "Q4_K"):
            q = quant.get(scheme)
            if isinstance(q, dict):
                rows.append((f"decode, batch 1, prompt {self.decode_prompt}, {q['tokens']} steps, "
                             f"{scheme} projections (tok/s)", tok_s(q["tokens"], q["ms"] / 1e3),
                             "—", "—", "—", "—", "—", "—"))
        return rows

    def report(self):
        b, r = self.b, self.res
        dev = b.device_label()
        driver = r.get("driver") if isinstance(r.get("driver"), list) else []
        load = next((e for e in driver if e.get("event") == "load"), None)
        gen = r.get("generate")
        comp = r.get("compile") if isinstance(r.get("compile"), dict) else {}
        comp_dec = next((e for e in comp.get("events", []) if e.get("event") == "decode"), None)
        quant = r.get("quantized") if isinstance(r.get("quantized"), dict) else {}
        wbytes = self.step_bytes()
        rows = self.table_rows()
        mode = (b.args.compile_mode if b.args.compile_backend == "inductor"
                else b.args.compile_backend)
        text = md_table(("what", "relaxc (C API, llm_bench)", "relaxc % of the floor",
                         "transformers eager", f"torch.compile ({mode})",
                         "relaxc / torch.compile (speed)", "relaxc / eager (speed)",
                         "relaxc generate"), rows)

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
        lm = r.get("launches")
        if isinstance(lm, dict) and lm.get("per_step"):
            s = f"Kernel launches per decode step (`relaxc inspect`): {lm['per_step']}"
            if lm.get("per_layer"):
                s += (f" ({lm['per_layer']} per layer x {lm['layers']} layers + {lm['outside']} "
                      f"outside the layers, {lm['target']}; issue 31's goal: <= 8 per layer)")
            notes.append(s + ".")
        elif lm:
            notes.append(f"Kernel launches per decode step: {lm}.")
        replay = self.replay_text()
        if replay:
            notes.append(replay + ".")
        notes.append(f"Floor: decode reads the weights once per token ({fmt_bytes(wbytes)}: every "
                     f"layer and the lm_head, not the embedding table) at the copy bandwidth of "
                     f"the run; prefill of n tokens: that, or its FLOPs (2 n x the layers' "
                     f"parameters, the last token's lm_head, causal attention 4 n (n + 1) / 2 x "
                     f"hidden per layer) at the f16 matrix peak of the run, whichever is longer. "
                     f"Ratios: relaxc's speed over the peer's (above 1: relaxc is faster).")
        if len(set((r.get("runs") or {}).values())) > 1:
            notes.append("Measured by several runs (--resume): " + ", ".join(
                f"{k} in run {v + 1}" for k, v in r["runs"].items()) + ".")
        b.add_section(f"model: {self.label}", text + "\n\n" + "\n".join(f"- {n}" for n in notes))

        b.units.put(self.unit, "model", record=r)  # the rows below replace the earlier ones
        for what, rx_v, fl_v, eg_v, cp_v, r_cp, r_eg, gen_v in rows:
            if rx_v == "—" and eg_v == "—" and cp_v == "—":
                continue
            fig = f"relaxc {rx_v}"
            if fl_v != "—":
                fig += f" ({fl_v} floor)"
            if gen_v != "—":
                fig += f" (relaxc generate {gen_v})"
            fig += f"; torch.compile {cp_v} (relaxc {r_cp}); transformers eager {eg_v} (relaxc {r_eg})"
            if what.startswith("decode, batch 1, prompt") and "projections" not in what and \
                    isinstance(lm, dict) and lm.get("per_step"):
                fig += f"; {lm['per_step']} kernel launches per step"
            b.add_row(f"{self.label}: {what}", fig, device=dev, unit=self.unit,
                      runs=list(r.get("runs", {}).values()) or None)
        if replay:
            b.add_row(f"{self.label}: launch replay of the decode step on the real driver "
                      f"({b.kind})", replay, device=dev, unit=self.unit,
                      runs=list(r.get("runs", {}).values()) or None)
        if "relaxc_rel_l2" in chk:
            fig = f"relaxc {chk['relaxc_rel_l2']:.2e}"
            if "transformers_f16_rel_l2" in chk:
                fig += f" (transformers f16: {chk['transformers_f16_rel_l2']:.2e})"
            b.add_row(f"{self.label}: relative L2 of the last-token logits vs {chk['reference']}, "
                      f"{self.decode_prompt}-token prompt", fig, device=dev, unit=self.unit,
                      runs=list(r.get("runs", {}).values()) or None)

    def step_bytes(self):
        """Bytes of weights one decode step reads: every layer's projections and the lm_head
        (the embedding table gives one row), f16; the norms' few KiB left out."""
        spec = self.spec
        return 2 * (self.parameters(self.layers) - spec["vocab"] * spec["hidden"])

    def prefill_flops(self, n):
        spec = self.spec
        per_layer = (self.parameters(self.layers) - 2 * spec["vocab"] * spec["hidden"]) // \
            max(1, self.layers)
        return (2 * n * per_layer * self.layers + 2 * spec["vocab"] * spec["hidden"]
                + 4 * spec["hidden"] * self.layers * n * (n + 1) // 2)

    def replay_text(self):
        """CUDA graph replay (Vulkan: recorded command buffers) during the decode steps, from
        llm_bench's replay counters, beside decode with RX_CUDA_GRAPHS=0."""
        r = self.res
        driver = r.get("driver") if isinstance(r.get("driver"), list) else []
        rp = next((e for e in driver if e.get("event") == "replay"), None)
        dec = next((e for e in driver if e.get("event") == "decode"), None)
        if not rp:
            return None
        what = "CUDA graphs" if self.b.kind == "cuda" else "recorded command buffers"
        if rp.get("replay") == "off":
            s = f"launch replay off on {self.b.kind} during the {rp['steps']} decode steps"
        else:
            s = (f"{what}: {rp['replayed']} flushes replayed, {rp['built']} built, "
                 f"{rp['direct']} launched directly over {rp['steps']} decode steps, "
                 f"{rp['updated']} launches updated before a replay")
        off = r.get("graphs_off")
        if isinstance(off, dict) and dec and off.get("ms"):
            on_s = dec["tokens"] / dec["ms"] * 1e3
            off_s = off["tokens"] / off["ms"] * 1e3
            s += (f"; decode {on_s:,.1f} tok/s with replay, {off_s:,.1f} tok/s with "
                  f"RX_CUDA_GRAPHS=0 ({on_s / off_s:.2f}×)")
        elif isinstance(off, str):
            s += f"; graphs off: {off}"
        return s


# ---------------------------------------------------------------------------------------------
# the GGUF file of the quantized model (Q4_K projections)

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

    todo = s.get("todo") or ["decode"] + [f"prefill-{n}" for n in s["prefill"]]
    with torch.inference_mode():
        if "decode" in todo:
            decode_row(s, ids, call, compiled, cache, run_decode, emit)
        for n in s["prefill"]:
            if f"prefill-{n}" not in todo:
                continue
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


def decode_row(s, ids, call, compiled, cache, run_decode, emit):
    """The worker's decode row: compile, record (reduce-overhead), then time the decode steps."""
    dev = torch.device(s["device"])
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
