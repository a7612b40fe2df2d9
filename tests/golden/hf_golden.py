#!/usr/bin/env python3
"""Golden logits from Hugging Face transformers' own model classes, for tests/test_hf_golden.cpp.

Builds tiny random models with LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and
Qwen3ForCausalLM (fixed seeds), saves each with save_pretrained, loads it back with
from_pretrained in float32 on the CPU and records transformers' logits:

  tests/golden/hf/<name>/           one folder per model (the FIXTURES table below)
    config.json, generation_config.json, model.safetensors
      (or model-0000k-of-0000n.safetensors + model.safetensors.index.json): as save_pretrained
      writes them, bf16 or fp32
    tokens.json                     the input ids, B rows of T: [[id, ...], ...]
    logits.safetensors              F32 tensors:
      prefill           [B, T, V]  one forward over the whole rows
      decode            [B, N, V]  step by step with past_key_values: the rows' first
                                   T - N + 1 tokens as a prefill (its last position's logits
                                   are step 0), then one token a step (step j: position
                                   T - N + j)
      decode_positions  [N] I64    the position each decode step's logits belong to
  tests/golden/hf-refused/<name>/   variants autocompress refuses (the REFUSED table): a
                                    checkpoint, or its config.json alone, with the same files

Every parameter is drawn again after construction (transformers' own init leaves the norms at 1
and the biases at 0, which would hide a norm or a bias the reader drops): projections
N(0, 1/in_features), embeddings N(0, 1), norms 1 + N(0, 0.1^2), biases N(0, 0.5^2).

Pinned versions (tests/golden/requirements-hf.txt): the script refuses to run with others, since
the files it writes are the behaviour of exactly these.

Regenerate every fixture (offline; nothing is downloaded) with:

  HF_HUB_OFFLINE=1 python3 tests/golden/hf_golden.py

where python3 has tests/golden/requirements-hf.txt installed (pip install -r it into a virtual
environment outside the repository). The outputs are deterministic: running it again rewrites
the same bytes.
"""
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the models are built here; never reach the Hub

PINNED = {"torch": "2.11.0", "transformers": "5.25.0", "safetensors": "0.8.0"}

import safetensors  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
    Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "hf"
OUT_REFUSED = ROOT / "hf-refused"

FAMILIES = {
    "llama": (LlamaConfig, LlamaForCausalLM),
    "mistral": (MistralConfig, MistralForCausalLM),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM),
}

# Llama 3's RoPE with a small original context, so that all three bands of
# _compute_llama3_parameters (kept, smoothed, divided by factor) turn by a visible angle within
# a 10-token row: with rope_theta 500000 and head_dim 24 the wavelengths are 6.3, 18.7, 56, ...
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 32}

COMMON = dict(vocab_size=300, bos_token_id=1, eos_token_id=2, max_position_embeddings=128,
              rms_norm_eps=1e-5)

# name: family, config arguments, checkpoint dtype, max_shard_size (None: one file), seed.
FIXTURES = {
    # GQA 4/2, head_dim 24 != 72/4, llama3 RoPE with rope_theta 500000, bf16 in 3+ shards.
    "llama3-gqa-bf16-sharded": ("llama", dict(
        COMMON, hidden_size=72, intermediate_size=136, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, rope_parameters=LLAMA3_ROPE,
        tie_word_embeddings=False), torch.bfloat16, "100KB", 1),
    # Tied embeddings, plain attention (G = H), head_dim derived from hidden / heads: 32 / 4 = 8.
    "llama-tied-fp32": ("llama", dict(
        COMMON, vocab_size=301, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True), torch.float32,
        None, 2),
    # GQA 6/2, head_dim 10 (6 x 10 = 60 != 36), rope_theta 1e6, no sliding window (v0.2 on),
    # bf16 in 2+ shards.
    "mistral-gqa-bf16-sharded": ("mistral", dict(
        COMMON, hidden_size=36, intermediate_size=52, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, head_dim=10, sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False), torch.bfloat16, "40KB", 3),
    # q/k/v biases, tied embeddings (as Qwen2.5 0.5B-3B), GQA 4/2, head_dim 48 / 4 = 12, bf16.
    "qwen2-bias-tied-bf16": ("qwen2", dict(
        COMMON, vocab_size=320, hidden_size=48, intermediate_size=88, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=True), torch.bfloat16, None, 4),
    # q/k RMSNorm over head_dim, GQA 4/2, head_dim 12 (4 x 12 = 48 != 32), untied, fp32.
    "qwen3-qknorm-fp32": ("qwen3", dict(
        COMMON, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=12, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False), torch.float32, None, 5),
}

