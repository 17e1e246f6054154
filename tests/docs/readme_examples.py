#!/usr/bin/env python3
"""Runs every example command of README.md as a reader would copy it (ctest readme_examples).

A command is a line of a ``` block that starts with "$ " (continued by lines ending in "\\");
the lines after it, up to the next command, are what the README says it prints. Each command
runs with bash in a scratch folder laid out like the repository's root (examples/, tests/ and
build/ linked in), with the built relaxc first on PATH, as the README's set-up line says. A
command whose shown output holds "error:" must fail, and the rest must succeed; every shown line
without "..." and without a timing (ms, tok/s, a "created" stamp) must appear in what it printed.
A command ending in "&" (a server) runs in the background and is stopped at the end.

usage: readme_examples.py REPO_ROOT BUILD_DIR
"""
import os
import re
import signal
import subprocess
import sys
import tempfile

VOLATILE = re.compile(r"\.\.\.|\bms\b|tok/s|\"created\"")


def commands(readme):
    """(command, shown output lines) for every "$ " line of the README's plain ``` blocks"""
    out, fence, plain, cur = [], False, False, None
    lines = open(readme, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("```"):
            fence = not fence
            plain = fence and line.strip() == "```"  # ```c blocks are code, not commands
            cur = None
            continue
        if not plain:
            continue
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i < len(lines):
                cmd = cmd[:-1] + " " + lines[i].strip()
                i += 1
            cur = (cmd, [])
            out.append(cur)
        elif cur is not None:
            cur[1].append(line)
    return out


def main():
    root, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    work = tempfile.mkdtemp(prefix="rx-readme-")
    for d in ("examples", "tests"):
        os.symlink(os.path.join(root, d), os.path.join(work, d))
    os.symlink(build, os.path.join(work, "build"))
    env = dict(os.environ, PATH=build + os.pathsep + os.environ.get("PATH", ""))
    background, failed, ran = [], 0, 0
    try:
        for cmd, shown in commands(os.path.join(root, "README.md")):
            ran += 1
            if cmd.rstrip().endswith("&"):
                background.append(subprocess.Popen(
                    ["bash", "-c", cmd.rstrip()[:-1]], cwd=work, env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
                print(f"started: {cmd}")
                continue
            r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, capture_output=True,
                               text=True, timeout=600)
            got = r.stdout + r.stderr
            want_error = any("error:" in s for s in shown)
            problems = []
            if want_error and r.returncode == 0:
                problems.append("succeeded, but the README shows an error")
            if not want_error and r.returncode != 0:
                problems.append(f"exit status {r.returncode}")
            for s in shown:
                if s.strip() and not VOLATILE.search(s) and s.rstrip() not in got:
                    problems.append(f"does not print the README's line: {s.rstrip()}")
            if problems:
                failed += 1
                print(f"FAIL: {cmd}")
                for p in problems:
                    print(f"  {p}")
                print("  it printed:\n    " + "\n    ".join(got.splitlines()[-20:]))
            else:
                print(f"ok: {cmd}")
    finally:
        for p in background:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait()
    print(f"readme_examples: {ran - failed} passed, {failed} failed")
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
