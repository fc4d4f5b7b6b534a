#!/usr/bin/env python3
"""PyTorch's CPU matrix products on kiln-gemm's shapes (gemm_shapes.h).

For each shape of examples/benchmark/gemm_shapes.h (or those whose name
contains --only), times torch.matmul in the layout the models use (NT: a
times b stored [N, K] transposed; NN; TN: a stored [K, M] transposed) and
prints one `GEMM peer=<variant> shape="<name>" ms=<median> gflops=<..>` line
per shape and variant, as kiln-gemm does:
  torch-fp32      fp32 operands
  torch-bf16      bf16 operands (oneDNN's bf16 GEMM, fp32 sums), the
                  conversion not timed
  torch-autocast  fp32 operands under torch.autocast("cpu", torch.bfloat16):
                  the conversion timed, as Kiln's --precision bf16 times it
Threads: OMP_NUM_THREADS, else every core. Needs PyTorch (a private venv, as
run-gpt2.sh makes); never a test dependency.

usage: torch_gemm_peer.py [--only SUBSTRING] [--variants fp32,bf16,autocast]
"""
import argparse
import os
import re
import statistics
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def shapes():
    text = open(os.path.join(HERE, "gemm_shapes.h"), encoding="utf-8").read()
    pattern = re.compile(
        r'\{"([^"]+)",\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*"(NT|NN|TN)"\}')
    return [(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)),
             int(m.group(5)), m.group(6)) for m in pattern.finditer(text)]


def operands(m, n, k, batch, layout, dtype):
    lead = (batch,) if batch > 1 else ()
    a = torch.full(lead + ((k, m) if layout == "TN" else (m, k)), 0.5,
                   dtype=dtype)
    b = torch.full(lead + ((n, k) if layout == "NT" else (k, n)), 0.25,
                   dtype=dtype)
    return a, b


def product(a, b, layout):
    if layout == "NT":
        return torch.matmul(a, b.transpose(-1, -2))
    if layout == "TN":
        return torch.matmul(a.transpose(-1, -2), b)
    return torch.matmul(a, b)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--variants", default="fp32,bf16,autocast")
    args = parser.parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in ("fp32", "bf16", "autocast"):
            parser.error("unknown variant '%s' (fp32, bf16, autocast)" % v)
    print("PyTorch %s contractions (%d threads)" %
          (torch.__version__, torch.get_num_threads()))
    for name, m, n, k, batch, layout in shapes():
        if args.only not in name:
            continue
        flop = 2.0 * m * n * k * batch
        reps = max(5, int(4e9 / flop))
        for variant in variants:
            dtype = torch.bfloat16 if variant == "bf16" else torch.float32
            a, b = operands(m, n, k, batch, layout, dtype)
            seconds = []
            for r in range(reps + 2):
                t0 = time.perf_counter()
                if variant == "autocast":
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        out = product(a, b, layout)
                else:
                    out = product(a, b, layout)
                t1 = time.perf_counter()
                if r == 0 and float(out.reshape(-1)[0]) != 0.125 * k:
                    raise SystemExit("%s %s: wrong result %s" %
                                     (name, variant, float(out.reshape(-1)[0])))
                if r >= 2:
                    seconds.append(t1 - t0)
            median = statistics.median(seconds)
            print("%-16s %s  %5d %5d %5d x%-3d %-8s %9.3f ms %7.1f GFLOP/s" %
                  (name, layout, m, n, k, batch, variant, median * 1e3,
                   flop / median * 1e-9))
            print('GEMM peer=torch-%s shape="%s" ms=%.4f gflops=%.2f' %
                  (variant, name, median * 1e3, flop / median * 1e-9),
                  flush=True)


if __name__ == "__main__":
    main()
