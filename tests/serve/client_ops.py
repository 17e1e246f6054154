#!/usr/bin/env python3
"""tests/serve/client_ops.py: relaxc serve's operations and its basic API through the official
openai client (ctest serve.client_ops, tests/serve/serve.cmake; the server of run_client.py is
started with --api-key). Checked against independent expectations:

- auth: no key, a wrong key -> 401 in OpenAI's shape (openai.AuthenticationError, code
  invalid_api_key, WWW-Authenticate); /health and /metrics open; the right key works;
- completions and chat, plain and streamed, greedy: each text equals `relaxc generate`'s (the
  single-request generation loop, not the batcher) for the same prompt or chat message; streamed
  chunks join to the same text, finish_reason "length", usage counts right;
- errors: unknown model 404, a prompt over the context 400 naming 'prompt', max_tokens over it
  400 naming 'max_tokens';
- /metrics: parsed as Prometheus text 0.0.4 (every sample's family typed, histograms cumulative
  with +Inf = _count), and its deltas over those requests equal what the client saw (requests by
  endpoint and status, prompt and generated tokens, TTFT/ITL/duration observations), KV pages all
  free when idle;
- the request log: a line per request, with the ids, token counts and finish reasons answered;
- timeouts (a second server, --request-timeout 1 --max-batch 1): a running request and one queued
  behind it both end with 504 past the deadline, a streamed one with an error event; their pages
  are freed (/metrics) and counted as timed out;
- graceful shutdown (a third server): SIGTERM while two streams are in flight: no new connections,
  both streams finish whole and equal to the reference, exit 0, "pages free: N/N"; and with
  --shutdown-timeout 1 a long request is cancelled (an error event) and the server exits 0 with
  every page free.
Prints each check; exits 1 if any failed."""
import atexit
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import openai
from openai import OpenAI

BASE = os.environ["RX_SERVE_BASE_URL"]
MODEL = os.environ["RX_SERVE_MODEL"]
KEY = os.environ.get("RX_SERVE_API_KEY")
LOG = os.environ["RX_SERVE_LOG"]
RELAXC = json.loads(os.environ["RX_SERVE_RELAXC"])
ARTIFACT = os.environ["RX_SERVE_ARTIFACT"]
ROOT = BASE[: -len("/v1")]

failed = []


def check(cond, what, detail=""):
    print(("ok:   " if cond else "FAIL: ") + what + ("" if cond else f" ({detail})"), flush=True)
    if not cond:
        failed.append(what)
    return cond


