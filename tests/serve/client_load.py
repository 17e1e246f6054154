#!/usr/bin/env python3
"""tests/serve/client_load.py: the load test of relaxc serve (issue 33; ctest serve.load, label
"load" so that CI can run it apart): 256 concurrent streaming clients of the official openai
client (asyncio) on 127.0.0.1, with prompts of 2 to about 45 tokens and answers of 1, 7 and 20
tokens, greedy; every 8th client whose answer is long disconnects after its second chunk.

Checks: every client that stays gets its whole answer, equal to the same request's answer run
alone beforehand (one at a time on the same server: the single-run reference), with the same
finish reason; none is refused or fails (nothing lost); the disconnected requests are cancelled
(relaxc_requests_cancelled_total); afterwards nothing runs or waits and every KV page is free
(/metrics), and again at the server's exit (run_client.py reads its "pages free: N/N"). Prints the wall time, the tokens per second and the time-to-first-token
percentiles it saw; exits 1 on any failure. Needs the server's flags of tests/serve/serve.cmake
(--max-batch 32, and connection and queue limits above 256)."""
import asyncio
import os
import re
import sys
import time
import urllib.request

import openai
from openai import AsyncOpenAI

BASE = os.environ["RX_SERVE_BASE_URL"]
MODEL = os.environ["RX_SERVE_MODEL"]
KEY = os.environ.get("RX_SERVE_API_KEY", "none")
ROOT = BASE[: -len("/v1")]
CLIENTS = 256
LENGTHS = [1, 7, 20]  # answer lengths (max_tokens)
DISCONNECT_EVERY = 8  # of the clients with long answers, every 8th leaves after its 2nd chunk

# prompts of 2 to about 45 tokens (prefill dominates on lavapipe: 256 prompts of these lengths
# take some 15 s of it; longer ones would make the test minutes long)
VERSE1 = "In the beginning God created the heaven and the earth."
VERSE = (VERSE1 + " And the earth was without form, and void; and darkness was upon the face of "
         "the deep. And the Spirit of God moved upon the face of the waters.")
PROMPTS = ["Blessed", "And God said", "And it came to pass", "In the beginning God",
           "And the LORD spake unto Moses, saying,", VERSE1, VERSE1 + " And God said, Let there be",
           VERSE]


def metrics():
    with urllib.request.urlopen(ROOT + "/metrics", timeout=60) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        mm = re.match(r"^([a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if mm:
            out[mm.group(1) + (mm.group(2) or "")] = float(mm.group(3))
    return out


async def one(client, prompt, n, leave_after=None):
    """(text, finish, ttft_s, left) of one streamed completion."""
    t0 = time.monotonic()
    text, finish, ttft, chunks = "", None, None, 0
    stream = await client.completions.create(model=MODEL, prompt=prompt, max_tokens=n,
                                             temperature=0, stream=True)
    async for ch in stream:
        if not ch.choices:
            continue
        if ch.choices[0].text and ttft is None:
            ttft = time.monotonic() - t0
        text += ch.choices[0].text
        finish = ch.choices[0].finish_reason or finish
        chunks += 1
        if leave_after is not None and chunks >= leave_after:
            await stream.close()  # the client goes away mid-stream
            return text, None, ttft, True
    return text, finish, ttft, False


def plan():
    """(prompt index, max_tokens, leave_after or None) per client: every combination many times."""
    out = []
    for i in range(CLIENTS):
        p, n = i % len(PROMPTS), LENGTHS[(i // len(PROMPTS)) % len(LENGTHS)]
        leave = 2 if n >= 7 and (i // len(PROMPTS)) % DISCONNECT_EVERY == 1 else None
        out.append((p, n, leave))
    return out


async def main():
    client = AsyncOpenAI(base_url=BASE, api_key=KEY, max_retries=0, timeout=600)
    clients = plan()
    failures = []
    # the single-run references, one request at a time
    t0 = time.monotonic()
    ref = {}
    for key in sorted({(p, n) for p, n, _ in clients}):
        text, finish, _, _ = await one(client, PROMPTS[key[0]], key[1])
        ref[key] = (text, finish)
    print(f"client_load.py: {len(ref)} single-run references in {time.monotonic() - t0:.1f} s",
          flush=True)
    before = metrics()

    t0 = time.monotonic()
    results = await asyncio.gather(*(one(client, PROMPTS[p], n, leave) for p, n, leave in clients),
                                   return_exceptions=True)
    wall = time.monotonic() - t0
    ttfts, tokens, left = [], 0, 0
    for i, ((p, n, leave), r) in enumerate(zip(clients, results)):
        if isinstance(r, BaseException):
            failures.append(f"client {i} (prompt {p}, max_tokens {n}): {r!r}")
            continue
        text, finish, ttft, gone = r
        if gone:
            left += 1
            continue
        if (text, finish) != ref[(p, n)]:
            failures.append(f"client {i} (prompt {p}, max_tokens {n}): got {(text, finish)!r}, "
                            f"alone {ref[(p, n)]!r}")
        tokens += n if finish == "length" else 0
        if ttft is not None:
            ttfts.append(ttft)
    ttfts.sort()
    pct = (lambda q: ttfts[min(len(ttfts) - 1, int(q * len(ttfts)))] * 1e3) if ttfts else None
    print(f"client_load.py: {CLIENTS} streaming clients ({left} left mid-stream) in {wall:.1f} s: "
          f"{tokens / wall:.0f} generated tokens/s; time to first token p50 "
          f"{pct(0.5):.0f} ms, p99 {pct(0.99):.0f} ms" if ttfts else "no answers", flush=True)

    # the server settles: the disconnected requests cancelled, nothing running, every page free
    after = None
    for _ in range(600):
        after = metrics()
        if after.get("relaxc_requests_running", 1) == 0 and after.get("relaxc_requests_waiting",
                                                                         1) == 0:
            break
        await asyncio.sleep(0.1)
    # pages the prefix cache keeps are in use but held by no request (evictable when unshared)
    used = after.get("relaxc_kv_pages_used", -1) - after.get("relaxc_prefix_cache_pages", 0)
    total = after.get("relaxc_kv_pages_total")
    if used != 0 or not total:
        failures.append(f"KV pages used after the load: {used} of {total}")
    if after.get("relaxc_requests_running") or after.get("relaxc_requests_waiting"):
        failures.append("requests still running or waiting after the load")
    cancelled = after["relaxc_requests_cancelled_total"] - before["relaxc_requests_cancelled_total"]
    if not 1 <= cancelled <= left:
        failures.append(f"{cancelled:.0f} requests cancelled, want 1..{left} (the clients that "
                        f"left)")
    ok200 = (after.get('relaxc_requests_total{endpoint="/v1/completions",status="200"}', 0)
             - before.get('relaxc_requests_total{endpoint="/v1/completions",status="200"}', 0))
    if ok200 != CLIENTS:
        failures.append(f"{ok200:.0f} completions answered 200, want {CLIENTS}")
    for k in ("relaxc_requests_refused_busy_total", "relaxc_requests_timed_out_total"):
        if after[k] != before[k]:
            failures.append(f"{k} grew by {after[k] - before[k]:.0f}")
    for f in failures[:20]:
        print("FAIL:", f)
    if failures:
        print(f"client_load.py: {len(failures)} failures")
        sys.exit(1)
    print(f"client_load.py: all {CLIENTS - left} staying clients got their single-run answers; "
          f"{cancelled:.0f} cancelled; KV pages {used:.0f}/{total:.0f} used")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except openai.APIError as e:
        print(f"client_load.py: FAIL: {e!r}")
        sys.exit(1)
