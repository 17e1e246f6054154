#!/usr/bin/env python3
"""bench/gpu.sh --resume without a GPU (issue 31): a second call continues where the first
stopped, measuring only what the first lacks and keeping every row it measured.

  gpu_resume_test.py SOURCE_DIR

- bench/gpu_bench_resume.py (the standard library alone, as in CI, where numpy and torch are
  absent): a run's units are written, read back as an earlier report, counted as done, carried in
  place (their rows keep their own run's command and date), replaced by a run that measures them
  again, and ordered by part (most important first) whatever order they were met in; a model's
  sub-units and a failed case (no unit) are measured again; sections merge by title;
- bench/gpu.sh's argument handling before the build: --resume of a missing path, of a report
  written before --resume existed, and a bad --budget each stop at once with exit status 2 and a
  message, so a GPU session never spends its build time on a typo.
Prints each failed check and exits 1."""
import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAILED: {what}")


def row(date, what, cmd):
    return [date, "NVIDIA H200", what, "1 µs", f"`{cmd}`"]


def first_run(R, parts):
    """The units a first run writes: it measured copy, the model's relaxc and eager sub-units and
    two GEMM cases, then lost the machine."""
    u = R.Units(parts, None, run=0)
    u.add_row("copy@run0", "copy", row("d1", "copy bandwidth", "gpu.sh"))
    u.put("gemm/cuda/gemm_f16_n1", "gemm", record={"cells": ["f16 n=1"], "section": "gemm"},
          rows=[row("d1", "gemm n=1", "gpu.sh")])
    u.put("model/7b", "model", record={"done": ["relaxc", "eager"], "runs": {"relaxc": 0}},
          rows=[row("d1", "decode", "gpu.sh")])
    u.put("gemm/cuda/gemm_f16_n16", "gemm", record={"cells": ["f16 n=16"], "section": "gemm"},
          rows=[row("d1", "gemm n=16", "gpu.sh")])
    return u


def test_units(R, tmp):
    parts = ("copy", "model", "gemm", "attention")
    u = first_run(R, parts)
    # parts in priority order, whatever the order met: copy, model, then gemm's two rows in order
    whats = [r[2] for r in u.rows()]
    check(whats == ["copy bandwidth", "decode", "gemm n=1", "gemm n=16"],
          f"rows in part order, then met order: {whats}")
    check(not u.done("gemm/cuda/gemm_f16_n1"), "a unit of this run is not 'done earlier'")
    report = os.path.join(tmp, "gpu-results.json")
    with open(report, "w") as f:
        json.dump({"format": R.FORMAT, "version": R.VERSION,
                   "runs": [{"command": "gpu.sh", "smoke": False, "torch_device": "NVIDIA H200"}],
                   "units": u.entries,
                   "sections": [["gemm", "gemm on cuda:0", "table 1"],
                                ["model", "model: 7B", "model table 1"]]}, f)

    prev = R.Previous(tmp)  # the directory, as gpu.sh --resume DIR gives it
    check(prev.path == report, f"Previous finds the report in its directory: {prev.path}")
    check(R.Previous(report[:-5] + ".md").path == report, "Previous takes the .md too")
    check(prev.summary() == {"copy": 1, "gemm": 2, "model": 1}, f"summary: {prev.summary()}")
    check(prev.device == "NVIDIA H200" and not prev.smoke, "the earlier run's device and kind")

    v = R.Units(parts, prev, run=1)
    check(v.done("gemm/cuda/gemm_f16_n1") and v.done("model/7b"), "earlier units are done")
    check(not v.done("gemm/cuda/gemm_f16_n64"), "a unit the first run lacks is not done")
    # the second run: carries n=1, measures n=64 (a case the first did not reach), carries n=16
    c = v.carry("gemm/cuda/gemm_f16_n1")
    check(c is not None and c["record"]["cells"] == ["f16 n=1"], "carry returns the record")
    v.put("gemm/cuda/gemm_f16_n64", "gemm", record={"cells": ["f16 n=64"]},
          rows=[row("d2", "gemm n=64", "gpu.sh --resume R")])
    v.carry("gemm/cuda/gemm_f16_n16")
    # the model: re-rendered by the second run (its rows replace the first's)
    v.put("model/7b", "model", record={"done": ["relaxc", "eager", "compile:decode"]},
          rows=[row("d2", "decode with torch.compile", "gpu.sh --resume R")])
    v.add_row("copy@run1", "copy", row("d2", "copy bandwidth", "gpu.sh --resume R"))
    got = [(r[0], r[2], r[4]) for r in v.rows()]
    want = [("d1", "copy bandwidth", "`gpu.sh`"),
            ("d2", "copy bandwidth", "`gpu.sh --resume R`"),
            ("d2", "decode with torch.compile", "`gpu.sh --resume R`"),
            ("d1", "gemm n=1", "`gpu.sh`"), ("d2", "gemm n=64", "`gpu.sh --resume R`"),
            ("d1", "gemm n=16", "`gpu.sh`")]
    check(got == want, f"merged rows keep their run's date and command, in place:\n  {got}\n  "
                       f"want {want}")
    check(v.carry("gemm/cuda/gemm_f16_n64") is None, "a unit of this run is not carried")
    recs = [rec["cells"][0] for _, rec in v.records("gemm")]
    check(recs == ["f16 n=1", "f16 n=64", "f16 n=16"], f"the gemm table's records: {recs}")

    secs = R.merge_sections(parts, [("gemm", "gemm on cuda:0", "table 2"),
                                    ("copy", "copy", "copy 2")],
                            [["gemm", "gemm on cuda:0", "table 1"],
                             ["model", "model: 7B", "model table 1"]])
    check([(t, x) for _, t, x in secs] == [("copy", "copy 2"), ("model: 7B", "model table 1"),
                                           ("gemm on cuda:0", "table 2")],
          f"sections: this run's replace the earlier ones of the same title, part order: {secs}")


