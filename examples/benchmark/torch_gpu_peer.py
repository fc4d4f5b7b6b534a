#!/usr/bin/env python3
"""PyTorch (CUDA) peer for Kiln's GPU benchmark: the BENCHMARKS.md models.

Measures, on one GPU, what kiln_bench.cpp measures with `--gpu native`: the
forward pass (eval mode, no grad, mean cross-entropy over every target, the
loss read back) and the training step (zero grads, forward, loss, backward,
AdamW lr 3e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every
parameter, no clipping, the loss read back) of gpt-tiny, gpt-small (plus a
batch-1 forward row, `forward-b1`) and encdec.

The models are those of torch_peer.cpp (the libtorch CPU peer), written again
in Python: the same layers, parameter shapes (818,048 / 12,318,720 /
48,234,496 parameters), initialization, explicit matmul-softmax-matmul
attention, and the shapes of kiln_bench.cpp's Shape structs. As on Kiln's
side, encdec takes a source padding mask [B, S] (bool, all true = every
token kept) and applies it in the encoder's self-attention and in the
decoder's cross-attention; targets are ids of their own, not the inputs
shifted. FLOPs, tokens/s and the RESULT lines use kiln_bench.cpp's formulas
and format (gptFlops / encdecFlops, training = 3 x forward); peak_pct is 0.0
(no GPU peak is measured here).

Each step is timed like Kiln's wall-clock step: the token ids (and the mask)
stay on the host as CPU tensors and are copied to the device inside the timed
step, and the loss is read back with .item() inside it. A pair of
torch.cuda.Event(enable_timing=True) brackets the step, followed by
torch.cuda.synchronize(); 3 warm-up steps, then --steps timed ones, reported
as median and min (wall_median_ms, the host clock's median, is printed too).

Variants (--variants): eager or torch.compile(model) in its default mode,
the loss inside the compiled module (the optimizer step stays eager: the
fused CUDA AdamW); fp32 = TF32 off (torch.backends.cuda.matmul.allow_tf32
and torch.backends.cudnn.allow_tf32 False, float32 matmul precision
'highest'), tf32 = TF32 on (precision 'high'). Only the legacy TF32 switches
are used, never the fp32_precision API, since mixing the two makes PyTorch
refuse to report (and Inductor to compile). bf16 = autocast to bf16
(torch.autocast(device_type, torch.bfloat16) around the forward pass and
the loss; the parameters, gradients and AdamW stay fp32: PyTorch's mixed
precision, the peer of Kiln's --precision bf16, mostly with --device cpu).
Default: eager-fp32, eager-tf32, compile-fp32.

Compiling encdec's 12 layers (forward and, for training, backward) with
Inductor takes minutes, so the compile variants run only for the models of
--compile-models (default gpt-tiny,gpt-small; the default run is meant to
finish in about 3 minutes on an H200); `--compile-models
gpt-tiny,gpt-small,encdec` adds encdec. The first call of each compiled row
(compilation included) is printed as compile_s.

All rows run in this one process, one after the other, the memory of each
released before the next (and torch._dynamo reset). A row that fails (a
torch.compile error, out of memory) is reported on stderr as
`error: MODEL MODE VARIANT: MESSAGE` and the run goes on; the exit status is
1 when any row failed.

usage: torch_gpu_peer.py [--models gpt-tiny,gpt-small,encdec]
    [--modes forward,train] [--steps N]
    [--variants eager-fp32,eager-tf32,compile-fp32,compile-tf32,
                eager-bf16,compile-bf16]
    [--compile-models gpt-tiny,gpt-small,encdec] [--attention manual|sdpa]
    [--device cuda]
"""
import argparse
import collections
import functools
import gc
import math
import statistics
import sys
import time
import traceback

MODELS = ("gpt-tiny", "gpt-small", "encdec")
MODES = ("forward", "train")
VARIANTS = ("eager-fp32", "eager-tf32", "compile-fp32", "compile-tf32",
            "eager-bf16", "compile-bf16")
DEFAULT_VARIANTS = "eager-fp32,eager-tf32,compile-fp32"
DEFAULT_COMPILE_MODELS = "gpt-tiny,gpt-small"
WARMUP = 3

