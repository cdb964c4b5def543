#!/usr/bin/env python3
"""Coefficients of the polynomials in bench/fused_loops.cpp (the hand loops'
own exp and tanh), fitted here by Chebyshev interpolation in double and
rounded to float. Plain Python, no numpy; run it to print them.

  exp:  e^r = 1 + r + r^2 * Q(r),      |r| <= ln2/2,  Q degree 4
        (tanh uses the same Q for its e^r - 1 = r + r^2 * Q(r))

Chebyshev interpolation is within a small factor of the minimax polynomial
for these smooth functions; the loops' errors are measured, not assumed
(bench_dvm --accuracy, docs/PERFORMANCE.md "Reference loops").
"""
import math
import struct


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def cheb_fit(g, lo, hi, degree):
    nodes = [0.5 * (lo + hi) + 0.5 * (hi - lo) * math.cos(math.pi * (k + 0.5) / (degree + 1))
             for k in range(degree + 1)]
    return solve([[x ** j for j in range(degree + 1)] for x in nodes], [g(x) for x in nodes])


def horner(c, x):
    s = 0.0
    for v in reversed(c):
        s = s * x + v
    return s


def g_exp(r):  # (e^r - 1 - r) / r^2, by its series near 0
    if abs(r) < 1e-3:
        return 0.5 + r / 6 + r * r / 24 + r ** 3 / 120
    return (math.expm1(r) - r) / (r * r)


def main():
    half_ln2 = math.log(2) / 2
    q = [f32(v) for v in cheb_fit(g_exp, -half_ln2, half_ln2, 4)]
    worst = max(abs(1 + r + r * r * horner(q, r) - math.exp(r)) / math.exp(r)
                for r in (half_ln2 * (2 * i / 20000 - 1) for i in range(20001)))
    print("exp Q:", ", ".join(f"{v:.9g}f" for v in q), f"  (relative error in double {worst:.2g})")

if __name__ == "__main__":
    main()
