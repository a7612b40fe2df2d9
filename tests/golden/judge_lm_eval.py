#!/usr/bin/env python3
"""lm-evaluation-harness as the judge of our task scorer: our task files run as lm-eval local tasks
(`--model hf`, CPU, float32) and `autocompress eval --tasks` runs on the same items; the two are
compared item by item.

For each TASK file (docs/eval.md, "Task files"; its first --limit items), this script writes
  - an lm-eval task YAML beside a JSONL of the items without our header line (lm-eval's `json`
    dataset of datasets reads every line as a row):
      multiple_choice: output_type multiple_choice, doc_to_text `context`, doc_to_choice
        `choices`, doc_to_target `gold`, target_delimiter from our header, metrics acc, acc_norm;
      loglikelihood:   output_type loglikelihood, doc_to_text `context`, doc_to_target
        "{{ DELIMITER + target }}" (lm-eval's loglikelihood requests are (context, target) with
        no delimiter, ours put the header's target_delimiter between them), metrics acc,
        perplexity;
  - the same items with our header, for `autocompress eval --tasks F --samples-out S.jsonl`.

Each MODEL is a checkpoint folder transformers loads (LlamaForCausalLM). Its tokenizer for lm-eval
is its tokenizer.json; where it has only llama2.c's tokenizer.bin (stories15M), transformers'
LlamaTokenizer is built from it with transformers' own generate_merges (the SentencePiece
extractor's rule: every split of a piece into two pieces is a merge, ranked by the piece's
score), byte tokens named <0xNN>, and saved beside the tasks.

Compared per item and choice (lm-eval's --log_samples output against ours):
  - token ids: ours (context, continuation) against lm-eval's own HFLM._encode_pair on the
    request lm-eval logged;
  - loglikelihood: |ours - lm-eval| <= LL_TOLERANCE (nats; both float32, different kernels);
  - is_greedy, and the metrics lm-eval logged per item (acc, acc_norm; for loglikelihood tasks acc
    and the target's loglikelihood) against ours. A differing acc / acc_norm is a failure unless
    the two best choices are within LL_TOLERANCE of each other in lm-eval's own scores (a near
    tie that float32 rounding may decide either way); such items are listed as near ties.
  - the task means lm-eval reports (acc, acc_norm, perplexity) against ours.

Usage (tests/test_judge.cpp runs it on 40 items of each family):

  OMP_NUM_THREADS=1 $AC_TORCH_VENV/bin/python tests/golden/judge_lm_eval.py \\
      --cli build/autocompress --work DIR [--limit N] [--batch-size B] [--summary F.json] \\
      [--reuse] --model NAME=DIR [--model NAME=DIR ...] TASK.jsonl [TASK.jsonl ...]

with the environment of scripts/setup_torch_venv.sh (lm_eval pinned in
tests/golden/requirements-hf.txt; other versions are refused). Prints one line per model and
task, writes the summary (items compared, agreements, worst differences, failures) as JSON, and
exits 0 when every check holds, 1 otherwise, listing each failing item.
"""
import argparse
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach the Hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# datasets caches the JSONL it converts: keep that out of $HOME.
os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="ac-judge-datasets-"))

PINNED = {"torch": "2.11.0", "transformers": "5.25.0", "lm_eval": "0.4.13"}

import torch  # noqa: E402
import transformers  # noqa: E402
from importlib.metadata import version  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama2c_tokenizer  # noqa: E402

# Both sides sum float32 log-probabilities over a few tokens; measured worst |diff| is recorded
# in docs/benchmarks.md, far below this.
LL_TOLERANCE = 1e-3
SPACE = "\u2581"  # SentencePiece's space


def check_versions():
    bad = [f"{p}=={v} (found {version(p)})" for p, v in PINNED.items()
           if version(p).split("+")[0] != v]
    if bad:
        sys.exit("judge_lm_eval: needs " + ", ".join(bad) +
                 ": pip install -r tests/golden/requirements-hf.txt")


