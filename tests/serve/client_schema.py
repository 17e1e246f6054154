"""tests/serve/client_schema.py: structured output (response_format) through the official openai
client against a running `relaxc serve` (tests/serve's harness starts it: RX_SERVE_BASE_URL,
RX_SERVE_MODEL, RX_SERVE_API_KEY, RX_SERVE_LOG; serve_common.md).

Checks, each against an independent expectation:
  - 64 samples (RX_SCHEMA_SAMPLES) per schema at temperature 1 (flat object with enums, nested objects with arrays,
    string lengths, integers and numbers, anyOf with $defs), on both endpoints, sent 32 at a
    time so that requests with different schemas share batches: every answer ends with "stop"
    and is valid by jsonschema (Draft 2020-12, with additionalProperties false added, as the
    server implies it) and in the schema's property order;
  - json_object: every answer that ends with "stop" is a JSON object; one cut by max_tokens is
    the start of one;
  - greedy answers for five schemas sent at once (twice each) equal the same requests sent one by one, and the
    streamed text equals the whole answer;
  - {"type": "text"} changes nothing (greedy text equals the request without response_format);
  - unsupported keywords and malformed response_format are 400 naming 'response_format'.
Prints what failed; exits 1 on any failure."""

import concurrent.futures
import copy
import json
import os
import sys

import jsonschema
import openai
from openai import OpenAI

BASE = os.environ["RX_SERVE_BASE_URL"]
SAMPLES = int(os.environ.get("RX_SCHEMA_SAMPLES", "64"))  # per schema (fewer: a quick run)
MODEL = os.environ["RX_SERVE_MODEL"]
client = OpenAI(base_url=BASE, api_key=os.environ.get("RX_SERVE_API_KEY", "none"), max_retries=0,
                timeout=1800)  # generous: lavapipe on a loaded machine
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg, flush=True)


SCHEMAS = {
    "flat_enums": {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "size": {"type": "string", "enum": ["S", "M", "L"]},
            "ok": {"type": "boolean"},
            "level": {"enum": [1, 2, 3, None]},
        },
        "required": ["color", "size", "ok", "level"],
        "additionalProperties": False,
    },
    "nested_arrays": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "minItems": 1,
                     "maxItems": 3},
            "owner": {
                "type": "object",
                "properties": {"first": {"type": "string", "maxLength": 8},
                               "age": {"type": "integer"}},
                "required": ["first", "age"],
            },
        },
        "required": ["id", "tags", "owner"],
    },
    "string_lengths": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 3, "maxLength": 3},
            "note": {"type": "string", "minLength": 2, "maxLength": 10},
            "extra": {"type": "string", "maxLength": 4},
        },
        "required": ["code", "note"],
    },
    "numbers": {
        "type": "object",
        "properties": {"x": {"type": "number"}, "n": {"type": "integer"},
                       "v": {"type": ["number", "null"]}},
        "required": ["x", "n", "v"],
    },
    "anyof_defs": {
        "$defs": {"pt": {"type": "object",
                         "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                         "required": ["x", "y"]}},
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/pt"},
                       "q": {"anyOf": [{"$ref": "#/$defs/pt"}, {"type": "null"},
                                       {"type": "boolean"}]}},
        "required": ["p", "q"],
    },
}


def closed(schema):
    """The schema with additionalProperties false on every object that lists properties."""
    s = copy.deepcopy(schema)

    def walk(x):
        if isinstance(x, dict):
            if "properties" in x:
                x.setdefault("additionalProperties", False)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(s)
    return s


def fmt(name, schema):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def ask(chat, response_format, temperature, seed, max_tokens=120, stream=False):
    """(text, finish_reason) of one request."""
    extra = {} if response_format is None else {"response_format": response_format}
    if chat:
        msgs = [{"role": "user", "content": "Answer in JSON."}]
        if stream:
            text, finish = "", None
            for ev in client.chat.completions.create(model=MODEL, messages=msgs, stream=True,
                                                     temperature=temperature, seed=seed,
                                                     max_tokens=max_tokens, **extra):
                if ev.choices:
                    text += ev.choices[0].delta.content or ""
                    finish = ev.choices[0].finish_reason or finish
            return text, finish
        r = client.chat.completions.create(model=MODEL, messages=msgs, temperature=temperature,
                                           seed=seed, max_tokens=max_tokens, **extra)
        return r.choices[0].message.content, r.choices[0].finish_reason
    r = client.completions.create(model=MODEL, prompt="And God said,", temperature=temperature,
                                  seed=seed, max_tokens=max_tokens, extra_body=extra)
    return r.choices[0].text, r.choices[0].finish_reason


