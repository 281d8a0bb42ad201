#!/usr/bin/env python3
"""MLA prefill attention's peer on an H200 machine: PyTorch's scaled_dot_product_attention, causal, K3's MLA shape
(q/k head dim 192, v 128, bf16), per backend (cuDNN, flash, efficient where they run the shape), at the heads of one
GPU (96) and of a TP16 rank (6), 8K and 32K tokens, no prefix. FLOPs are counted as mla_bench counts them (causal:
heads * T^2 / 2 * (192 + 128) * 2). Prints one JSON object: the torch and cuDNN versions and per row the median of
CUDA-event timings over --repeats launches after a warm-up.

Usage: python3 bench/peers/sdpa_prefill.py [--repeats 10] [--tokens 8192,32768] [--heads 96,6]
"""
import argparse
import json
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def time_ms(fn, repeats):
    fn()  # warm-up (plans, autotuning)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--tokens", default="8192,32768")
    parser.add_argument("--heads", default="96,6")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("sdpa_prefill: no CUDA device", file=sys.stderr)
        return 77
    rows = []
    for heads in [int(h) for h in args.heads.split(",")]:
        for tokens in [int(t) for t in args.tokens.split(",")]:
            gen = torch.Generator(device="cuda").manual_seed(41)
            q = torch.randn(1, heads, tokens, 192, device="cuda", dtype=torch.bfloat16, generator=gen)
            k = torch.randn(1, heads, tokens, 192, device="cuda", dtype=torch.bfloat16, generator=gen)
            v = torch.randn(1, heads, tokens, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
            flops = heads * tokens * tokens / 2 * (192 + 128) * 2
            for name, backend in BACKENDS.items():
                row = {"op": f"sdpa_{name} heads {heads} tokens {tokens} (causal FLOPs)", "flops": flops}
                try:
                    with sdpa_kernel([backend]):
                        ms = time_ms(
                            lambda: torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, is_causal=True, scale=192**-0.5), args.repeats)
                    row.update(median_us=ms * 1e3, tflops_per_s=flops / (ms * 1e-3) / 1e12)
                except RuntimeError as e:  # the backend does not run this shape (e.g. head dims 192 / 128)
                    row["error"] = str(e).splitlines()[0][:200]
                rows.append(row)
            del q, k, v
            torch.cuda.empty_cache()
    print(json.dumps({
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "results": rows,
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
