#!/usr/bin/env bash
# Seeds the fuzz corpora from real files the project makes (docs/fuzzing.md). Nothing here is
# committed: every seed is regenerated from the CLI, stories15M and the repository's JSON.
#
#   fuzz/make_corpus.sh [SEED_DIR] [AUTOCOMPRESS_BIN]
#     SEED_DIR          default build-fuzz/seeds; one folder per fuzz target
#     AUTOCOMPRESS_BIN  default build/autocompress (scripts/build.sh); without it only the seeds
#                       that need no CLI are made (a warning says which are missing)
#
# Seeds: a small random llama2.c model (D 16, L 2, V 512) whose tokenizer is the first 511
# pieces of stories15M's tokenizer.bin plus its ' ' piece, imported with `autocompress import
# llama2c` (config.json, model.safetensors, tokenizer.bin) and exported to GGUF (f32, f16, q8_0, q4_0)
# with `autocompress export`; a sharded index naming its tensors; token files from `autocompress
# sample`; stories15M's model.bin header (its first 4096 bytes: a truncated file); DeciLM
# block_configs and arch.json variants of the config; scenarios/, devices/, engines/; a profile
# of the tiny model from `autocompress profile --min-repeats 1`.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-build-fuzz/seeds}
bin=${2:-build/autocompress}
stories="${AC_CACHE_DIR:-$HOME/.cache/autocompress}/stories15m"
work=$(mktemp -d "${TMPDIR:-/tmp}/ac-corpus.XXXXXX")
trap 'rm -rf "$work"' EXIT
targets=(safetensors safetensors_index config gguf llama2c tokenizer hf_tokenizer token_file scenario profile)
for t in "${targets[@]}"; do mkdir -p "$seeds/$t"; done

# The tiny llama2.c model and tokenizer (deterministic).
python3 - "$work" "$stories/tokenizer.bin" <<'EOF'
import os, random, struct, sys
work, stories_tok = sys.argv[1], sys.argv[2]
V = 512
records = []
if os.path.exists(stories_tok):  # the first 511 pieces of stories15M and its ' ' piece
    b = open(stories_tok, 'rb').read()
    max_len, off, allr = struct.unpack_from('<i', b)[0], 4, []
    while off < len(b):
        score, n = struct.unpack_from('<fi', b, off)
        allr.append((score, b[off + 8:off + 8 + n]))
        off += 8 + n
    space = next(r for r in allr if r[1] == b' ')
    records = allr[:V - 1] + [space]
else:  # synthetic: specials, 256 byte tokens, ' ', merges of two letters
    records = [(0.0, b'<unk>'), (0.0, b'\n<s>\n'), (0.0, b'\n</s>\n')]
    records += [(0.0, ('<0x%02X>' % i).encode()) for i in range(256)] + [(-1.0, b' ')]
    letters = 'etaoinshrdlu'
    pieces = [a + b for a in letters for b in letters] + [' ' + a for a in letters]
    records += [(-2.0 - i, p.encode()) for i, p in enumerate(pieces)][:V - len(records)]
    records += [(-1e3 - i, b'x%d' % i) for i in range(V - len(records))]
max_len = max(len(p) for _, p in records)
with open(os.path.join(work, 'tokenizer.bin'), 'wb') as f:
    f.write(struct.pack('<i', max_len))
    for s, p in records:
        f.write(struct.pack('<fi', s, len(p)) + p)
dim, hidden, layers, heads, kv, seq = 16, 32, 2, 2, 1, 8
hd = dim // heads
n = (V * dim + layers * dim + 2 * layers * dim * dim + 2 * layers * kv * hd * dim + layers * dim
     + 3 * layers * hidden * dim + dim + seq * hd)
rng = random.Random(10)
with open(os.path.join(work, 'model.bin'), 'wb') as f:
    f.write(struct.pack('<7i', dim, hidden, layers, heads, kv, V, seq))
    f.write(struct.pack('<%df' % n, *[rng.gauss(0, 0.1) for _ in range(n)]))
