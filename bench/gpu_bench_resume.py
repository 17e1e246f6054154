"""bench/gpu_bench_resume.py: what lets bench/gpu.sh continue an earlier run (--resume), so that
a session that loses the GPU machine loses no measured row.

A report's JSON (bench/gpu_bench.py writes it beside the Markdown after every measured row) holds
its *units*: one per table row (a kernel case on one device), per model measurement (relaxc's
decode and prefill, transformers eager, each torch.compile graph, graphs off, ...) and per run's
references (copy bandwidth, matrix peak). Each unit keeps the RESULTS.md rows it gave, its raw
record (with the table cells as they were rendered) and the run that measured it. A resumed run
reads them back (Previous), skips the units done, measures the others, and writes one report
holding both: every row keeps the date and the exact command of the run that measured it, and
every ratio the references of its own run.

Standard library only: tests/tools/gpu_resume_test.py runs it in CI, where numpy and torch are
absent.
"""

import json
import os

FORMAT = "relaxc-gpu-bench"
VERSION = 2


def report_json(path):
    """The JSON of a report given as its directory, its .md or its .json."""
    if os.path.isdir(path):
        cands = sorted(f for f in os.listdir(path) if f.endswith(".json"))
        named = [f for f in cands if f.startswith("gpu-results")]
        cands = named or cands
        if not cands:
            raise ValueError(f"{path}: no report (.json) in this directory")
        if len(cands) > 1:  # the newest: a resumed run's report holds the earlier ones
            cands.sort(key=lambda f: os.path.getmtime(os.path.join(path, f)))
        return os.path.join(path, cands[-1])
    if path.endswith(".md"):
        path = path[:-3] + ".json"
    if not os.path.exists(path):
        raise ValueError(f"{path}: no such report")
    return path


class Previous:
    """An earlier report read back: its runs, its units and its sections."""

    def __init__(self, path):
        self.path = report_json(path)
        with open(self.path) as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{self.path}: not JSON ({e})") from e
        if data.get("format") != FORMAT:
            raise ValueError(f"{self.path}: not a report of bench/gpu.sh with units (format "
                             f"{FORMAT!r}; reports written before --resume existed cannot be "
                             f"resumed)")
        if data.get("version", 0) > VERSION:
            raise ValueError(f"{self.path}: report version {data.get('version')}, newer than "
                             f"this script's {VERSION}")
        self.runs = data.get("runs", [])
        self.units = data.get("units", {})
        self.sections = data.get("sections", [])
        self.smoke = bool(self.runs and self.runs[0].get("smoke"))
        self.device = self.runs[0].get("torch_device") if self.runs else None

    def done(self, unit):
        return unit in self.units

    def summary(self):
        """Units done per part, for the log: {"model": 5, "gemm": 30, ...}."""
        out = {}
        for u in self.units.values():
            out[u.get("part", "?")] = out.get(u.get("part", "?"), 0) + 1
        return out


class Units:
    """The units of this report: carried from a Previous, or measured now. Their rows, in the
    order of the parts, then in the order they were met, make the report's last table."""

    def __init__(self, parts_order, prev=None, run=0):
        self.parts_order = list(parts_order)
        self.prev = prev
        self.run = run          # index of this run among the report's runs
        self.entries = {}       # unit -> {"part", "rows", "record", "run"}
        self.met = []           # units in the order this run met them
        if prev:
            for u, e in prev.units.items():
                self.entries[u] = dict(e)

    def done(self, unit):
        """Measured by an earlier run (and not since replaced)."""
        e = self.entries.get(unit)
        return bool(e) and e.get("run", 0) != self.run

    def meet(self, unit):
        if unit not in self.met:
            self.met.append(unit)

    def carry(self, unit):
        """The earlier entry of unit, met here so that its rows stay in place; None if none."""
        if not self.done(unit):
            return None
        self.meet(unit)
        return self.entries[unit]

    def put(self, unit, part, record=None, rows=None):
        """unit measured by this run (replacing an earlier entry)."""
        self.entries[unit] = {"part": part, "rows": list(rows or []), "record": record,
                              "run": self.run}
        self.meet(unit)
        return self.entries[unit]

    def add_row(self, unit, part, row):
        e = self.entries.get(unit)
        if e is None or e.get("run") != self.run:
            e = self.put(unit, part)
        e["rows"].append(list(row))

    def ordered(self):
        """Units in part order; within a part, those of earlier runs that this run did not meet
        first (in their earlier order: a copy row of run 1 before run 2's), then those met, in
        the order met (a carried case in its place among the measured ones)."""
        rank = {p: i for i, p in enumerate(self.parts_order)}
        seen = {u: (1, i) for i, u in enumerate(self.met)}
        for i, u in enumerate(u for u in self.entries if u not in seen):
            seen[u] = (0, i)
        return sorted(self.entries, key=lambda u: (rank.get(self.entries[u].get("part"), 99),
                                                   seen[u]))

    def rows(self):
        return [tuple(r) for u in self.ordered() for r in self.entries[u]["rows"]]

    def records(self, part):
        return [(u, self.entries[u]["record"]) for u in self.ordered()
                if self.entries[u].get("part") == part]


def merge_sections(parts_order, current, previous):
    """The report's sections: this run's (part, title, text), and each earlier section whose
    title this run did not write again, in part order."""
    titles = {t for _, t, _ in current}
    rank = {p: i for i, p in enumerate(parts_order)}
    allsec = list(current) + [tuple(s) for s in previous if s[1] not in titles]
    order = {id(s): i for i, s in enumerate(allsec)}
    return sorted(allsec, key=lambda s: (rank.get(s[0], 99), order[id(s)]))