def generate(args):
    """`relaxc generate ARTIFACT ARGS --temperature 0`'s text (stdout, its final newline off)."""
    r = subprocess.run(RELAXC + ["generate", ARTIFACT, "--temperature", "0"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    if r.returncode:
        raise SystemExit(f"relaxc generate {args} failed: {r.stderr}")
    return r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout


def http(url, key=None, data=None):
    """(status, headers, body) of a plain HTTP request."""
    req = urllib.request.Request(url, data=data)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


# ---- Prometheus text format 0.0.4 ----

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*"'
                    r'(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\\n]*")*)?\})? (\S+)$')


def parse_metrics(text):
    """{(name, ((label, value), ...)): float}, checking the format; raises ValueError."""
    types, out = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            if kind not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise ValueError(f"unknown type {line!r}")
            if name in types:
                raise ValueError(f"{name} typed twice")
            types[name] = kind
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a sample line: {line!r}")
        name, labels, value = m.group(1), m.group(3), float(m.group(5))
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        kind = types.get(name) or types.get(family)
        if kind is None:
            raise ValueError(f"{name} has no # TYPE before it")
        if kind == "counter" and not name.endswith("_total"):
            raise ValueError(f"counter {name} does not end in _total")
        lab = tuple(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', labels or ""))
        if (name, lab) in out:
            raise ValueError(f"{name}{lab} twice")
        out[(name, lab)] = value
    for name, kind in types.items():
        if kind != "histogram":
            continue
        buckets = sorted(((float(dict(l)["le"]), v) for (n, l), v in out.items()
                          if n == name + "_bucket"), key=lambda b: b[0])
        if not buckets or buckets[-1][0] != float("inf"):
            raise ValueError(f"{name} has no +Inf bucket")
        if any(b[1] > c[1] for b, c in zip(buckets, buckets[1:])):
            raise ValueError(f"{name}'s buckets are not cumulative")
        if buckets[-1][1] != out.get((name + "_count", ())):
            raise ValueError(f"{name}: +Inf bucket != _count")
    return out


def metrics(root=ROOT):
    status, headers, body = http(root + "/metrics")
    if status != 200:
        raise SystemExit(f"/metrics: {status}")
    return headers, parse_metrics(body)


def m(ms, name, **labels):
    return ms.get((name, tuple(labels.items())), 0.0)


# ---- servers of the script's own ----


class Server:
    """`relaxc serve ARTIFACT --port 0 FLAGS`, stderr into a file next to the harness's log; killed
    at exit if a failed check left it running."""

    def __init__(self, tag, flags):
        self.log = f"{LOG[:-4]}.{tag}.log" if LOG.endswith(".log") else f"{LOG}.{tag}"
        with open(self.log, "w") as f:
            self.proc = subprocess.Popen(RELAXC + ["serve", ARTIFACT, "--port", "0",
                                                   "--model-name", MODEL] + flags,
                                         stdout=subprocess.DEVNULL, stderr=f)
        atexit.register(lambda p=self.proc: p.poll() is None and (p.kill(), p.wait()))
        deadline, port = time.time() + 120, None
        while time.time() < deadline and self.proc.poll() is None:
            m_ = re.search(r"http://[0-9.]+:(\d+)/v1", self.text())
            if m_ and http(f"http://127.0.0.1:{m_.group(1)}/health")[0] == 200:
                port = int(m_.group(1))
                break
            time.sleep(0.1)
        if port is None:
            raise SystemExit(f"server {tag} did not start: {self.text()}")
        self.root = f"http://127.0.0.1:{port}"
        self.client = OpenAI(base_url=self.root + "/v1", api_key="none", max_retries=0)

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self, wait=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=wait)


def pages_line(text):
    m_ = re.search(r"pages free: (\d+)/(\d+)", text)
    return (int(m_.group(1)), int(m_.group(2))) if m_ else None


# ---- the checks ----


def check_auth():
    bad = OpenAI(base_url=BASE, api_key="wrong-key", max_retries=0)
    try:
        bad.models.list()
        check(False, "a wrong key is refused", "models.list() answered")
    except openai.AuthenticationError as e:
        check(e.status_code == 401 and e.body.get("code") == "invalid_api_key",
              "a wrong key: 401 invalid_api_key", e.body)
    try:
        bad.completions.create(model=MODEL, prompt="In", max_tokens=2)
        check(False, "a wrong key's completion is refused", "answered")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, "a wrong key's completion: 401")
    status, headers, body = http(BASE + "/models")
    check(status == 401 and headers.get("WWW-Authenticate") == "Bearer"
          and json.loads(body)["error"]["type"] == "invalid_request_error",
          "no key: 401 with WWW-Authenticate: Bearer and OpenAI's error object", (status, body))
    status, _, _ = http(BASE + "/models", key=KEY + "x")
    check(status == 401, "a key with one more byte: 401", status)
    status, _, _ = http(BASE + "/models", key=KEY[:-1])
    check(status == 401, "a key one byte short: 401", status)
    check(http(ROOT + "/health")[0] == 200, "/health needs no key")
    check(http(ROOT + "/metrics")[0] == 200, "/metrics needs no key")
    good = OpenAI(base_url=BASE, api_key=KEY, max_retries=0)
    check([x.id for x in good.models.list().data] == [MODEL], "the right key lists the model")
    return good


