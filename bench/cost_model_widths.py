#!/usr/bin/env python3
"""Summaries for bench/cost_model_widths.sh, computed from the rows of `validate`'s JSON.

  cost_model_widths.py run VALIDATE.json PROFILE.json   one JSON line for one run
  cost_model_widths.py summary OUT RUNS                  the runs side by side, OUT/summary.json

Per run: MAPE and worst error of TTFT, TPOT and peak memory; the mean signed error (the bias
every row shares: the machine faster or slower than when profiled); the TPOT MAPE once that bias
is divided out; the TPOT errors per hidden size; the profile's fitted decode correction; the
errors as fractions of the base (the teacher) measured in the same rounds, when validate measured
it (its "relative_to_base"); the measurement against itself inside the run (its
"measurement_repeatability"). Over the runs: the same architectures' measured TPOT run against
run, the machine against itself minutes apart.
Standard library only.
"""
import json
import os
import sys


def errors(rows):
    """Signed percent errors (pred / meas - 1) per metric, and each row's hidden size."""
    out = {"ttft": [], "tpot": [], "memory": [], "hidden": []}
    for r in rows:
        p, m = r["predicted"], r["measured"]
        out["ttft"].append(100 * (p["ttft_ms"] / m["ttft_ms"] - 1))
        out["tpot"].append(100 * (p["tpot_ms"] / m["tpot_ms"] - 1))
        out["memory"].append(100 * (p["peak_memory_bytes"] / m["peak_memory_bytes"] - 1))
        out["hidden"].append(r["config"]["hidden_size"])
    return out


def mape(v):
    return sum(abs(x) for x in v) / len(v)


def debiased(v):
    b = sum(v) / len(v)
    return mape([100 * ((1 + x / 100) / (1 + b / 100) - 1) for x in v])


def run_summary(validate_path, profile_path):
    v = json.load(open(validate_path))
    e = errors(v["rows"])
    widths = {}
    for d, x in zip(e["hidden"], e["tpot"]):
        widths.setdefault(d, []).append(x)
    corr = {}
    try:
        p = json.load(open(profile_path))
        c = p.get("correction", {})
        if c.get("fitted"):
            corr = {"decode": c["decode"], "loo_mape_tpot": c["leave_one_out_mape_percent"]["tpot_ms"]}
    except (OSError, ValueError, KeyError):
        pass
    return {
        "validate": validate_path,
        "ttft_mape": mape(e["ttft"]), "ttft_max": max(abs(x) for x in e["ttft"]),
        "tpot_mape": mape(e["tpot"]), "tpot_max": max(abs(x) for x in e["tpot"]),
        "memory_mape": mape(e["memory"]), "memory_max": max(abs(x) for x in e["memory"]),
        "ttft_bias": sum(e["ttft"]) / len(e["ttft"]), "tpot_bias": sum(e["tpot"]) / len(e["tpot"]),
        "ttft_mape_debiased": debiased(e["ttft"]), "tpot_mape_debiased": debiased(e["tpot"]),
        "tpot_by_hidden_size": {str(d): sum(x) / len(x) for d, x in sorted(widths.items())},
        "tpot_max_reduced_width": max([abs(x) for d, x in zip(e["hidden"], e["tpot"])
                                       if d < max(e["hidden"])] or [0]),
        "correction": corr,
        # As fractions of the base measured in the same rounds (validate's relative_to_base):
        # the error a relative limit meets, with the machine's drift cancelled.
        "relative": relative(v),
        # The measurement against itself inside the run (validate's measurement_repeatability:
        # odd rounds against even ones): the noise floor under tpot_mape_debiased.
        "tpot_noise": noise(v),
    }


def noise(v):
    r = v.get("measurement_repeatability")
    if not r or not r.get("rows"):
        return None
    return {"apart": r["apart_percent"]["tpot_ms"], "max_apart": r["max_apart_percent"]["tpot_ms"],
            "drift": r["drift_percent"]["tpot_ms"]}


