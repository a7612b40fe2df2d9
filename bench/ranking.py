#!/usr/bin/env python3
"""The pool and the figures of bench/ranking.sh: how well does each cheap signal rank pruned
candidates by the quality they reach after the final distillation?

usage:
  bench/ranking.py pool SETTING_DIR [--size N]    SETTING_DIR/searches/*.json -> cand-NN/arch.json
  bench/ranking.py report OUT [--json F] [--svg F] every OUT/SETTING/ with a pool -> table, JSON, SVG

A proxy gives each candidate a number, lower meaning "expected better after the final
distillation". Against the truth (the held-out KL to the teacher after FINAL tokens, lower better;
the mean task accuracy then, higher better) each proxy is scored per setting by
  - Kendall's tau-b and Spearman's rho (1: the same order as the truth, 0: unrelated),
  - top-1: whether the candidate it ranks first is the best of the pool,
  - regret: the truth of the candidate it ranks first minus the best of the pool (KL: >= 0;
    task accuracy: best minus chosen, >= 0),
and its cost in distillation tokens per candidate.

Proxies:
  params           minus the non-embedding parameter count (more kept = better)
  kl_calibration   KL right after pruning on the search's calibration windows (what the searches rank by)
  kl_r0            held-out KL right after pruning
  short_R          held-out KL after a distillation of R tokens with its own schedule (compress's
                   lightweight retraining at R = FINAL / 8)
  curve_R          held-out KL after the first R tokens of the final distillation itself (free
                   for the candidate that is kept: its run goes on)
  extrapolated     KL(t) = c + a t^-alpha fitted on the curve up to 16 384 tokens, read at FINAL
  penalty          short_R + gamma x (attention-free layers), gamma fitted on the other settings
                   (least squares on the within-setting deviations), judged on this one
  bld_B            held-out KL after a blockwise local distillation of B tokens alone
  bld_B_curve_R    held-out KL after the first R tokens of the final distillation started from
                   that blockwise distillation
  halving_B        compress's judge (--autocompress-judge halving, src/search/minitron.h): every
                   candidate ranked by bld_B, the better half (at least 2) then by bld_B_curve_R at
                   R = FINAL / 8, ahead of the rest; its cost is B + the retrained share of R

With FINAL_BLD=B (every candidate's final recipe also run from the blockwise start, as compress
runs it), every proxy is scored a second time against that run's final KL ("proxies_bld_final":
the truth of the method's own recipe; task accuracy is only measured after the plain start).
"""
import argparse
import csv
import glob
import json
import math
import os
import sys
from datetime import datetime, timezone

# ---------------------------------------------------------------------------------------------
# pool


def target_key(cfg):
    return json.dumps(cfg, sort_keys=True)


def structure_counts(cfg):
    """(attention-free layers that keep their FFN, whole blocks removed) of a target config (the
    parent's layer count; DeciLM block_configs, or a homogeneous config: none of either)."""
    free = removed = 0
    for b in cfg.get("block_configs") or []:
        no_att = bool(b.get("attention", {}).get("no_op"))
        no_ffn = bool(b.get("ffn", {}).get("no_op"))
        free += no_att and not no_ffn
        removed += no_att and no_ffn
    return free, removed


def read_searches(setting_dir):
    """[(source name, method, [candidate json])] of every search of a setting."""
    out = []
    for path in sorted(glob.glob(os.path.join(setting_dir, "searches", "*.json"))):
        j = json.load(open(path))
        name = os.path.splitext(os.path.basename(path))[0]
        out.append((name, j["method"], j["search"]))
    return out