# kiln_bench.cpp's Shape (torch_peer.cpp's Config): encdec has S = T.
Shape = collections.namedtuple("Shape", "vocab d heads layers dff t b")
SHAPES = {
    "gpt-tiny": Shape(65, 128, 4, 4, 512, 128, 16),
    "gpt-small": Shape(4096, 384, 6, 6, 1536, 256, 8),
    "encdec": Shape(8000, 512, 8, 6, 2048, 64, 8),
}


def gpt_flops(c):
    """Matmul FLOPs of one forward pass (dense T x T attention)."""
    t, d = float(c.t), float(c.d)
    return c.b * (c.layers * (24 * t * d * d + 4 * t * t * d) +
                  2 * t * d * c.vocab)


def encdec_flops(c):
    """Encoder layer 24·S·d² + 4·S²·d; decoder layer 28·T·d² + 4·S·d² (cross
    K|V) + 4·T²·d + 4·T·S·d; head 2·T·d·V (50.50 GFLOP for the doc's model)."""
    s, t, d = float(c.t), float(c.t), float(c.d)
    enc = 24 * s * d * d + 4 * s * s * d
    dec = 28 * t * d * d + 4 * s * d * d + 4 * t * t * d + 4 * t * s * d
    return c.b * (c.layers * (enc + dec) + 2 * t * d * c.vocab)


