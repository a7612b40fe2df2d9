#!/usr/bin/env python3
"""Golden loss and gradients of the sparse and hybrid goldens from transformers' own classes,
for tests/test_train_any_model.cpp (autograd through our MoE and Nemotron-H forwards).

For each fixture folder below (written by hf_golden_moe.py and hf_golden_nemotron_h.py, left as
they are), loads the committed model with from_pretrained, casts it to float64 on the CPU and
runs the committed tokens.json [B, T] through it; the loss is the mean next-token cross-entropy

  loss = mean over b < B, t < T - 1 of  -log softmax(logits[b, t])[tokens[b, t + 1]]

and loss.backward() gives the gradient of every parameter. A few of them (the GRADS table: at
least one of each layer kind, small enough that a fixture stays a few KB) are written to

  <folder>/grads.safetensors   F64 loss [] and one tensor per parameter named as in the
                               checkpoint; a fused expert tensor [E, ...] is written for one
                               expert e under the per-expert name (...experts.e.up_proj.weight)

float64, so that the test's tolerance is our fp32 forward's error, not the golden's. The router's
top-k is piecewise constant: the fixtures' routers keep a gap of at least MIN_ROUTER_GAP at every
top-k boundary (their generators check it), so float32 and float64 choose the same experts and
the gradients are those of one smooth piece.

Pinned versions as hf_golden.py. Regenerate (offline; deterministic, the same bytes again) with:

  HF_HUB_OFFLINE=1 python3 tests/golden/hf_golden_gradients.py
"""
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_golden import PINNED, check_versions  # noqa: E402

import json  # noqa: E402

import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

ROOT = Path(__file__).resolve().parent

LOAD_ARGS = {"experts_implementation": "eager", "attn_implementation": "eager"}

# folder: the parameters whose gradients are written; (name, e) writes expert e of a fused tensor.
GRADS = {
    "hf-nemotron-h/nemotronh-mix-fp32": [
        "model.layers.0.mixer.A_log", "model.layers.0.mixer.D", "model.layers.0.mixer.dt_bias",
        "model.layers.0.mixer.conv1d.bias", "model.layers.0.mixer.norm.weight",
        "model.layers.0.norm.weight", "model.layers.1.norm.weight", "model.layers.3.norm.weight",
        "model.layers.4.mixer.gate.weight", "model.layers.7.norm.weight", "model.norm_f.weight"],
    "hf-nemotron-h/nemotronh-latent-bf16-sharded": [
        "model.layers.0.mixer.A_log", "model.layers.0.mixer.in_proj.bias",
        "model.layers.1.mixer.gate.weight", ("model.layers.1.mixer.experts.up_proj", 1)],
    "hf-moe/qwen3moe-top2-fp32": [
        "model.layers.0.mlp.gate.weight", "model.layers.0.self_attn.q_norm.weight",
        "model.layers.0.post_attention_layernorm.weight", "model.layers.2.input_layernorm.weight",
        "model.norm.weight"],
    "hf-moe/mixtral-top2-fp32": [
        "model.layers.0.mlp.gate.weight", "model.layers.1.post_attention_layernorm.weight"],
}


def per_expert_name(name, e):
    """...experts.down_proj, 1 -> ...experts.1.down_proj.weight (the unfused spelling)."""
    head, tail = name.rsplit(".", 1)
    return f"{head}.{e}.{tail}.weight"


def write_gradients(rel, wanted):
    folder = ROOT / rel
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                              **LOAD_ARGS).double()
    model.eval()  # no dropout; autograd stays on
    tokens = torch.tensor(json.loads((folder / "tokens.json").read_text()), dtype=torch.int64)
    logits = model(tokens, use_cache=False).logits  # [B, T, V] float64
    V = logits.shape[-1]
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V),
                                             tokens[:, 1:].reshape(-1))
    loss.backward()
    params = dict(model.named_parameters())
    out = {"loss": loss.detach().clone()}
    for w in wanted:
        name, e = (w, None) if isinstance(w, str) else w
        g = params[name].grad
        g = g if e is None else g[e]
        if not g.abs().max() > 0:  # an expert no token chose: a gradient that tests nothing
            sys.exit(f"hf_golden_gradients.py: {rel}: the gradient of {w} is zero; pick another")
        out[name if e is None else per_expert_name(name, e)] = g.contiguous()
    path = folder / "grads.safetensors"
    safetensors.torch.save_file(
        out, str(path),
        metadata={"source": f"{type(model).__name__}, transformers {transformers.__version__}, "
                            f"torch {PINNED['torch']}, float64 on the CPU, mean next-token CE "
                            f"on tokens.json"})
    return path, loss.item()


def main():
    check_versions()
    torch.set_num_threads(1)  # one summation order, so that a rerun writes the same bytes
    for rel, wanted in GRADS.items():
        path, loss = write_gradients(rel, wanted)
        print(f"{path.relative_to(ROOT.parent.parent)}: {path.stat().st_size / 1024:.1f} KiB, "
              f"loss {loss:.6f}")


if __name__ == "__main__":
    main()