def pool(setting_dir, size):
    """Picks `size` distinct feasible candidates: every search's pick, then Minitron's grid best
    first by KL after pruning (at most a third of the pool), then the differentiable searches'
    other proposals best first; writes cand-NN/arch.json and pool.json."""
    chosen, seen = [], set()

    def take(c, source):
        t = c.get("target")
        if not t or not c.get("feasible", False):
            return False
        k = target_key(t)
        if k in seen:
            for e in chosen:
                if target_key(e["config"]) == k and source not in e["sources"]:
                    e["sources"].append(source)
            return False
        seen.add(k)
        chosen.append({"config": t, "describe": c["describe"], "parameters": c["parameters"],
                       "kl_calibration": c["loss_after_prune"], "cost": c["cost"],
                       "attention_free_layers": structure_counts(t)[0],
                       "blocks_removed": structure_counts(t)[1], "sources": [source]})
        return True

    searches = read_searches(setting_dir)
    for name, method, s in searches:
        take(s["best"], name + ":pick")
    ranked = lambda s: sorted((c for c in s["candidates"] if c.get("loss_after_prune", -1) >= 0),
                              key=lambda c: c["loss_after_prune"])
    minitron_cap = max(1, size // 3)
    for name, method, s in searches:
        if method != "minitron":
            continue
        for c in ranked(s):
            if sum(any(x.startswith(name) for x in e["sources"]) for e in chosen) >= minitron_cap:
                break
            take(c, name)
    others = [(c["loss_after_prune"], name, c) for name, method, s in searches if method != "minitron"
              for c in ranked(s)]
    for _, name, c in sorted(others, key=lambda x: x[0]):
        if len(chosen) >= size:
            break
        take(c, name)
    for name, method, s in searches:  # still short: Minitron's rest
        for c in ranked(s):
            if len(chosen) >= size:
                break
            take(c, name)
    if len(chosen) < size:
        print(f"ranking.py pool: {setting_dir}: only {len(chosen)} distinct feasible candidates "
              f"(asked for {size})", file=sys.stderr)
    for i, e in enumerate(chosen):
        d = os.path.join(setting_dir, f"cand-{i:02d}")
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "arch.json"), e)
    write_json(os.path.join(setting_dir, "pool.json"),
               [{k: v for k, v in e.items() if k != "config"} for e in chosen])


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# statistics


def kendall_tau_b(x, y):
    """Kendall's tau-b of two equal-length sequences (ties in either counted as neither)."""
    n, conc, disc, tx, ty = len(x), 0, 0, 0, 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                conc += 1
            else:
                disc += 1
    den = math.sqrt((conc + disc + tx) * (conc + disc + ty))
    return (conc - disc) / den if den else float("nan")


