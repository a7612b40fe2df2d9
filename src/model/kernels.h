// Fused kernels of the Llama block, each with its own backward: RMSNorm, RoPE into the head
// layout, SwiGLU's gate, and causal attention. Each replaces a chain of ATen kernels (and their
// autograd nodes) with one pass over the data forward and one backward. They run for fp32 CPU tensors;
// other dtypes take the ATen chain they replace (the same function), which is also the truth
// the tests compare against (tests/test_kernels.cpp, float64).
#pragma once
#include <ATen/ATen.h>

namespace ac {

/// RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm): y = x * rsqrt(mean(x^2, -1) + eps) * w.
/// x [..., D] fp32, w [D]; returns [..., D]. Backward, with r = rsqrt(mean(x^2) + eps) per row:
///   dx = r (dy w) - x r^3 / D * sum(dy w x),   dw = sum over rows of dy x r.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);

/// RoPE (Su et al. 2021, rotate-half form of HF modeling_llama.py apply_rotary_pos_emb) on
/// x [B, T, heads, Hd] (the projection's layout), written in the attention's layout:
///   y[b, h, t] = x[b, t, h] * cos[t] + rotate_half(x[b, t, h]) * sin[t],
///   rotate_half(v) = cat(-v[Hd/2:], v[:Hd/2]);
/// returns a contiguous [B, heads, T, Hd]. cos, sin: [T, Hd] fp32 (rope_tables). The backward
/// gives dx in x's layout. Throws ConfigError on other shapes or an odd Hd.
at::Tensor rope_to_heads(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// SwiGLU's gate (Shazeer 2020, "GLU Variants Improve Transformer"; HF LlamaMLP):
///   y = silu(gate) * up,   silu(g) = g * sigmoid(g).
/// gate, up [..., F] fp32, the same shape; returns that shape. Backward, with s = sigmoid(g):
///   d gate = dy * up * s * (1 + g (1 - s)),   d up = dy * silu(g).
/// The exponential's argument is clamped to [-87, 88] (|g| > 87: s is then 0 or 1 to float
/// precision). Throws ConfigError on different shapes.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);

/// grouped_attention(qg, k, v, causal mask) (model/llama.h) for a block that starts at position
/// 0 (S = T: a prefill without a cache before it, or a training step): query t sees keys s <= t.
/// fp32 CPU tensors run a fused kernel (model/causal_attention.cpp: per KV group, oneDNN sgemm
/// for the two products and one pass for the causal softmax) with its own backward (dQ, dK,
/// dV) under autograd; other dtypes run grouped_attention. qg [B, G, H/G, T, Hd], k and v
/// [B, G, T, Hd]; returns [B, G, H/G, T, Hd]. Exponentials below exp(-87) of a row's maximum
/// count as 0. Throws ConfigError on other shapes.
at::Tensor causal_attention(const at::Tensor& qg, const at::Tensor& k, const at::Tensor& v);

}  // namespace ac
