#!/usr/bin/env python3
"""Our exports read back by the field's code: gguf-py reads every GGUF, transformers every HF
folder, and each is compared with what the export was meant to hold.

Each EXPORT is a folder `autocompress export` wrote; its export_report.json names the source
checkpoint (`source`: our config.json, model.safetensors in fp32, tokenizer.bin) and `dtype`.
The expectations are computed here from those files, never from the export itself:

  model.gguf (any --dtype; architecture `llama` or `deci`), read with gguf.GGUFReader:
    - metadata: the keys and value types gguf-py's own GGUFWriter writes for the source config
      (add_context_length, add_head_count, ...: per-layer lists for `deci`, as
      convert_hf_to_gguf.py DeciModel.set_gguf_parameters writes them), the vocabulary of
      tokenizer.bin as llama.cpp's convert-llama2c-to-ggml reads it, and our own keys
      (autocompress.hf_config, .ffn_free_layers, .attention_free_layers, docs/formats.md); no key
      missing, none extra, every value equal (floats as float32);
    - tensors: the names of gguf.get_tensor_name_map for the architecture, q/k rows permuted as
      convert_hf_to_gguf.py LlamaModel.permute does, rope_freqs.weight for llama3 RoPE as
      LlamaModel.generate_extra_tensors computes it, the zero stubs llama.cpp needs (a one-head
      attention in an attention-free layer 0, a width-1 FFN in an FFN-free layer with attention);
      shapes (ggml order), types (1-D F32; 2-D --dtype, F16 where a block type's rows are not
      whole blocks) and values through gguf.quants.dequantize: F32 equal to the source, F16 and
      BF16 equal to the source rounded to that type, Q8_0 and Q4_0 within ggml's error bound of
      each 32-value block (docs/formats.md: d/2 resp. |d| per value plus fp16's rounding of d
      times |q|). How many Q8_0 / Q4_0 blocks gguf-py's own quantizer writes byte for byte alike
      is reported (ggml's Q4_0 rounding depends on FMA, so bytes may differ where values agree).
  config.json of LlamaForCausalLM (and the parent's other classes): AutoModelForCausalLM
    .from_pretrained(dir, dtype=torch.float32) loads it with no missing, unexpected or
    mismatched tensor, and its logits on our tokens equal ours (--logits EXPORT=FILE, a
    safetensors file of `tokens` [B, T] I64 and our `logits` [B, T, V] F32):
    max |ours - transformers| / max |transformers| <= 1e-5 (tests/test_hf_golden.cpp says why).
  config.json of DeciLMForCausalLM: AutoConfig.from_pretrained(dir, trust_remote_code=True)
    reads it through the class its auto_map names, and every layer's KV heads and FFN width
    (vLLM nemotron_nas.py: num_attention_heads // n_heads_in_group,
    _ffn_mult_to_intermediate_size) and the global fields equal the source's.

Usage (tests/test_judge.cpp runs it on folders the CLI writes):

  HF_HUB_OFFLINE=1 $AC_TORCH_VENV/bin/python tests/golden/judge_exports.py \\
      [--summary FILE.json] [--logits EXPORT=FILE ...] EXPORT [EXPORT ...]

with the environment of scripts/setup_torch_venv.sh (tests/golden/requirements-hf.txt pins the
versions; others are refused). Prints one line per check with the worst difference, writes the
summary (what was compared, worst differences, failures) as JSON, exits 0 when every check holds
and 1 otherwise, listing each failure with the file, key or tensor, expected and found.
"""
import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never reach the Hub
# trust_remote_code copies configuration_decilm.py into a modules cache: keep it out of $HOME.
os.environ.setdefault("HF_MODULES_CACHE", tempfile.mkdtemp(prefix="ac-judge-modules-"))

PINNED = {"torch": "2.11.0", "transformers": "5.25.0", "safetensors": "0.8.0", "gguf": "0.19.0",
          "numpy": "2.2.6"}

import gguf  # noqa: E402
import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import safetensors.numpy  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from importlib.metadata import version  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama2c_tokenizer  # noqa: E402

HF_TOLERANCE = 1e-5
SPACE = "\u2581"  # SentencePiece's space


class Judge:
    """Collects failures and the measured worst differences."""

    def __init__(self):
        self.failures = []
        self.summary = {"versions": {}, "gguf": [], "hf_logits": [], "decilm_config": [],
                        "failures": self.failures}

    def fail(self, where, what):
        self.failures.append(f"{where}: {what}")
        print(f"  FAIL {where}: {what}")

    def expect(self, ok, where, what):
        if not ok:
            self.fail(where, what)
        return ok