def ranks(x):
    """Average ranks (1-based) with ties sharing their mean rank."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    r = [0.0] * len(x)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman_rho(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")


def fit_power_law(ts, ks):
    """c, a, alpha of KL(t) = c + a t^-alpha (least squares in c, a for each alpha of a grid;
    c >= 0). None with fewer than 3 points."""
    if len(ts) < 3:
        return None
    best = None
    for i in range(1, 300):
        alpha = i / 100
        xs = [t ** -alpha for t in ts]
        n, sx, sy = len(xs), sum(xs), sum(ks)
        sxx = sum(x * x for x in xs)
        sxy = sum(x * y for x, y in zip(xs, ks))
        den = n * sxx - sx * sx
        if den == 0:
            continue
        a = (n * sxy - sx * sy) / den
        c = (sy - a * sx) / n
        if c < 0:
            c, a = 0.0, sxy / sxx
        err = sum((c + a * x - y) ** 2 for x, y in zip(xs, ks))
        if best is None or err < best[0]:
            best = (err, c, a, alpha)
    return best[1:] if best else None


# ---------------------------------------------------------------------------------------------
# report


def eval_kl(path):
    j = json.load(open(path))
    return j["models"][0]["eval"]["kl_to_teacher"]


def task_accuracy(path):
    accs = []
    for m in json.load(open(path)).get("models", []):
        for t in m.get("tasks", []):
            v = t["metrics"].get("acc_norm") or t["metrics"]["acc"]
            accs.append(v["value"])
    return sum(accs) / len(accs) if accs else None


def read_candidate(d):
    arch = json.load(open(os.path.join(d, "arch.json")))
    log = os.path.join(d, "final", "eval_log.csv")
    if not os.path.exists(log) or not os.path.exists(os.path.join(d, "tasks.json")):
        return None
    curve = {int(r["tokens"]): float(r["kl_to_teacher"]) for r in csv.DictReader(open(log))}
    c = {"name": os.path.basename(d), "describe": arch["describe"], "sources": arch["sources"],
         "parameters": arch["parameters"],
         "attention_free_layers": structure_counts(arch["config"])[0],
         "blocks_removed": structure_counts(arch["config"])[1],
         "kl_calibration": arch["kl_calibration"], "kl_r0": eval_kl(os.path.join(d, "r0.json")),
         "curve": curve, "final_kl": curve[max(curve)], "final_tokens": max(curve),
         "task_acc": task_accuracy(os.path.join(d, "tasks.json")), "short": {}}
    for f in glob.glob(os.path.join(d, "short-*.json")):
        c["short"][int(f.rsplit("-", 1)[1][:-5])] = eval_kl(f)
    # Blockwise local distillation alone (bld-B.json), and the final recipe started from it
    # (final-bld-B/eval_log.csv).
    c["bld"], c["final_bld"] = {}, {}
    for f in glob.glob(os.path.join(d, "bld-*.json")):
        if not f.endswith(".blocks.json"):
            c["bld"][int(f.rsplit("-", 1)[1][:-5])] = eval_kl(f)
    for f in glob.glob(os.path.join(d, "final-bld-*", "eval_log.csv")):
        b = int(os.path.basename(os.path.dirname(f)).rsplit("-", 1)[1])
        c["final_bld"][b] = {int(r["tokens"]): float(r["kl_to_teacher"]) for r in csv.DictReader(open(f))}
    return c


def read_settings(out):
    settings = {}
    for pool_file in sorted(glob.glob(os.path.join(out, "*", "pool.json"))):
        d = os.path.dirname(pool_file)
        cands = [read_candidate(c) for c in sorted(glob.glob(os.path.join(d, "cand-*")))]
        cands = [c for c in cands if c]
        if len(cands) >= 3:
            settings[os.path.basename(d)] = cands
    return settings


def base_proxies(cands):
    """{proxy: ([value per candidate], training tokens per candidate)}; lower = better."""
    final = cands[0]["final_tokens"]
    p = {"params": ([-c["parameters"] for c in cands], 0),
         "kl_calibration": ([c["kl_calibration"] for c in cands], 0),
         "kl_r0": ([c["kl_r0"] for c in cands], 0)}
    for r in sorted(set.intersection(*[set(c["short"]) for c in cands])):
        p[f"short_{r}"] = ([c["short"][r] for c in cands], r)
    for r in sorted(set.intersection(*[set(c["curve"]) for c in cands])):
        if r < final:
            p[f"curve_{r}"] = ([c["curve"][r] for c in cands], r)
    for b in sorted(set.intersection(*[set(c["bld"]) for c in cands])):
        p[f"bld_{b}"] = ([c["bld"][b] for c in cands], b)
    for b in sorted(set.intersection(*[set(c["final_bld"]) for c in cands])):
        for r in sorted(set.intersection(*[set(c["final_bld"][b]) for c in cands])):
            if r < final:
                p[f"bld_{b}_curve_{r}"] = ([c["final_bld"][b][r] for c in cands], b + r)
    for b in sorted(set.intersection(*[set(c["bld"]) for c in cands])):
        r = final // 8
        if not all(r in c["final_bld"].get(b, {}) for c in cands):
            continue
        n = len(cands)
        m = min(n, max(2, (n + 1) // 2))  # the better half, at least 2 (src/search/minitron.cpp)
        by_bld = sorted(range(n), key=lambda i: cands[i]["bld"][b])
        kept = sorted(by_bld[:m], key=lambda i: cands[i]["final_bld"][b][r])
        rank = {i: k for k, i in enumerate(kept + by_bld[m:])}
        p[f"halving_{b}"] = ([rank[i] for i in range(n)], b + (r * m + n - 1) // n)
    ext = []
    for c in cands:
        pts = sorted((t, k) for t, k in c["curve"].items() if t <= 16384)
        f = fit_power_law([t for t, _ in pts], [k for _, k in pts])
        ext.append(f[0] + f[1] * final ** -f[2] if f else float("nan"))
    if all(math.isfinite(v) for v in ext):
        p["extrapolated"] = (ext, 16384)
    return p


def penalty_proxy(settings, name, short_key):
    """short_R + gamma x attention-free layers, gamma fitted by least squares on the other
    settings' within-setting deviations of final KL - short_R. (values, gamma) or None."""
    num = den = 0.0
    for other, cands in settings.items():
        if other == name:
            continue
        if any(short_key not in c["short"] for c in cands):
            continue
        y = [c["final_kl"] - c["short"][short_key] for c in cands]
        x = [c["attention_free_layers"] for c in cands]
        mx, my = sum(x) / len(x), sum(y) / len(y)
        num += sum((a - mx) * (b - my) for a, b in zip(x, y))
        den += sum((a - mx) ** 2 for a in x)
    if den == 0:
        return None
    gamma = num / den
    cands = settings[name]
    if any(short_key not in c["short"] for c in cands):
        return None
    return [c["short"][short_key] + gamma * c["attention_free_layers"] for c in cands], gamma


