"""Judging one case of the core fuzzer: failures break the scan's promise; notes are allowed
differences worth counting (fpclass stricter than the oracle)."""

from __future__ import annotations

import collections

from fuzz_supervisor import MEMORY_MB, SCAN_SECONDS, Outcome


def promise_failures(o: Outcome) -> tuple[list, bool]:
    """([(failure class, detail)] of a scan that crashed, hung, raised, passed MEMORY_MB or
    SCAN_SECONDS, reported an internal error or exited with another code than 0, 1, 2; whether
    the scan's answer can be judged further: not after a crash, hang or raise). Every fuzzer's
    judge starts here."""
    s = o.scan
    if o.failure:
        return [("crash or hang", o.failure)], False
    if "raised" in s:
        return [("scan raised", s["raised"])], False
    fails = []
    if s.get("maxrss_mb", 0) > MEMORY_MB:
        fails.append(("memory", f"peak RSS {s['maxrss_mb']:.0f} MB"))
    if s.get("seconds", 0) > SCAN_SECONDS:
        fails.append(("slow", f"{s['seconds']:.1f} s"))
    reasons = s["problems"] + [t[5] for t in s["tensors"]]
    internal = [r for r in reasons if r and "internal error" in r]
    if internal:
        fails.append(("internal error", internal[0]))
    if s["exit"] not in (0, 1, 2):
        fails.append(("exit code", str(s["exit"])))
    return fails, True


def judge(case_id: str, o: Outcome) -> tuple[list, list]:
    """([(failure class, detail)], [(note class, detail)]) for one case's outcome."""
    notes = []
    s, orc = o.scan, o.oracle
    fails, judged = promise_failures(o)
    if not judged:
        return fails, notes
    clean = s["exit"] == 0
    if orc.get("ok") is None:
        if clean:
            notes.append(("clean, oracle unavailable", orc.get("reason", "")))
        return fails, notes
    if orc["ok"] is False:
        if clean:
            fails.append((f"clean but the {orc['format']} oracle rejects", orc["reason"]))
        return fails, notes
    ours: dict = {}
    for name, status, nan, pinf, ninf, reason, dtype in s["tensors"]:
        ours.setdefault(name, []).append((status, (nan, pinf, ninf), reason, dtype))
    theirs = {k: [tuple(c) for c in v] for k, v in orc["tensors"].items()}
    file_problem = bool(s["problems"])
    in_training = {k: [tuple(c) for c in v] for k, v in orc.get("training", {}).items()}
    for name, expected in theirs.items():
        mine = ours.get(name)
        if mine is None:
            hidden = sum(map(sum, expected))
            if clean or (hidden and not file_problem):
                fails.append(("training_info tensors never read" if in_training.get(name)
                              == expected else "tensor missing from the report",
                              f"{name!r}: oracle counts {expected}, fpclass exit {s['exit']}"))
            else:
                notes.append(("tensor missing, file reported", name))
            continue
        if any(m[0] != "checked" for m in mine):
            if any(m[0] == "unchecked" for m in mine):
                notes.append(("stricter (unchecked, oracle reads it)",
                              next(m[2] for m in mine if m[0] == "unchecked")))
            continue
        got = sorted(m[1] for m in mine)
        verdict = _compare(got, expected)
        if verdict and in_training.get(name) and _compare(
                got, _without(expected, in_training[name])) != "counts differ":
            verdict = "training_info tensors never read"
        if verdict:
            fails.append((verdict, f"{name!r} ({mine[0][3]}): fpclass {got}, oracle {sorted(expected)}"))
    for name in orc.get("unverified", []):
        if clean:
            notes.append(("clean, tensor unverified by the oracle", name))
    if clean and orc.get("soft"):
        notes.append((f"clean, {orc['soft'].split(':')[0]} refuses (other reader accepts)", orc["soft"]))
    if not clean and not any(f for f in fails) and s["problems"]:
        notes.append(("stricter (file problem, oracle reads it)", s["problems"][0]))
    return fails, notes


def _compare(got, expected):
    """None when fpclass's counts for one name equal the oracle's; else the failure class."""
    if got == sorted(expected):
        return None
    if len(got) < len(expected) and [sum(c) for c in zip(*got)] == [sum(c) for c in zip(*expected)]:
        return "tensors of one name merged into one result"
    return "counts differ"


def _without(expected, drop):
    rest = list(expected)
    for c in drop:
        rest.remove(c)
    return rest


def failure_kind(cls: str, detail: str) -> str:
    """A failure class plus the gist of its detail (names and numbers dropped), so that distinct
    causes of one class are listed apart."""
    import re
    gist = re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "X", detail))
    if cls.startswith("clean but"):
        return f"{cls}: {gist[:70]}"
    if cls == "internal error":
        return f"{cls}: {gist.split(':')[1].strip() if ':' in gist else gist}"
    return cls


def tally(cases, outcomes: dict, judge_case, seed_failure=None) -> tuple:
    """(per-format Counter of cases / clean / found / inconclusive / failures, {(format, failure
    kind): [(case id, detail)]}, Counter of (format, note class)) for judged cases [(id, path,
    format)]. `judge_case(case_id, outcome)` gives (failures, notes); `seed_failure(case_id,
    exit_code, outcome)` a (class, detail) failure for an unmutated seed read wrongly, or None."""
    table = collections.defaultdict(collections.Counter)
    failures, notes = collections.defaultdict(list), collections.Counter()
    for case_id, _, fmt in cases:
        o = outcomes.get(case_id)
        assert o is not None, f"{case_id}: no outcome"
        row = table[fmt]
        row["cases"] += 1
        exit_code = o.scan.get("exit")
        row[{0: "clean", 1: "found", 2: "inconclusive"}.get(exit_code, "other")] += 1
        fails, case_notes = judge_case(case_id, o)
        misread = seed_failure(case_id, exit_code, o) if seed_failure is not None else None
        if misread:
            fails = fails or [misread]
        for cls, detail in fails:
            row["failures"] += 1
            failures[(fmt, failure_kind(cls, detail))].append((case_id, detail))
        for cls, _ in case_notes:
            notes[(fmt, cls)] += 1
    return table, failures, notes


def print_table(formats, table, notes) -> None:
    """The per-format table of `tally`, then the notes (allowed differences)."""
    print(f"{'format':<12} {'cases':>6} {'clean':>6} {'found':>6} {'inconcl.':>8} {'failures':>8}")
    for fmt in formats:
        r = table[fmt]
        print(f"{fmt:<12} {r['cases']:>6} {r['clean']:>6} {r['found']:>6} {r['inconclusive']:>8} "
              f"{r['failures']:>8}")
    if notes:
        print("notes (allowed differences):")
        for (fmt, cls), n in sorted(notes.items()):
            print(f"  {fmt:<12} {cls}: {n}")
