"""Prefix caching through relaxc serve, driven by the official openai client (tests/serve,
docs/serve.md "Prefix caching"). Needs a server started with the prefix cache on (the default;
SERVE_FLAGS: none) on the tiny KJV model with its chat template. Reads RX_SERVE_BASE_URL,
RX_SERVE_MODEL and RX_SERVE_API_KEY (optional).

Checks, greedy (temperature 0), against independent expectations:
- a completion prompt never seen (a fresh random text) has no cached tokens; the same prompt again
  reports usage.prompt_tokens_details.cached_tokens = the whole 16-token pages of its first
  prompt_tokens - 1 tokens (one token is always prefilled), and the same text and finish reason;
- a prompt that extends it by more text reports at least those cached pages; sent again it
  reports the whole pages of its own prompt_tokens - 1 and the same answer, and streamed, the same
  text;
- chat requests sharing a long system prompt with different user messages: the second reports
  cached tokens (a multiple of 16, at least the system prompt's whole pages);
- 4 identical requests sent at once (threads) give 4 equal answers, and all but one report
  cached tokens.
Prints each failure; exits 1 on any."""
import os
import random
import sys
import threading

from openai import OpenAI

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


base = os.environ["RX_SERVE_BASE_URL"]
model = os.environ["RX_SERVE_MODEL"]
client = OpenAI(base_url=base, api_key=os.environ.get("RX_SERVE_API_KEY", "none"), max_retries=0)
rng = random.Random()  # a fresh text each run: the server may have served this script before
WORDS = ("and the LORD said unto Moses go thou in the land of Egypt behold his people shall "
         "come out of the house with bread and wine unto the mountain of God").split()


def text(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def cached(usage):
    d = getattr(usage, "prompt_tokens_details", None)
    return getattr(d, "cached_tokens", None) if d is not None else None


def complete(prompt, max_tokens=12):
    r = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0)
    return r.choices[0].text, r.choices[0].finish_reason, r.usage


def streamed(prompt, max_tokens=12):
    out = []
    for ev in client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens,
                                        temperature=0, stream=True):
        if ev.choices:
            out.append(ev.choices[0].text or "")
    return "".join(out)


# 1. a fresh prompt, then the same again
p = text(60)
t1, f1, u1 = complete(p)
t2, f2, u2 = complete(p)
want = (u1.prompt_tokens - 1) // 16 * 16
check(cached(u1) == 0, f"a fresh prompt of {u1.prompt_tokens} tokens: cached_tokens {cached(u1)}, expected 0")
check(cached(u2) == want, f"the same prompt again: cached_tokens {cached(u2)}, expected {want}")
check(want >= 16, f"the prompt has {u1.prompt_tokens} tokens: too short to show caching")
check((t2, f2) == (t1, f1), f"the same prompt cached: {t2!r} ({f2}) differs from {t1!r} ({f1})")
check(u2.prompt_tokens == u1.prompt_tokens, "prompt_tokens differ between the two")

# 2. a prompt extending it
q = p + " " + text(30)
t3, f3, u3 = complete(q)
check(cached(u3) is not None and cached(u3) >= want and cached(u3) % 16 == 0,
      f"an extended prompt: cached_tokens {cached(u3)}, expected a multiple of 16 >= {want}")
t4, f4, u4 = complete(q)
check(cached(u4) == (u4.prompt_tokens - 1) // 16 * 16,
      f"the extended prompt again: cached_tokens {cached(u4)}")
check((t4, f4) == (t3, f3), f"the extended prompt twice: {t4!r} differs from {t3!r}")
s4 = streamed(q)
check(s4 == t3, f"the extended prompt streamed: {s4!r} differs from {t3!r}")

# 3. chat with a shared system prompt
system = "You are a scribe. " + text(80)
answers = []
for i, user in enumerate(["In the beginning", "And God said"]):
    r = client.chat.completions.create(
        model=model, temperature=0, max_tokens=8,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}])
    c = cached(r.usage)
    if i == 0:
        check(c == 0, f"chat, first: cached_tokens {c}, expected 0 (a fresh system prompt)")
    else:
        check(c is not None and c >= 64 and c % 16 == 0 and c < r.usage.prompt_tokens,
              f"chat, second user message after the same system prompt: cached_tokens {c} of "
              f"{r.usage.prompt_tokens}, expected a multiple of 16, at least 64")
    answers.append(r.choices[0].message.content)

# 4. identical requests at once
p = text(70)
results = [None] * 4


def run(k):
    results[k] = complete(p, 10)


threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(all(r is not None for r in results), "a concurrent request failed")
if all(r is not None for r in results):
    check(len({(r[0], r[1]) for r in results}) == 1,
          f"4 identical requests at once gave different answers: {[r[0] for r in results]}")
    hits = sum(1 for r in results if cached(r[2]))
    check(hits == 3, f"4 identical requests at once: {hits} reported cached tokens, expected 3")

print(f"client_prefix: {len(failures)} failed" if failures else "client_prefix: all passed")
sys.exit(1 if failures else 0)