def score(values, cands, kl=None):
    """Scores of one proxy against the truth: `kl` (default: every candidate's final KL after the
    plain start) and the task accuracy after the plain start."""
    kl = kl if kl is not None else [c["final_kl"] for c in cands]
    task = [-c["task_acc"] for c in cands]
    first = min(range(len(values)), key=lambda i: values[i])
    return {"tau_kl": kendall_tau_b(values, kl), "rho_kl": spearman_rho(values, kl),
            "tau_task": kendall_tau_b(values, task), "rho_task": spearman_rho(values, task),
            "top1_kl": kl[first] == min(kl), "regret_kl": kl[first] - min(kl),
            "top1_task": task[first] == min(task), "regret_task": task[first] - min(task),
            "chosen": cands[first]["name"]}


def report(out, json_path, svg_path):
    settings = read_settings(out)
    if not settings:
        sys.exit(f"ranking.py report: no setting under {out} has 3 or more finished candidates")
    result = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "settings": {}}
    for name, cands in settings.items():
        proxies = base_proxies(cands)
        shorts = sorted(k for k in proxies if k.startswith("short_"))
        gamma = None
        if shorts:
            pen = penalty_proxy(settings, name, int(shorts[-1].split("_")[1]))
            if pen:
                proxies["penalty"] = (pen[0], int(shorts[-1].split("_")[1]))
                gamma = pen[1]
        rows = {k: dict(score(v, cands), tokens=t) for k, (v, t) in proxies.items()}
        # Against the final run started from the blockwise start, where every candidate ran it.
        rows_bld = {}
        for b in sorted(set.intersection(*[set(c["final_bld"]) for c in cands])):
            if all(max(c["final_bld"][b]) == c["final_tokens"] for c in cands):
                truth = [c["final_bld"][b][c["final_tokens"]] for c in cands]
                rows_bld[b] = {k: dict(score(v, cands, truth), tokens=t)
                               for k, (v, t) in proxies.items()}
        # The final recipe started from BLD, on the candidates that ran it (FINAL_BLD), paired
        # with the plain start.
        bld_init = {}
        for b in sorted(set().union(*[set(c["final_bld"]) for c in cands])):
            ran = [c for c in cands if b in c["final_bld"] and max(c["final_bld"][b]) == c["final_tokens"]]
            if len(ran) < 2:
                continue
            d = [c["final_bld"][b][c["final_tokens"]] - c["final_kl"] for c in ran]
            mean = sum(d) / len(d)
            se = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d))
            best = min(ran, key=lambda c: c["final_kl"])
            best_bld = min(ran, key=lambda c: c["final_bld"][b][c["final_tokens"]])
            bld_init[b] = {"mean_delta_final_kl": mean, "se": se, "better": sum(x < 0 for x in d),
                           "deltas": {c["name"]: x for c, x in zip(ran, d)},
                           "best_final_kl": best["final_kl"], "best": best["name"],
                           "best_final_kl_with_bld": best_bld["final_bld"][b][best_bld["final_tokens"]],
                           "best_with_bld": best_bld["name"]}
        result["settings"][name] = {
            "candidates": cands,
            "proxies": rows, "proxies_bld_final": rows_bld, "penalty_gamma": gamma,
            "bld_init": bld_init,
            "best_kl": min(c["final_kl"] for c in cands),
            "best_task": max(c["task_acc"] for c in cands)}
    print(markdown(result))
    if json_path:
        write_json(json_path, result)
    if svg_path:
        svg(result, svg_path)