EOF
cp "$work/model.bin" "$seeds/llama2c/tiny-model.bin"
[ -f "$stories/model.bin" ] && head -c 4096 "$stories/model.bin" > "$seeds/llama2c/stories15m-head.bin"
# tokenizer target input: uint32 vocab_size (little-endian), then tokenizer.bin.
{ printf '\x00\x02\x00\x00'; cat "$work/tokenizer.bin"; } > "$seeds/tokenizer/tiny-512.bin"

# hf_tokenizer: two small tokenizer.json files of the two families it reads (the real ones are
# megabytes, too slow per input): byte-level BPE with Llama 3's Split regex and an added special
# token, and Llama 2's SentencePiece-style BPE with byte fallback, its normalizers, BOS template
# and decoders.
python3 - "$seeds/hf_tokenizer" <<'PYEOF'
import json, os, sys
out = sys.argv[1]
bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
b2u = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {b2u[b]: b for b in range(256)}
for k, t in enumerate(["he", "ll", "hell", "\u0120w", "hello", "\u0120t", "\u0120th"]):
    vocab[t] = 256 + k
regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
         "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
bl = {"version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [{"id": 263, "content": "<|begin_of_text|>", "single_word": False, "lstrip": False,
                        "rstrip": False, "normalized": False, "special": True}],
      "normalizer": None,
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
          {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
      "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
      "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
      "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False,
                "ignore_merges": True, "vocab": vocab,
                "merges": ["h e", "l l", "he ll", "\u0120 w", "hell o", "\u0120 t", "\u0120t h"]}}
with open(os.path.join(out, "byte-level.json"), "w") as f:
    json.dump(bl, f, ensure_ascii=False)
sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    sp_vocab["<0x%02X>" % b] = 3 + b
for k, t in enumerate(["\u2581", "h", "i", "\u2581h", "\u2581hi"]):
    sp_vocab[t] = 259 + k
def added(i, c):
    return {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}
