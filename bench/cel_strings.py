#!/usr/bin/env python3
"""The re-review's string-function attacks (cel_attack.py's rules and sizes), each event posted
5 times with its rule selecting it and 5 times with the same data and no rule selecting it
(label attack=none): the difference of the medians is the evaluation's own time.
Usage: DRIFT_SENTINEL_BIN=target/release/drift-sentinel python bench/cel_strings.py [case ...]
(BENCHMARKS.md, "Hostile CEL": the string functions before and after)"""
import sys, statistics, tempfile
from pathlib import Path
sys.argv, cases = sys.argv[:1], sys.argv[1:]
src = (Path(__file__).resolve().parent / "cel_attack.py").read_text().replace("\nmain()", "\n")
attack = type(sys)("attack")
attack.__dict__["__file__"] = str(Path(__file__).resolve().parent / "cel_attack.py")
exec(compile(src, "cel_attack.py", "exec"), attack.__dict__)
cases = cases or ["indexof", "lastindexof", "lastindexof2", "replace", "split", "splitsep"]
with tempfile.TemporaryDirectory(prefix="celab-") as d:
    s = attack.Sentinel(Path(d), "rules:\n  invariants:\n" + "".join(attack.rule_yaml(c) for c in dict.fromkeys(cases)))
    s.start()
    try:
        for round_, c in enumerate(cases):
            before_errors = attack.metric(s, "drift_sentinel_invariant_errors_total", rule=f"attack-{c}")
            before_budget = attack.metric(s, "drift_sentinel_invariant_errors_total", rule=f"attack-{c}", kind="budget")
            times = {}
            for label in (c, "none"):
                took = []
                for i in range(5):
                    obj = attack.cm(label, attack.SIZES[c], name=f"cm-{c}-{label}-{round_}")
                    st, t, _ = attack.post(s, obj)
                    assert st == 202, st
                    took.append(t * 1000)
                times[label] = statistics.median(took)
            errors = attack.metric(s, "drift_sentinel_invariant_errors_total", rule=f"attack-{c}") - before_errors
            budget = attack.metric(s, "drift_sentinel_invariant_errors_total", rule=f"attack-{c}", kind="budget") - before_budget
            print(f"{c}: with the rule {times[c]:.1f} ms, without {times['none']:.1f} ms "
                  f"(evaluation ~{times[c]-times['none']:.1f} ms); errors {errors:.0f} of 5, budget {budget:.0f}", flush=True)
    finally:
        s.stop()