def markdown(result):
    lines = []
    for name, s in result["settings"].items():
        lines.append(f"**{name}** ({len(s['candidates'])} candidates; best final KL "
                     f"{s['best_kl']:.4f}, best task accuracy {s['best_task']:.4f}"
                     + (f"; penalty gamma {s['penalty_gamma']:.4f} per attention-free layer, "
                        "fitted on the other settings" if s["penalty_gamma"] is not None else "")
                     + ")\n")
        lines.append("| proxy | tokens / candidate | τ vs final KL | ρ vs final KL | τ vs task acc. "
                     "| top-1 (KL) | regret KL | regret task acc. | picks |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for k, r in s["proxies"].items():
            lines.append(f"| {k} | {r['tokens']} | {r['tau_kl']:.2f} | {r['rho_kl']:.2f} | "
                         f"{r['tau_task']:.2f} | {'yes' if r['top1_kl'] else 'no'} | "
                         f"{r['regret_kl']:.4f} | {r['regret_task']:.4f} | {r['chosen']} |")
        lines.append("")
        for b, rows in s.get("proxies_bld_final", {}).items():
            truth = [c["final_bld"][b][c["final_tokens"]] for c in s["candidates"]]
            lines.append(f"Against the final KL of the run started from a blockwise distillation of "
                         f"{b} tokens (best {min(truth):.4f}):\n")
            lines.append("| proxy | tokens / candidate | τ vs final KL | ρ vs final KL | top-1 (KL) "
                         "| regret KL | picks |")
            lines.append("|---|---|---|---|---|---|---|")
            for k, r in rows.items():
                lines.append(f"| {k} | {r['tokens']} | {r['tau_kl']:.2f} | {r['rho_kl']:.2f} | "
                             f"{'yes' if r['top1_kl'] else 'no'} | {r['regret_kl']:.4f} | {r['chosen']} |")
            lines.append("")
        for b, r in s.get("bld_init", {}).items():
            lines.append(f"Final recipe started from a blockwise distillation of {b} tokens: final KL "
                         f"{r['mean_delta_final_kl']:+.4f} ± {r['se']:.4f} against the plain start "
                         f"(better in {r['better']} of the {len(r['deltas'])} candidates that ran it: "
                         f"{', '.join(r['deltas'])}); the best of those {r['best_final_kl_with_bld']:.4f} "
                         f"({r['best_with_bld']}) against {r['best_final_kl']:.4f} ({r['best']})\n")
        lines.append("| candidate | sources | attention-free (FFN kept) | blocks removed | parameters "
                     "| KL r=0 | final KL | task acc. |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for c in s["candidates"]:
            lines.append(f"| {c['name']} `{c['describe']}` | {', '.join(c['sources'])} | "
                         f"{c['attention_free_layers']} | {c['blocks_removed']} | "
                         f"{c['parameters'] / 1e6:.2f}M | "
                         f"{c['kl_r0']:.3f} | {c['final_kl']:.4f} | {c['task_acc']:.4f} |")
        lines.append("")
    return "\n".join(lines)


def svg(result, path):
    """tau against the final KL per proxy, against the proxy's distillation tokens per candidate
    (log scale; 0 tokens drawn at the left edge), one colour per setting."""
    colors = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700"]
    W, H, left, top, pw, ph = 760, 400, 70, 50, 520, 290
    xs = [r["tokens"] for s in result["settings"].values() for r in s["proxies"].values() if r["tokens"] > 0]
    lo, hi = math.log2(min(xs) / 2), math.log2(max(xs) * 1.2)
    x = lambda t: left + (0 if t <= 0 else (math.log2(t) - lo) / (hi - lo) * pw)
    y = lambda v: top + (1 - (v + 1) / 2) * ph
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
         '<text x="10" y="20" font-size="14">Kendall τ of each proxy against the held-out KL after '
         'the final distillation</text>',
         f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>']
    for v in (-1, -0.5, 0, 0.5, 0.7, 1):
        o.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"'
                 + (' stroke-dasharray="4 3"' if v == 0.7 else '') + '/>')
        o.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for e in range(int(math.ceil(lo)), int(hi) + 1):
        o.append(f'<text x="{x(2 ** e):.1f}" y="{top + ph + 14}" text-anchor="middle">{2 ** e}</text>')
    o.append(f'<text x="{left + pw / 2}" y="{top + ph + 32}" text-anchor="middle">distillation tokens '
             'per candidate (0 at the left edge)</text>')
    for i, (name, s) in enumerate(result["settings"].items()):
        col = colors[i % len(colors)]
        pos = {}  # proxies of one cost share an x: shifted apart a little
        for k, r in s["proxies"].items():
            same = [q for q, rr in s["proxies"].items() if rr["tokens"] == r["tokens"]]
            pos[k] = (x(r["tokens"]) + 7 * (same.index(k) - (len(same) - 1) / 2) + 3 * i,
                      y(r["tau_kl"]))
        curve = sorted((r["tokens"], k) for k, r in s["proxies"].items()
                       if k.startswith("curve_") or k == "kl_r0")
        o.append('<polyline fill="none" stroke="{}" points="{}"/>'.format(
            col, " ".join(f"{pos[k][0]:.1f},{pos[k][1]:.1f}" for _, k in curve)))
        for k, r in s["proxies"].items():
            mark = "circle" if k.startswith("curve_") or k == "kl_r0" else "rect"
            cx, cy = pos[k]
            title = f"<title>{name} {k}: τ {r['tau_kl']:.2f}</title>"
            if mark == "circle":
                o.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{col}">{title}</circle>')
            else:
                o.append(f'<rect x="{cx - 4:.1f}" y="{cy - 4:.1f}" width="8" height="8" fill="none" '
                         f'stroke="{col}">{title}</rect>')
                o.append(f'<text x="{cx + 6:.1f}" y="{cy + 4:.1f}" font-size="9" fill="{col}">{k}</text>')
        o.append(f'<text x="{left + pw + 12}" y="{top + 14 + 16 * i}" fill="{col}">{name}</text>')
    o.append(f'<text x="{left + pw + 12}" y="{top + 14 + 16 * len(result["settings"]) + 8}" '
             'font-size="9">● the final run after r tokens</text>')
    o.append(f'<text x="{left + pw + 12}" y="{top + 14 + 16 * len(result["settings"]) + 22}" '
             'font-size="9">□ other proxies</text>')
    o.append("</svg>")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(o) + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pool")
    p.add_argument("setting_dir")
    p.add_argument("--size", type=int, default=12)
    r = sub.add_parser("report")
    r.add_argument("out")
    r.add_argument("--json")
    r.add_argument("--svg")
    a = ap.parse_args()
    if a.cmd == "pool":
        pool(a.setting_dir, a.size)
    else:
        report(a.out, a.json, a.svg)


if __name__ == "__main__":
    main()
