#!/usr/bin/env python3
"""Pairs AutoCompress and Minitron per run of bench/vs_minitron_hybrid.sh (report.json's
"comparison" rows of `compress --method both` on a Nemotron-H teacher) and prints, per setting,
the mean ± standard error over seeds of each method and of their paired difference.

  python3 bench/vs_minitron_hybrid.py OUT [--json FILE]
"""
import argparse
import json
import math
from pathlib import Path

METRICS = [  # (key in a comparison row, label, lower is better)
    ("kl_to_teacher", "held-out KL to the teacher after distillation (nats/token)", True),
    ("kl_after_pruning", "held-out KL after pruning, before distillation", True),
    ("perplexity", "held-out perplexity", True),
    ("search_tokens", "search tokens", True),
    ("parameters", "parameters", None),
]


def mean_se(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, float("nan")
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = {}
    for report in sorted(Path(a.out, "runs").glob("*/report.json")):
        setting, seed = report.parent.name.rsplit("-s", 1)
        r = json.loads(report.read_text())
        rows = {c["method"]: c for c in r["comparison"]}
        if set(rows) != {"autocompress", "minitron"}:
            raise SystemExit(f"{report}: expected an autocompress and a minitron row, found {sorted(rows)}")
        runs.setdefault(setting, []).append((int(seed), rows, r))
    summary = {}
    for setting, rs in sorted(runs.items()):
        rs.sort(key=lambda t: t[0])
        seeds = [s for s, _, _ in rs]
        print(f"\n**{setting}** (seeds {', '.join(map(str, seeds))}; teacher "
              f"{rs[0][2]['teacher']['describe']})\n")
        print("| | AutoCompress | Minitron | AutoCompress − Minitron (paired) |\n|---|---|---|---|")
        entry = {"seeds": seeds, "metrics": {}, "architectures": {}}
        for key, label, lower in METRICS:
            ac = [float(rows["autocompress"][key]) for _, rows, _ in rs]
            mi = [float(rows["minitron"][key]) for _, rows, _ in rs]
            d = [x - y for x, y in zip(ac, mi)]
            (am, ase), (mm, mse), (dm, dse) = mean_se(ac), mean_se(mi), mean_se(d)
            verdict = ""
            if lower is not None and dse == dse and abs(dm) > dse and dm != 0:
                verdict = " (AutoCompress better)" if (dm < 0) == lower else " (Minitron better)"
            fmtv = "{:.0f}" if key in ("search_tokens", "parameters") else "{:.1f}" if key == "perplexity" else "{:.5f}"
            cell = lambda m, s: f"{fmtv.format(m)} ± {fmtv.format(s)}"
            print(f"| {label} | {cell(am, ase)} | {cell(mm, mse)} | {cell(dm, dse)}{verdict} |")
            entry["metrics"][key] = {"autocompress": ac, "minitron": mi, "difference_mean": dm,
                                     "difference_se": dse}
        for m in ("autocompress", "minitron"):
            entry["architectures"][m] = [rows[m]["describe"] for _, rows, _ in rs]
            print(f"\n{m} architectures: " + "; ".join(f"`{x}`" for x in entry["architectures"][m]))
        # Where AutoCompress's pick came from: the differentiable search or one of the descents.
        entry["autocompress_source"] = [r["plan"]["label"] for _, _, r in rs]
        print("\nautocompress picked by: " + "; ".join(entry["autocompress_source"]))
        summary[setting] = entry
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
