#!/usr/bin/env python3
"""Tables and plots the AutoCompress vs Minitron study (bench/vs_minitron.sh).

Reads OUT/runs/SETTING-sSEED/report.json (compress --method both), OUT/ood/SETTING-sSEED.json
(eval on Moby Dick) and OUT/tasks/SETTING-sSEED.json (eval --tasks on the shared task files; the
teacher's in OUT/tasks/teacher.json), and prints one markdown table: per setting, mean +- standard error over the
seeds of each method's metrics, and the paired difference AutoCompress - Minitron (the mean of
the per-seed differences, with the standard error of that mean). Writes the numbers as JSON
(--json) and a plot of the paired differences (--svg).

usage: bench/vs_minitron.py OUT [--json F.json] [--svg F.svg]

Mean task accuracy: the mean over the task families of acc_norm (multiple choice: accuracy of
the per-byte log-likelihood) or acc (cloze), each family weighted equally. The cost is the binding
limit's ratio: the largest over the limits of value / limit (for a throughput floor, limit /
value), measured where the run measured (cpu-local), predicted elsewhere; <= 1 meets every limit.
"""
import argparse
import glob
import json
import math
import os
import platform
import re
import sys
from datetime import datetime, timezone

METHODS = ("autocompress", "minitron")
# (key, label, format, lower is better)
METRICS = [
    ("task_acc", "mean task accuracy", "{:.4f}", False),
    ("kl", "held-out KL to the teacher (nats/token)", "{:.4f}", True),
    ("ppl", "held-out perplexity", "{:.3f}", True),
    ("kl_after_prune", "KL after pruning, before distillation", "{:.3f}", True),
    ("ood_bpb", "Moby Dick bits per byte", "{:.4f}", True),
    ("ood_kl", "Moby Dick KL to the teacher", "{:.4f}", True),
    ("search_tokens", "search tokens", "{:.0f}", True),
    ("cost_ratio", "cost / limit (binding limit)", "{:.3f}", None),
    ("params_m", "parameters (M)", "{:.2f}", None),
]


def mean_se(xs):
    n = len(xs)
    if n == 0:
        return None, None
    m = sum(xs) / n
    if n < 2:
        return m, None
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def task_scores(path):
    """{model path: {family: (accuracy, its standard error over items, items)}} of an eval --out
    file with tasks: acc_norm (multiple choice), else acc (cloze)."""
    if not os.path.exists(path):
        return {}
    out = {}
    for m in json.load(open(path)).get("models", []):
        per = {}
        for t in m.get("tasks", []):
            v = t["metrics"].get("acc_norm") or t["metrics"]["acc"]
            per[t["task"]] = (v["value"], v["stderr"], t["n"])
        out[os.path.normpath(m.get("model", ""))] = per
    return out


def task_accuracy(per):
    """(mean over families, {family: accuracy}) of a task_scores entry."""
    acc = {k: v[0] for k, v in per.items()}
    return (sum(acc.values()) / len(acc) if acc else None), acc


def cost_ratio(row, report):
    measured = row.get("measured")
    limits = report["scenario"]["limits"] if measured else report["scenario"]["limits_for_search"]
    fig = measured if measured else row["predicted"]
    worst, which = 0.0, None
    for name, limit in limits.items():
        if name == "min_throughput_tokens_per_s":
            r = limit / fig["throughput_tokens_per_s"]
        else:
            r = fig[name] / limit
        if r > worst:
            worst, which = r, name
    return worst, which, "measured" if measured else "predicted"


def ood_of(path):
    """{model path: (bits per byte, KL)} of an eval --out file."""
    if not os.path.exists(path):
        return {}
    j = json.load(open(path))
    out = {}
    for m in j.get("models", []):
        e = m.get("eval", {})
        out[m.get("model", "")] = (e.get("bits_per_byte"), e.get("kl_to_teacher"))
    return out


def collect(out_dir):
    runs = []
    for rep in sorted(glob.glob(os.path.join(out_dir, "runs", "*", "report.json"))):
        run_dir = os.path.dirname(rep)
        m = re.match(r"(.+)-s(\d+)$", os.path.basename(run_dir))
        if not m:
            continue
        setting, seed = m.group(1), int(m.group(2))
        report = json.load(open(rep))
        ood = ood_of(os.path.join(out_dir, "ood", f"{setting}-s{seed}.json"))
        scored = task_scores(os.path.join(out_dir, "tasks", f"{setting}-s{seed}.json"))
        rows = {r["method"]: r for r in report["comparison"]}
        if set(rows) != set(METHODS):
            sys.exit(f"{rep}: expected the rows {METHODS}, found {sorted(rows)}")
        for method, row in rows.items():
            ratio, binding, how = cost_ratio(row, report)
            model = os.path.join(run_dir, row["model"])
            per = scored.get(os.path.normpath(model), {})
            acc, per_task = task_accuracy(per)
            bpb, okl = next((v for k, v in ood.items() if os.path.normpath(k) == os.path.normpath(model)),
                            (None, None))
            runs.append({
                "setting": setting, "seed": seed, "method": method, "config": row["config"],
                "params_m": row["parameters"] / 1e6, "search_tokens": row["search_tokens"],
                "kl": row["eval"]["kl_to_teacher"], "ppl": row["eval"]["perplexity"],
                "bpb": row["eval"].get("bits_per_byte"),
                "kl_after_prune": row["eval_after_prune"]["kl_to_teacher"],
                "task_acc": acc, "tasks": per_task,
                "task_item_se": {k: v[1] for k, v in per.items()}, "task_items": {k: v[2] for k, v in per.items()},
                "ood_bpb": bpb, "ood_kl": okl,
                "cost_ratio": ratio, "binding_limit": binding, "cost_source": how,
                "minutes": report.get("total_seconds", 0) / 60,
            })
    return runs


