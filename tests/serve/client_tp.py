"""relaxc serve on two ranks (--tensor-parallel 2, docs/distributed.md "relaxc serve on several
ranks"), driven by the official openai client. The harness starts the server with
`--tensor-parallel 2` (it starts `mpirun -n 2` of itself; RX_MPIRUN_ARGS from ctest) on the tiny
KJV model; every rank holds the whole model (replicated: no sharded LLM preset yet), so the
answers must be the one-process server's exactly, and the follower's KV cache must follow every
page operation of rank 0's prefix cache (a follower checks a digest of its cache against rank 0's
before every call and fails the job when they differ).

Checks, greedy (temperature 0):
- a one-rank server (started here) and the two-rank one answer the same completions, chats and
  streams, prompts of 1 to ~60 tokens;
- the prefix cache on: a repeated prompt reports cached tokens on the two ranks as on one, with the
  same answer; n = 3 choices of one prompt (forks of its pages) agree;
- the server stops on SIGTERM (sent here: the harness then checks its exit 0 and "pages free:
  N/N"): rank 1 says it followed to the end with every page of its cache free;
- a second two-rank server whose follower is killed (SIGKILL) exits non-zero within 60 s, and its
  stderr names rank 1 and says the server stopped.
Prints each check; exits 1 if any failed."""
import atexit
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from openai import OpenAI

BASE = os.environ["RX_SERVE_BASE_URL"]
MODEL = os.environ["RX_SERVE_MODEL"]
LOG = os.environ["RX_SERVE_LOG"]
PID = int(os.environ["RX_SERVE_PID"])
RELAXC = json.loads(os.environ["RX_SERVE_RELAXC"])
ARTIFACT = os.environ["RX_SERVE_ARTIFACT"]

failed = []


def check(cond, what, detail=""):
    print(("ok:   " if cond else "FAIL: ") + what + ("" if cond else f" ({detail})"), flush=True)
    if not cond:
        failed.append(what)
    return cond


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def healthy(root):
    try:
        with urllib.request.urlopen(root + "/health", timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


class Server:
    """`relaxc serve ARTIFACT --port 0 FLAGS`, stderr into a file beside the harness's log."""

    def __init__(self, tag, flags):
        self.log = f"{LOG[:-4]}.{tag}.log" if LOG.endswith(".log") else f"{LOG}.{tag}"
        with open(self.log, "w") as f:
            self.proc = subprocess.Popen(RELAXC + ["serve", ARTIFACT, "--port", "0",
                                                   "--model-name", MODEL] + flags,
                                         stdout=subprocess.DEVNULL, stderr=f)
        atexit.register(lambda p=self.proc: p.poll() is None and (p.kill(), p.wait()))
        deadline, self.root = time.time() + 180, None
        while time.time() < deadline and self.proc.poll() is None:
            m = re.search(r"http://[0-9.]+:(\d+)/v1", read(self.log))
            if m and healthy(f"http://127.0.0.1:{m.group(1)}"):
                self.root = f"http://127.0.0.1:{m.group(1)}"
                break
            time.sleep(0.1)
        if self.root is None:
            raise SystemExit(f"server {tag} did not start: {read(self.log)}")
        self.client = OpenAI(base_url=self.root + "/v1", api_key="none", max_retries=0)


def cached(usage):
    d = getattr(usage, "prompt_tokens_details", None)
    return getattr(d, "cached_tokens", None) if d is not None else None


def answers(client, prompts):
    """What a server answers to the fixed sequence of requests (prefix cache hits included)."""
    out = []
    for p, n in prompts:
        r = client.completions.create(model=MODEL, prompt=p, max_tokens=n, temperature=0)
        out.append(("completion", r.choices[0].text, r.choices[0].finish_reason,
                    r.usage.prompt_tokens, cached(r.usage)))
    for p, n in prompts[:3]:  # repeated: whole pages of the prompt come from the prefix cache
        r = client.completions.create(model=MODEL, prompt=p, max_tokens=n, temperature=0)
        out.append(("again", r.choices[0].text, cached(r.usage)))
    p = prompts[-1][0]
    r = client.completions.create(model=MODEL, prompt=p + " and", max_tokens=8, temperature=0, n=3)
    out.append(("n=3", sorted((c.index, c.text) for c in r.choices)))
    text = "".join(ev.choices[0].text for ev in client.completions.create(
        model=MODEL, prompt=prompts[1][0], max_tokens=10, temperature=0, stream=True)
        if ev.choices)
    out.append(("stream", text))
    r = client.chat.completions.create(model=MODEL, messages=[
        {"role": "system", "content": prompts[-1][0]}, {"role": "user", "content": "who?"}],
        max_tokens=8, temperature=0)
    out.append(("chat", r.choices[0].message.content))
    return out


def main():
    rng = random.Random(35)
    words = ("and the LORD said unto Moses go thou in the land of Egypt behold his people shall "
             "come out of the house with bread and wine unto the mountain of God").split()
    prompts = [(" ".join(rng.choice(words) for _ in range(k)), n)
               for k, n in ((1, 5), (7, 9), (20, 6), (33, 12), (45, 4))]
    two = OpenAI(base_url=BASE, api_key="none", max_retries=0)
    got = answers(two, prompts)
    one = Server("one-rank", [])
    want = answers(one.client, prompts)
    one.proc.send_signal(signal.SIGTERM)
    one.proc.wait(timeout=60)
    for g, w in zip(got, want):
        check(g == w, f"two ranks = one process: {w[0]}", (g, w))
    check(any(a[0] == "again" and (a[2] or 0) > 0 for a in got),
          "the prefix cache served repeated prompts on two ranks", got)

    # SIGTERM to the server (the harness checks its exit status and rank 0's pages line)
    log = LOG
    os.kill(PID, signal.SIGTERM)
    deadline = time.time() + 60
    while time.time() < deadline and "rank 0 stopped" not in read(log):
        time.sleep(0.1)
    m = re.search(r"rank 1: rank 0 stopped; pages free here: (\d+)/(\d+)", read(log))
    check(m is not None and m.group(1) == m.group(2),
          "rank 1 followed rank 0 to the end, every page of its cache free",
          m.group(0) if m else read(log)[-3000:])
    check("out of step" not in read(log), "rank 1's KV cache never went out of step")

    # a follower that dies ends the server with an error naming it
    srv = Server("tp-kill", ["--tensor-parallel", "2"])
    r = srv.client.completions.create(model=MODEL, prompt=prompts[2][0], max_tokens=4,
                                      temperature=0)
    check(r.choices[0].text == want[2][1][:len(r.choices[0].text)] and r.choices[0].text,
          "the second two-rank server answers", r.choices[0].text)
    m = re.search(r"rank 1 \(pid (\d+)\) follows rank 0", read(srv.log))
    if check(m is not None, "rank 1 says its pid", read(srv.log)[-2000:]):
        os.kill(int(m.group(1)), signal.SIGKILL)
        t0 = time.time()
        try:
            rc = srv.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        text = read(srv.log)
        check(rc not in (None, 0), f"a killed follower ends the server with an error (exit {rc}, "
              f"{time.time() - t0:.1f} s)", text[-3000:])
        check(re.search(r"rank 1\b", text[text.find("follows rank 0"):]) is not None and
              "the server stopped" in text, "the error names rank 1 and says the server stopped",
              text[-3000:])
    if failed:
        print(f"{len(failed)} check(s) failed: {failed}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
