#!/usr/bin/env python3
"""Golden logits of Nemotron-H hybrids from transformers' own NemotronHForCausalLM, for
tests/test_nemotron_h_golden.cpp.

Builds tiny random NemotronHForCausalLM models (fixed seeds) whose layer patterns mix Mamba-2
mixers (M), attention without RoPE (*), relu² MLPs (-) and MoE layers (E), saves each with
save_pretrained, loads it back with from_pretrained in float32 on the CPU and records
transformers' logits, in the layout of tests/golden/hf_golden.py (whose helpers it uses):

  tests/golden/hf-nemotron-h/<name>/  one folder per model (the FIXTURES table below)
    config.json, generation_config.json, model.safetensors
      (or model-0000k-of-0000n.safetensors + model.safetensors.index.json): as save_pretrained
      writes them, bf16 or fp32
    tokens.json                       the input ids, B rows of T: [[id, ...], ...]
    logits.safetensors                F32 tensors prefill [B, T, V], decode [B, N, V] and
                                      decode_positions [N] I64, as hf_golden.py describes them;
                                      the decode runs through transformers' own cache (the
                                      attention layers' keys and values, the Mamba layers' conv
                                      and SSM states)

transformers runs its PyTorch path: neither mamba-ssm nor causal-conv1d is installed with the
pins, and nothing is fetched from the Hub (use_mamba_kernels is deprecated in 5.x and ignored).
The chunked SSD scan of the prefill (mamba2_chunk_scan) runs with chunk_size smaller than T, so
the fixtures cross chunk boundaries and pad the last chunk.

Every parameter is drawn again after construction with hf_golden.py's laws (projections
N(0, 1/in), the conv1d's [C, 1, Kc] weights N(0, 1/Kc), A_log, D and dt_bias [nh] N(0, 1/nh),
the embedding N(0, 1), norms 1 + N(0, 0.1^2), biases N(0, 0.5^2)), and so is the router's
e_score_correction_bias buffer [E] (N(0, 0.3^2); zero at construction, which would hide a
reader that drops it). A token whose k-th and (k+1)-th choice score (sigmoid + correction bias)
are closer than MIN_ROUTER_GAP, or whose group choice is as close, would pick its experts by
float rounding, so the script refuses such a draw rather than write a fixture that another
summation order could flip.

Pinned versions (tests/golden/requirements-hf.txt, checked as hf_golden.py does). Regenerate
every fixture (offline; nothing is downloaded) with:

  HF_HUB_OFFLINE=1 python3 tests/golden/hf_golden_nemotron_h.py

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
from hf_golden import (B, PINNED, PREFILL, T, check_versions, save_random_model,  # noqa: E402
                       size_of)

import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import NemotronHConfig, NemotronHForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "hf-nemotron-h"

MIN_ROUTER_GAP = 1e-4

# The experts as the modeling file writes them (NemotronHExperts.forward, a loop over the experts
# hit), rather than the grouped_mm kernel, which needs 16-byte strides these odd sizes lack.
LOAD_ARGS = {"experts_implementation": "eager", "attn_implementation": "eager"}

COMMON = dict(bos_token_id=1, eos_token_id=2, max_position_embeddings=128,
              layer_norm_epsilon=1e-5, tie_word_embeddings=False, mamba_hidden_act="silu",
              mlp_hidden_act="relu2", use_mamba_kernels=False)

# name: config arguments, checkpoint dtype, max_shard_size (None: one file), seed.
FIXTURES = {
    # Every layer kind twice or more (M * - E), Mamba-2 with 6 heads of 5 in 2 groups (gated norm
    # over groups of 15), state 7, conv 4 with bias, chunk 4 (T = 10: three chunks, the last
    # padded); attention 4/2 heads of 6 (24 != 22); MoE 5 experts top-2 renormalised, scaled by
    # 2.5, a shared expert of 14; fp32.
    "nemotronh-mix-fp32": (dict(
        COMMON, vocab_size=131, hidden_size=22, hybrid_override_pattern="M*M-EM*E",
        mamba_num_heads=6, mamba_head_dim=5, ssm_state_size=7, n_groups=2, conv_kernel=4,
        chunk_size=4, use_conv_bias=True, use_bias=False,
        num_attention_heads=4, num_key_value_heads=2, head_dim=6, intermediate_size=26,
        n_routed_experts=5, num_experts_per_tok=2, moe_intermediate_size=12,
        moe_shared_expert_intermediate_size=14, n_shared_experts=1, routed_scaling_factor=2.5,
        norm_topk_prob=True, n_group=1, topk_group=1), torch.float32, None, 21),
    # Latent MoE (moe_latent_size 10: fc1_latent_proj [10, 26], experts in 10, fc2_latent_proj
    # [26, 10]), 6 experts in 2 groups of which 1 is kept, top-2 not renormalised; Mamba-2 with 4
    # heads of 3 in 4 groups, state 5, conv 3, in_proj / out_proj biases (use_bias), chunk 3;
    # attention 3/1 heads of 8; bf16 in shards.
    "nemotronh-latent-bf16-sharded": (dict(
        COMMON, vocab_size=97, hidden_size=26, hybrid_override_pattern="ME*M-E",
        mamba_num_heads=4, mamba_head_dim=3, ssm_state_size=5, n_groups=4, conv_kernel=3,
        chunk_size=3, use_conv_bias=True, use_bias=True,
        num_attention_heads=3, num_key_value_heads=1, head_dim=8, intermediate_size=18,
        n_routed_experts=6, num_experts_per_tok=2, moe_intermediate_size=11,
        moe_shared_expert_intermediate_size=9, n_shared_experts=1, moe_latent_size=10,
        routed_scaling_factor=1.5, norm_topk_prob=False, n_group=2, topk_group=1),
        torch.bfloat16, "20KB", 22),
}


def draw_weights(model, seed):
    """Every parameter, and the routers' correction bias, drawn again from `seed` (see the
    module docstring for the laws)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # a tied head is listed once, as the embedding
            if name.endswith("norm.weight") or name.endswith("norm_f.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif name.endswith("embeddings.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:  # [out, in] projections, [E, out, in] experts, conv [C, 1, Kc], [nh] vectors
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.3 * torch.randn(b.shape, generator=g))