sp = {"version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
      "normalizer": {"type": "Sequence", "normalizers": [
          {"type": "Prepend", "prepend": "\u2581"},
          {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
      "pre_tokenizer": None,
      "post_processor": {"type": "TemplateProcessing",
                         "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}}],
                         "pair": [],
                         "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
      "decoder": {"type": "Sequence", "decoders": [
          {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
          {"type": "ByteFallback"}, {"type": "Fuse"},
          {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
      "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                "vocab": sp_vocab, "merges": ["\u2581 h", "\u2581h i"]}}
with open(os.path.join(out, "sentencepiece.json"), "w") as f:
    json.dump(sp, f, ensure_ascii=False)
PYEOF

# Repository JSON.
cp scenarios/*.json "$seeds/scenario/"
for f in devices/*.json; do cp "$f" "$seeds/scenario/device-$(basename "$f")"; done
for f in engines/*.json; do cp "$f" "$seeds/scenario/engine-$(basename "$f")"; done
[ -d tests/fixtures/configs ] && cp tests/fixtures/configs/*.json "$seeds/config/"
# The hybrid Mamba-2 / attention / MoE configs (nemotron_h) of the case study.
for f in architectures/*.json; do cp "$f" "$seeds/config/arch-$(basename "$f")"; done

missing=()
if [ -x "$bin" ]; then
  export AC_QUIET=1 AC_NUM_THREADS=1
  "$bin" import llama2c "$work/model.bin" "$work/tokenizer.bin" --out "$work/tiny" >/dev/null
  "$bin" export --model "$work/tiny" --out "$work/gguf32" --format gguf >/dev/null
  "$bin" export --model "$work/tiny" --out "$work/gguf16" --format gguf --dtype f16 >/dev/null
  # D 16 rows stay F16; the FFN's down projection (rows of 32) is quantized.
  for q in q8_0 q4_0; do
    "$bin" export --model "$work/tiny" --out "$work/gguf-$q" --format gguf --dtype $q >/dev/null
    cp "$work/gguf-$q/model.gguf" "$seeds/gguf/tiny-$q.gguf"
  done
  cp "$work/tiny/model.safetensors" "$seeds/safetensors/tiny.safetensors"
  cp "$work/tiny/config.json" "$seeds/config/tiny-config.json"
  cp "$work/gguf32/model.gguf" "$seeds/gguf/tiny-f32.gguf"
  cp "$work/gguf16/model.gguf" "$seeds/gguf/tiny-f16.gguf"
  "$bin" sample --model "$work/tiny" --count 4 --seq-len 16 --seed 1 \
    --out "$seeds/token_file/tiny.tokens" >/dev/null
  if timeout 300 "$bin" profile --model "$work/tiny" --min-repeats 1 \
       --out "$seeds/profile/tiny-profile.json" >/dev/null 2>&1; then :; else
    missing+=(profile)
  fi
else
  echo "[make_corpus] warning: $bin not found: no CLI-made seeds (safetensors, config, gguf," \
       "token_file, profile); run scripts/build.sh first" >&2
  missing+=(safetensors gguf token_file profile)
fi

# Variants built from the files above (python: small edits of real files).
python3 - "$seeds" "$work" <<'EOF'
import json, os, struct, sys
seeds, work = sys.argv[1], sys.argv[2]
def put(target, name, obj):
    with open(os.path.join(seeds, target, name), 'w') as f:
        json.dump(obj, f, indent=1)
cfg_path = os.path.join(seeds, 'config', 'tiny-config.json')
cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {
    'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'vocab_size': 512,
    'hidden_size': 16, 'intermediate_size': 32, 'num_hidden_layers': 2,
    'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 8,
    'max_position_embeddings': 8, 'rms_norm_eps': 1e-5, 'rope_theta': 10000.0,
    'tie_word_embeddings': True, 'bos_token_id': 1, 'eos_token_id': 2}
deci = dict(cfg, architectures=['DeciLMForCausalLM'], model_type='nemotron-nas')
deci['block_configs'] = [
    {'attention': {'no_op': False, 'replace_with_linear': False, 'n_heads_in_group': 2},
     'ffn': {'no_op': False, 'replace_with_linear': False, 'ffn_mult': 24.0}},
    {'attention': {'no_op': True, 'replace_with_linear': False, 'n_heads_in_group': None},
     'ffn': {'no_op': False, 'replace_with_linear': False, 'ffn_mult': 1.3, 'intermediate_size': 20}},
    {'attention': {'n_heads_in_group': 1, 'num_attention_heads': 4},
     'ffn': {'ffn_mult': None}}]
put('config', 'deci-config.json', deci)
llama3 = dict(cfg, rope_scaling={'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0,
                                 'high_freq_factor': 4.0, 'original_max_position_embeddings': 8192},
              eos_token_id=[2, 3])
put('config', 'llama3-config.json', llama3)
put('config', 'qwen3-moe-config.json', {
    'architectures': ['Qwen3MoeForCausalLM'], 'model_type': 'qwen3_moe', 'vocab_size': 50,
    'hidden_size': 8, 'intermediate_size': 12, 'num_hidden_layers': 4,
    'num_attention_heads': 2, 'num_key_value_heads': 1, 'head_dim': 4, 'num_experts': 4,
    'num_experts_per_tok': 2, 'moe_intermediate_size': 6, 'decoder_sparse_step': 2,
    'mlp_only_layers': [3]})
put('config', 'mixtral-config.json', {
    'architectures': ['MixtralForCausalLM'], 'model_type': 'mixtral', 'vocab_size': 50,
    'hidden_size': 8, 'intermediate_size': 6, 'num_hidden_layers': 2,
    'num_attention_heads': 2, 'num_key_value_heads': 2, 'num_local_experts': 3,
    'num_experts_per_tok': 1})
put('config', 'arch.json', {'config': deci, 'search': {'method': 'autocompress', 'steps': 10},
                             'limits': {'tpot_ms': 3.5}})
# A Nemotron-H target: its config.json leaves removed blocks out, arch.json lists them.
nano = json.load(open('architectures/nemotron-3-nano-30b-a3b.json'))
put('config', 'nemotron-h-arch.json', {'config': nano, 'removed_layers': [1, 4]})
# A sharded index naming the tiny model's tensors (from its safetensors header, or a fixed list).
names = ['model.embed_tokens.weight', 'model.norm.weight', 'model.layers.0.mlp.up_proj.weight']
st = os.path.join(seeds, 'safetensors', 'tiny.safetensors')
if os.path.exists(st):
    b = open(st, 'rb').read()
    n = struct.unpack_from('<Q', b)[0]
    names = sorted(k for k in json.loads(b[8:8 + n]) if k != '__metadata__')
    # A two-tensor file cut from the real one's header layout: metadata only, and empty.
    hdr = json.dumps({'__metadata__': {'format': 'pt'}}).encode()
    open(os.path.join(seeds, 'safetensors', 'empty.safetensors'), 'wb').write(
        struct.pack('<Q', len(hdr)) + hdr)
half = len(names) // 2
put('safetensors_index', 'model.safetensors.index.json',
    {'metadata': {'total_size': 1234},
     'weight_map': {k: 'model-%05d-of-00002.safetensors' % (1 if i < half else 2)
                    for i, k in enumerate(names)}})
# A profile by hand when the CLI made none (same format as save_profile).
pf = os.path.join(seeds, 'profile', 'tiny-profile.json')
if not os.path.exists(pf):
    put('profile', 'tiny-profile.json', {
        'format': 'autocompress-profile', 'version': 1, 'device': 'cpu',
        'identity': {'cpu_model': 'x', 'cores': 2, 'threads': 2, 'isa': ['avx2'],
                     'torch_version': '1.13', 'date': '2026-01-01', 'timer': 'wall'},
        'workload': {'prompt_tokens': 128, 'output_tokens': 128, 'batch_size': 1,
                     'weight_dtype': 'fp32', 'kv_cache_dtype': 'fp32', 'tensor_parallel': 1},
        'dispatch_overhead_ms': 0.002, 'memory_bandwidth_bytes_per_s': 1e10,
        'gemm_peak_flops': 1e11,
        'calibration': {'prefill_step_ms': 0, 'decode_step_ms': 0, 'models': 0},
        'elapsed_s': 1.0,
        'tables': {'gemm': {'dims': ['M', 'N', 'K'], 'entries': [
                       {'dims': [1, 16, 16], 'median_ms': 0.01, 'spread': 0.1, 'repeats': 7},
                       {'dims': [1, 32, 16], 'median_ms': 0.02, 'spread': 0.1, 'repeats': 7},
                       {'dims': [128, 32, 32], 'median_ms': 0.2, 'spread': 0.1, 'repeats': 7}]},
                   'rmsnorm': {'dims': ['M', 'D'], 'entries': [
                       {'dims': [1, 16], 'median_ms': 0.001, 'spread': 0.0, 'repeats': 7}]}}})
# A token file by hand when the CLI made none: magic, count, vocab, ids.
tf = os.path.join(seeds, 'token_file', 'tiny.tokens')
if not os.path.exists(tf):
    ids = [1, 5, 9, 300, 2, 1, 7]
    open(tf, 'wb').write(b'ACTOK1\0\0' + struct.pack('<QQ', len(ids), 512) +
                         struct.pack('<%di' % len(ids), *ids))
EOF

for t in "${targets[@]}"; do
  printf '[make_corpus] %-18s %3d seeds\n' "$t" "$(ls "$seeds/$t" | wc -l)"
done
if ((${#missing[@]})); then echo "[make_corpus] without CLI seeds: ${missing[*]}" >&2; fi
