#!/usr/bin/env python3
"""tests/serve/run_client.py: one client test of relaxc serve (ctest's rx_serve_client_test,
tests/serve/serve.cmake). Python's standard library only; the client script runs in the venv.

  run_client.py --relaxc RELAXC --venv VENV --work DIR --tests TESTS_DIR [--prefix PREFIX]
                [--timeout S] SCRIPT [-- SERVE_FLAGS...]

1. VENV (scripts/serve-venv.sh BUILD_DIR makes it from tests/serve/requirements.txt) must exist,
   else the test fails saying how to make it: never a silent pass.
2. The artifact: the tiny Llama of tests/llm/models/kjv-llama with tests/chat/model's
   tokenizer_config.json (its chat template), compiled for Vulkan (lavapipe in CI) with decode
   batches of up to 32 (serve's default --max-batch stays 8) once into
   DIR/kjv-chat.rxm and reused while it is newer than relaxc and its inputs (under a file lock, so
   tests that ctest runs side by side compile it once).
3. `PREFIX RELAXC serve DIR/kjv-chat.rxm --port 0 --model-name kjv SERVE_FLAGS...` (PREFIX: the
   sanitized build's wrapper, RX_TEST_RUN_PREFIX), stderr into DIR/NAME.log; waits for its banner
   (the port) and for GET /health.
4. `VENV/bin/python SCRIPT` with RX_SERVE_BASE_URL (http://127.0.0.1:PORT/v1), RX_SERVE_MODEL
   (kjv), RX_SERVE_API_KEY (--api-key's value, when the flags set one), RX_SERVE_LOG (the server's
   stderr file), RX_SERVE_PID (a script may stop the server itself, e.g. to test shutdown),
   RX_SERVE_ARTIFACT and RX_SERVE_RELAXC (the command line of relaxc as JSON, prefix included: a
   script may run `relaxc generate` on the artifact for its reference answers).
5. SIGTERM to the server (unless the script already stopped it); it must exit 0 within
   --shutdown-wait seconds, its log ending with "pages free: N/N" (every KV page back). The test fails when the script exits non-zero ("client script ...
   failed with exit status N"), when the server does not start, crashes or does not stop.
"""
import argparse
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

MODEL_FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json"]
MODEL_NAME = "kjv"
MAX_BATCH = 32  # the artifact's decode batch: serve's --max-batch may go up to it (the load test)


def fail(msg, log=None):
    print(f"run_client.py: FAILED: {msg}", flush=True)
    if log and os.path.exists(log):
        with open(log, errors="replace") as f:
            tail = f.read()[-6000:]
        print(f"---- the server's stderr ({log}), last lines ----\n{tail}", flush=True)
    sys.exit(1)


def artifact(relaxc_cmd, tests, work):
    """Compiles (or reuses) the chat-template tiny Llama; returns its path."""
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "kjv-chat.rxm")
    src = [os.path.join(tests, "llm", "models", "kjv-llama", f) for f in MODEL_FILES]
    src.append(os.path.join(tests, "chat", "model", "tokenizer_config.json"))
    with open(os.path.join(work, "kjv-chat.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        newest = max(os.path.getmtime(p) for p in src + [relaxc_cmd[-1], __file__])
        if os.path.exists(out) and os.path.getmtime(out) >= newest:
            return out
        folder = os.path.join(work, "kjv-chat")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for p in src:
            shutil.copy(p, folder)
        tmp = out + ".tmp"
        r = subprocess.run(relaxc_cmd + ["compile", folder, "--target", "vulkan", "--max-batch",
                            str(MAX_BATCH), "-o", tmp],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600)
        if r.returncode:
            fail(f"relaxc compile of {folder} failed:\n{r.stdout}")
        os.replace(tmp, out)
        return out


def start(cmd, log, timeout):
    """Starts the server; returns (process, port) once /health answers 200."""
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f)
    deadline = time.time() + timeout
    port = None
    while time.time() < deadline:
        if proc.poll() is not None:
            fail(f"relaxc serve exited with status {proc.returncode} before it served", log)
        if port is None:
            with open(log, errors="replace") as f:
                m = re.search(r"http://[0-9.]+:(\d+)/v1", f.read())
            port = int(m.group(1)) if m else None
        if port is not None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        return proc, port
            except (urllib.error.URLError, OSError):
                pass
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    fail(f"relaxc serve did not answer /health within {timeout} s", log)


def stop(proc, log, wait_s):
    """SIGTERM (unless it already exited); it must exit 0 within wait_s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fail(f"relaxc serve did not exit within {wait_s} s of SIGTERM", log)
    if rc != 0:
        fail(f"relaxc serve exited with status {rc} (want 0) after SIGTERM", log)
    with open(log, errors="replace") as f:
        m = re.search(r"pages free: (\d+)/(\d+)", f.read())
    if not m or m.group(1) != m.group(2):
        fail("relaxc serve's last line is not 'pages free: N/N' (every KV page back): "
             + (m.group(0) if m else "no such line"), log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--relaxc", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--prefix", default="")
    ap.add_argument("--name", default=None)
    ap.add_argument("--timeout", type=float, default=300, help="the client script's limit")
    ap.add_argument("--shutdown-wait", type=float, default=60)
    ap.add_argument("script")
    ap.add_argument("serve_flags", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    flags = a.serve_flags[1:] if a.serve_flags[:1] == ["--"] else a.serve_flags
    name = a.name or os.path.splitext(os.path.basename(a.script))[0]

    py = os.path.join(a.venv, "bin", "python")
    if not os.path.exists(os.path.join(a.venv, ".relaxc-requirements")) or not os.access(py, os.X_OK):
        build = os.path.dirname(os.path.abspath(a.venv))
        fail(f"no virtual environment {a.venv} with the openai client: make it with "
             f"`bash scripts/serve-venv.sh {build}` (needs python3-venv and PyPI, or "
             f"PIP_INDEX_URL/PIP_FIND_LINKS); `make test` runs it")

    relaxc_cmd = shlex.split(a.prefix) + [os.path.abspath(a.relaxc)]
    model = artifact(relaxc_cmd, a.tests, a.work)
    log = os.path.join(a.work, f"{name}.log")
    cmd = relaxc_cmd + ["serve", model, "--port", "0", "--model-name", MODEL_NAME] + flags
    print("run_client.py: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    proc, port = start(cmd, log, 120)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the sanitized build's preloads are relaxc's, not Python's
    env.update(RX_SERVE_BASE_URL=f"http://127.0.0.1:{port}/v1", RX_SERVE_MODEL=MODEL_NAME,
               RX_SERVE_LOG=log, RX_SERVE_PID=str(proc.pid), RX_SERVE_ARTIFACT=model,
               RX_SERVE_RELAXC=json.dumps(relaxc_cmd), PYTHONUNBUFFERED="1")
    env.pop("RX_SERVE_API_KEY", None)
    if "--api-key" in flags and flags.index("--api-key") + 1 < len(flags):
        env["RX_SERVE_API_KEY"] = flags[flags.index("--api-key") + 1]
    try:
        r = subprocess.run([py, os.path.abspath(a.script)], env=env, timeout=a.timeout)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        rc = None
    if rc != 0:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        why = f"timed out after {a.timeout} s" if rc is None else f"failed with exit status {rc}"
        fail(f"client script {os.path.basename(a.script)} {why}", log)
    stop(proc, log, a.shutdown_wait)
    print(f"run_client.py: {name}: passed", flush=True)


if __name__ == "__main__":
    main()
