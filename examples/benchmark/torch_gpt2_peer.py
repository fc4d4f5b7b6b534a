#!/usr/bin/env python3
"""Current PyTorch (CPU) peer for kiln-bench's GPT-2 124M rows.

The model is GPT-2's smallest (V 50257, d 768, 12 heads, 12 layers, d_ff
3072, 1024 positions, GELU's tanh form, tied head: 124,439,808 parameters),
written as nanoGPT writes it, with the names and shapes of
dsl::models::gpt2() (fused q|k|v projection, pre-LN blocks), fp32, attention
through F.scaled_dot_product_attention. The rows are kiln-bench's:

- prefill: one sequence of 512 positions from an empty cache, eval mode, no
  grad; the last position's logits and every layer's keys and values
  (tokens/s = 512 / median ms);
- decode: a 16-token prompt prefilled, then 128 tokens one at a time, greedy,
  each step the new position against the keys and values cached so far
  (concatenated, as Hugging Face's DynamicCache does); tokens/s over the 128;
- decode-b4: the same for four prompts together (batch 4: one forward call
  per position for all four); tokens/s = 4 x 128 over the time;
- train: batch 4 of 64 positions, mean cross-entropy, backward, AdamW (lr
  3e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.01, no clipping).

Variants (--variants): eager, and compile (torch.compile of the model's
forward; decode compiles with dynamic shapes). Each row prints a
`RESULT peer=torch-<variant> model=gpt2 mode=<mode> ...` line in kiln-bench's
format; the first call of a compiled row (compilation included) is printed
as compile_s. Threads: OMP_NUM_THREADS, else every core.

usage: torch_gpt2_peer.py [--modes prefill,decode,decode-b4,train] [--steps N]
    [--variants eager,compile]
"""
import argparse
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, D, H, L, DFF, MAXLEN = 50257, 768, 12, 12, 3072, 1024


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)
        self.ln_2 = nn.LayerNorm(D)
        self.c_fc = nn.Linear(D, DFF)
        self.mlp_proj = nn.Linear(DFF, D)

    def forward(self, x, past_k=None, past_v=None):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=1)
            v = torch.cat([past_v, v], dim=1)
        heads = lambda z: z.view(b, z.shape[1], H, D // H).transpose(1, 2)
        # A new position sees every cached one: causal only over the new.
        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v),
                                           is_causal=t > 1)
        y = y.transpose(1, 2).reshape(b, t, D)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)),
                                     approximate="tanh"))
        return x, k, v


class Gpt2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(MAXLEN, D)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, pos=0, cache=None):
        """Logits of every position, or with a cache (a list of (k, v) per
        layer, or [] to start one) the last position's logits and the new
        cache."""
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(pos, pos + t))
        new_cache = []
        for i, block in enumerate(self.h):
            past = cache[i] if cache else (None, None)
            x, k, v = block(x, *past)
            new_cache.append((k, v))
        if cache is None:
            return F.linear(self.ln_f(x), self.wte.weight)
        return F.linear(self.ln_f(x[:, -1]), self.wte.weight), new_cache


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def result(variant, mode, median, best, tokens, extra=""):
    print(f"RESULT peer=torch-{variant} model=gpt2 mode={mode} "
          f"median_ms={median:.2f} min_ms={best:.2f} "
          f"tokens_per_s={tokens / (median * 1e-3):.1f} "
          f"rss_mib={peak_rss_mib():.0f}{extra}", flush=True)


def timed(fn, steps):
    times = []
    for i in range(3 + steps):
        t0 = time.perf_counter()
        fn()
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def run(mode, variant, steps):
    torch.manual_seed(0)
    model = Gpt2()
    gen = torch.Generator().manual_seed(1)
    forward = model
    compile_s = None
    if variant == "compile":
        forward = torch.compile(model, dynamic=mode.startswith("decode"))
    if mode == "train":
        model.train()
        idx = torch.randint(0, V, (4, 64), generator=gen)
        targets = torch.randint(0, V, (4, 64), generator=gen)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4,
                                betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.01)

        def step():
            opt.zero_grad(set_to_none=True)
            logits = forward(idx)
            loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
            loss.backward()
            opt.step()
            return loss.item()

        t0 = time.perf_counter()
        step()
        compile_s = time.perf_counter() - t0
        median, best = timed(step, steps)
        result(variant, mode, median, best, 4 * 64,
               f" compile_s={compile_s:.1f}" if variant == "compile" else "")
        return
    model.eval()
    with torch.no_grad():
        if mode == "prefill":
            idx = torch.randint(0, V, (1, 512), generator=gen)
            t0 = time.perf_counter()
            forward(idx, 0, [])
            compile_s = time.perf_counter() - t0
            median, best = timed(lambda: forward(idx, 0, []), steps)
            result(variant, mode, median, best, 512,
                   f" compile_s={compile_s:.1f}"
                   if variant == "compile" else "")
            return
        batch = 4 if mode == "decode-b4" else 1
        prompt = torch.tensor([[(i * 7919 + b * 104729) % V
                                for i in range(16)] for b in range(batch)])

        def generate(count, on_token=None):
            logits, cache = forward(prompt, 0, [])
            pos = prompt.shape[1]
            for _ in range(count):
                token = logits.argmax(-1, keepdim=True)
                if on_token:
                    on_token()
                logits, cache = forward(token, pos, cache)
                pos += 1

        t0 = time.perf_counter()
        generate(8)  # warm-up (and compilation)
        compile_s = time.perf_counter() - t0
        stamps = []
        generate(129, lambda: stamps.append(time.perf_counter()))
        # Stamp i is taken before step i: steps 1..128 are single tokens.
        per_token = [(b - a) * 1e3 for a, b in zip(stamps[1:], stamps[2:])]
        total = (stamps[-1] - stamps[1])
        median = statistics.median(per_token)
        print(f"RESULT peer=torch-{variant} model=gpt2 mode={mode} "
              f"median_ms={median:.2f} min_ms={min(per_token):.2f} "
              f"tokens_per_s={batch * len(per_token) / total:.1f} "
              f"rss_mib={peak_rss_mib():.0f}"
              + (f" compile_s={compile_s:.1f}" if variant == "compile"
                 else ""), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="prefill,decode,train")
    parser.add_argument("--variants", default="eager,compile")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    threads = int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count()
    torch.set_num_threads(threads)
    print(f"PyTorch {torch.__version__}, {threads} threads", flush=True)
    failed = False
    for mode in args.modes.split(","):
        if mode not in ("prefill", "decode", "decode-b4", "train"):
            sys.exit(f"unknown mode '{mode}' "
                     "(prefill, decode, decode-b4, train)")
        for variant in args.variants.split(","):
            if variant not in ("eager", "compile"):
                sys.exit(f"unknown variant '{variant}' (eager, compile)")
            try:
                run(mode, variant, args.steps)
            except Exception as e:  # a torch.compile failure: report, go on
                print(f"error: gpt2 {mode} {variant}: {e}", file=sys.stderr,
                      flush=True)
                failed = True
            torch._dynamo.reset()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
