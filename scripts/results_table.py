#!/usr/bin/env python3
"""Regenerates the README's results section from results/*.json (written by `ferrokern bench
--json` on a GPU run), each section from the newest run that measured it. Tables are generated, never typed.
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
    docs = [(path, json.load(open(path))) for path in files]
    # Each section from the newest run that measured it (a later run may time only some).
    sections = {}
    for path, doc in docs:
        for fam in sorted({m["family"] for m in doc.get("measurements") or []}):
            sections[fam] = (path, doc, [m for m in doc["measurements"] if m["family"] == fam])
        for key in ("gemm", "gemm_tc", "paged_decode", "attention", "attention_backward"):
            if doc.get(key):
                sections[key] = (path, doc, doc[key])
    sources = {}
    for name, (path, doc, _) in sections.items():
        sources.setdefault(path, (doc, []))[1].append(name)
    out = []
    for path, (doc, names) in sorted(sources.items()):
        out.append(f"From `{os.path.relpath(path, ROOT)}` ({', '.join(names)}): {doc['gpu']} "
                   f"(sm_{doc['compute_capability'].replace('.', '')}), driver CUDA {doc['driver_cuda_version']}, "
                   f"{doc['date']}, command `{doc['command']}`"
                   + (", cut short by its time limit" if doc.get("complete") is False else "")
                   + (f", sections left out (`--skip`): {', '.join(doc['skipped'])}" if doc.get("skipped") else "")
                   + ".\n")
    out.append("Median of each run's reps; ratio = kernel throughput / baseline throughput measured in the same "
               "run.\n")
    doc = {k: v[2] for k, v in sections.items()}
    measured = [m for fam in ("elementwise", "rows") for m in doc.get(fam, [])]
    measured += [m for fam, ms in doc.items() if fam not in ("elementwise", "rows", "gemm", "gemm_tc",
                 "paged_decode", "attention", "attention_backward") for m in ms]
    out += ["| family | op | version | shape | dtype | median ms | GB/s | baseline | ratio |",
            "|---|---|---|---|---|---:|---:|---|---:|"]
    for m in measured:
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
