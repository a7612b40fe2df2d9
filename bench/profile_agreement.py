#!/usr/bin/env python3
"""Summary for bench/profile_agreement.sh: how far apart two profiles of one machine, taken
minutes apart, predict the teacher and 20 prunes, beside how far apart the machine itself
measured the same models over the same gap.

  profile_agreement.py OUT ROUNDS PAIR FLAGS_A FLAGS_B     prints it, writes OUT/summary.json

Reads OUT/agree_{a,b}.json (`autocompress_bench agree` over the rounds' profiles of each kind,
in round order) and, where the script measured them, OUT/validate_R.json (`validate --count 20
--seed 7`: the same 20 prunes and the teacher, measured in round R). Each pair is two rounds
PAIR apart. Per pair and metric (TPOT, TTFT) over the 21 models, with r_k = x_k / y_k:
  max_diff        max_k |r_k - 1|, percent: the issue's figure;
  drift           mean_k (r_k - 1): what every model shares (the machine faster or slower; the
                  same definition as validate's bias);
  max_after_drift max_k |r_k / (1 + drift) - 1|: what is left once the drift is divided out,
                  the part a model of the machine can be asked to hold still;
  relative        max_k |(x_k / x_0) / (y_k / y_0) - 1|: as fractions of each one's teacher.
The same four figures of the measurements tell what the machine repeats over that gap: a profile
cannot agree with another more closely than the machine agrees with itself. Each kind's profiles
are also validated against their round's measurements (the 20 prunes, as `validate` does): TPOT
and TTFT MAPE, with and without their shared bias, and the largest TPOT error.
Standard library only.
"""
import json
import os
import sys

from cost_model_widths import debiased, mape


def compare(x, y):
    """The four figures (percent) of two equally ordered lists of positive latencies; x[0] and
    y[0] are the teacher's."""
    r = [a / b for a, b in zip(x, y)]
    drift = sum(v - 1 for v in r) / len(r)
    return {
        "max_diff": 100 * max(abs(v - 1) for v in r),
        "drift": 100 * drift,
        "max_after_drift": 100 * max(abs(v / (1 + drift) - 1) for v in r),
        "relative": 100 * max(abs(v / r[0] - 1) for v in r),
        "teacher": 100 * abs(r[0] - 1),
    }


def measured(out, r, archs):
    """The round's measured TPOT and TTFT (p10, ms) in agree's architecture order, or None when
    that round was not measured."""
    path = os.path.join(out, f"validate_{r}.json")
    if not os.path.exists(path):
        return None
    v = json.load(open(path))
    rows = {row["architecture"]: row["measured"] for row in v["rows"]}
    base = v.get("relative_to_base")
    if base:
        rows[base["base"]] = base["base_measured"]
    missing = [a for a in archs if a not in rows]
    if missing:
        sys.exit(f"{path}: expected the architectures agree predicted, found none for {missing[0]}")
    return {m: [rows[a][m + "_ms"] for a in archs] for m in ("tpot", "ttft")}


def validation(pred, meas):
    """MAPE of the prunes (every model but the teacher, x[0]), that MAPE once the mean signed
    error is divided out (as cost_model_widths.py and validate compute them), and the largest
    error; percent."""
    e = [100 * (p / m - 1) for p, m in zip(pred[1:], meas[1:])]
    return {"mape": mape(e), "debiased": debiased(e), "max": max(abs(x) for x in e)}


def stats(v):
    """Each pair's figure (signed where it has a sign), and the mean, largest and count within 3
    of their sizes."""
    a = [abs(x) for x in v]
    return {"each": [round(x, 2) for x in v], "mean": round(sum(a) / len(a), 2),
            "max": round(max(a), 2), "within_3": sum(x <= 3 for x in a)}


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    out, rounds, pair, flags = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:6]
    summary = {"pair_rounds": pair}
    ms, pairs = None, [(i, i + pair) for i in range(rounds - pair)]
    for way, f in zip("ab", flags):
        a = json.load(open(os.path.join(out, f"agree_{way}.json")))
        archs = [row["architecture"] for row in a["rows"]]
        n = len(a["rows"][0]["tpot_ms"])
        if n != rounds:
            sys.exit(f"{out}/agree_{way}.json: expected {rounds} profiles, found {n}")
        if ms is None:  # both kinds predicted the same architectures (agree's seed)
            ms = [measured(out, r, archs) for r in range(1, rounds + 1)]
        pred = {m: [[row[m + "_ms"][i] for row in a["rows"]] for i in range(n)] for m in ("tpot", "ttft")}
        prof = [json.load(open(os.path.join(out, f"{way}_{r}.json"))) for r in range(1, rounds + 1)]
        s = {"flags": f, "pairs": len(pairs),
             "seconds_per_profile": [round(p["elapsed_s"], 1) for p in prof]}
        for m in ("tpot", "ttft"):
            c = [compare(pred[m][i], pred[m][j]) for i, j in pairs]
            s[m] = {k: stats([x[k] for x in c]) for k in c[0]}
        rounds_measured = [i for i in range(n) if ms[i]]
        if rounds_measured:
            s["validation"] = {}
            for m in ("tpot", "ttft"):
                v = [validation(pred[m][i], ms[i][m]) for i in rounds_measured]
                s["validation"][m] = {k: [round(x[k], 2) for x in v] for k in v[0]}
        summary[way] = s
    meas_pairs = [(i, j) for i, j in pairs if ms[i] and ms[j]]
    if meas_pairs:
        summary["measured"] = {"pairs": len(meas_pairs)}
        for m in ("tpot", "ttft"):
            c = [compare(ms[i][m], ms[j][m]) for i, j in meas_pairs]
            summary["measured"][m] = {k: stats([x[k] for x in c]) for k in c[0]}
    tmp = os.path.join(out, "summary.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(summary, fh, indent=1)
    os.replace(tmp, os.path.join(out, "summary.json"))
    names = {"max_diff": "largest difference", "max_after_drift": "after the shared drift",
             "drift": "shared drift", "relative": "as fractions of the teacher",
             "teacher": "the teacher"}
    rows = [(f"profiles {w} ({summary[w]['flags']})", summary[w]) for w in "ab"]
    if "measured" in summary:
        rows.append(("measured (validate, the same models and rounds)", summary["measured"]))
    print(f"{summary['a']['pairs']} pairs {pair} rounds apart; profiles a "
          f"{min(summary['a']['seconds_per_profile'])}-{max(summary['a']['seconds_per_profile'])} s, "
          f"b {min(summary['b']['seconds_per_profile'])}-{max(summary['b']['seconds_per_profile'])} s")
    for w in "ab":
        for m, v in summary[w].get("validation", {}).items():
            print(f"profiles {w} against their round's measurement, {m.upper()}: MAPE {v['mape']}, "
                  f"without the shared bias {v['debiased']}, largest {v['max']}")
    for m in ("tpot", "ttft"):
        print(m.upper())
        for label, s in rows:
            print(f"  {label}")
            for k, name in names.items():
                x = s[m][k]
                print(f"    {name:28s} mean {x['mean']:6.2f}  max {x['max']:6.2f}  within 3%: "
                      f"{x['within_3']}/{len(x['each'])}  {x['each']}")


if __name__ == "__main__":
    main()