def check_generation(c, seen):
    """Completions and chat, plain and streamed; returns their answers' ids."""
    prompt, n = "And God said", 24
    want = generate(["--prompt", prompt, "--max-tokens", str(n)])
    r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0)
    check(r.choices[0].text == want, "completion = relaxc generate", (r.choices[0].text, want))
    check(r.choices[0].finish_reason == "length" and r.usage.completion_tokens == n,
          "completion: finish length, usage", r)
    seen["prompt"] += r.usage.prompt_tokens * 2
    seen["ids"].append(r.id)
    chunks = list(c.completions.create(model=MODEL, prompt=prompt, max_tokens=n, temperature=0,
                                       stream=True))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    check(text == want, "streamed completion = relaxc generate", (text, want))
    check(chunks[-1].choices[0].finish_reason == "length", "streamed: finish length at the end")
    seen["ids"].append(chunks[0].id)

    msg, n2 = "In the beginning", 16
    want = generate(["--chat", msg, "--max-tokens", str(n2)])
    messages = [{"role": "user", "content": msg}]
    r = c.chat.completions.create(model=MODEL, messages=messages, max_tokens=n2, temperature=0)
    check(r.choices[0].message.content == want and r.choices[0].message.role == "assistant",
          "chat = relaxc generate --chat", (r.choices[0].message.content, want))
    seen["prompt"] += r.usage.prompt_tokens * 2
    seen["ids"].append(r.id)
    chunks = list(c.chat.completions.create(model=MODEL, messages=messages, max_tokens=n2,
                                            temperature=0, stream=True))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check(text == want, "streamed chat = relaxc generate --chat", (text, want))
    check(chunks[-1].choices[0].finish_reason == "length", "streamed chat: finish length")
    seen["ids"].append(chunks[0].id)
    seen["tokens"] += 2 * n + 2 * n2
    seen["requests"] += 4


def check_errors(c):
    try:
        c.completions.create(model="no-such-model", prompt="In", max_tokens=2)
        check(False, "an unknown model is refused", "answered")
    except openai.NotFoundError as e:
        check(e.status_code == 404 and e.body.get("param") == "model", "unknown model: 404",
              e.body)
    try:
        c.completions.create(model=MODEL, prompt="and the earth " * 400, max_tokens=2)
        check(False, "a prompt over the context is refused", "answered")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "prompt", "a prompt over the context: 400 on 'prompt'", e.body)
    try:
        c.completions.create(model=MODEL, prompt="In", max_tokens=100000)
        check(False, "max_tokens over the context is refused", "answered")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "max_tokens", "max_tokens over the context: 400", e.body)


def check_metrics(before, after, headers, seen):
    check(headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
          "/metrics: text/plain; version=0.0.4", headers.get("Content-Type"))

    def d(name, **labels):
        return m(after, name, **labels) - m(before, name, **labels)

    check(d("relaxc_requests_total", endpoint="/v1/completions", status="200") == 2,
          "metrics: 2 completions answered 200")
    check(d("relaxc_requests_total", endpoint="/v1/chat/completions", status="200") == 2,
          "metrics: 2 chats answered 200")
    check(d("relaxc_requests_total", endpoint="/v1/completions", status="404") == 1,
          "metrics: 1 completion answered 404")
    check(d("relaxc_requests_total", endpoint="/v1/completions", status="400") == 2,
          "metrics: 2 completions answered 400")
    check(m(after, "relaxc_requests_total", endpoint="/v1/models", status="401") >= 2,
          "metrics: the refused keys counted as 401")
    check(d("relaxc_generation_tokens_total") == seen["tokens"], "metrics: generated tokens",
          (d("relaxc_generation_tokens_total"), seen["tokens"]))
    check(d("relaxc_prompt_tokens_total") == seen["prompt"], "metrics: prompt tokens",
          (d("relaxc_prompt_tokens_total"), seen["prompt"]))
    check(d("relaxc_time_to_first_token_seconds_count") == seen["requests"],
          "metrics: one TTFT per generation")
    check(d("relaxc_inter_token_latency_seconds_count") == seen["tokens"] - seen["requests"],
          "metrics: one inter-token latency per token after the first",
          d("relaxc_inter_token_latency_seconds_count"))
    check(d("relaxc_request_duration_seconds_count") == seen["requests"],
          "metrics: one duration per generation")
    check(d("relaxc_time_to_first_token_seconds_sum") > 0, "metrics: TTFT sum > 0")
    total = m(after, "relaxc_kv_pages_total")
    held = m(after, "relaxc_kv_pages_used") - m(after, "relaxc_prefix_cache_pages")
    check(total > 0 and held == 0, "metrics: no KV page held by a request when idle (the prefix "
          "cache's aside)", (m(after, "relaxc_kv_pages_used"), total))
    check(m(after, "relaxc_requests_running") == 0 and m(after, "relaxc_requests_waiting") == 0,
          "metrics: nothing running or waiting when idle")
    check(d("relaxc_batcher_new_tokens_total") == seen["tokens"],
          "metrics: the batcher's new tokens")


