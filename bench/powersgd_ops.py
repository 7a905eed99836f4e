#!/usr/bin/env python3
"""On a GPU: how fast each of PowerSGD's passes over a gradient runs, in the forms ATen
offers, at ViT-L/32's weight shapes; fp32, as the powersgd plugin runs them.

Per gradient matrix M (rows x cols) and rank r, one step of the plugin is
  M = G + E;  P = M Q;  Q = M^T P;  G = P Q^T;  E = M - P Q^T
Each is memory-bound (r is 1 to 4), so the figure that matters is the bandwidth it
reaches against a plain copy's. Every form is timed on the same data, one matrix at a
time (what a bucket of some tens of MB holds of one shape) and as a batch of 24 (one
large bucket), on the device: the calls captured in a CUDA graph and replayed, timed with
CUDA events, so that the host's time per launch does not count.

  python3 bench/powersgd_ops.py --out FILE.json

Prints one line per (shape, rank, batch, op, form): microseconds per matrix and GB/s
(bytes read and written by the op, counted once).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import environment  # noqa: E402
import graph_timing  # noqa: E402

# ViT-L/32's weight matrices: attention in-projection, out-projection, MLP in, MLP out.
SHAPES = [(3072, 1024), (1024, 1024), (4096, 1024), (1024, 4096)]


def timed(fn, reps=20):
    """Device microseconds per call: `reps` calls captured in a CUDA graph (after one
    warm-up pass of them) and replayed, so that the host's time per launch (Python's
    included) does not count."""
    graph = graph_timing.capture(torch, lambda: [fn() for _ in range(reps)], 1)
    return graph_timing.replay_ms(torch, graph, 3, warm_replays=1) / reps * 1e3


def split_forms(k, M, O, P, Q, mat, thin):
    """The four products with each matrix's rows split into k blocks (a function of its own
    so that each k's lambdas hold their own tensors)."""
    b, rows, cols = M.shape
    r = P.shape[2]
    Mk = M.view(b * k, rows // k, cols)
    Ok = O.view(b * k, rows // k, cols)
    Pk = P.view(b * k, rows // k, r)

    def q_blocks():
        return Q.unsqueeze(1).expand(b, k, cols, r).reshape(b * k, cols, r)

    def qt_blocks():
        return Q.transpose(1, 2).unsqueeze(1).expand(b, k, r, cols).reshape(b * k, r, cols)

    return {
        f"split {k}": ("P=MQ", lambda: torch.bmm(Mk, q_blocks(), out=Pk), mat + thin),
        f"split {k}^T": ("Q=M^TP", lambda: torch.sum(torch.bmm(Mk.transpose(1, 2), Pk).view(b, k, cols, r), 1,
                                                   out=Q), mat + thin),
        f"split {k} outer": ("G=PQ^T", lambda: torch.bmm(Pk, qt_blocks(), out=Ok), mat + thin),
        f"split {k} baddbmm_": ("E=M-PQ^T", lambda: Mk.baddbmm_(Pk, qt_blocks(), beta=1, alpha=-1), 2 * mat + thin),
    }


def column_split_forms(k, m, p, q, mat, thin):
    """P = M Q and Q = M^T P for one matrix with its columns split into k blocks, each a
    matrix of a batch (strided views, no copy of M): P sums the blocks' products, Q's
    blocks are its own rows."""
    rows, cols = m.shape
    r = p.shape[1]
    c = cols // k
    blocks = m.view(rows, k, c).permute(1, 0, 2)  # [k, rows, c], rows cols apart
    q_blocks = q.view(k, c, r)
    return {
        f"colsplit {k}": ("P=MQ", lambda: torch.sum(torch.bmm(blocks, q_blocks), 0, out=p), mat + thin),
        f"colsplit {k}^T": ("Q=M^TP", lambda: torch.bmm(blocks.transpose(1, 2), p.unsqueeze(0).expand(k, rows, r),
                                                      out=q_blocks), mat + thin),
    }


def forms(b, rows, cols, r):
    """name -> (op, callable, bytes moved) for one batch of b matrices."""
    f = dict(device="cuda", dtype=torch.float32)
    G, E, M = (torch.randn(b, rows, cols, **f) for _ in range(3))
    O = torch.empty(b, rows, cols, **f)
    P, Q = torch.randn(b, rows, r, **f), torch.randn(b, cols, r, **f)
    mat = 4 * b * rows * cols
    thin = 4 * b * (rows + cols) * r
    out = {}
    out["copy (reference)"] = ("ref", lambda: O.copy_(M), 2 * mat)
    out["add_out"] = ("M=G+E", lambda: torch.add(G, E, out=M), 3 * mat)
    out["add_ in place"] = ("M=G+E", lambda: E.add_(G), 3 * mat)
    out["bmm"] = ("P=MQ", lambda: torch.bmm(M, Q, out=P), mat + thin)
    out["bmm^T"] = ("Q=M^TP", lambda: torch.bmm(M.transpose(1, 2), P, out=Q), mat + thin)
    out["bmm outer"] = ("G=PQ^T", lambda: torch.bmm(P, Q.transpose(1, 2), out=O), mat + thin)
    out["baddbmm_"] = ("E=M-PQ^T", lambda: M.baddbmm_(P, Q.transpose(1, 2), beta=1, alpha=-1), 2 * mat + thin)
    out["baddbmm out"] = ("E=M-PQ^T", lambda: torch.baddbmm(M, P, Q.transpose(1, 2), beta=1, alpha=-1, out=O),
                          2 * mat + thin)
    if b == 1:
        m, o = M[0], O[0]
        p, q = P[0], Q[0]
        out["mm"] = ("P=MQ", lambda: torch.mm(m, q, out=p), mat + thin)
        out["mm^T"] = ("Q=M^TP", lambda: torch.mm(m.t(), p, out=q), mat + thin)
        out["mm outer"] = ("G=PQ^T", lambda: torch.mm(p, q.t(), out=o), mat + thin)
        out["addmm_"] = ("E=M-PQ^T", lambda: m.addmm_(p, q.t(), beta=1, alpha=-1), 2 * mat + thin)
        # The transposed products: P^T = Q^T M^T, Q^T = P^T M (cuBLAS then sees the long
        # dimension as its N), written into transposed buffers.
        pt, qt = torch.empty(r, rows, **f), torch.empty(r, cols, **f)
        out["mm transposed"] = ("P=MQ", lambda: torch.mm(q.t(), m.t(), out=pt), mat + thin)
        out["mm^T transposed"] = ("Q=M^TP", lambda: torch.mm(p.t(), m, out=qt), mat + thin)
        for k in (4, 8, 16, 32):
            if cols % k == 0:
                out.update(column_split_forms(k, m, p, q, mat, thin))
        if r == 1:
            pv, qv = p[:, 0], q[:, 0]
            out["mv"] = ("P=MQ", lambda: torch.mv(m, qv, out=pv), mat + thin)
            out["mv^T"] = ("Q=M^TP", lambda: torch.mv(m.t(), pv, out=qv), mat + thin)
            out["mul broadcast"] = ("G=PQ^T", lambda: torch.mul(p, q.t(), out=o), mat + thin)
            out["addr_"] = ("E=M-PQ^T", lambda: m.addr_(pv, qv, beta=1, alpha=-1), 2 * mat + thin)
    # Rows split into k blocks, each a matrix of the batch: k times the thread blocks for
    # cuBLAS where one matrix gives it too few (M^T P's blocks summed afterwards).
    for k in (4, 16, 32):
        if rows % k == 0:
            out.update(split_forms(k, M, O, P, Q, mat, thin))
    if r == 1:
        out["mul broadcast (batch)"] = ("G=PQ^T", lambda: torch.mul(P, Q.transpose(1, 2), out=O), mat + thin)
        out["sum of product (batch)"] = ("P=MQ", lambda: torch.sum(M * Q.transpose(1, 2), 2, keepdim=True), 3 * mat)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows_out = []
    for rows, cols in SHAPES:
        for r in (1, 4):
            for b in (1, 24):
                for name, (op, fn, nbytes) in forms(b, rows, cols, r).items():
                    try:
                        us = timed(fn)
                    except RuntimeError as e:  # a form this LibTorch cannot run or capture
                        print(f"{rows}x{cols} r{r} b{b} {name}: {str(e).splitlines()[0]}", flush=True)
                        continue
                    row = {"rows": rows, "cols": cols, "rank": r, "batch": b, "op": op, "form": name,
                           "us_per_matrix": us / b, "gbps": nbytes / (us * 1e-6) / 1e9}
                    rows_out.append(row)
                    print(f"{rows}x{cols} r{r} b{b:<2} {op:<9} {name:<24} {us / b:8.1f} us/matrix "
                          f"{row['gbps']:7.0f} GB/s", flush=True)
                torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        json.dump({"environment": environment.environment(), "rows": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()