@functools.lru_cache(maxsize=None)
def model_classes(torch):
    """The models of torch_peer.cpp, defined once torch is imported."""
    nn = torch.nn
    F = torch.nn.functional

    def attend(q, k, v, heads, masked, causal, sdpa):
        """Multi-head attention over projected q [B,Tq,d], k|v [B,Tk,d].
        `masked` (bool, True = left out) broadcasts to [B, H, Tq, Tk]."""
        b, tq, d = q.shape
        tk = k.shape[1]
        dh = d // heads
        q = q.view(b, tq, heads, dh).transpose(1, 2)
        k = k.view(b, tk, heads, dh).transpose(1, 2)
        v = v.view(b, tk, heads, dh).transpose(1, 2)
        if sdpa:
            if causal:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                keep = None if masked is None else ~masked
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        else:
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
            if masked is not None:
                att = att.masked_fill(masked, float("-inf"))
            att = torch.softmax(att, -1)
            out = torch.matmul(att, v)
        return out.transpose(1, 2).contiguous().view(b, tq, d)

    def causal_mask(t):
        return torch.ones(t, t, dtype=torch.bool).triu(1)

    def layer_norm(d):
        return nn.LayerNorm(d, eps=1e-5, elementwise_affine=True)

    class GptBlock(nn.Module):
        """Pre-LN block: fused QKV, erf GELU (torch_peer.cpp's GptBlock)."""

        def __init__(self, c, sdpa):
            super().__init__()
            self.heads, self.sdpa = c.heads, sdpa
            self.ln1 = layer_norm(c.d)
            self.qkv = nn.Linear(c.d, 3 * c.d)
            self.proj = nn.Linear(c.d, c.d)
            self.ln2 = layer_norm(c.d)
            self.fc1 = nn.Linear(c.d, c.dff)
            self.fc2 = nn.Linear(c.dff, c.d)

        def forward(self, x, mask):
            q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
            x = x + self.proj(attend(q, k, v, self.heads, mask, True,
                                     self.sdpa))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Gpt(nn.Module):
        """GPT-2 style decoder with a tied head; forward gives the loss."""

        def __init__(self, c, sdpa):
            super().__init__()
            self.vocab = c.vocab
            self.wte = nn.Parameter(torch.empty(c.vocab, c.d))
            self.wpe = nn.Parameter(torch.empty(c.t, c.d))
            self.h = nn.ModuleList(GptBlock(c, sdpa) for _ in range(c.layers))
            self.ln_f = layer_norm(c.d)
            self.register_buffer("mask", causal_mask(c.t))
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if p.dim() == 2:
                        p.normal_(0.0, 0.02)
                    elif name.endswith("bias"):
                        p.zero_()

        def forward(self, idx, targets):
            t = idx.shape[1]
            x = F.embedding(idx, self.wte) + self.wpe[:t]
            mask = self.mask[:t, :t]
            for block in self.h:
                x = block(x, mask)
            logits = F.linear(self.ln_f(x), self.wte)
            return F.cross_entropy(logits.view(-1, self.vocab),
                                   targets.reshape(-1))

    class EncLayer(nn.Module):
        """Post-LN encoder layer (torch_peer.cpp's EncLayer)."""

        def __init__(self, c, sdpa):
            super().__init__()
            self.heads, self.sdpa = c.heads, sdpa
            self.qkv = nn.Linear(c.d, 3 * c.d)
            self.proj = nn.Linear(c.d, c.d)
            self.ln1 = layer_norm(c.d)
            self.fc1 = nn.Linear(c.d, c.dff)
            self.fc2 = nn.Linear(c.dff, c.d)
            self.ln2 = layer_norm(c.d)

        def forward(self, x, src_masked):
            q, k, v = self.qkv(x).chunk(3, -1)
            x = self.ln1(x + self.proj(attend(q, k, v, self.heads, src_masked,
                                              False, self.sdpa)))
            return self.ln2(x + self.fc2(torch.relu(self.fc1(x))))

    class DecLayer(nn.Module):
        """Post-LN decoder layer (torch_peer.cpp's DecLayer)."""

        def __init__(self, c, sdpa):
            super().__init__()
            self.heads, self.sdpa = c.heads, sdpa
            self.qkv = nn.Linear(c.d, 3 * c.d)
            self.proj = nn.Linear(c.d, c.d)
            self.ln1 = layer_norm(c.d)
            self.xq = nn.Linear(c.d, c.d)
            self.xkv = nn.Linear(c.d, 2 * c.d)
            self.xproj = nn.Linear(c.d, c.d)
            self.ln2 = layer_norm(c.d)
            self.fc1 = nn.Linear(c.d, c.dff)
            self.fc2 = nn.Linear(c.dff, c.d)
            self.ln3 = layer_norm(c.d)

        def forward(self, y, mem, causal, src_masked):
            q, k, v = self.qkv(y).chunk(3, -1)
            y = self.ln1(y + self.proj(attend(q, k, v, self.heads, causal,
                                              True, self.sdpa)))
            k, v = self.xkv(mem).chunk(2, -1)
            y = self.ln2(y + self.xproj(attend(self.xq(y), k, v, self.heads,
                                               src_masked, False, self.sdpa)))
            return self.ln3(y + self.fc2(torch.relu(self.fc1(y))))

    class EncDec(nn.Module):
        """The "Attention is all you need" base: post-LN, one shared
        embedding scaled by √d plus sinusoidal PE, logits = y·embᵀ; forward
        gives the loss."""

        def __init__(self, c, sdpa):
            super().__init__()
            self.vocab = c.vocab
            self.scale = math.sqrt(float(c.d))
            self.emb = nn.Parameter(torch.empty(c.vocab, c.d))
            self.enc = nn.ModuleList(EncLayer(c, sdpa)
                                     for _ in range(c.layers))
            self.dec = nn.ModuleList(DecLayer(c, sdpa)
                                     for _ in range(c.layers))
            pos = torch.arange(c.t, dtype=torch.float32).unsqueeze(1)
            div = torch.exp(torch.arange(0, c.d, 2, dtype=torch.float32) *
                            (-math.log(10000.0) / c.d))
            table = torch.zeros(c.t, c.d)
            table[:, 0::2] = torch.sin(pos * div)
            table[:, 1::2] = torch.cos(pos * div)
            self.register_buffer("pe", table)
            self.register_buffer("mask", causal_mask(c.t))
            with torch.no_grad():
                for name, p in self.named_parameters():
                    if p.dim() == 2:
                        nn.init.xavier_uniform_(p)
                    elif name.endswith("bias"):
                        p.zero_()

        def embed(self, ids):
            return (F.embedding(ids, self.emb) * self.scale +
                    self.pe[:ids.shape[1]])

        def forward(self, src, tgt, src_mask, targets):
            # src_mask [B, S]: True = a real token; left out where False.
            src_masked = ~src_mask[:, None, None, :]
            x = self.embed(src)
            for layer in self.enc:
                x = layer(x, src_masked)
            t = tgt.shape[1]
            causal = self.mask[:t, :t]
            y = self.embed(tgt)
            for layer in self.dec:
                y = layer(y, x, causal, src_masked)
            logits = F.linear(y, self.emb)
            return F.cross_entropy(logits.view(-1, self.vocab),
                                   targets.reshape(-1))

    return Gpt, EncDec