def check_log(seen):
    want = set(seen["ids"])
    lines = {}
    pat = re.compile(r"^relaxc serve: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (\S+) POST "
                     r"(/v1/\S+) 200 prompt=(\d+) new=(\d+) ttft_ms=([\d.]+) total_ms=([\d.]+) "
                     r"finish=(\w+)$")
    for _ in range(50):  # a line is written when its answer has been sent: at most moments later
        with open(LOG, errors="replace") as f:
            lines = {mm.group(1): mm for mm in map(pat.match, f.read().splitlines()) if mm}
        if want <= set(lines):
            break
        time.sleep(0.1)
    check(want <= set(lines), "the request log has a line per generation", want - set(lines))
    for i in want & set(lines):
        mm = lines[i]
        check(mm.group(7) == "length" and int(mm.group(4)) in (16, 24)
              and float(mm.group(5)) <= float(mm.group(6)),
              f"log line of {i}: tokens, finish, ttft <= total", mm.group(0))
    with open(LOG, errors="replace") as f:
        text = f.read()
    check(re.search(r" - GET /v1/models 401 total_ms=", text) is not None,
          "the request log has the refused requests")


def check_timeouts():
    srv = Server("timeout", ["--request-timeout", "1", "--max-batch", "1"])
    c = srv.client
    results = {}

    def run(tag, stream):
        t0 = time.time()
        try:
            if stream:
                got = ""
                for ch in c.completions.create(model=MODEL, prompt="And God said", max_tokens=400,
                                               temperature=0, stream=True):
                    got += ch.choices[0].text if ch.choices else ""
                results[tag] = ("answered", got)
            else:
                r = c.completions.create(model=MODEL, prompt="And God said", max_tokens=400,
                                         temperature=0)
                results[tag] = ("answered", r.choices[0].finish_reason)
        except openai.APIStatusError as e:
            results[tag] = (e.status_code, str(e.message), time.time() - t0)
        except openai.APIError as e:  # an error event inside a stream
            results[tag] = ("stream-error", str(e.message), time.time() - t0)

    running = threading.Thread(target=run, args=("running", False))
    running.start()
    for _ in range(200):  # until the first runs, so the next one queues behind it
        if m(metrics(srv.root)[1], "relaxc_requests_running") == 1:
            break
        time.sleep(0.05)
    queued = threading.Thread(target=run, args=("queued", False))
    queued.start()
    running.join()
    queued.join()
    streamed = threading.Thread(target=run, args=("streamed", True))
    streamed.start()
    streamed.join()
    for tag in ("running", "queued"):
        r = results.get(tag)
        check(r and r[0] == 504 and "deadline" in r[1], f"timeout: the {tag} request ends 504",
              r)
    r = results.get("streamed")
    check(r and r[0] == "stream-error" and "deadline" in r[1],
          "timeout: a streamed request ends with an error event", r)
    # the answer goes out as the request is reaped; the scheduler's snapshot of the pages follows
    # within a step, so wait for it (at most 5 s)
    for _ in range(50):
        ms = metrics(srv.root)[1]
        if m(ms, "relaxc_kv_pages_used") == m(ms, "relaxc_prefix_cache_pages"):
            break
        time.sleep(0.1)
    check(m(ms, "relaxc_requests_timed_out_total") == 3, "timeout: 3 counted as timed out",
          m(ms, "relaxc_requests_timed_out_total"))
    check(m(ms, "relaxc_kv_pages_used") - m(ms, "relaxc_prefix_cache_pages") == 0,
          "timeout: their KV pages freed",
          (m(ms, "relaxc_kv_pages_used"), m(ms, "relaxc_prefix_cache_pages")))
    check(len(re.findall(r"finish=timeout", srv.text())) == 3, "timeout: logged as such")
    rc = srv.stop()
    check(rc == 0, "timeout server: exit 0 on SIGTERM", rc)


