"""Weighted minimax fit of a rational P(z)/Q(z) to g, shared by dvm's fit scripts.

fit(zs, gs, weights, M, N, iters) returns (max error, p, q): P of degree M and Q of
degree N in z with P(0) = Q(0) = 1, minimizing max |P/(Q g) - 1| * weight over the
sample points, by Loeb's linearised least squares (divide by the previous Q) with
Lawson reweighting (w_i *= |err_i|). Arithmetic is mpmath's at the caller's precision.
"""
import struct

import mpmath as mp


def f32(v):
    """v rounded to the nearest float32."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def grid(c, npts):
    """Sample points of (0, c]: npts Chebyshev nodes (dense near c) and npts evenly spaced."""
    xs = [c * (1 - mp.cos(mp.pi * (i + mp.mpf(1) / 2) / (2 * npts))) for i in range(npts)]
    return xs + [c * mp.mpf(i) / npts for i in range(1, npts + 1)]


def fit(zs, gs, weights, M, N, iters):
    K = M + N
    w = [mp.mpf(1) / len(zs)] * len(zs)
    qprev = [mp.mpf(1)] * len(zs)
    best = None
    for _ in range(iters):
        A = mp.matrix(K, K)
        b = mp.matrix(K, 1)
        for z, g, wi, qp, s0 in zip(zs, gs, w, qprev, weights):
            s = s0 / (g * qp)
            row = [z**k * s for k in range(1, M + 1)] + [-g * z**k * s for k in range(1, N + 1)]
            rhs = (g - 1) * s
            for i in range(K):
                ri = wi * row[i]
                b[i] += ri * rhs
                for j in range(i, K):
                    A[i, j] += ri * row[j]
        for i in range(K):
            for j in range(i):
                A[i, j] = A[j, i]
        sol = mp.lu_solve(A, b)
        p = [mp.mpf(1)] + [sol[i] for i in range(M)]
        q = [mp.mpf(1)] + [sol[M + i] for i in range(N)]
        errs = [(mp.polyval(p[::-1], z) / (mp.polyval(q[::-1], z) * g) - 1) * s0
                for z, g, s0 in zip(zs, gs, weights)]
        emax = max(abs(e) for e in errs)
        if best is None or emax < best[0]:
            best = (emax, p, q)
        qprev = [mp.polyval(q[::-1], z) for z in zs]
        w = [wi * abs(e) for wi, e in zip(w, errs)]
        tot = sum(w)
        w = [wi / tot for wi in w]
    return best


def print_coefficients(named):
    """Prints each (name, values) list as float literals for vmath.h: name0, name1, ..."""
    for name, vals in named:
        for k, v in enumerate(vals):
            fv = f32(v)
            print(f"  {name}{k} = {fv:.9e}f  ({float.hex(fv)})")