def run_steps(model, tokens):
    """The prefill over whole rows, then PREFILL tokens and one token a step through
    transformers' cache; calls the model as hf_golden.transformers_logits does."""
    with torch.no_grad():
        prefill = model(tokens, use_cache=False).logits
        out = model(tokens[:, :PREFILL], use_cache=True)
        steps = [out.logits[:, -1]]
        for t in range(PREFILL, T):
            out = model(tokens[:, t:t + 1], cache=out.cache, use_cache=True)
            steps.append(out.logits[:, -1])
    return prefill, torch.stack(steps, dim=1)


def smallest_router_gap(model, tokens):
    """The smallest gap at a top-k (or top-group) boundary over every MoE layer, in the prefill
    and the decode steps."""
    gaps = []

    def hook(module, args, output):
        scores = output[0].float().sigmoid() + module.e_score_correction_bias
        E, G = module.num_experts, module.num_group
        if G > 1:
            per_group = scores.view(-1, G, E // G).topk(2, dim=-1)[0].sum(-1).sort(-1, True)[0]
            gaps.append((per_group[:, module.topk_group - 1] -
                         per_group[:, module.topk_group]).min().item())
            keep = output[2]  # the chosen experts' groups are the kept ones
            group_of = torch.arange(E).view(G, E // G)
            kept = (group_of[(keep // (E // G))[:, :1]]).squeeze(1)  # [N, E/G] experts of a group
            scores = scores.gather(1, kept)
        ranked = scores.sort(dim=-1, descending=True)[0]
        gaps.append((ranked[:, module.top_k - 1] - ranked[:, module.top_k]).min().item())

    for name, module in model.named_modules():
        if name.endswith("mixer.gate"):
            module.register_forward_hook(hook)
    run_steps(model, tokens)
    return min(gaps) if gaps else float("inf")


def write_fixture(root, name, args, dtype, shard, seed):
    folder = root / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    config = NemotronHConfig(**args)
    tokens = save_random_model(folder, config, NemotronHForCausalLM, draw_weights, dtype, shard, seed)
    loaded = NemotronHForCausalLM.from_pretrained(folder, dtype=torch.float32, **LOAD_ARGS)
    loaded.eval()
    gap = smallest_router_gap(loaded, tokens)
    if gap < MIN_ROUTER_GAP:
        sys.exit(f"hf_golden_nemotron_h.py: {name}: router scores {gap:.2g} apart at a top-k "
                 f"boundary (below {MIN_ROUTER_GAP}); pick another seed")
    loaded = NemotronHForCausalLM.from_pretrained(folder, dtype=torch.float32, **LOAD_ARGS)
    loaded.eval()
    prefill, decode = run_steps(loaded, tokens)
    positions = torch.arange(PREFILL - 1, T, dtype=torch.int64)
    safetensors.torch.save_file(
        {"prefill": prefill.float().contiguous(), "decode": decode.float().contiguous(),
         "decode_positions": positions},
        str(folder / "logits.safetensors"),
        metadata={"source": f"NemotronHForCausalLM, transformers {transformers.__version__}, "
                            f"torch {PINNED['torch']}, float32 on the CPU"})
    return folder, gap


def main():
    check_versions()
    torch.set_num_threads(1)  # one summation order, so that a rerun writes the same bytes
    OUT.mkdir(exist_ok=True)
    for name, spec in FIXTURES.items():
        folder, gap = write_fixture(OUT, name, *spec)
        print(f"{folder.relative_to(ROOT.parent.parent)}: {size_of(folder) / 1024:.0f} KiB, "
              f"smallest top-k router gap {gap:.2g}")


if __name__ == "__main__":
    main()
