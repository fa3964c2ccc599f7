#!/usr/bin/env python3
"""Regenerates the README's results section from the newest results/*.json (written by
`ferrokern bench --json` on a GPU run). Tables are generated, never typed.
Usage: scripts/results_table.py [--check]   (--check: exit 1 if the README is stale)"""
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def render():
    files = sorted(glob.glob(os.path.join(ROOT, "results", "*.json")))
    if not files:
        return ("No GPU run has been recorded yet: every number here will come from a "
                "`ferrokern bench --json` run on a GPU, committed under `results/`.\n")
    path = files[-1]
    doc = json.load(open(path))
    out = [f"From `{os.path.relpath(path, ROOT)}`: {doc['gpu']} (sm_{doc['compute_capability'].replace('.', '')}), "
           f"driver CUDA {doc['driver_cuda_version']}, {doc['date']}, command `{doc['command']}`. "
           f"Median of {doc['reps']} runs; ratio = kernel throughput / baseline throughput measured in the same run."
           + (" This run was cut short: only the sections below were measured." if doc.get("complete") is False else "")
           + (f" Sections left out (`--skip`, their tests hung): {', '.join(doc['skipped'])}." if doc.get("skipped") else "")
           + "\n",
           "| family | op | version | shape | dtype | median ms | GB/s | baseline | ratio |",
           "|---|---|---|---|---|---:|---:|---|---:|"]
    for m in doc["measurements"]:
        out.append(f"| {m['family']} | {m['op']} | {m['version']} | {m['shape']} | {m['dtype']} | "
                   f"{m['median_ms']:.4f} | {m['gbps']:.1f} | {m['baseline']} | {m['ratio']:.3f} |")
    gemm = doc.get("gemm") or []
    if gemm:
        out += ["", "SGEMM (f32, NN, alpha 1, beta 0) against cuBLAS SGEMM in the same run:", "",
                "| version | shape (m x n x k) | median ms | TFLOP/s | cuBLAS TFLOP/s | ratio to cuBLAS |",
                "|---|---|---:|---:|---:|---:|"]
        fmt = lambda v, f: "n/a" if v is None else format(v, f)
        for g in gemm:
            out.append(f"| {g['version']} | {g['shape']} | {g['median_ms']:.4f} | {g['tflops']:.2f} | "
                       f"{fmt(g.get('cublas_tflops'), '.2f')} | {fmt(g.get('ratio'), '.3f')} |")
    tc = doc.get("gemm_tc") or []
    if tc:
        out += ["", "Tensor-core GEMM (bf16 in, f32 out, NN) against cuBLAS cublasGemmEx (f32 compute) in the same run:", "",
                "| version | shape (m x n x k) | median ms | TFLOP/s | cuBLAS TFLOP/s | ratio to cuBLAS |",
                "|---|---|---:|---:|---:|---:|"]
        fmt = lambda v, f: "n/a" if v is None else format(v, f)
        for g in tc:
            out.append(f"| {g['version']} | {g['shape']} | {g['median_ms']:.4f} | {g['tflops']:.2f} | "
                       f"{fmt(g.get('cublas_tflops'), '.2f')} | {fmt(g.get('ratio'), '.3f')} |")
    paged = doc.get("paged_decode") or []
    if paged:
        out += ["", "Paged decode (bf16) against a device-to-device copy of the KV bytes it reads, same run:", "",
                "| version | shape | median ms | GB/s | copy GB/s | ratio |", "|---|---|---:|---:|---:|---:|"]
        for m in paged:
            out.append(f"| {m['version']} | {m['shape']} | {m['median_ms']:.4f} | {m['gbps']:.1f} | "
                       f"{m['baseline_gbps']:.1f} | {m['ratio']:.3f} |")
    out += attention_table(doc.get("attention"), "Attention forward (bf16) against PyTorch's "
                           "scaled_dot_product_attention in the same run:")
    out += attention_table(doc.get("attention_backward"), "Attention backward (bf16; dQ, dK, dV from dO, O and "
                           "the log-sum-exp; TFLOP/s count 2.5x the forward's FLOPs) against the backward of "
                           "PyTorch's scaled_dot_product_attention in the same run:")
    return "\n".join(out) + "\n"


def attention_table(rows, title):
    """The README lines of one attention section (none when the run has no rows for it)."""
    if not rows:
        return []
    out = ["", title, "", "| version | shape | causal | median ms | TFLOP/s | PyTorch TFLOP/s | ratio to PyTorch |",
           "|---|---|---|---:|---:|---:|---:|"]
    fmt = lambda v, f: "n/a" if v is None else format(v, f)
    for a in rows:
        out.append(f"| {a['version']} | {a['shape']} | {a['causal']} | {a['median_ms']:.4f} | {a['tflops']:.2f} | "
                   f"{fmt(a.get('torch_tflops'), '.2f')} | {fmt(a.get('ratio'), '.3f')} |")
    return out


def main():
    readme = os.path.join(ROOT, "README.md")
    text = open(readme).read()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + render() + END + tail
    if "--check" in sys.argv:
        sys.exit(0 if new == text else 1)
    open(readme, "w").write(new)


if __name__ == "__main__":
    main()