def read_task(path):
    """(header, items) of one of our task files; items as parsed JSON objects."""
    lines = [ln for ln in Path(path).read_text(encoding="utf-8").split("\n") if ln.strip()]
    if not lines:
        sys.exit(f"judge_lm_eval: {path}: empty task file")
    header = json.loads(lines[0])
    if header.get("format") not in ("multiple_choice", "loglikelihood"):
        sys.exit(f"judge_lm_eval: {path}:1: 'format' is {header.get('format')!r}, expected "
                 "\"multiple_choice\" or \"loglikelihood\"")
    header.setdefault("name", Path(path).stem)
    header.setdefault("target_delimiter", " ")
    return header, [json.loads(ln) for ln in lines[1:]]


def jinja_string(s):
    """`s` as a Jinja string literal (double quotes, backslash escapes as in JSON)."""
    return json.dumps(s)


def task_yaml(name, header, data_file):
    """The lm-eval task config of one of our task files (docs/eval.md, "Agreement with
    lm-evaluation-harness"). Values are JSON, which YAML reads as they are."""
    lines = [f"task: {json.dumps(name)}",
             "dataset_path: json",
             "dataset_kwargs:",
             "  data_files:",
             f"    test: {json.dumps(str(data_file))}",
             "test_split: test",
             "num_fewshot: 0",
             "doc_to_text: context"]
    if header["format"] == "multiple_choice":
        lines += ["output_type: multiple_choice",
                  "doc_to_choice: choices",
                  "doc_to_target: gold",
                  f"target_delimiter: {json.dumps(header['target_delimiter'])}",
                  "metric_list:",
                  "  - metric: acc",
                  "  - metric: acc_norm"]
    else:
        template = "{{ " + jinja_string(header["target_delimiter"]) + " + target }}"
        lines += ["output_type: loglikelihood",
                  f"doc_to_target: {json.dumps(template)}",
                  "metric_list:",
                  "  - metric: acc",
                  "  - metric: perplexity"]
    return "\n".join(lines) + "\n"


def write_tasks(task_files, limit, work):
    """Writes, per task file, the lm-eval YAML + JSONL and our cut task file; returns a list of
    {name, lm_eval_task, header, items, ours_file}."""
    include = work / "lm_eval_tasks"
    include.mkdir(parents=True, exist_ok=True)
    out = []
    for f in task_files:
        header, items = read_task(f)
        items = items[:limit] if limit else items
        name = header["name"]
        lm_name = "ac_" + name  # never the name of one of lm-eval's own tasks
        data = include / f"{name}.jsonl"
        data.write_text("".join(json.dumps(it) + "\n" for it in items), encoding="utf-8")
        (include / f"{name}.yaml").write_text(task_yaml(lm_name, header, data.resolve()),
                                              encoding="utf-8")
        ours = work / "ours_tasks" / f"{name}.jsonl"
        ours.parent.mkdir(parents=True, exist_ok=True)
        ours.write_text("".join(json.dumps(x) + "\n" for x in [header] + items), encoding="utf-8")
        out.append({"name": name, "lm_eval_task": lm_name, "header": header, "items": items,
                    "ours_file": ours})
    return out


def llama2c_hf_tokenizer(model_dir, out_dir):
    """transformers' LlamaTokenizer of a llama2.c tokenizer.bin, saved to out_dir (tokenizer.json,
    tokenizer_config.json). Ids 0, 1, 2 are <unk>, <s>, </s>; 3..258 the bytes <0x00>..<0xFF>;
    every other piece is its text with ' ' written as U+2581, its score the merge rank's key."""
    from transformers import LlamaTokenizer
    from transformers.tokenization_utils_base import generate_merges
    pieces, scores, _ = llama2c_tokenizer.load(Path(model_dir) / "tokenizer.bin")
    vocab, vocab_scores = {}, {}
    for i, p in enumerate(pieces):
        if i < 3:
            name = ("<unk>", "<s>", "</s>")[i]
        elif llama2c_tokenizer.is_byte(i):
            name = f"<0x{i - 3:02X}>"
        else:
            name = p.decode("utf-8").replace(" ", SPACE)
        if name in vocab:
            sys.exit(f"judge_lm_eval: {model_dir}/tokenizer.bin: piece {i} {name!r} repeats piece "
                     f"{vocab[name]}")
        vocab[name] = i
        vocab_scores[name] = scores[i]
    tok = LlamaTokenizer(vocab=vocab, merges=generate_merges(vocab, vocab_scores),
                         add_bos_token=True, add_eos_token=False)
    tok.save_pretrained(out_dir)
    return out_dir