def machine_between_runs(paths):
    """The machine against itself between runs: the same architectures' measured TPOT in run a
    and run b (percent): the drift every one shares (mean of a/b - 1), the mean and largest
    |.| left once it is divided out. A pair whose rows differ is left out."""
    vs = [json.load(open(p)) for p in paths]
    out = []
    for i in range(len(vs)):
        for j in range(i + 1, len(vs)):
            a, b = vs[i]["rows"], vs[j]["rows"]
            if [r["architecture"] for r in a] != [r["architecture"] for r in b]:
                continue
            d = [100 * (x["measured"]["tpot_ms"] / y["measured"]["tpot_ms"] - 1) for x, y in zip(a, b)]
            drift = sum(d) / len(d)
            out.append({"a": i + 1, "b": j + 1, "drift": drift, "apart": debiased(d),
                        "max_apart": max(abs(100 * ((1 + x / 100) / (1 + drift / 100) - 1)) for x in d)})
    return out


def relative(v):
    r = v.get("relative_to_base")
    if not r:
        return None
    return {"base": r["base"], "ttft_mape": r["mape_percent"]["ttft_ms"],
            "ttft_max": r["max_ape_percent"]["ttft_ms"], "tpot_mape": r["mape_percent"]["tpot_ms"],
            "tpot_max": r["max_ape_percent"]["tpot_ms"]}


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "run":
        print(json.dumps(run_summary(sys.argv[2], sys.argv[3])))
        return
    if len(sys.argv) == 4 and sys.argv[1] == "summary":
        out, runs = sys.argv[2], int(sys.argv[3])
        rs = [run_summary(os.path.join(out, f"validate_{r}.json"), os.path.join(out, f"profile_{r}.json"))
              for r in range(1, runs + 1)]
        agree = None
        if os.path.exists(os.path.join(out, "agree.json")):
            agree = json.load(open(os.path.join(out, "agree.json")))
        print(f"{'run':>3} | {'TTFT MAPE':>9} {'max':>6} | {'TPOT MAPE':>9} {'max':>6} {'bias':>6} "
              f"{'debiased':>8} {'max D<288':>9} | {'memory':>6} | {'TTFT/base':>9} {'max':>6} | "
              f"{'TPOT/base':>9} {'max':>6}")
        for i, r in enumerate(rs, 1):
            rel = r["relative"]
            tail = (f" | {rel['ttft_mape']:>8.2f}% {rel['ttft_max']:>5.1f}% | {rel['tpot_mape']:>8.2f}% "
                    f"{rel['tpot_max']:>5.1f}%") if rel else " | (base not measured)"
            print(f"{i:>3} | {r['ttft_mape']:>8.2f}% {r['ttft_max']:>5.1f}% | {r['tpot_mape']:>8.2f}% "
                  f"{r['tpot_max']:>5.1f}% {r['tpot_bias']:>+5.1f}% {r['tpot_mape_debiased']:>7.2f}% "
                  f"{r['tpot_max_reduced_width']:>8.1f}% | {r['memory_mape']:>5.2f}%{tail}")
        for i, r in enumerate(rs, 1):
            n = r["tpot_noise"]
            if n:
                print(f"run {i}: the measurement against itself (odd rounds against even): "
                      f"TPOT {n['apart']:.2f}% apart (max {n['max_apart']:.2f}%) beyond a shared "
                      f"{n['drift']:+.2f}%")
        between = machine_between_runs([r["validate"] for r in rs])
        for m in between:
            print(f"the machine, run {m['a']} against run {m['b']} (the same models measured): TPOT "
                  f"drift {m['drift']:+.2f}%, beyond it {m['apart']:.2f}% apart (max {m['max_apart']:.2f}%)")
        if agree:
            for p in agree["pairs"]:
                print(f"profiles {os.path.basename(p['a'])} vs {os.path.basename(p['b'])}: largest TPOT "
                      f"difference {p['max_tpot_diff_percent']:.2f}%, TTFT {p['max_ttft_diff_percent']:.2f}% "
                      f"over {agree['architectures']} architectures (teacher TPOT {p['teacher_tpot_diff_percent']:.2f}%); "
                      f"as fractions of each one's teacher: TPOT {p.get('max_relative_tpot_diff_percent', float('nan')):.2f}%, "
                      f"TTFT {p.get('max_relative_ttft_diff_percent', float('nan')):.2f}%")
        tmp = os.path.join(out, "summary.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"runs": rs, "agree": agree, "machine_between_runs": between}, f, indent=1)
        os.replace(tmp, os.path.join(out, "summary.json"))
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