def test_errors(R, tmp):
    old = os.path.join(tmp, "old.json")
    with open(old, "w") as f:
        json.dump({"parts": {}, "rows": []}, f)  # a report of before --resume
    for path, want in ((old, "cannot be resumed"), (os.path.join(tmp, "none.json"), "no such"),
                       (os.path.join(tmp, "empty"), "no report")):
        os.makedirs(os.path.join(tmp, "empty"), exist_ok=True)
        try:
            R.Previous(path)
            check(False, f"Previous({path}) refuses")
        except ValueError as e:
            check(want in str(e), f"Previous({path}) says '{want}': {e}")


def test_gpu_sh(src, tmp):
    old = os.path.join(tmp, "old")
    os.makedirs(old, exist_ok=True)
    with open(os.path.join(old, "gpu-results.json"), "w") as f:
        json.dump({"parts": {}}, f)
    sh = os.path.join(src, "bench", "gpu.sh")
    for args, want in ((["--resume", os.path.join(tmp, "missing")], "no report"),
                       (["--resume", old], "no report of this script with units"),
                       (["--budget", "ten"], "whole seconds"), (["--bogus"], "unknown option")):
        build = os.path.join(tmp, "build-gpu")
        p = subprocess.run(["bash", sh, "--build-dir", build] + args, capture_output=True,
                           text=True, timeout=60, cwd=tmp)
        check(p.returncode == 2 and want in p.stderr,
              f"gpu.sh {' '.join(args)}: exit 2 and '{want}' (got {p.returncode}: "
              f"{p.stderr.strip()[-200:]})")
        check(not os.path.exists(build), f"gpu.sh {' '.join(args)} stopped before the build")


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    src = os.path.abspath(argv[1])
    sys.path.insert(0, os.path.join(src, "bench"))
    import gpu_bench_resume as R
    with tempfile.TemporaryDirectory() as tmp:
        test_units(R, tmp)
        test_errors(R, tmp)
        test_gpu_sh(src, tmp)
    if failures:
        print(f"gpu_resume: {len(failures)} checks failed")
        return 1
    print("gpu_resume: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
