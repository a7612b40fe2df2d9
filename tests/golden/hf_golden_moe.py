#!/usr/bin/env python3
"""Golden logits of sparse MoE decoders from transformers' own classes, for
tests/test_moe_golden.cpp.

Builds tiny random models with Qwen3MoeForCausalLM and MixtralForCausalLM (fixed seeds), saves
each with save_pretrained, loads it back with from_pretrained in float32 on the CPU and records
transformers' logits, in the layout of tests/golden/hf_golden.py (whose helpers it uses):

  tests/golden/hf-moe/<name>/       one folder per model (the FIXTURES table below)
    config.json, generation_config.json, model.safetensors
      (or model-0000k-of-0000n.safetensors + model.safetensors.index.json): as save_pretrained
      writes them, bf16 or fp32
    tokens.json                     the input ids, B rows of T: [[id, ...], ...]
    logits.safetensors              F32 tensors prefill [B, T, V], decode [B, N, V] and
                                    decode_positions [N] I64, as hf_golden.py describes them
  tests/golden/hf-moe-refused/<name>/  variants autocompress refuses past a point (the REFUSED
                                    table), with the same files

Every parameter is drawn again after construction, with hf_golden.py's laws; the experts'
[E, out, in] tensors (transformers 5 keeps them fused: experts.gate_up_proj [E, 2 Fe, D],
experts.down_proj [E, D, Fe]) are projections of in = their last dimension, and the router
(mlp.gate.weight [E, D]) one of in = D. A token whose k-th and (k+1)-th router probabilities
are closer than MIN_ROUTER_GAP would pick its experts by float rounding, so the script refuses
such a draw rather than write a fixture that another summation order could flip.

Pinned versions (tests/golden/requirements-hf.txt, checked as hf_golden.py does). Regenerate
every fixture (offline; nothing is downloaded) with:

  HF_HUB_OFFLINE=1 python3 tests/golden/hf_golden_moe.py

where python3 has tests/golden/requirements-hf.txt installed. The outputs are deterministic:
running it again rewrites the same bytes.
"""
import json
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the models are built here; never reach the Hub

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_golden  # noqa: E402
from hf_golden import (B, PINNED, T, check_versions, save_random_model, size_of,  # noqa: E402
                       transformers_logits)

import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM)

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "hf-moe"

FAMILIES = {
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM),
    "mixtral": (MixtralConfig, MixtralForCausalLM),
}

MIN_ROUTER_GAP = 1e-4

# The experts as the modeling files write them (Qwen3MoeExperts.forward, MixtralExperts.forward:
# a loop over the experts hit), rather than transformers' default grouped_mm kernel, which needs
# 16-byte strides that these odd sizes do not have (integrations/moe.py).
LOAD_ARGS = {"experts_implementation": "eager"}

COMMON = dict(bos_token_id=1, eos_token_id=2, max_position_embeddings=128, rms_norm_eps=1e-5)

# name: family, config arguments, checkpoint dtype, max_shard_size (None: one file), seed.
FIXTURES = {
    # 5 experts, top-2 renormalised (norm_topk_prob, as the released Qwen3-MoE models), layer 1
    # dense through mlp_only_layers (a Qwen3MoeMLP of intermediate_size between sparse layers),
    # GQA 4/2, head_dim 12 (4 x 12 = 48 != 24), q/k norms, untied, fp32.
    "qwen3moe-top2-fp32": ("qwen3_moe", dict(
        COMMON, vocab_size=97, hidden_size=24, intermediate_size=40, moe_intermediate_size=16,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
        num_experts=5, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[1], use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False), torch.float32, None, 11),
    # top-3 of 5 without renormalisation (norm_topk_prob false, transformers' default),
    # decoder_sparse_step 2 (layer 0 dense, layer 1 sparse), GQA 6/2, head_dim 8, tied, bf16 in
    # shards.
    "qwen3moe-top3-step2-bf16-sharded": ("qwen3_moe", dict(
        COMMON, vocab_size=131, hidden_size=24, intermediate_size=44, moe_intermediate_size=14,
        num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2, head_dim=8,
        num_experts=5, num_experts_per_tok=3, norm_topk_prob=False, decoder_sparse_step=2,
        use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=True), torch.bfloat16, "20KB", 12),
    # 5 experts top-2 (Mixtral renormalises always), GQA 4/2, head_dim 10 (40 != 28), untied,
    # fp32.
    "mixtral-top2-fp32": ("mixtral", dict(
        COMMON, vocab_size=101, hidden_size=28, intermediate_size=18, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=10, num_local_experts=5,
        num_experts_per_tok=2, sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        tie_word_embeddings=False), torch.float32, None, 13),
    # 4 experts top-3, GQA 6/3, head_dim 6 (36 != 30 / 6 = 5), bf16 in shards.
    "mixtral-top3-bf16-sharded": ("mixtral", dict(
        COMMON, vocab_size=113, hidden_size=30, intermediate_size=22, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=3, head_dim=6, num_local_experts=4,
        num_experts_per_tok=3, sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False), torch.bfloat16, "20KB", 14),
}