def summarize(runs):
    settings = []
    for r in runs:
        if r["setting"] not in settings:
            settings.append(r["setting"])
    summary = {}
    for s in settings:
        by = {(r["seed"], r["method"]): r for r in runs if r["setting"] == s}
        seeds = sorted({seed for seed, _ in by if all((seed, m) in by for m in METHODS)})
        entry = {"seeds": seeds, "metrics": {}}
        for key, _, _, _ in METRICS:
            vals = {m: [by[(sd, m)][key] for sd in seeds if by[(sd, m)][key] is not None] for m in METHODS}
            diffs = [by[(sd, "autocompress")][key] - by[(sd, "minitron")][key] for sd in seeds
                     if by[(sd, "autocompress")][key] is not None and by[(sd, "minitron")][key] is not None]
            e = {m: dict(zip(("mean", "se"), mean_se(vals[m]))) for m in METHODS}
            e["diff"] = dict(zip(("mean", "se"), mean_se(diffs)))
            entry["metrics"][key] = e
        tasks = sorted({t for r in runs if r["setting"] == s for t in r["tasks"]})
        entry["tasks"] = {}
        for t in tasks:
            diffs = [by[(sd, "autocompress")]["tasks"].get(t, float("nan")) -
                     by[(sd, "minitron")]["tasks"].get(t, float("nan")) for sd in seeds]
            item_se = [r["task_item_se"][t] for r in by.values() if t in r.get("task_item_se", {})]
            items = [r["task_items"][t] for r in by.values() if t in r.get("task_items", {})]
            entry["tasks"][t] = {m: dict(zip(("mean", "se"), mean_se([by[(sd, m)]["tasks"].get(t, float("nan")) for sd in seeds])))
                                 for m in METHODS}
            entry["tasks"][t]["diff"] = dict(zip(("mean", "se"), mean_se(diffs)))
            entry["tasks"][t]["items"] = max(items) if items else None
            entry["tasks"][t]["largest_item_se"] = max(item_se) if item_se else None
        a, b = entry["metrics"]["search_tokens"]["autocompress"]["mean"], entry["metrics"]["search_tokens"]["minitron"]["mean"]
        entry["search_token_ratio"] = b / a if a else None  # Minitron's / AutoCompress's
        entry["configs"] = {m: [by[(sd, m)]["config"] for sd in seeds] for m in METHODS}
        entry["binding"] = {m: [f'{by[(sd, m)]["binding_limit"]} ({by[(sd, m)]["cost_source"]})' for sd in seeds]
                            for m in METHODS}
        summary[s] = entry
    return summary