def split_list(text):
    return [item for item in text.split(",") if item]


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="PyTorch CUDA peer of kiln-bench --gpu native.")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--compile-models", default=DEFAULT_COMPILE_MODELS,
                        help="models the compile variants run for "
                        "(default %(default)s)")
    parser.add_argument("--attention", choices=("manual", "sdpa"),
                        default="manual",
                        help="manual: matmul, softmax, matmul as "
                        "torch_peer.cpp (default); sdpa: "
                        "F.scaled_dot_product_attention (peer name gets "
                        "-sdpa)")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    args.models = split_list(args.models)
    args.modes = split_list(args.modes)
    args.variants = split_list(args.variants)
    args.compile_models = split_list(args.compile_models)
    args.steps = max(1, args.steps)
    for name, given, known in (("model", args.models, MODELS),
                               ("model", args.compile_models, MODELS),
                               ("mode", args.modes, MODES),
                               ("variant", args.variants, VARIANTS)):
        for item in given:
            if item not in known:
                parser.error("unknown %s '%s' (%s)" %
                             (name, item, ", ".join(known)))
    return args


def set_precision(torch, tf32):
    """TF32 on or off through the legacy switches only (see the docstring):
    allow_tf32 first, then the precision, which agrees with it."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def host_ids(torch, b, t, vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(vocab, (b, t), dtype=torch.int64, generator=gen)


def host_inputs(torch, model, shape, mode):
    """The step's inputs on the host (kiln_bench.cpp's seeds, not its ids)."""
    c = shape
    if model == "encdec":
        src_mask = torch.ones(c.b, c.t, dtype=torch.bool)
        return [host_ids(torch, c.b, c.t, c.vocab, 5),
                host_ids(torch, c.b, c.t, c.vocab, 6), src_mask,
                host_ids(torch, c.b, c.t, c.vocab, 7)]
    seeds = (3, 4) if mode == "forward-b1" else (1, 2)
    return [host_ids(torch, c.b, c.t, c.vocab, s) for s in seeds]


def run_row(torch, args, model, mode, variant, peer):
    """Builds, (compiles,) warms up and times one row; prints its lines."""
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    compiled = variant.startswith("compile")
    train = mode == "train"
    set_precision(torch, variant.endswith("tf32"))
    shape = SHAPES[model]
    if mode == "forward-b1":
        shape = shape._replace(b=1)
    torch.manual_seed(1234)
    gpt_class, encdec_class = model_classes(torch)
    sdpa = args.attention == "sdpa"
    net = (encdec_class if model == "encdec" else gpt_class)(shape, sdpa)
    params = sum(p.numel() for p in net.parameters())
    net = net.to(device)
    net.train(train)
    fn = torch.compile(net) if compiled else net
    opt = None
    if train:
        opt = torch.optim.AdamW(net.parameters(), lr=3e-4, betas=(0.9, 0.999),
                                eps=1e-8, weight_decay=0.01, fused=cuda)
    host = host_inputs(torch, model, shape, mode)
    bf16 = variant.endswith("bf16")

    def forward():
        if bf16:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                return fn(*[h.to(device) for h in host]).float()
        return fn(*[h.to(device) for h in host])

    def step():
        if train:
            opt.zero_grad(set_to_none=True)
            loss = forward()
            loss.backward()
            opt.step()
            return loss.item()
        with torch.no_grad():
            return forward().item()

    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
    ms, wall_ms = [], []
    first = last = 0.0
    compile_s = 0.0
    for i in range(WARMUP + args.steps):
        t0 = time.perf_counter()
        if cuda:
            start.record()
        last = step()
        if cuda:
            end.record()
            torch.cuda.synchronize(device)
        t1 = time.perf_counter()
        if i == 0:
            first = last
            compile_s = t1 - t0
            if compiled:
                print("%s %s %s: first call (torch.compile) %.1f s" %
                      (model, mode, peer, compile_s), flush=True)
        if i >= WARMUP:
            wall_ms.append((t1 - t0) * 1e3)
            ms.append(start.elapsed_time(end) if cuda else wall_ms[-1])
    median = statistics.median(ms)
    flops = encdec_flops(shape) if model == "encdec" else gpt_flops(shape)
    if train:
        flops *= 3  # BENCHMARKS.md: training = 3 x forward
    gflops = flops * 1e-9 / (median * 1e-3)
    tokens = shape.b * shape.t / (median * 1e-3)
    gpu_mib = (torch.cuda.max_memory_allocated(device) / (1 << 20)
               if cuda else 0.0)
    print("%-10s %-11s %-18s %9.2f ms  %9.0f tok/s  %8.1f GFLOP/s  GPU peak "
          "%.0f MiB  params %d  loss %.4f -> %.4f" %
          (model, mode, peer, median, tokens, gflops, gpu_mib, params, first,
           last), flush=True)
    line = ("RESULT peer=%s model=%s mode=%s median_ms=%.2f min_ms=%.2f "
            "tokens_per_s=%.0f gflops=%.1f peak_pct=%.1f loss_first=%.4f "
            "loss_last=%.4f wall_median_ms=%.2f gpu_peak_mib=%.0f" %
            (peer, model, mode, median, min(ms), tokens, gflops, 0.0, first,
             last, statistics.median(wall_ms), gpu_mib))
    if compiled:
        line += " compile_s=%.1f" % compile_s
    print(line, flush=True)


def release(torch, cuda):
    """Frees what the last row left: compiled graphs and cached blocks."""
    gc.collect()
    dynamo = getattr(torch, "_dynamo", None)
    if dynamo is not None:
        dynamo.reset()
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def one_line(error):
    text = " ".join(str(error).split())
    if len(text) > 600:
        text = text[:600] + " ..."
    return "%s: %s" % (type(error).__name__, text)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError as error:
        print("error: cannot import torch: %s" % error, file=sys.stderr,
              flush=True)
        return 1
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("error: CUDA is not available to torch %s" % torch.__version__,
              file=sys.stderr, flush=True)
        return 1
    suffix = "-sdpa" if args.attention == "sdpa" else ""
    print("PyTorch %s (CUDA %s) on %s; variants %s; %d timed steps after %d "
          "warm-up; compile variants for %s; attention %s" %
          (torch.__version__, torch.version.cuda,
           torch.cuda.get_device_name(device) if cuda else args.device,
           ",".join(args.variants), args.steps, WARMUP,
           ",".join(args.compile_models) or "no model", args.attention),
          flush=True)
    rows = []
    for model in args.models:
        for variant in args.variants:
            if (variant.startswith("compile") and
                    model not in args.compile_models):
                print("note: %s %s skipped (not in --compile-models)" %
                      (model, variant), flush=True)
                continue
            modes = list(args.modes)
            if model == "gpt-small" and "forward" in modes:
                modes.append("forward-b1")
            rows.extend((model, mode, variant) for mode in modes)
    failed = 0
    for model, mode, variant in rows:
        peer = "torch-" + variant + suffix
        message = None
        try:
            run_row(torch, args, model, mode, variant, peer)
        except Exception as error:  # noqa: BLE001 -- a row fails, not the run
            message = one_line(error)
            tail = traceback.format_exc().splitlines()[-20:]
        if message is not None:
            failed += 1
            print("error: %s %s %s: %s" % (model, mode, variant, message),
                  file=sys.stderr, flush=True)
            for text in tail:
                print("  " + text, file=sys.stderr)
            sys.stderr.flush()
        try:
            release(torch, cuda)
        except Exception as error:  # noqa: BLE001
            print("warning: releasing %s %s %s: %s" %
                  (model, mode, variant, one_line(error)), file=sys.stderr,
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