def in_order(value, schema):
    """Are the object's keys in the schema's property order (recursively, where it says)?"""
    if isinstance(value, dict) and "properties" in schema:
        names = list(schema["properties"])
        pos = [names.index(k) for k in value]
        if pos != sorted(pos):
            return False
        return all(in_order(v, schema["properties"][k]) for k, v in value.items())
    if isinstance(value, list) and "items" in schema:
        return all(in_order(v, schema["items"]) for v in value)
    return True


def samples(pool):
    jobs = []
    for name, schema in SCHEMAS.items():
        for k in range(SAMPLES):
            jobs.append((name, schema, k, pool.submit(ask, k % 2 == 0, fmt(name, schema), 1.0,
                                                      1000 + k)))
    counts = {}
    for name, schema, k, fut in jobs:
        try:
            text, finish = fut.result()
        except Exception as e:  # noqa: BLE001 - reported as a failure
            fail(f"{name} sample {k}: {e!r}")
            continue
        if finish != "stop":
            fail(f"{name} sample {k}: finish {finish!r}, text {text!r}")
            continue
        try:
            value = json.loads(text)
            jsonschema.Draft202012Validator(closed(schema)).validate(value)
        except (ValueError, jsonschema.ValidationError) as e:
            fail(f"{name} sample {k}: {text!r}: {e}")
            continue
        if not in_order(value, schema):
            fail(f"{name} sample {k}: keys out of the schema's order: {text!r}")
            continue
        counts[name] = counts.get(name, 0) + 1
    for name in SCHEMAS:
        print(f"{name}: {counts.get(name, 0)}/{SAMPLES} valid", flush=True)


def json_objects(pool):
    futs = [pool.submit(ask, k % 2 == 1, {"type": "json_object"}, 1.0, 7 + k, 60)
            for k in range(SAMPLES)]
    whole = 0
    for k, fut in enumerate(futs):
        text, finish = fut.result()
        if finish == "stop":
            try:
                if not isinstance(json.loads(text), dict):
                    fail(f"json_object sample {k}: not an object: {text!r}")
                whole += 1
            except ValueError as e:
                fail(f"json_object sample {k}: {text!r}: {e}")
        elif not text.lstrip().startswith("{"):
            fail(f"json_object sample {k} (cut by max_tokens): {text!r} does not start an object")
    print(f"json_object: {whole}/{SAMPLES} whole objects, the others cut by max_tokens",
          flush=True)


def batched_greedy(pool):
    names = list(SCHEMAS)
    alone = {n: ask(True, fmt(n, SCHEMAS[n]), 0.0, 0) for n in names}
    together = [(n, pool.submit(ask, True, fmt(n, SCHEMAS[n]), 0.0, 0)) for n in names * 2]
    for n, fut in together:
        if fut.result() != alone[n]:
            fail(f"greedy {n}: batched {fut.result()!r} != alone {alone[n]!r}")
    for n in names[:2]:
        text, finish = ask(True, fmt(n, SCHEMAS[n]), 0.0, 0, stream=True)
        if (text, finish) != alone[n]:
            fail(f"greedy {n}: streamed {(text, finish)!r} != {alone[n]!r}")
    plain = ask(False, None, 0.0, 0, 30)
    if ask(False, {"type": "text"}, 0.0, 0, 30) != plain:
        fail("response_format text changed the greedy answer")
    print("greedy: batched, streamed and text checked", flush=True)


def refusals():
    bad = [
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "string", "pattern": "a+"}}}, "'pattern'"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "integer", "minimum": 3}}}, "'minimum'"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "$ref": "https://example.com/s.json"}}}, "'$ref'"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {}}, "required": ["b"]}}}, "'b'"),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, "schema"),
        ({"type": "xml"}, "xml"),
        ({"type": 3}, "response_format"),
    ]
    for rf, text in bad:
        try:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user",
                                                                   "content": "x"}],
                                           max_tokens=4, response_format=rf)
            fail(f"{rf}: accepted")
        except openai.BadRequestError as e:
            err = e.body if isinstance(e.body, dict) else {}
            if err.get("param") != "response_format" or text not in err.get("message", ""):
                fail(f"{rf}: 400 but {err}")
    print("refusals checked", flush=True)


def main():
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        refusals()
        batched_greedy(pool)
        samples(pool)
        json_objects(pool)
    if failures:
        print(f"client_schema: {len(failures)} failures")
        return 1
    print("client_schema: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
