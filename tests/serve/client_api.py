#!/usr/bin/env python3
"""tests/serve/client_api.py: the completions and chat API's fields through the official openai
client against a running `relaxc serve` (tests/serve/requirements.txt; the ctest harness starts the
server with the tiny KJV model and sets RX_SERVE_BASE_URL, RX_SERVE_MODEL and, when it uses one,
RX_SERVE_API_KEY). Each check compares with an independent expectation:

- stop: 32 requests (half streamed, 8 at once) with 1 to 4 stop strings taken at random from the
  model's own greedy answer: the text equals that answer cut before the first stop string (the
  one that ends first, the longest of those), every streamed prefix is a prefix of it (no part of
  a stop string is ever shown), finish_reason "stop";
- n: greedy choices all equal the n=1 answer, indexed 0..n-1, streamed chunks carry their index;
  prompts as a list of strings, token ids and lists of ids give one choice per prompt x n, index
  prompt * n + i, each equal to that prompt alone;
- logprobs: the chosen token is the most probable under greedy, top lists sorted with exp sums
  <= 1, tokens joined equal the text, text_offset their running lengths (completions); chat's
  content entries with bytes equal to the token's UTF-8;
- echo: the prompt's text, then the answer without echo;
- stream_options.include_usage: a last chunk with no choices and the usage of the whole answer;
- penalties: frequency and presence penalties keep the greedy answer until its first repeated
  token, where the token is the argmax of the unpenalized top logprobs less
  frequency * count + presence, computed here (when the top 5 decide it);
- logit_bias: -100 on the greedy first token makes the first token the runner-up of the
  unbiased top logprobs; +100 on a token makes it the first token;
- seed: a request with a seed at temperature 1 repeats itself (alone and 4 at once); choice i of
  n=3 equals n=1 with seed + i;
- max_completion_tokens caps the chat answer (finish_reason "length");
- a field the server does not implement (suffix, best_of > 1, parallel_tool_calls, 5 stop
  strings, echo with logprobs) is a 400 naming it.
Prints each failure and exits 1 on any."""
import json
import math
import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
from openai import OpenAI

FAILS = []
client = OpenAI(base_url=os.environ["RX_SERVE_BASE_URL"],
                api_key=os.environ.get("RX_SERVE_API_KEY", "none"), timeout=120, max_retries=0)
MODEL = os.environ["RX_SERVE_MODEL"]
PROMPTS = ["In the beginning God", "And the LORD said unto Moses", "Blessed are",
           "And it came to pass", "Thou shalt"]
lock = threading.Lock()


def check(cond, what):
    if not cond:
        with lock:
            FAILS.append(what)
            print("FAIL:", what, flush=True)
    return cond


def complete(prompt, **kw):
    return client.completions.create(model=MODEL, prompt=prompt, **kw)


def greedy(prompt, max_tokens=16, **kw):
    return complete(prompt, max_tokens=max_tokens, temperature=0, **kw)


def reference_cut(text, stops):
    """The text before the first stop string: the occurrence that ends first, the longest."""
    for end in range(1, len(text) + 1):
        best = max((len(s) for s in stops if text.endswith(s, 0, end)), default=0)
        if best:
            return text[:end - best], True
    return text, False


def one_stop_request(k, full):
    rng = random.Random(k)
    prompt = PROMPTS[k % len(PROMPTS)]
    text = full[prompt]
    stops = []
    for _ in range(rng.randint(1, 4)):
        a = rng.randrange(len(text))
        stops.append(text[a:a + rng.randint(1, 6)])
    stops = [s for s in stops if s] or [text[-1]]
    want, found = reference_cut(text, stops)
    stream = k % 2 == 1
    if not stream:
        r = greedy(prompt, stop=stops)
        got, finish = r.choices[0].text, r.choices[0].finish_reason
    else:
        got, finish = "", None
        for ch in greedy(prompt, stop=stops, stream=True):
            for c in ch.choices:
                got += c.text
                check(want.startswith(got), f"stop {k}: streamed {got!r} is no prefix of {want!r} "
                      f"(stops {stops})")
                finish = c.finish_reason or finish
    check(got == want, f"stop {k}: {got!r}, expected {want!r} (stops {stops}, stream {stream})")
    check(finish == ("stop" if found else "length"), f"stop {k}: finish_reason {finish}")