# Variants autocompress refuses. config_only: config.json alone (the refusal comes before the
# weights are read).
REFUSED = {
    # A sliding window shorter than the rows: transformers attends over the last 6 positions.
    "mistral-sliding-window": ("mistral", dict(
        COMMON, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, sliding_window=6,
        tie_word_embeddings=False), torch.float32, None, 6, False),
    # YaRN RoPE scaling (transformers _compute_yarn_parameters), which the forward does not have.
    "llama-yarn-rope": ("llama", dict(
        COMMON, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 32}), torch.float32, None, 7, True),
}

B, T, PREFILL = 2, 10, 4  # rows, tokens a row, the decode's prefill length


def check_versions():
    found = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
             "safetensors": safetensors.__version__}
    wrong = [f"{k} {found[k]} (pinned {v})" for k, v in PINNED.items() if found[k] != v]
    if wrong:
        sys.exit("hf_golden.py: other versions than tests/golden/requirements-hf.txt pins: "
                 + ", ".join(wrong))


def draw_weights(model, seed):
    """Every parameter drawn again from `seed` (see the module docstring for the laws)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied head is listed once, as the embedding
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:  # [out, in] projections and an untied lm_head
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)


def transformers_logits(folder, tokens, **load_args):
    """prefill [B, T, V], decode [B, N, V] and decode_positions [N] from the saved checkpoint,
    loaded as transformers loads it, in float32 on the CPU (load_args: more from_pretrained
    arguments, e.g. hf_golden_moe.py's experts_implementation)."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager", **load_args)
    model.eval()
    with torch.no_grad():
        prefill = model(tokens, use_cache=False).logits
        out = model(tokens[:, :PREFILL], use_cache=True)
        steps = [out.logits[:, -1]]
        past = out.past_key_values
        for t in range(PREFILL, T):
            out = model(tokens[:, t:t + 1], past_key_values=past, use_cache=True)
            steps.append(out.logits[:, -1])
            past = out.past_key_values
    decode = torch.stack(steps, dim=1)
    positions = torch.arange(PREFILL - 1, T, dtype=torch.int64)
    return prefill.float().contiguous(), decode.float().contiguous(), positions


def save_random_model(folder, config, model_class, draw, dtype, shard, seed):
    """Builds model_class(config) (torch seed `seed`), redraws its parameters with draw(model,
    seed), saves it in `dtype` with save_pretrained (sharded at `shard` when given) and writes
    tokens.json: B rows of T ids from a generator seeded 1000 + seed. Returns the ids [B, T]."""
    torch.manual_seed(seed)
    model = model_class(config)
    draw(model, seed)
    model = model.to(dtype)
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(folder, **kwargs)
    g = torch.Generator().manual_seed(1000 + seed)
    tokens = torch.randint(0, config.vocab_size, (B, T), generator=g)
    (folder / "tokens.json").write_text(json.dumps(tokens.tolist()) + "\n")
    return tokens


def write_fixture(root, name, family, args, dtype, shard, seed, config_only=False):
    folder = root / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    config_class, model_class = FAMILIES[family]
    config = config_class(**args)
    if config_only:
        config.save_pretrained(folder)
        return folder
    tokens = save_random_model(folder, config, model_class, draw_weights, dtype, shard, seed)
    prefill, decode, positions = transformers_logits(folder, tokens)
    safetensors.torch.save_file(
        {"prefill": prefill, "decode": decode, "decode_positions": positions},
        str(folder / "logits.safetensors"),
        # One key: safetensors writes the metadata's keys in no fixed order.
        metadata={"source": f"{model_class.__name__}, transformers {transformers.__version__}, "
                            f"torch {PINNED['torch']}, float32 on the CPU"})
    return folder


def size_of(folder):
    return sum(f.stat().st_size for f in folder.iterdir())


def main():
    check_versions()
    torch.set_num_threads(1)  # one summation order, so that a rerun writes the same bytes
    for root, table in ((OUT, FIXTURES), (OUT_REFUSED, REFUSED)):
        root.mkdir(exist_ok=True)
        for name, spec in table.items():
            folder = write_fixture(root, name, *spec)
            print(f"{folder.relative_to(ROOT.parent.parent)}: {size_of(folder) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
