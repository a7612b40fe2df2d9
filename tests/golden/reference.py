#!/usr/bin/python3
"""Independent float64 reference of the Llama-family forward pass, for the golden tests.

Runs with Debian's python3-torch (/usr/bin/python3). Reads an HF-layout checkpoint folder
(config.json + model.safetensors, parsed here with json + struct, no autocompress code), runs the
model in float64 and writes the logits as a safetensors file (F64, name "logits", [B, T, V]).

It follows HF transformers' modeling_llama.py (rotate-half RoPE, repeat_kv GQA, RMSNorm,
SwiGLU) and modeling_rope_utils.py (llama3 / linear rope_scaling); heterogeneous DeciLM
"block_configs" (attention/ffn no_op, n_heads_in_group, intermediate_size) are supported.

usage: reference.py CHECKPOINT_DIR TOKENS_JSON OUT.safetensors
  TOKENS_JSON: [[id, id, ...], ...]  (B rows of equal length T)
"""
import json
import math
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = bytearray(data[base + b:base + e])
        t = torch.frombuffer(buf, dtype=DTYPES[info["dtype"]]) if e > b else torch.zeros(0)
        out[name] = t.reshape(info["shape"]).to(torch.float64)
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def inv_freq(cfg, head_dim):
    theta = cfg.get("rope_theta", 10000.0)
    f = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    rs = cfg.get("rope_scaling")
    if not rs:
        return f
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "linear":
        return f / rs["factor"]
    if kind == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wl, high_wl = old / lo, old / hi
        out = []
        for x in f.tolist():
            wl = 2 * math.pi / x
            if wl < high_wl:
                out.append(x)
            elif wl > low_wl:
                out.append(x / factor)
            else:
                s = (old / wl - lo) / (hi - lo)
                out.append((1 - s) * x / factor + s * x)
        return torch.tensor(out, dtype=torch.float64)
    return f


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def layer_shapes(cfg):
    L, H = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    G = cfg.get("num_key_value_heads", H)
    blocks = cfg.get("block_configs")
    shapes = []
    for i in range(L):
        if blocks is None:
            shapes.append((True, H, G, True))
            continue
        a, f = blocks[i]["attention"], blocks[i]["ffn"]
        h = a.get("num_attention_heads", H)
        attn = not a.get("no_op", False)
        g = h // a["n_heads_in_group"] if attn else 0
        shapes.append((attn, h, g, not f.get("no_op", False)))
    return shapes


def forward(cfg, W, tokens):
    D = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    Hd = cfg.get("head_dim") or D // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    B, T = tokens.shape
    x = W["model.embed_tokens.weight"][tokens]
    pos = torch.arange(T, dtype=torch.float64)
    freqs = torch.outer(pos, inv_freq(cfg, Hd))
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos(), emb.sin()
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i, (attn, h_i, g_i, ffn) in enumerate(layer_shapes(cfg)):
        p = "model.layers.%d." % i
        if attn:
            h = rms_norm(x, W[p + "input_layernorm.weight"], eps)

            def proj(name):
                y = h @ W[p + "self_attn.%s.weight" % name].T
                bias = W.get(p + "self_attn.%s.bias" % name)
                return y if bias is None else y + bias

            q = proj("q_proj").view(B, T, h_i, Hd).transpose(1, 2)
            k = proj("k_proj").view(B, T, g_i, Hd).transpose(1, 2)
            v = proj("v_proj").view(B, T, g_i, Hd).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(h_i // g_i, dim=1)  # HF repeat_kv
            v = v.repeat_interleave(h_i // g_i, dim=1)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(Hd)
            s = s.masked_fill(~causal, float("-inf"))
            o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, h_i * Hd)
            x = x + o @ W[p + "self_attn.o_proj.weight"].T
        if ffn:
            h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
            g = torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T)
            u = h @ W[p + "mlp.up_proj.weight"].T
            x = x + (g * u) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T


def main():
    ckpt, tokens_json, out = sys.argv[1:4]
    cfg = json.load(open(ckpt + "/config.json"))
    W = read_safetensors(ckpt + "/model.safetensors")
    tokens = torch.tensor(json.load(open(tokens_json)), dtype=torch.long)
    with torch.no_grad():
        logits = forward(cfg, W, tokens)
    write_safetensors(out, {"logits": logits})


if __name__ == "__main__":
    main()