def finite(x):
    """x with every NaN or infinity replaced by None (JSON has neither)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def cell(fmt, e):
    if e["mean"] is None:
        return "—"
    s = fmt.format(e["mean"])
    return s + (" ± " + fmt.format(e["se"]) if e["se"] is not None else "")


def markdown(summary):
    lines = []
    for s, e in summary.items():
        lines.append(f"\n**{s}** (seeds {', '.join(map(str, e['seeds']))}; "
                     f"binding limit: {e['binding']['autocompress'][0] if e['binding']['autocompress'] else '—'})\n")
        lines.append("| | AutoCompress | Minitron | AutoCompress − Minitron (paired) |")
        lines.append("|---|---|---|---|")
        for key, label, fmt, lower in METRICS:
            m = e["metrics"][key]
            better = ""
            d = m["diff"]
            if lower is not None and d["mean"] is not None and d["se"]:
                good = d["mean"] < 0 if lower else d["mean"] > 0
                if abs(d["mean"]) > d["se"]:
                    better = " (AutoCompress better)" if good else " (Minitron better)"
            lines.append(f"| {label} | {cell(fmt, m['autocompress'])} | {cell(fmt, m['minitron'])} | "
                         f"{cell(fmt, d)}{better} |")
        for t, m in e["tasks"].items():
            n = f" ({m['items']} items, SE over items ≤ {m['largest_item_se']:.4f})" if m.get("items") else ""
            lines.append(f"| task {t}{n} | {cell('{:.4f}', m['autocompress'])} | {cell('{:.4f}', m['minitron'])} | "
                         f"{cell('{:.4f}', m['diff'])} |")
        if e["search_token_ratio"]:
            lines.append(f"| search tokens, Minitron / AutoCompress | | | {e['search_token_ratio']:.2f}x |")
        for m in METHODS:
            lines.append(f"\n{m} architectures: " + "; ".join(f"`{c}`" for c in e["configs"][m]))
    return "\n".join(lines) + "\n"


def svg(summary, path):
    """Four panels (mean task accuracy, held-out KL, Moby Dick bits/byte, search tokens): per
    setting, the paired difference AutoCompress - Minitron with +-1 standard error (tokens: the
    ratio Minitron / AutoCompress)."""
    panels = [("task_acc", ("Δ mean task accuracy", "above 0: AutoCompress better"), False),
              ("kl", ("Δ held-out KL to the teacher", "below 0: AutoCompress better"), True),
              ("ood_bpb", ("Δ Moby Dick bits per byte", "below 0: AutoCompress better"), True),
              ("tokens", ("search tokens, Minitron / AutoCompress", "above 1: AutoCompress used fewer"), None)]
    settings = list(summary)
    pw, ph, left, top, gap = 210, 190, 60, 74, 50
    W, H = left + len(panels) * (pw + gap), top + ph + 80
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="20" font-size="14">AutoCompress vs Minitron on stories15M: paired difference '
           'per setting, mean ± 1 standard error over seeds</text>']
    for i, (key, (title, sub), lower) in enumerate(panels):
        x0 = left + i * (pw + gap)
        vals = []
        for s in settings:
            if key == "tokens":
                r = summary[s]["search_token_ratio"]
                vals.append((r, 0.0))
            else:
                d = summary[s]["metrics"][key]["diff"]
                vals.append((d["mean"], d["se"] or 0.0))
        finite = [v for v, _ in vals if v is not None]
        if not finite:
            out.append(f'<text x="{x0}" y="{top + ph / 2}" fill="#555">{title}: not measured</text>')
            continue
        lo = min([v - e for v, e in vals if v is not None] + [0 if key != "tokens" else 1])
        hi = max([v + e for v, e in vals if v is not None] + [0 if key != "tokens" else 1])
        pad = (hi - lo) * 0.1 or 1e-3
        lo, hi = lo - pad, hi + pad
        y = lambda v: top + ph - (v - lo) / (hi - lo) * ph
        out.append(f'<text x="{x0}" y="{top - 22}">{title}</text>')
        out.append(f'<text x="{x0}" y="{top - 8}" font-size="9" fill="#555">{sub}</text>')
        out.append(f'<rect x="{x0}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        ref = 1 if key == "tokens" else 0
        out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y(ref):.1f}" y2="{y(ref):.1f}" stroke="#444" stroke-dasharray="4 3"/>')
        for t in (lo + pad, (lo + hi) / 2, hi - pad):
            out.append(f'<text x="{x0 - 4}" y="{y(t) + 4:.1f}" text-anchor="end" font-size="9">{t:.3g}</text>')
        for j, (s, (v, e)) in enumerate(zip(settings, vals)):
            if v is None:
                continue
            cx = x0 + (j + 0.5) * pw / len(settings)
            good = (v > ref) if (lower is False or key == "tokens") else (v < ref)
            color = "#1a7f37" if good else "#cf222e"
            out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(v - e):.1f}" y2="{y(v + e):.1f}" stroke="{color}"/>')
            out.append(f'<circle cx="{cx:.1f}" cy="{y(v):.1f}" r="4" fill="{color}"><title>{s}: {v:.4g} ± {e:.2g}</title></circle>')
            out.append(f'<text x="{cx:.1f}" y="{top + ph + 14}" text-anchor="end" font-size="9" '
                       f'transform="rotate(-25 {cx:.1f} {top + ph + 14})">{s}</text>')
    out.append("</svg>")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    a = ap.parse_args()
    runs = collect(a.out)
    if not runs:
        sys.exit(f"{a.out}: no runs/*/report.json")
    summary = summarize(runs)
    teacher = next(iter(task_scores(os.path.join(a.out, "tasks", "teacher.json")).values()), {})
    if teacher:
        print("teacher: " + ", ".join(f"{k} {v[0]:.4f} ({v[2]} items)" for k, v in sorted(teacher.items())) +
              f"; mean {task_accuracy(teacher)[0]:.4f}")
    print(markdown(summary))
    if a.json:
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
        env = " ".join(f"{k}={os.environ[k]}" for k in ("DISTILL_TOKENS", "TASK_ITEMS", "TASK_STORIES", "HELDOUT", "SETTINGS")
                       if os.environ.get(k))
        command = (env + " " if env else "") + "bench/vs_minitron.sh"
        doc = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "command": command,
               "machine": f"{cpu}, {os.cpu_count()} cores", "summary": summary, "runs": runs,
               "teacher_tasks": {k: {"accuracy": v[0], "se": v[1], "items": v[2]} for k, v in teacher.items()}}
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(finite(doc), f, indent=1, allow_nan=False, default=str)
            f.write("\n")
        os.replace(tmp, a.json)
    if a.svg:
        svg(summary, a.svg)


if __name__ == "__main__":
    main()