def tokenizer_for(model_dir, work, name):
    if (Path(model_dir) / "tokenizer.json").exists():
        return str(model_dir)
    return str(llama2c_hf_tokenizer(model_dir, work / f"tokenizer-{name}"))


def make_lm(model_dir, tokenizer_dir, batch_size):
    """lm-eval's HFLM (`--model hf`) on the CPU in float32."""
    from lm_eval.models.huggingface import HFLM
    return HFLM(pretrained=str(model_dir), tokenizer=tokenizer_dir, dtype="float32", device="cpu",
                batch_size=batch_size)


def run_lm_eval(lm, tasks, work):
    """lm-eval's simple_evaluate on our tasks, 0-shot, with the per-sample log; returns
    (samples by task, results by task)."""
    import lm_eval
    from lm_eval.tasks import TaskManager
    manager = TaskManager(include_path=str(work / "lm_eval_tasks"), include_defaults=False)
    out = lm_eval.simple_evaluate(model=lm, tasks=[t["lm_eval_task"] for t in tasks],
                                  task_manager=manager, log_samples=True, bootstrap_iters=0,
                                  random_seed=0, numpy_random_seed=0, torch_random_seed=0,
                                  fewshot_random_seed=0)
    return out["samples"], out["results"]


def means_of_samples(samples):
    """lm-eval's task means from its per-sample log: the mean of acc / acc_norm, and for
    perplexity its aggregation exp(-mean(loglikelihood)) (lm_eval.api.metrics.perplexity)."""
    out = {}
    for metric in ("acc", "acc_norm", "perplexity"):
        if samples and metric in samples[0]:
            v = sum(float(x[metric]) for x in samples) / len(samples)
            out[f"{metric},none"] = math.exp(-v) if metric == "perplexity" else v
    return out


def lm_eval_outputs(lm, tasks, work, name, reuse):
    """lm-eval's samples and results for one model: run now and saved in WORK, or with --reuse
    read from an earlier run's lm_eval-NAME.samples.json (results recomputed from the samples
    where lm_eval-NAME.results.json is absent). Returns (samples, results, how)."""
    samples_file = work / f"lm_eval-{name}.samples.json"
    results_file = work / f"lm_eval-{name}.results.json"
    if reuse and samples_file.exists():
        samples = json.loads(samples_file.read_text())
        if results_file.exists():
            return samples, json.loads(results_file.read_text()), "reused"
        results = {t["lm_eval_task"]: means_of_samples(samples[t["lm_eval_task"]]) for t in tasks}
        return samples, results, "reused, means from the samples"
    samples, results = run_lm_eval(lm, tasks, work)
    samples_file.write_text(json.dumps(samples))
    results_file.write_text(json.dumps(results, default=str))
    return samples, results, "run"


def run_ours(cli, model_dir, tasks, work, name):
    """`autocompress eval --tasks ... --samples-out` on the cut task files; returns its results
    JSON and the samples, keyed by (task, doc_id)."""
    samples = work / f"ours-{name}.samples.jsonl"
    cmd = [str(cli), "eval", "--model", str(model_dir), "--json", "--samples-out", str(samples)]
    for t in tasks:
        cmd += ["--tasks", str(t["ours_file"])]
    env = dict(os.environ, AC_QUIET="1")
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit(f"judge_lm_eval: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr}")
    by_item = {}
    for line in samples.read_text(encoding="utf-8").splitlines():
        s = json.loads(line)
        by_item[(s["task"], s["doc_id"])] = s
    return json.loads(run.stdout), by_item


