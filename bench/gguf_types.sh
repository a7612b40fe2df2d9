#!/usr/bin/env bash
# stories15M exported as GGUF in f32, f16, q8_0 and q4_0: for each, the file size, the
# perplexity llama.cpp gives it and ours on the same held-out windows, and llama.cpp's TPOT.
# Prints a markdown table (also OUT/table.md; the figures in OUT/results.json).
#
#   bench/gguf_types.sh
#
# Columns:
#   size            bytes of model.gguf (`autocompress export --format gguf --dtype TYPE`)
#   ppl llama.cpp   tools/llamacpp/perplexity.mjs: llama.cpp's probability of each next token
#                   over the packed windows of 256 tokens `autocompress eval` scores
#   ppl ours        `autocompress eval` of the file's weights (`autocompress import gguf`: the
#                   model as the file stores it, q8_0 / q4_0 dequantized, run in fp32); the f32
#                   row is the source model itself
#   TPOT llama.cpp  tools/llamacpp/run.mjs: mean decode time per token of a greedy continuation
#                   of "Once upon a time" (up to 200 tokens), median of TPOT_RUNS runs
# The held-out text is HELDOUT stories sampled from stories15M with seed 20262 (as
# bench/vs_minitron.sh samples its held-out set).
#
# Environment: MODEL (the checkpoint folder to export, e.g. a compress run's model/; default
# stories15M itself; the held-out text is always sampled from stories15M), BIN (the CLI to run; without it build/autocompress is built), OUT (default
# out/gguf-types), HELDOUT (stories, default 32), THREADS (llama.cpp's threads, default 1: the
# TPOT of one core, unaffected by ggml's spinning threads on a busy machine), TPOT_RUNS
# (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/gguf-types}
heldout=${HELDOUT:-32}
threads=${THREADS:-1}
runs=${TPOT_RUNS:-5}
types=(f32 f16 q8_0 q4_0)

scripts/setup_node.sh >/dev/null
model_dir=$(scripts/fetch_stories15m.sh)
if [ -z "${BIN:-}" ]; then scripts/build.sh --target autocompress >/dev/null; fi
bin=${BIN:-build/autocompress}
ckpt=${AC_CACHE_DIR:-$HOME/.cache/autocompress}/stories15m/hf
[ -f "$ckpt/config.json" ] || $bin import llama2c "$model_dir/model.bin" "$model_dir/tokenizer.bin" --out "$ckpt"

log() { echo "[gguf-types $(date -u +%H:%M:%S)] $*" >&2; }
# json FILE EXPRESSION: one value of a JSON file (EXPRESSION indexes `j`).
json() { python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }

src=${MODEL:-$ckpt}
mkdir -p "$out"
if [ ! -f "$out/heldout.tokens" ]; then
  log "sampling $heldout held-out stories"
  $bin sample --model "$ckpt" --count "$heldout" --seed 20262 --out "$out/heldout.tokens.tmp" >/dev/null
  mv "$out/heldout.tokens.tmp" "$out/heldout.tokens"
fi
prompt="Once upon a time"
$bin tokenize --model "$ckpt" --prompt "$prompt" --json >"$out/prompt.json"
prompt_ids=$(json "$out/prompt.json" "','.join(str(i) for i in j['ids'])")

for t in "${types[@]}"; do
  d=$out/$t
  if [ ! -f "$d/model.gguf" ]; then
    log "$t: export"
    rm -rf "$d"
    $bin export --model "$src" --out "$d" --format gguf --dtype "$t" >/dev/null
  fi
  weights=$src
  if [ "$t" != f32 ]; then
    [ -f "$d/back/config.json" ] || $bin import gguf "$d/model.gguf" --out "$d/back" >/dev/null
    weights=$d/back
  fi
  log "$t: perplexity, ours"
  $bin eval --model "$weights" --data "$out/heldout.tokens" --out "$d/eval.json" >/dev/null
  log "$t: perplexity, llama.cpp"
  node tools/llamacpp/perplexity.mjs "$d/model.gguf" "$out/heldout.tokens" 256 -1 "$threads" \
    >"$d/ppl_llamacpp.json"
  for r in $(seq 1 "$runs"); do
    log "$t: TPOT, llama.cpp run $r of $runs"
    node tools/llamacpp/run.mjs "$d/model.gguf" "$prompt" "$prompt_ids" 200 "$threads" >"$d/tpot_$r.json"
  done
done

# The table, from the files above.
python3 - "$out" "$heldout" "$threads" "$runs" "${types[@]}" <<'EOF_PY' | tee "$out/table.md"
import json, os, statistics, sys
out, heldout, threads, runs, types = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
load = lambda *p: json.load(open(os.path.join(out, *p)))
rows = []
for t in types:
    cpp = load(t, "ppl_llamacpp.json")
    tpots = [load(t, f"tpot_{r}.json")["tpot_ms"] for r in range(1, runs + 1)]
    rows.append({"type": t, "bytes": os.path.getsize(os.path.join(out, t, "model.gguf")),
                 "ppl_llama_cpp": cpp["perplexity"],
                 "ppl_ours": load(t, "eval.json")["models"][0]["eval"]["perplexity"],
                 "tpot_ms": statistics.median(tpots), "tpot_ms_runs": tpots,
                 "tokens_scored": cpp["tokens"], "windows": cpp["sequences"],
                 "llama_cpp": cpp["llama_cpp"]["release"]})
json.dump(rows, open(os.path.join(out, "results.json"), "w"), indent=1)
print(f"| type | size | perplexity, llama.cpp | perplexity, ours (fp32, the file's weights) "
      f"| TPOT, llama.cpp ({threads} thread{'s' if threads != '1' else ''}) |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['type']} | {r['bytes'] / 1e6:.1f} MB | {r['ppl_llama_cpp']:.4f} | {r['ppl_ours']:.4f} "
          f"| {r['tpot_ms']:.3f} ms |")
print(f"\n{rows[0]['tokens_scored']} predicted tokens ({rows[0]['windows']} windows of 256, {heldout} "
      f"held-out stories); TPOT: median of {runs} runs of up to 200 tokens; llama.cpp "
      f"{rows[0]['llama_cpp']} (node-llama-cpp 3.21.1, CPU).")
EOF_PY
