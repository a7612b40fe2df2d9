#!/usr/bin/env python3
"""Where the search tokens of the AutoCompress vs Minitron study go (bench/vs_minitron.sh).

Reads OUT/runs/SETTING-sSEED/{arch.json, arch.minitron.json, report.json, stages.json} and splits
each method's search tokens (forward tokens through any model, the teacher's included; the
compare row's figure) into its parts, from the counts the runs recorded and the token rules of
src/search (minitron.h retrain_top_candidates, differentiable.h, outcome.h):

  AutoCompress  searches     every differentiable search: the teacher's pass over the search's
                             batches (once), the steps, the KLs after pruning of the ranking and
                             the refinement (the search JSON's per-search figures)
                variants     the KLs after pruning of the placement variants (what is left)
                judge KLs    the teacher's pass over the judged windows, and every finalist's KL
                             on them after its blockwise start and after its retraining
                blockwise    the finalists' blockwise starts (the teacher's states once)
                retraining   the retrained finalists' distillation (teacher and student)
                kept         minus the kept finalist's blockwise start and retraining, which the
                             final run continues (its own distillation, counted there)
  Minitron      ranking      the teacher's pass and every grid candidate's KL after pruning
                retraining   its top-k each distilled (teacher and student), judged again

A part's formula must add up to the recorded total to the token: a run where it does not is
reported and the script exits non-zero. Prints a markdown table per run and per setting (means),
with the parts that grow with the distillation budget (blockwise starts, retraining) apart from
the fixed ones.

usage: bench/search_tokens.py OUT [OUT...]
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def autocompress_parts(run):
    arch = load(os.path.join(run, "arch.json"))["search"]
    report = load(os.path.join(run, "report.json"))
    options = load(os.path.join(run, "stages.json"))["options"]
    seq_len = options["data"]["seq_len"]
    judged = report["data"]["calibration_tokens"] // seq_len * seq_len  # every full window
    judge = arch.get("judge") or {}
    b, t = judge.get("bld_tokens", 0), judge.get("retrain_tokens", 0)
    cands = arch["candidates"]
    n = sum(1 for c in cands if c.get("loss_after_bld", -1) >= 0)
    kind = judge.get("judge", "retraining")
    if kind == "halving":
        m = sum(1 for c in cands if c.get("loss_after_retrain", -1) >= 0 and
                c.get("loss_after_retrain") != c.get("loss_after_bld"))
    elif kind == "blockwise":
        m = 0
    else:
        m = sum(1 for c in cands if c.get("loss_after_retrain", -1) >= 0)
        n = m if b else 0
    parts = {
        "searches": sum(s.get("search_tokens", 0) for s in arch["searches"]),
        "judge KLs": judged * (1 + (n if kind != "retraining" else 0) + m),
        "blockwise": b * (1 + n) if b else 0,
        "retraining": 2 * t * m,
    }
    parts["variants"] = arch["search_tokens"] - sum(parts.values())
    comp = next(c for c in report["comparison"] if c["method"] == "autocompress")
    d = comp["distill"]
    parts["kept"] = -2 * d.get("continued_retraining_tokens", 0) - 2 * d.get("continued_bld_tokens", 0)
    total = comp["search_tokens"]
    finalists = {"finalists": n, "retrained": m,
                 "variants": len(arch.get("placement_variants") or []),
                 "variant finalists": sum(1 for v in arch.get("placement_variants") or [] if v.get("finalist"))}
    return parts, total, finalists


def minitron_parts(run):
    arch = load(os.path.join(run, "arch.minitron.json"))["search"]
    report = load(os.path.join(run, "report.json"))
    options = load(os.path.join(run, "stages.json"))["options"]
    seq_len = options["data"]["seq_len"]
    window = 8 * seq_len  # SearchSettings: minitron_batch_size 8, minitron_batches 1
    cands = arch["candidates"]
    k = sum(1 for c in cands if c.get("loss_after_prune", -1) >= 0)
    r = sum(1 for c in cands if c.get("loss_after_retrain", -1) >= 0)
    retrain = options["search"]["minitron_retrain"][1] or options["distill"]["tokens"] // 8
    retrain = max(retrain, options["distill"]["batch"] * seq_len)
    parts = {"ranking": window * (k + 1)}
    if r:
        parts["ranking"] += window * (1 + r)  # the retraining's teacher pass and judged KLs
        parts["retraining"] = 2 * retrain * r
    comp = next(c for c in report["comparison"] if c["method"] == "minitron")
    return parts, comp["search_tokens"], {"ranked": k, "retrained": r}


def main(outs):
    rows, bad = [], []
    for out in outs:
        for run in sorted(glob.glob(os.path.join(out, "runs", "*-s*"))):
            if not os.path.isdir(run) or not os.path.exists(os.path.join(run, "report.json")):
                continue
            name = os.path.basename(run)
            setting, seed = name.rsplit("-s", 1)
            ac, ac_total, ac_counts = autocompress_parts(run)
            mi, mi_total, mi_counts = minitron_parts(run)
            if ac["variants"] < 0 or sum(mi.values()) != mi_total or sum(ac.values()) != ac_total:
                bad.append(f"{run}: parts {ac} / {mi} do not add up to {ac_total} / {mi_total}")
            rows.append((out, setting, seed, ac, ac_total, ac_counts, mi, mi_total, mi_counts))
    ac_keys = ["searches", "variants", "judge KLs", "blockwise", "retraining", "kept"]
    print("| study | setting | seed | AC searches | variants | judge KLs | blockwise | retraining | kept "
          "| AC total | finalists (retrained) | Minitron ranking | retraining | Minitron total | ratio |")
    print("|" + "---|" * 15)
    for out, setting, seed, ac, act, acc, mi, mit, mic in rows:
        print(f"| {os.path.basename(out)} | {setting} | {seed} | " +
              " | ".join(f"{ac[k]:,}" for k in ac_keys) +
              f" | {act:,} | {acc['finalists']} ({acc['retrained']}) | {mi['ranking']:,} | "
              f"{mi.get('retraining', 0):,} | {mit:,} | {act / mit:.2f} |")
    print()
    print("| study | setting | AC fixed | AC with the budget | Minitron fixed | Minitron with the budget "
          "| ratio | ratio of the parts that grow with the budget |")
    print("|" + "---|" * 8)
    groups = {}
    for r in rows:
        groups.setdefault((r[0], r[1]), []).append(r)
    for (out, setting), rs in groups.items():
        mean = lambda xs: sum(xs) / len(xs)
        ac_grow = mean([r[3]["blockwise"] + r[3]["retraining"] + r[3]["kept"] for r in rs])
        ac_fixed = mean([r[4] for r in rs]) - ac_grow
        mi_grow = mean([r[6].get("retraining", 0) for r in rs])
        mi_fixed = mean([r[7] for r in rs]) - mi_grow
        print(f"| {os.path.basename(out)} | {setting} | {ac_fixed:,.0f} | {ac_grow:,.0f} | {mi_fixed:,.0f} "
              f"| {mi_grow:,.0f} | {(ac_fixed + ac_grow) / (mi_fixed + mi_grow):.2f} | "
              f"{ac_grow / mi_grow if mi_grow else float('nan'):.2f} |")
    for b in bad:
        print("does not add up:", b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
