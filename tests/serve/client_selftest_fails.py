#!/usr/bin/env python3
"""tests/serve/client_selftest_fails.py: the harness's own check (serve.harness_fails in
tests/serve/serve.cmake): a client script that reaches the server through the openai client and
then fails on purpose, exit status 3, which run_client.py must report as the test's failure."""
import os
import sys

from openai import OpenAI

client = OpenAI(base_url=os.environ["RX_SERVE_BASE_URL"],
                api_key=os.environ.get("RX_SERVE_API_KEY", "none"))
print("models:", [m.id for m in client.models.list().data])
print("deliberate failure (the harness must report it)")
sys.exit(3)
