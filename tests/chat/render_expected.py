#!/usr/bin/env python3
"""tests/chat/render_expected.py: renders every template of tests/chat/templates/ with every
conversation of tests/chat/conversations/ by Python's jinja2, configured as transformers'
apply_chat_template configures it (ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, the loopcontrols extension, transformers' tojson, raise_exception and
strftime_now), into tests/chat/expected/: TEMPLATE__CONVERSATION.txt (the exact bytes) or
TEMPLATE__CONVERSATION.err (first line "raise" and the raise_exception message, or "error" and
jinja2's message, for a render that fails). unit.test_chat_template renders the same pairs with
the C engine (runtime/llm/jinja*.c) and compares byte for byte.

The bos_token and eos_token are fixed ("<s>", "</s>"), and strftime_now's clock is NOW (UTC), the
same value the C test passes. Run: python3 tests/chat/render_expected.py (requirements.txt)."""
import json
import os
import sys
from datetime import datetime, timezone

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1717243200  # 2024-06-01 12:00:00 UTC; tests/unit/test_chat_template.c uses the same
BOS, EOS = "<s>", "</s>"
HERE = os.path.dirname(os.path.abspath(__file__))


class RaiseError(Exception):
    pass


def environment():
    def raise_exception(message):
        raise RaiseError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(NOW, tz=timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = environment()
    out_dir = os.path.join(HERE, "expected")
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        os.remove(os.path.join(out_dir, f))
    templates = sorted(os.listdir(os.path.join(HERE, "templates")))
    convs = sorted(os.listdir(os.path.join(HERE, "conversations")))
    for t in templates:
        with open(os.path.join(HERE, "templates", t), encoding="utf-8", newline="") as fh:
            tmpl = env.from_string(fh.read())
        for c in convs:
            with open(os.path.join(HERE, "conversations", c), encoding="utf-8") as fh:
                ctx = json.load(fh)
            ctx.setdefault("bos_token", BOS)
            ctx.setdefault("eos_token", EOS)
            name = t.rsplit(".", 1)[0] + "__" + c.rsplit(".", 1)[0]
            try:
                text, ext = tmpl.render(**ctx), ".txt"
            except RaiseError as e:
                text, ext = "raise\n" + str(e) + "\n", ".err"
            except Exception as e:  # a type error, an undefined attribute: C must fail too
                text, ext = "error\n" + type(e).__name__ + ": " + str(e) + "\n", ".err"
            with open(os.path.join(out_dir, name + ext), "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
    print(f"{len(templates)} templates x {len(convs)} conversations -> {out_dir}")


if __name__ == "__main__":
    sys.exit(main())