def check_shutdown():
    srv = Server("shutdown", ["--max-batch", "2"])
    n = 30
    want = generate(["--prompt", "And it came to pass", "--max-tokens", str(n)])
    texts, started = {}, threading.Barrier(3)

    def stream(i):
        got, first = "", True
        try:
            for ch in srv.client.completions.create(model=MODEL, prompt="And it came to pass",
                                                    max_tokens=n, temperature=0, stream=True):
                if first:
                    first = False
                    started.wait(timeout=120)
                got += ch.choices[0].text if ch.choices else ""
                texts[i] = (got, ch.choices[0].finish_reason if ch.choices else None)
        except Exception as e:  # noqa: BLE001 (reported by the check below)
            texts[i] = (got, repr(e))

    th = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
    for t in th:
        t.start()
    started.wait(timeout=120)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    refused = False
    try:
        urllib.request.urlopen(srv.root + "/health", timeout=5)
    except (urllib.error.URLError, OSError):
        refused = True
    check(refused, "shutdown: no new connections once SIGTERM came")
    for t in th:
        t.join(timeout=300)
    for i in range(2):
        check(texts.get(i) == (want, "length"), f"shutdown: in-flight stream {i} finished whole",
              texts.get(i))
    rc = srv.proc.wait(timeout=120)
    check(rc == 0, "shutdown: exit 0", rc)
    p = pages_line(srv.text())
    check(p is not None and p[0] == p[1] and p[1] > 0, "shutdown: pages free: N/N", p)

    srv = Server("shutdown-cancel", ["--shutdown-timeout", "1"])
    result = {}

    def long_stream():
        got = ""
        try:
            for ch in srv.client.completions.create(model=MODEL, prompt="And God said",
                                                    max_tokens=400, temperature=0, stream=True):
                got += ch.choices[0].text if ch.choices else ""
                result["started"] = True
            result["end"] = "answered"
        except openai.APIError as e:
            result["end"] = str(e.message)

    t = threading.Thread(target=long_stream)
    t.start()
    for _ in range(600):
        if result.get("started"):
            break
        time.sleep(0.05)
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    t.join(timeout=120)
    rc = srv.proc.wait(timeout=120)
    check("stopping" in result.get("end", ""), "shutdown timeout: the long stream is cancelled",
          result)
    check(rc == 0 and time.time() - t0 < 60, "shutdown timeout: exit 0, soon", rc)
    p = pages_line(srv.text())
    check(p is not None and p[0] == p[1], "shutdown timeout: pages free: N/N", p)
    check("--shutdown-timeout 1 s passed: cancelling 1 requests" in srv.text(),
          "shutdown timeout: the log says what was cancelled")


def main():
    if not KEY:
        raise SystemExit("client_ops.py needs the server's --api-key (RX_SERVE_API_KEY)")
    c = check_auth()
    _, before = metrics()
    seen = {"prompt": 0, "tokens": 0, "requests": 0, "ids": []}
    check_generation(c, seen)
    check_errors(c)
    headers, after = metrics()
    check_metrics(before, after, headers, seen)
    check_log(seen)
    check_timeouts()
    check_shutdown()
    if failed:
        print(f"client_ops.py: {len(failed)} checks failed: {failed}")
        sys.exit(1)
    print("client_ops.py: all checks passed")


if __name__ == "__main__":
    main()
