#!/usr/bin/python3
"""How strongly the native latency correction should be pulled toward the bare tables.

Reads the samples of `autocompress calibrate --samples S.json --count N` (the base and N prunes
whose hidden sizes are spread over the search's range, random and whole layers alternating,
measured in interleaved rounds), fits the correction of hardware/correction.h on half of them
within the physical bounds (factors in [0.5, 2], constants >= 0) for several ridge strengths, and
reports the TTFT and TPOT errors on the other half (whole layers and random layers apart) with
the worst row; the bare tables (no correction) for reference.

  /usr/bin/python3 bench/correction_ridge.py S.json [S2.json ...]

The fit is the same problem as fit_phase_correction: minimise sum ((y - x.theta - offset) / y)^2
+ ridge * |theta - prior|^2, solved exactly by enumerating which bounds are active.
"""
import itertools
import json
import sys

import numpy as np

PRIOR = np.array([1, 1, 1, 1, 0, 0], dtype=float)
LO = np.array([0.5, 0.5, 0.5, 0.5, 0, 0])
HI = np.array([2, 2, 2, 2, np.inf, np.inf])


def fit(X, off, y, ridge):
    w = 1 / y
    A = X * w[:, None]
    b = (y - off) * w
    M = A.T @ A + max(ridge, 1e-12) * np.eye(6)
    r = A.T @ b + max(ridge, 1e-12) * PRIOR
    best, best_obj = None, np.inf
    states = [[None, LO[j]] + ([HI[j]] if np.isfinite(HI[j]) else []) for j in range(6)]
    for combo in itertools.product(*states):
        fixed = np.array([c is not None for c in combo])
        val = np.array([c if c is not None else 0 for c in combo], dtype=float)
        free = ~fixed
        th = val.copy()
        if free.any():
            rhs = r[free] - M[np.ix_(free, fixed)] @ val[fixed]
            try:
                th[free] = np.linalg.solve(M[np.ix_(free, free)], rhs)
            except np.linalg.LinAlgError:
                continue
        if np.any(th < LO - 1e-12) or np.any(th > HI + 1e-12):
            continue
        obj = np.sum(((y - X @ th - off) / y) ** 2) + ridge * np.sum((th - PRIOR) ** 2)
        if obj < best_obj:
            best, best_obj = th, obj
    return best


def errors(X, off, y, th):
    e = 100 * ((X @ th + off) / y - 1)
    return np.mean(np.abs(e)), np.max(np.abs(e))


def main(paths):
    for path in paths:
        s = json.load(open(path))["samples"]
        print(f"{path}: {len(s)} architectures; fit on the even ones, judged on the odd ones")
        for phase, key in (("TTFT", "prefill"), ("TPOT", "decode")):
            X = np.array([r[key]["x"] for r in s])
            off = np.array([r[key]["offset"] for r in s])
            y = np.array([r["measured"]["ttft_ms" if key == "prefill" else "tpot_ms"] for r in s])
            # Architecture 0 is the base; prune k = i - 1 alternates random layers (k even) and
            # whole layers (k odd): fit on k % 4 in {0, 1}, judge on k % 4 in {2, 3}, so that
            # both sets hold both kinds and every width band.
            k = np.arange(len(s)) - 1
            tr = np.where((k < 0) | (k % 4 < 2))[0]
            te = np.where((k >= 0) & (k % 4 >= 2))[0]
            whole = te[k[te] % 2 == 1]
            rand = te[k[te] % 2 == 0]
            bare = errors(X[te], off[te], y[te], PRIOR)
            print(f"  {phase}: bare tables MAPE {bare[0]:.2f}% (max {bare[1]:.1f}%)")
            for ridge in (0, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1):
                th = fit(X[tr], off[tr], y[tr], ridge)
                m = errors(X[te], off[te], y[te], th)
                mw = errors(X[whole], off[whole], y[whole], th)
                mr = errors(X[rand], off[rand], y[rand], th)
                print(f"    ridge {ridge:<6g} MAPE {m[0]:.2f}% (max {m[1]:.1f}%; whole layers "
                      f"{mw[0]:.2f}%, random {mr[0]:.2f}%)  theta " + " ".join(f"{v:.2f}" for v in th))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
