#!/usr/bin/env python3
"""tests/chat/serve_chat.py MODEL.rxm MESSAGES_JSON RELAXC...: starts `RELAXC... serve MODEL.rxm --port 0`
(RELAXC...: lit's %relaxc, which in a sanitized build is a wrapper and its arguments before relaxc),
posts one greedy /v1/chat/completions request (max_tokens 16) with the given messages, prints
`prompt_tokens N` and the answer's content on its own line, and stops the server with SIGINT.
Python's standard library only (tests/lit/run/chat_template.test runs it in CI)."""
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request


def main():
    model, messages, relaxc = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    srv = subprocess.Popen(relaxc + ["serve", model, "--port", "0", "--model-name", "m"],
                           stderr=subprocess.PIPE, text=True)
    try:
        port = None
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            line = srv.stderr.readline()
            if not line:
                break
            m = re.search(r"127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            raise SystemExit("relaxc serve did not announce its port")
        body = json.dumps({"model": "m", "messages": messages, "max_tokens": 16,
                           "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            answer = json.load(r)
        print("prompt_tokens", answer["usage"]["prompt_tokens"])
        print(answer["choices"][0]["message"]["content"])
    finally:
        srv.send_signal(signal.SIGINT)
        srv.wait(timeout=60)


if __name__ == "__main__":
    main()
