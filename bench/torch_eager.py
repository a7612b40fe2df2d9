#!/usr/bin/python3
"""The baseline of bench/run.sh: the same work as autocompress_bench, written the usual way in
PyTorch eager (Debian's python3-torch), float32, on random weights of the same shapes.

  train       one distillation step: teacher forward (no autograd), student forward + backward of
              KL(teacher || student), gradient clipping, AdamW step (torch.optim.AdamW).
  importance  the forward pass of the model over calibration batches (what importance scoring
              costs at least: autocompress adds the activation statistics on top).

The model follows HF transformers' modeling_llama.py in eager mode (rotate-half RoPE, repeat_kv
GQA, RMSNorm, SwiGLU, causal softmax attention). Prints one JSON line:
  {"which": ..., "tokens_per_s": median over steps, "step_s": [...], "threads": N}

usage: torch_eager.py train|importance --dim D --layers L --heads H --kv-heads G --ffn F
       --vocab V [--student-dim ... --student-ffn ... --student-heads ... --student-kv-heads ...]
       --batch B --seq T --steps N --warmup W --threads N
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F


class Llama(torch.nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, ffn, tied=True):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        g = torch.Generator().manual_seed(0)

        def p(*shape):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) * 0.02)

        self.embed = p(vocab, dim)
        self.lm_head = self.embed if tied else p(vocab, dim)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.attn_norm = torch.nn.Parameter(torch.ones(dim))
            b.q = p(heads * self.hd, dim)
            b.k = p(kv_heads * self.hd, dim)
            b.v = p(kv_heads * self.hd, dim)
            b.o = p(dim, heads * self.hd)
            b.ffn_norm = torch.nn.Parameter(torch.ones(dim))
            b.gate = p(ffn, dim)
            b.up = p(ffn, dim)
            b.down = p(dim, ffn)
            self.blocks.append(b)
        self.norm = torch.nn.Parameter(torch.ones(dim))

    @staticmethod
    def rms(x, w, eps=1e-5):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    @staticmethod
    def rot(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), -1)

    def forward(self, tokens):
        B, T = tokens.shape
        x = F.embedding(tokens, self.embed)
        inv = 1.0 / 10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd)
        ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
        causal = torch.full((T, T), float("-inf")).triu(1)
        for b in self.blocks:
            h = self.rms(x, b.attn_norm)
            q = F.linear(h, b.q).view(B, T, self.heads, self.hd).transpose(1, 2)
            k = F.linear(h, b.k).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
            v = F.linear(h, b.v).view(B, T, self.kv_heads, self.hd).transpose(1, 2)
            q, k = q * cos + self.rot(q) * sin, k * cos + self.rot(k) * sin
            rep = self.heads // self.kv_heads
            k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
            att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + causal
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + F.linear(y, b.o)
            h = self.rms(x, b.ffn_norm)
            x = x + F.linear(F.silu(F.linear(h, b.gate)) * F.linear(h, b.up), b.down)
        return F.linear(self.rms(x, self.norm), self.lm_head)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("which", choices=["train", "importance"])
    for name, default in [("dim", 288), ("layers", 6), ("heads", 6), ("kv-heads", 6),
                          ("ffn", 768), ("vocab", 32000), ("student-dim", 192),
                          ("student-heads", 4), ("student-kv-heads", 4), ("student-ffn", 512),
                          ("batch", 8), ("seq", 256), ("steps", 5), ("warmup", 1),
                          ("threads", 2)]:
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    teacher = Llama(a.vocab, a.dim, a.layers, a.heads, a.kv_heads, a.ffn)
    g = torch.Generator().manual_seed(1)
    times = []
    if a.which == "importance":
        with torch.no_grad():
            for i in range(a.warmup + a.steps):
                tokens = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
                t0 = time.perf_counter()
                teacher(tokens)
                if i >= a.warmup:
                    times.append(time.perf_counter() - t0)
    else:
        student = Llama(a.vocab, a.student_dim, a.layers, a.student_heads, a.student_kv_heads,
                        a.student_ffn)
        params = list(student.parameters())
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
        for i in range(a.warmup + a.steps):
            tokens = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
            t0 = time.perf_counter()
            with torch.no_grad():
                t_logp = teacher(tokens).log_softmax(-1)
            s_logp = student(tokens).log_softmax(-1)
            loss = (t_logp.exp() * (t_logp - s_logp)).sum(-1).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            if i >= a.warmup:
                times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({"which": a.which, "tokens_per_s": a.batch * a.seq / median,
                      "step_s": times, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