def check_versions(judge):
    found = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
             "safetensors": safetensors.__version__, "gguf": version("gguf"),
             "numpy": np.__version__}
    judge.summary["versions"] = found
    wrong = [f"{k} {found[k]} (pinned {v})" for k, v in PINNED.items() if found[k] != v]
    if wrong:
        sys.exit("judge_exports.py: other versions than tests/golden/requirements-hf.txt pins: "
                 + ", ".join(wrong))


# --------------------------------------------------------------------------------------------
# The source checkpoint: our config.json, weights and tokenizer.bin

def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def rope_of(cfg):
    """(rope_theta, scaling dict or None) in either spelling (transformers 4 or 5)."""
    params = cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta", params.get("rope_theta", 10000.0))
    scaling = cfg.get("rope_scaling") or (params if params else None)
    if scaling is not None:
        kind = scaling.get("rope_type", scaling.get("type", "default"))
        scaling = None if kind == "default" else dict(scaling, rope_type=kind)
    return float(theta), scaling


def find_multiple(n, k):
    return n if n % k == 0 else n + k - n % k


def layers_of(cfg):
    """[(H, G, F)] per layer as the DeciLM loaders read block_configs (vLLM nemotron_nas.py:
    no_op or a null n_heads_in_group / ffn_mult removes the part; KV heads
    num_attention_heads // n_heads_in_group; FFN width _ffn_mult_to_intermediate_size), or the
    global fields of a homogeneous config."""
    H0, D = cfg["num_attention_heads"], cfg["hidden_size"]
    if "block_configs" not in cfg:
        G0 = cfg.get("num_key_value_heads", H0)
        return [(H0, G0, cfg["intermediate_size"])] * cfg["num_hidden_layers"]
    out = []
    for b in cfg["block_configs"]:
        a, f = b["attention"], b["ffn"]
        if a.get("no_op") or a.get("n_heads_in_group") is None:
            H = G = 0
        else:
            H = a.get("num_attention_heads", H0)
            G = H // a["n_heads_in_group"]
        if f.get("no_op") or (f.get("ffn_mult") is None and "intermediate_size" not in f):
            F = 0
        elif "intermediate_size" in f:
            F = f["intermediate_size"]
        else:
            F = find_multiple(int(2 * f["ffn_mult"] * D / 3), 256)
        out.append((H, G, F))
    return out


def head_dim_of(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def source_weights(src):
    """HF name -> float32 numpy array, from model.safetensors or the shards of its index."""
    index = src / "model.safetensors.index.json"
    files = (sorted(set(read_json(index)["weight_map"].values())) if index.exists()
             else ["model.safetensors"])
    out = {}
    for name in files:
        for k, v in safetensors.numpy.load_file(str(src / name)).items():
            out[k] = v.astype(np.float32)
    return out


def llama2c_vocab(path, bos, eos, unk=0):
    """tokens, scores, types of a llama2.c tokenizer.bin as llama.cpp's
    examples/convert-llama2c-to-ggml reads it (load_vocab: <unk> UNKNOWN, <s> and </s> CONTROL,
    the 256 byte tokens BYTE as <0xNN> (ids 3..258), every other piece NORMAL with its spaces
    escaped to U+2581, llama_escape_whitespaces)."""
    pieces, scores, _ = llama2c_tokenizer.load(path)
    tokens, types = [], []
    for i, p in enumerate(pieces):
        if i == unk:
            tokens.append("<unk>"), types.append(gguf.TokenType.UNKNOWN)
        elif i == bos:
            tokens.append("<s>"), types.append(gguf.TokenType.CONTROL)
        elif i == eos:
            tokens.append("</s>"), types.append(gguf.TokenType.CONTROL)
        elif llama2c_tokenizer.is_byte(i):
            tokens.append(f"<0x{i - 3:02X}>"), types.append(gguf.TokenType.BYTE)
        else:
            tokens.append(p.decode("utf-8").replace(" ", SPACE))
            types.append(gguf.TokenType.NORMAL)
    return tokens, [float(s) for s in scores], [int(t) for t in types]


# --------------------------------------------------------------------------------------------
# GGUF: the expected metadata, written by gguf-py's own GGUFWriter

FILE_TYPES = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
              "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
              "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}
GGML_TYPES = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
              "bf16": gguf.GGMLQuantizationType.BF16, "q8_0": gguf.GGMLQuantizationType.Q8_0,
              "q4_0": gguf.GGMLQuantizationType.Q4_0}