def request_args(sample):
    """The (context, continuation) strings of each request lm-eval logged for one item: a list
    of tuples in 0.4.13's samples."""
    return [(a[0], a[1]) for a in sample["arguments"]]


def near_tie(scores, tolerance):
    """Whether the two best of `scores` are within `tolerance`."""
    top = sorted(scores, reverse=True)
    return len(top) > 1 and top[0] - top[1] <= tolerance


def compare_task(lm, task, lm_samples, ours, model_name, failures):
    """Item-by-item comparison of one task; returns its summary row."""
    mc = task["header"]["format"] == "multiple_choice"
    row = {"model": model_name, "task": task["name"], "format": task["header"]["format"],
           "items": 0, "requests": 0, "tokens_equal": 0, "ll_max_abs_diff": 0.0,
           "is_greedy_equal": 0, "acc_equal": 0, "acc_norm_equal": 0 if mc else None,
           "near_ties": []}
    for s in sorted(lm_samples, key=lambda s: s["doc_id"]):
        k = s["doc_id"]
        o = ours.get((task["name"], k))
        where = f"{model_name} {task['name']} item {k} (line {k + 2})"
        if o is None:
            failures.append(f"{where}: no line in our --samples-out")
            continue
        row["items"] += 1
        resps = [r[0] for r in s["resps"]]  # [(ll, is_greedy)] per request
        lm_ll = [float(r[0]) for r in resps]
        lm_greedy = [bool(r[1]) for r in resps]
        args = request_args(s)
        for c, (ctx, cont) in enumerate(args):
            row["requests"] += 1
            ctx_enc, cont_enc = lm._encode_pair(ctx, cont)
            if ctx_enc == o["context_tokens"] and cont_enc == o["continuation_tokens"][c]:
                row["tokens_equal"] += 1
            else:
                failures.append(f"{where} choice {c}: token ids differ: lm-eval {ctx_enc[-6:]} | "
                                f"{cont_enc}, ours {o['context_tokens'][-6:]} | "
                                f"{o['continuation_tokens'][c]}")
            d = abs(lm_ll[c] - o["loglikelihoods"][c])
            row["ll_max_abs_diff"] = max(row["ll_max_abs_diff"], d)
            if d > LL_TOLERANCE:
                failures.append(f"{where} choice {c}: loglikelihood lm-eval {lm_ll[c]:.6f}, ours "
                                f"{o['loglikelihoods'][c]:.6f} (|diff| {d:.2e} > {LL_TOLERANCE})")
            if lm_greedy[c] == o["is_greedy"][c]:
                row["is_greedy_equal"] += 1
            else:
                failures.append(f"{where} choice {c}: is_greedy lm-eval {lm_greedy[c]}, ours "
                                f"{o['is_greedy'][c]}")
        metrics = [("acc", lm_ll)]
        if mc:
            lengths = [len(ch) for ch in task["items"][k]["choices"]]
            metrics.append(("acc_norm", [ll / n for ll, n in zip(lm_ll, lengths)]))
        for metric, scores in metrics:
            if float(s[metric]) == float(o[metric]):
                row[f"{metric}_equal"] += 1
            elif mc and near_tie(scores, LL_TOLERANCE):
                row["near_ties"].append({"doc_id": k, "metric": metric,
                                         "lm_eval": s[metric], "ours": o[metric]})
            else:
                failures.append(f"{where}: {metric} lm-eval {s[metric]}, ours {o[metric]}")
        if not mc and abs(float(s["perplexity"]) - lm_ll[0]) > 0:
            failures.append(f"{where}: lm-eval's per-item perplexity {s['perplexity']} is not "
                            f"its loglikelihood {lm_ll[0]}")
    if row["items"] != len(task["items"]):
        failures.append(f"{model_name} {task['name']}: lm-eval logged {row['items']} items of "
                        f"{len(task['items'])}")
    return row