def stop_strings():
    full = {p: greedy(p).choices[0].text for p in PROMPTS}
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda k: one_stop_request(k, full), range(32)))


def n_and_prompt_lists(vocab):
    one = greedy(PROMPTS[0], max_tokens=10).choices[0].text
    r = greedy(PROMPTS[0], max_tokens=10, n=3)
    check([c.index for c in r.choices] == [0, 1, 2], f"n=3 indexes {[c.index for c in r.choices]}")
    check(all(c.text == one for c in r.choices), f"n=3 greedy {[c.text for c in r.choices]} != {one!r}")
    got = {}
    for ch in greedy(PROMPTS[0], max_tokens=10, n=2, stream=True):
        for c in ch.choices:
            got[c.index] = got.get(c.index, "") + c.text
    check(got == {0: one, 1: one}, f"n=2 streamed {got}")
    alone = [greedy(p, max_tokens=6).choices[0].text for p in PROMPTS[:3]]
    r = greedy(PROMPTS[:3], max_tokens=6, n=2)
    want = [alone[i // 2] for i in range(6)]
    check([c.index for c in r.choices] == list(range(6)) and [c.text for c in r.choices] == want,
          f"3 prompts x n=2: {[(c.index, c.text) for c in r.choices]}, expected {want}")
    check(r.usage.completion_tokens == 36, f"3 prompts x 2 x 6 tokens: usage {r.usage}")
    # token ids: those of a prompt's own tokens (found through the map of ids to texts)
    ids = tokens_of(vocab, " And it came to pass")
    if check(ids is not None, "no ids for ' And it came to pass'"):
        a = greedy(ids, max_tokens=6).choices[0].text
        b = greedy([ids, ids[:2]], max_tokens=6).choices
        b2 = greedy(ids[:2], max_tokens=6).choices[0].text
        check(b[0].text == a and b[1].text == b2, f"lists of ids: {[c.text for c in b]} vs {a!r}, {b2!r}")


def tokens_of(vocab, text):
    """Greedy longest-match of text over the vocabulary's texts (the ids need not be the
    tokenizer's own segmentation: any ids whose texts join to it)."""
    by_text = {}
    for i, t in vocab.items():
        if t and t not in by_text:
            by_text[t] = i
    out, at = [], 0
    while at < len(text):
        for end in range(len(text), at, -1):
            if text[at:end] in by_text:
                out.append(by_text[text[at:end]])
                at = end
                break
        else:
            return None
    return out


def bytes_to_unicode():
    """GPT-2's byte-level alphabet (the ByteLevel pre-tokenizer of tokenizers): byte -> char."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def id_texts():
    """id -> text, from the served model's tokenizer.json (byte-level BPE; RX_SERVE_TOKENIZER, by
    default the tiny KJV model's, which the ctest harness serves): each token's bytes as UTF-8."""
    path = os.environ.get("RX_SERVE_TOKENIZER") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "llm", "models", "kjv-llama",
        "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    back = {c: b for b, c in bytes_to_unicode().items()}
    special = {t["id"] for t in tok.get("added_tokens", []) if t.get("special")}
    texts = {}
    for t, i in tok["model"]["vocab"].items():
        if i in special or any(c not in back for c in t):
            continue
        try:
            texts[i] = bytes(back[c] for c in t).decode("utf-8")
        except UnicodeDecodeError:
            pass  # a piece of a character
    return texts


def logprobs_and_echo():
    r = greedy(PROMPTS[1], max_tokens=12, logprobs=5)
    c = r.choices[0]
    lp = c.logprobs
    ok = check(lp is not None and len(lp.tokens) == 12, f"logprobs: {lp}")
    if ok:
        check("".join(lp.tokens) == c.text, f"tokens {lp.tokens} do not join to {c.text!r}")
        off = 0
        for i, (tok, l, top) in enumerate(zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)):
            vals = list(top.values())
            check(abs(l - max(vals)) < 1e-6, f"step {i}: greedy {tok!r} {l} is not the top {top}")
            check(vals == sorted(vals, reverse=True), f"step {i}: top not sorted {top}")
            check(sum(math.exp(v) for v in vals) <= 1 + 1e-5, f"step {i}: exp sum over 1 {top}")
            check(lp.text_offset[i] == off, f"step {i}: text_offset {lp.text_offset[i]} != {off}")
            off += len(tok)
    msgs = [{"role": "user", "content": PROMPTS[2]}]
    r = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=0,
                                       logprobs=True, top_logprobs=20)
    content = r.choices[0].logprobs.content if r.choices[0].logprobs else None
    if check(content and len(content) >= 1, f"chat logprobs {r.choices[0].logprobs}"):
        check("".join(t.token for t in content) == r.choices[0].message.content,
              "chat logprob tokens do not join to the content")
        for i, t in enumerate(content):
            vals = [x.logprob for x in t.top_logprobs]
            check(len(vals) == 20 and vals == sorted(vals, reverse=True) and
                  abs(t.logprob - vals[0]) < 1e-6 and sum(math.exp(v) for v in vals) <= 1 + 1e-5,
                  f"chat step {i}: {t.token!r} {t.logprob} top {vals[:3]}...")
            check(bytes(t.bytes) == t.token.encode(), f"chat step {i}: bytes {t.bytes}")
    # echo
    plain = greedy(PROMPTS[3], max_tokens=8).choices[0].text
    e = greedy(PROMPTS[3], max_tokens=8, echo=True).choices[0].text
    check(e == PROMPTS[3] + plain, f"echo {e!r}, expected {PROMPTS[3] + plain!r}")


def include_usage():
    whole = greedy(PROMPTS[0], max_tokens=9)
    chunks = list(greedy(PROMPTS[0], max_tokens=9, stream=True,
                         stream_options={"include_usage": True}))
    last = chunks[-1]
    check(last.choices == [] and last.usage is not None and
          last.usage.completion_tokens == whole.usage.completion_tokens and
          last.usage.prompt_tokens == whole.usage.prompt_tokens,
          f"include_usage: last chunk {last}, whole usage {whole.usage}")
    check("".join(c.text for ch in chunks[:-1] for c in ch.choices) == whole.choices[0].text,
          "include_usage: the chunks' text differs")
    msgs = [{"role": "user", "content": PROMPTS[0]}]
    chunks = list(client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=5,
                                                 temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5,
          f"chat include_usage {chunks[-1]}")


def penalties():
    for prompt in PROMPTS[:3]:
        base = greedy(prompt, max_tokens=16, logprobs=5).choices[0].logprobs
        toks = base.tokens
        t = next((i for i in range(len(toks)) if toks[i] in toks[:i]), None)
        if t is None:
            continue
        for kind, f, p in (("frequency", 1.5, 0.0), ("presence", 0.0, 1.5)):
            counts = {}
            for x in toks[:t]:
                counts[x] = counts.get(x, 0) + 1
            top = base.top_logprobs[t]
            vals = {k: v - f * counts.get(k, 0) - p * (k in counts) for k, v in top.items()}
            best = max(vals, key=vals.get)
            decided = vals[best] > min(top.values())  # no token outside the top 5 can beat it
            r = greedy(prompt, max_tokens=t + 1, logprobs=0, frequency_penalty=f,
                       presence_penalty=p).choices[0].logprobs.tokens
            check(r[:t] == toks[:t], f"{kind} penalty changed tokens before the first repeat: "
                  f"{r[:t]} vs {toks[:t]}")
            if decided:
                check(r[t] == best, f"{kind} penalty on {prompt!r} step {t}: {r[t]!r}, the "
                      f"penalized argmax is {best!r} ({vals})")
    r0 = greedy(PROMPTS[0], frequency_penalty=0, presence_penalty=0).choices[0].text
    check(r0 == greedy(PROMPTS[0]).choices[0].text, "zero penalties changed the answer")


def logit_bias(vocab):
    by_text = {}
    for i, t in vocab.items():
        by_text.setdefault(t, i)
    r = greedy(PROMPTS[0], max_tokens=1, logprobs=5).choices[0].logprobs
    first, top = r.tokens[0], r.top_logprobs[0]
    runner = sorted(top, key=top.get, reverse=True)[1]
    if not check(first in by_text, f"logit_bias: no id for {first!r}"):
        return
    b = greedy(PROMPTS[0], max_tokens=1, logit_bias={str(by_text[first]): -100}).choices[0].text
    check(b == runner, f"logit_bias -100 on {first!r}: {b!r}, the runner-up is {runner!r}")
    forced = by_text.get(" Moses")
    if check(forced is not None, "logit_bias: no id for ' Moses'"):
        f = greedy(PROMPTS[0], max_tokens=1, logit_bias={str(forced): 100}).choices[0].text
        check(f == " Moses", f"logit_bias +100 on ' Moses': {f!r}")


def seeds():
    # 6 tokens: a decode over several rows may round a logit's last bit differently from one over
    # a single row, which can move a draw that lands at a boundary; the fewer draws, the rarer
    kw = dict(max_tokens=6, temperature=1.0, seed=42)
    a = complete(PROMPTS[4], n=3, **kw)
    b = complete(PROMPTS[4], n=3, **kw)
    check([c.text for c in a.choices] == [c.text for c in b.choices], "seed: n=3 does not repeat")
    for i in range(3):
        one = complete(PROMPTS[4], n=1, **dict(kw, seed=42 + i)).choices[0].text
        check(one == a.choices[i].text, f"seed: choice {i} {a.choices[i].text!r} != seed {42 + i}"
              f" alone {one!r}")
    with ThreadPoolExecutor(4) as ex:
        par = list(ex.map(lambda _: complete(PROMPTS[4], **kw).choices[0].text, range(4)))
    check(all(p == a.choices[0].text for p in par), f"seed under batching: {par}")


def max_completion_tokens():
    msgs = [{"role": "user", "content": PROMPTS[0]}]
    r = client.chat.completions.create(model=MODEL, messages=msgs, temperature=0,
                                       max_completion_tokens=3)
    check(r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length",
          f"max_completion_tokens 3: {r.usage}, {r.choices[0].finish_reason}")


def refusals():
    msgs = [{"role": "user", "content": "a"}]
    cases = [
        ("suffix", lambda: complete("a", suffix="b")),
        ("best_of", lambda: complete("a", best_of=2)),
        ("stop", lambda: complete("a", stop=["a", "b", "c", "d", "e"])),
        ("echo", lambda: complete("a", echo=True, logprobs=1)),
        ("parallel_tool_calls", lambda: client.chat.completions.create(
            model=MODEL, messages=msgs, parallel_tool_calls=False)),
    ]
    for name, call in cases:
        try:
            call()
            check(False, f"{name}: accepted")
        except openai.BadRequestError as e:
            check(name in str(e), f"{name}: the 400 does not name it: {e}")


def main():
    vocab = id_texts()
    check(len(vocab) >= 64, f"only {len(vocab)} ids found")
    parts = [("stop", stop_strings), ("n and prompt lists", lambda: n_and_prompt_lists(vocab)),
             ("logprobs and echo", logprobs_and_echo), ("include_usage", include_usage),
             ("penalties", penalties), ("logit_bias", lambda: logit_bias(vocab)),
             ("seed", seeds), ("max_completion_tokens", max_completion_tokens),
             ("refusals", refusals)]
    only = os.environ.get("RX_CLIENT_API_ONLY")  # "stop,seed": those parts alone (by hand)
    for name, f in parts:
        if only and name not in only.split(","):
            continue
        t0 = time.time()
        try:
            f()
            print(f"{name}: {time.time() - t0:.1f} s", flush=True)
        except Exception as e:  # an exception is a failure of that part, the rest still runs
            check(False, f"{name}: {type(e).__name__}: {e}")
    print(f"client_api: {len(FAILS)} failures")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