def stubs_of(layers, arch):
    """The layers llama.cpp cannot run as they are (docs/formats.md): FFN-free layers with
    attention (llama.cpp's deci graph skips a layer whose n_ff is 0) and an attention-free
    layer 0 (load_hparams takes the head size from layer 0's heads)."""
    if arch != "deci":
        return [], False
    ffn_free = [i for i, (H, _, F) in enumerate(layers) if H > 0 and F == 0]
    return ffn_free, layers[0][0] == 0


def expected_metadata(cfg, src, dtype, arch):
    """{key: (GGUFValueType, element type or None, value)} as GGUFWriter records them."""
    layers = layers_of(cfg)
    ffn_free, layer0_stub = stubs_of(layers, arch)
    Hd = head_dim_of(cfg)
    theta, scaling = rope_of(cfg)
    w = gguf.GGUFWriter(path=None, arch=arch)  # records general.architecture itself
    w.add_name("autocompress")
    w.add_custom_alignment(gguf.GGUF_DEFAULT_ALIGNMENT)
    w.add_file_type(FILE_TYPES[dtype])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)  # convert_hf_to_gguf.py writes it always
    w.add_vocab_size(cfg["vocab_size"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    if arch == "llama":
        H, G, F = layers[0]
        w.add_feed_forward_length(F)
        w.add_head_count(H)
        w.add_head_count_kv(G)
    else:  # DeciModel.set_gguf_parameters: lists, with the stubs of stubs_of
        w.add_feed_forward_length([1 if i in ffn_free else F for i, (_, _, F) in enumerate(layers)])
        w.add_head_count([1 if i == 0 and layer0_stub else H for i, (H, _, _) in enumerate(layers)])
        w.add_head_count_kv([1 if i == 0 and layer0_stub else G
                             for i, (_, G, _) in enumerate(layers)])
    w.add_key_length(Hd)
    w.add_value_length(Hd)
    w.add_rope_dimension_count(Hd)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if scaling and scaling["rope_type"] == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(scaling["factor"])
    tokens, scores, types = llama2c_vocab(src / "tokenizer.bin", cfg["bos_token_id"],
                                          cfg["eos_token_id"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_string("autocompress.hf_config", json.dumps(cfg))  # compared as JSON, below
    if ffn_free:
        w.add_array("autocompress.ffn_free_layers", ffn_free)
    if layer0_stub:
        w.add_array("autocompress.attention_free_layers", [0])
    out = {}
    for key, v in w.kv_data[0].items():
        sub = None
        if v.type == gguf.GGUFValueType.ARRAY:
            sub = v.sub_type or gguf.GGUFValueType.get_type(v.value[0])
        out[key] = (v.type, sub, v.value)
    return out


def same_value(key, vtype, sub, want, got):
    """Values as the file holds them: floats as float32, hf_config as JSON."""
    if key == "autocompress.hf_config":
        return json.loads(got) == json.loads(want)
    if vtype == gguf.GGUFValueType.FLOAT32:
        return np.float32(want) == np.float32(got)
    if vtype == gguf.GGUFValueType.ARRAY and sub == gguf.GGUFValueType.FLOAT32:
        return np.array_equal(np.asarray(want, np.float32), np.asarray(got, np.float32))
    if vtype == gguf.GGUFValueType.ARRAY:
        return [int(x) if isinstance(x, (bool, np.integer)) else x for x in want] == list(got)
    return want == got


def short(v):
    s = repr(v)
    return s if len(s) < 120 else s[:117] + "..."


def judge_metadata(judge, reader, where, want):
    got = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    judge.expect(reader.fields["GGUF.version"].contents() == 3, where, "GGUF version is not 3")
    for key in sorted(set(got) - set(want)):
        judge.fail(f"{where} key {key}", f"not expected, found {short(got[key].contents())}")
    for key, (vtype, sub, value) in want.items():
        if key not in got:
            judge.fail(f"{where} key {key}", f"missing, expected {short(value)}")
            continue
        f = got[key]
        found_types = [f.types[0], f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY
                       else None]
        if found_types != [vtype, sub]:
            judge.fail(f"{where} key {key}",
                       f"type {[t and t.name for t in found_types]}, expected "
                       f"{[vtype.name, sub and sub.name]}")
            continue
        if not same_value(key, vtype, sub, value, f.contents()):
            judge.fail(f"{where} key {key}", f"value {short(f.contents())}, expected "
                                             f"{short(value)}")
    return len(want)


# --------------------------------------------------------------------------------------------
# GGUF: the expected tensors

def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py LlamaModel.permute: HF's rotate-half q/k rows -> llama.cpp's
    interleaved pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_factors(theta, dim, s):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors (rope_freqs.weight)."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = s.get("factor", 8.0)
    low, high = s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
    old = s.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(out, dtype=torch.float32).numpy()


def expected_tensors(cfg, weights, arch):
    """GGUF name -> float32 torch-order array of what the file must hold."""
    layers = layers_of(cfg)
    ffn_free, layer0_stub = stubs_of(layers, arch)
    D, Hd, L = cfg["hidden_size"], head_dim_of(cfg), cfg["num_hidden_layers"]
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA if arch == "llama"
                                     else gguf.MODEL_ARCH.DECI, L)
    out = {}
    for hf, w in weights.items():
        if hf == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue  # llama.cpp reuses token_embd
        name = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise SystemExit(f"judge_exports.py: {hf}: gguf-py maps no GGUF name to it")
        if ".attn_q." in name or ".attn_k." in name:
            H, G, _ = layers[int(name.split(".")[1])]
            w = permute(w, H, H) if ".attn_q." in name else permute(w, H, G)
        out[name] = w
    theta, scaling = rope_of(cfg)
    if scaling and scaling["rope_type"] == "llama3":
        out["rope_freqs.weight"] = llama3_rope_factors(theta, Hd, scaling)
    if layer0_stub:  # one head adding exactly zero
        out["blk.0.attn_norm.weight"] = np.ones(D, np.float32)
        for n in ("attn_q", "attn_k", "attn_v"):
            out[f"blk.0.{n}.weight"] = np.zeros((Hd, D), np.float32)
        out["blk.0.attn_output.weight"] = np.zeros((D, Hd), np.float32)
    for i in ffn_free:  # a width-1 FFN adding exactly zero
        out[f"blk.{i}.ffn_norm.weight"] = np.ones(D, np.float32)
        out[f"blk.{i}.ffn_gate.weight"] = np.zeros((1, D), np.float32)
        out[f"blk.{i}.ffn_up.weight"] = np.zeros((1, D), np.float32)
        out[f"blk.{i}.ffn_down.weight"] = np.zeros((D, 1), np.float32)
    return out


def expected_type(dtype, shape):
    """1-D F32; 2-D --dtype, F16 when a block type's rows are not whole blocks (llama-quant.cpp
    tensor_type_fallback)."""
    if len(shape) == 1:
        return gguf.GGMLQuantizationType.F32
    t = GGML_TYPES[dtype]
    block = gguf.GGML_QUANT_SIZES[t][0]
    return gguf.GGMLQuantizationType.F16 if shape[-1] % block else t


def rounded(src, t):
    """The source rounded to a float type (round to nearest even)."""
    if t == gguf.GGMLQuantizationType.F32:
        return src
    if t == gguf.GGMLQuantizationType.F16:
        return src.astype(np.float16).astype(np.float32)
    return torch.from_numpy(src).to(torch.bfloat16).float().numpy()


def quant_bound(src, t):
    """Per value, the largest |dequantized - source| ggml's reference quantizer allows
    (docs/formats.md): per 32-value block d = amax / 127 (Q8_0) or max / -8 (Q4_0), error
    d/2 (Q8_0) or |d| (Q4_0: the values clipped at +7|d|), plus |q| * |d - fp16(d)| with |q| <=
    127 resp. 8; a block whose d underflows fp16 comes back as zeros (error amax)."""
    blocks = src.reshape(-1, 32).astype(np.float64)
    amax = np.abs(blocks).max(axis=1)
    d, qmax, own = ((amax / 127, 127, 0.5) if t == gguf.GGMLQuantizationType.Q8_0
                    else (amax / 8, 8, 1.0))
    d32 = d.astype(np.float32)
    fp16_err = np.abs(d32.astype(np.float16).astype(np.float64) - d32.astype(np.float64))
    bound = own * d + qmax * fp16_err
    bound = np.where(d32.astype(np.float16) == 0, amax, bound)
    bound = bound * (1 + 1e-6) + 1e-30  # float32 arithmetic inside a block
    return np.repeat(bound, 32).reshape(src.shape)


def judge_tensor(judge, where, t, want, dtype, stats):
    shape = list(want.shape)
    ttype = expected_type(dtype, shape)
    if not judge.expect(list(t.shape) == shape[::-1], where,
                        f"ne {list(t.shape)}, expected {shape[::-1]} (torch shape {shape} "
                        "reversed)"):
        return
    if not judge.expect(t.tensor_type == ttype, where,
                        f"type {t.tensor_type.name}, expected {ttype.name}"):
        return
    got = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
    diff = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    kind = ttype.name
    s = stats.setdefault(kind, {"tensors": 0, "values": 0, "max_abs_diff": 0.0})
    s["tensors"] += 1
    s["values"] += int(want.size)
    s["max_abs_diff"] = max(s["max_abs_diff"], diff)
    if ttype in (gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.Q4_0):
        bound = quant_bound(want, ttype)
        ratio = float((np.abs(got.astype(np.float64) - want) / bound).max())
        s["max_diff_over_bound"] = max(s.get("max_diff_over_bound", 0.0), ratio)
        judge.expect(ratio <= 1.0, where,
                     f"dequantized values differ from the source by up to {ratio:.3g} x ggml's "
                     "error bound")
        # gguf-py's own quantizer on the same values: blocks written byte for byte alike.
        theirs = gguf.quants.quantize(want, ttype).reshape(-1, gguf.GGML_QUANT_SIZES[ttype][1])
        ours = np.asarray(t.data).reshape(-1, gguf.GGML_QUANT_SIZES[ttype][1])
        s["blocks"] = s.get("blocks", 0) + ours.shape[0]
        s["blocks_equal_to_gguf_py"] = (s.get("blocks_equal_to_gguf_py", 0)
                                        + int((theirs == ours).all(axis=1).sum()))
    else:
        judge.expect(np.array_equal(got, rounded(want, ttype)), where,
                     f"values differ from the source rounded to {kind} by up to {diff:.3g}")


def judge_gguf(judge, export, report, cfg, src):
    path = export / "model.gguf"
    dtype = report["dtype"]
    arch = "deci" if "block_configs" in cfg else "llama"
    reader = gguf.GGUFReader(path)
    where = str(path)
    keys = judge_metadata(judge, reader, where, expected_metadata(cfg, src, dtype, arch))
    want = expected_tensors(cfg, source_weights(src), arch)
    found = {t.name: t for t in reader.tensors}
    for name in sorted(set(found) - set(want)):
        judge.fail(f"{where} tensor {name}", "not expected")
    stats = {}
    for name, w in want.items():
        if name not in found:
            judge.fail(f"{where} tensor {name}", f"missing, expected torch shape {list(w.shape)}")
            continue
        judge.expect((found[name].data_offset - reader.data_offset) % reader.alignment == 0,
                     f"{where} tensor {name}", f"data at offset {found[name].data_offset} is not "
                     f"aligned to general.alignment {reader.alignment}")
        judge_tensor(judge, f"{where} tensor {name}", found[name], w, dtype, stats)
    row = {"export": export.name, "arch": arch, "dtype": dtype, "keys_compared": keys,
           "tensors_compared": len(want), "by_type": stats}
    judge.summary["gguf"].append(row)
    worst = ", ".join(
        f"{k} {v['tensors']} tensors max|diff| {v['max_abs_diff']:.3g}"
        + (f" ({v['max_diff_over_bound']:.4f} of the bound, {v['blocks_equal_to_gguf_py']}/"
           f"{v['blocks']} blocks byte-equal to gguf-py's quantizer)" if "blocks" in v else "")
        for k, v in sorted(stats.items()))
    print(f"gguf {export.name}: {arch} {dtype}, {keys} keys, {len(want)} tensors; {worst}")


# --------------------------------------------------------------------------------------------
# transformers

def judge_hf_logits(judge, export, logits_file):
    where = str(export)
    if logits_file is None:
        judge.fail(where, "an HF export of the parent's class needs --logits EXPORT=FILE")
        return
    ours = safetensors.numpy.load_file(str(logits_file))
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        export, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    for k in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        judge.expect(not info.get(k), where, f"transformers' {k}: {sorted(info.get(k))}")
    model.eval()
    with torch.no_grad():
        theirs = model(torch.from_numpy(ours["tokens"]), use_cache=False).logits.double()
    mine = torch.from_numpy(ours["logits"]).double()
    if not judge.expect(theirs.shape == mine.shape, where,
                        f"logits shape {list(theirs.shape)}, ours {list(mine.shape)}"):
        return
    diff = float((theirs - mine).abs().max())
    scale = float(theirs.abs().max())
    rel = diff / scale
    judge.expect(rel <= HF_TOLERANCE, where,
                 f"logits differ by {diff:.3g} (relative {rel:.3g} > {HF_TOLERANCE})")
    judge.summary["hf_logits"].append({"export": export.name, "class": type(model).__name__,
                                       "tokens": list(ours["tokens"].shape),
                                       "max_abs_diff": diff, "max_abs_logit": scale,
                                       "relative": rel})
    print(f"transformers {export.name}: {type(model).__name__}, logits {list(mine.shape)}: "
          f"max|diff| {diff:.3g}, max|logit| {scale:.3g}, relative {rel:.3g}")


def judge_decilm_config(judge, export, cfg):
    where = f"{export / 'config.json'}"
    try:
        hf = transformers.AutoConfig.from_pretrained(export, trust_remote_code=True)
    except Exception as e:  # noqa: BLE001: any refusal is the finding
        judge.fail(where, f"AutoConfig.from_pretrained(trust_remote_code=True) refuses it: "
                          f"{type(e).__name__}: {e}")
        return
    judge.expect(hf.model_type == "nemotron-nas", where, f"model_type {hf.model_type}")
    compared = 0
    for field in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "head_dim", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
                  "bos_token_id", "eos_token_id"):
        compared += 1
        judge.expect(getattr(hf, field, None) == cfg[field], where,
                     f"{field} reads {getattr(hf, field, None)!r}, ours {cfg[field]!r}")
    theta, _ = rope_of(cfg)
    hf_theta = getattr(hf, "rope_theta", None)
    if hf_theta is None:
        hf_theta = (getattr(hf, "rope_parameters", None) or {}).get("rope_theta")
    compared += 1
    judge.expect(hf_theta == theta, where, f"rope_theta reads {hf_theta!r}, ours {theta!r}")
    # Each layer as vLLM builds it from what transformers read.
    hf_layers = layers_of({"num_attention_heads": hf.num_attention_heads,
                           "hidden_size": hf.hidden_size,
                           "block_configs": [dict(b) for b in hf.block_configs]})
    ours = layers_of(cfg)
    judge.expect(hf_layers == ours, where,
                 f"layers (H, G, F) read {hf_layers}, ours {ours}")
    compared += len(ours)
    judge.summary["decilm_config"].append({"export": export.name,
                                           "class": type(hf).__name__,
                                           "fields_compared": compared, "layers": ours})
    print(f"transformers {export.name}: AutoConfig -> {type(hf).__name__}, {compared} fields "
          f"and layers (H, G, F) {ours} as ours")


# --------------------------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("exports", nargs="+", type=Path, help="folders `autocompress export` wrote")
    p.add_argument("--logits", action="append", default=[], metavar="EXPORT=FILE",
                   help="our logits for an HF export (safetensors: tokens, logits)")
    p.add_argument("--summary", type=Path, help="write the summary JSON here")
    args = p.parse_intermixed_args()
    judge = Judge()
    check_versions(judge)
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    logits = {}
    for item in args.logits:
        export, _, file = item.partition("=")
        logits[Path(export).resolve()] = Path(file)
    for export in args.exports:
        report = read_json(export / "export_report.json")
        src = Path(report["source"])
        cfg = read_json(src / "config.json")
        if (export / "model.gguf").exists():
            judge_gguf(judge, export, report, cfg, src)
        if (export / "config.json").exists():
            hf_cfg = read_json(export / "config.json")
            if hf_cfg.get("model_type") == "nemotron-nas":
                judge_decilm_config(judge, export, cfg)
            else:
                judge_hf_logits(judge, export, logits.get(export.resolve()))
    if args.summary:
        args.summary.write_text(json.dumps(judge.summary, indent=1) + "\n")
    if judge.failures:
        print(f"judge_exports.py: {len(judge.failures)} failures:")
        for f in judge.failures:
            print(f"  {f}")
        return 1
    print("judge_exports.py: every check holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
