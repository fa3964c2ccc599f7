#!/usr/bin/env python3
"""The attention baseline for `ferrokern bench`: times PyTorch's scaled_dot_product_attention
on the GPU with CUDA events (median of 20 runs after 3 warm-up runs, L2 flushed before each)
for the shapes given as a JSON list in argv[1], and prints one JSON object per shape. A shape
with "backward": true times the backward alone: autograd of one forward, the graph kept,
`torch.autograd.grad` of (dQ, dK, dV) for a fixed dO, FLOPs 2.5x the forward's.
A shape with "varlen": [[seq_q, seq_k], ...] (equal pairs) times a variable-length batch of
those sequences through nested jagged tensors (PyTorch dispatches them to its varlen
FlashAttention kernel); batch, seq_q and seq_k are then ignored.
Without torch or a GPU it prints one object with an "error" field and exits 0, so the bench
can say why the baseline is missing; a shape PyTorch cannot run gets "median_ms": null and
an "unsupported" field saying why."""
import json
import statistics
import sys


def main():
    shapes = json.loads(sys.argv[1])
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(json.dumps({"error": f"torch is not installed ({e})"}))
        return
    if not torch.cuda.is_available():
        print(json.dumps({"error": "torch sees no CUDA device"}))
        return
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16}
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    for s in shapes:
        try:
            ms = time_shape(torch, F, dtypes[s["dtype"]], flush, s)
        except Exception as e:  # one shape PyTorch cannot run (or runs out of memory on)
            out = dict(s)
            out.update({"median_ms": None, "unsupported": f"{type(e).__name__}: {e}"[:300]})
            print(json.dumps(out))
            continue
        h, d = s["heads"], s["head_dim"]
        pairs = s.get("varlen") or [[s["seq_q"], s["seq_k"]]] * s["batch"]
        flops = sum(4 * h * lq * lk * d for lq, lk in pairs)
        flops *= (0.5 if s["causal"] else 1.0) * (2.5 if s.get("backward") else 1.0)
        out = dict(s)
        out.update({"median_ms": ms, "tflops": flops / (ms * 1e9), "torch": torch.__version__})
        print(json.dumps(out))


def inputs(torch, dt, s, backward):
    """Q, K, V: dense [batch, heads, seq, head_dim], or nested jagged [batch, heads, j, head_dim]."""
    b, h, hk, sq, sk, d = s["batch"], s["heads"], s["kv_heads"], s["seq_q"], s["seq_k"], s["head_dim"]
    if s.get("varlen"):
        if any(lq != lk for lq, lk in s["varlen"]) or hk != h:
            raise ValueError("the nested-tensor baseline takes equal query and key lengths and kv_heads = heads")

        def nested():
            parts = [torch.randn(lq, h, d, dtype=dt, device="cuda") for lq, _ in s["varlen"]]
            t = torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=backward)
            return t.transpose(1, 2)

        return nested(), nested(), nested()
    q = torch.randn(b, h, sq, d, dtype=dt, device="cuda", requires_grad=backward)
    k = torch.randn(b, hk, sk, d, dtype=dt, device="cuda", requires_grad=backward)
    v = torch.randn(b, hk, sk, d, dtype=dt, device="cuda", requires_grad=backward)
    return q, k, v


def time_shape(torch, F, dt, flush, s):
    """Median milliseconds of 20 runs of the shape's pass, L2 flushed before each."""
    backward = bool(s.get("backward", False))
    q, k, v = inputs(torch, dt, s, backward)
    kwargs = {"is_causal": bool(s["causal"])}
    if s["kv_heads"] != s["heads"]:
        kwargs["enable_gqa"] = True

    if backward:
        out = F.scaled_dot_product_attention(q, k, v, **kwargs)
        grad_out = torch.randn_like(out)

        def run():
            return torch.autograd.grad(out, (q, k, v), grad_out, retain_graph=True)
    else:

        def run():
            return F.scaled_dot_product_attention(q, k, v, **kwargs)

    for _ in range(3):
        run()
    times = []
    for _ in range(20):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)

if __name__ == "__main__":
    main()