# Variants autocompress refuses past a point, written to tests/golden/hf-moe-refused/ with the
# same files.
REFUSED = {
    # A sliding window shorter than the rows: Qwen3-MoE slides every layer with
    # use_sliding_window (no layer_types or max_window_layers, unlike Qwen2 / Qwen3).
    "qwen3moe-sliding-window": ("qwen3_moe", dict(
        COMMON, vocab_size=97, hidden_size=16, intermediate_size=24, moe_intermediate_size=12,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=True, use_sliding_window=True,
        sliding_window=6, tie_word_embeddings=False), torch.float32, None, 15),
}
OUT_REFUSED = ROOT / "hf-moe-refused"


def draw_weights(model, seed):
    """Every parameter drawn again from `seed` with hf_golden.py's laws (see the docstring)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied head is listed once, as the embedding
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:  # [out, in] projections, [E, out, in] experts, the router, an untied lm_head
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)


def smallest_router_gap(folder, tokens, k):
    """The smallest gap between a token's k-th and (k+1)-th router probability over every
    sparse layer, in the prefill and in the decode steps as transformers_logits runs them."""
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, attn_implementation="eager", **LOAD_ARGS)
    model.eval()
    gaps = []

    def hook(module, args, output):
        probs = torch.softmax(output[0].float(), dim=-1).sort(dim=-1, descending=True).values
        gaps.append((probs[:, k - 1] - probs[:, k]).min().item())

    for name, module in model.named_modules():
        if name.endswith("mlp.gate"):
            module.register_forward_hook(hook)
    with torch.no_grad():
        model(tokens, use_cache=False)
        out = model(tokens[:, :hf_golden.PREFILL], use_cache=True)
        for t in range(hf_golden.PREFILL, T):
            out = model(tokens[:, t:t + 1], past_key_values=out.past_key_values, use_cache=True)
    assert gaps, "no router found"
    return min(gaps)


def write_fixture(root, name, family, args, dtype, shard, seed):
    folder = root / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    config_class, model_class = FAMILIES[family]
    config = config_class(**args)
    tokens = save_random_model(folder, config, model_class, draw_weights, dtype, shard, seed)
    gap = smallest_router_gap(folder, tokens, config.num_experts_per_tok)
    if gap < MIN_ROUTER_GAP:
        sys.exit(f"hf_golden_moe.py: {name}: router probabilities {gap:.2g} apart at the top-k "
                 f"boundary (below {MIN_ROUTER_GAP}); pick another seed")
    prefill, decode, positions = transformers_logits(folder, tokens, **LOAD_ARGS)
    safetensors.torch.save_file(
        {"prefill": prefill, "decode": decode, "decode_positions": positions},
        str(folder / "logits.safetensors"),
        metadata={"source": f"{model_class.__name__}, transformers {transformers.__version__}, "
                            f"torch {PINNED['torch']}, float32 on the CPU"})
    return folder, gap


def main():
    check_versions()
    torch.set_num_threads(1)  # one summation order, so that a rerun writes the same bytes
    for root, table in ((OUT, FIXTURES), (OUT_REFUSED, REFUSED)):
        root.mkdir(exist_ok=True)
        for name, spec in table.items():
            folder, gap = write_fixture(root, name, *spec)
            print(f"{folder.relative_to(ROOT.parent.parent)}: {size_of(folder) / 1024:.0f} KiB, "
                  f"smallest top-k router gap {gap:.2g}")


if __name__ == "__main__":
    main()