def compare_means(row, lm_result, ours_task, failures):
    """lm-eval's task means against ours (acc and acc_norm exactly: both are means of the same
    0/1 items; perplexity within the log-likelihood tolerance)."""
    row["lm_eval"], row["ours"] = {}, {}
    for metric in ("acc", "acc_norm", "perplexity"):
        key = f"{metric},none"
        if key not in lm_result:
            continue
        lm_v = float(lm_result[key])
        ours_v = float(ours_task["metrics"][metric]["value"])
        row["lm_eval"][metric], row["ours"][metric] = lm_v, ours_v
        tol = 1e-12 if metric != "perplexity" else ours_v * LL_TOLERANCE
        if abs(lm_v - ours_v) > tol + len(row["near_ties"]) / max(row["items"], 1):
            failures.append(f"{row['model']} {row['task']}: mean {metric} lm-eval {lm_v}, ours "
                            f"{ours_v}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tasks", nargs="+", type=Path, help="our task files (docs/eval.md)")
    p.add_argument("--model", action="append", required=True, metavar="NAME=DIR",
                   help="a checkpoint transformers loads; repeat for more")
    p.add_argument("--cli", type=Path, required=True, help="the autocompress binary")
    p.add_argument("--work", type=Path, required=True, help="folder for YAMLs, tokenizers, logs")
    p.add_argument("--limit", type=int, default=0, help="first N items of each file (0 = all)")
    p.add_argument("--batch-size", type=int, default=16, help="lm-eval's batch size")
    p.add_argument("--summary", type=Path, help="write the summary JSON here")
    p.add_argument("--reuse", action="store_true",
                   help="compare with lm-eval's log of an earlier run in WORK where there is one "
                        "(lm_eval-NAME.samples.json) instead of running lm-eval again")
    a = p.parse_args()
    check_versions()
    logging.getLogger("lm-eval").setLevel(logging.WARNING)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    a.work.mkdir(parents=True, exist_ok=True)
    tasks = write_tasks(a.tasks, a.limit, a.work)
    failures, rows, timing = [], [], {}
    for spec in a.model:
        name, _, model_dir = spec.partition("=")
        if not model_dir:
            sys.exit(f"judge_lm_eval: --model {spec!r}: expected NAME=DIR")
        t0 = time.time()
        lm = make_lm(model_dir, tokenizer_for(model_dir, a.work, name), a.batch_size)
        lm_samples, lm_results, how = lm_eval_outputs(lm, tasks, a.work, name, a.reuse)
        t1 = time.time()
        ours_out, ours = run_ours(a.cli, model_dir, tasks, a.work, name)
        t2 = time.time()
        timing[name] = {"lm_eval": how, "lm_eval_s": round(t1 - t0, 1),
                        "ours_s": round(t2 - t1, 1)}
        for i, t in enumerate(tasks):
            row = compare_task(lm, t, lm_samples[t["lm_eval_task"]], ours, name, failures)
            compare_means(row, lm_results[t["lm_eval_task"]], ours_out["models"][0]["tasks"][i],
                          failures)
            rows.append(row)
            print(f"[lm-eval] {name} {t['name']}: {row['items']} items, {row['requests']} requests:"
                  f" tokens {row['tokens_equal']}/{row['requests']}, is_greedy "
                  f"{row['is_greedy_equal']}/{row['requests']}, acc {row['acc_equal']}/"
                  f"{row['items']}" + (f", acc_norm {row['acc_norm_equal']}/{row['items']}"
                                       if row["acc_norm_equal"] is not None else "") +
                  f", near ties {len(row['near_ties'])}, max |ll diff| "
                  f"{row['ll_max_abs_diff']:.2e} nats; means lm-eval {row['lm_eval']} ours "
                  f"{row['ours']}")
    summary = {"versions": {p: version(p) for p in PINNED}, "ll_tolerance": LL_TOLERANCE,
               "limit": a.limit, "batch_size": a.batch_size, "tasks": rows, "timing": timing,
               "failures": failures}
    if a.summary:
        a.summary.write_text(json.dumps(summary, indent=1) + "\n")
    for f in failures[:50]:
        print("FAIL " + f)
    if len(failures) > 50:
        print(f"... and {len(failures) - 50} more failures")
    print(f"[lm-eval] {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
