#!/usr/bin/env python3
"""Fit the coefficients of dvm's float32 exp polynomial (backends/math/vmath.h).

Form: after x = n*ln2 + r (|r| <= ln2/2),
    e^r ~ 1 + r + r^2 * P(r),   deg P = 4   (degree 6 in all)
Method: Remez exchange on the relative error of that value against e^r,
    err(r) = r^2 (P(r) - g(r)) / e^r,   g(r) = (e^r - 1 - r) / r^2,
g summed from its series (no cancellation near 0), in double precision: the
minimax error (~3e-9, 0.05 ULP) is seven orders of magnitude above double's
rounding. The coefficients are rounded to float and printed highest degree
first, in the order vmath.h's Horner scheme uses them. The float exp was then
checked exhaustively in C++ against double exp: every float of [-104, 89],
worst 1.010 ULP (normal results) and 0.750 (subnormal), the same as the
degree-7 Cephes polynomial it replaced, for one fma less. Runtime: seconds.
"""
import math
import struct

HALF = math.log(2) / 2 * 1.0005  # |r| bound, with room for Cody-Waite's rounding
N = 5                             # coefficients of P
GRID = [-HALF + 2 * HALF * i / 200000 for i in range(200001)]


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def g(r):
    """(e^r - 1 - r) / r^2 = sum_k r^k / (k + 2)!"""
    total, term, k = 0.0, 0.5, 0
    while abs(term) > 1e-30 and k < 40:
        total += term
        k += 1
        term = term * r / (k + 2)
    return total


def poly(c, r):
    p = 0.0
    for cc in reversed(c):
        p = p * r + cc
    return p


def err(c, r):
    return r * r * (poly(c, r) - g(r)) / math.exp(r)


def solve(rows):
    """Gauss-Jordan with partial pivoting on an augmented matrix."""
    n = len(rows)
    for col in range(n):
        piv = max(range(col, n), key=lambda i: abs(rows[i][col]))
        rows[col], rows[piv] = rows[piv], rows[col]
        for i in range(n):
            if i != col:
                f = rows[i][col] / rows[col][col]
                rows[i] = [u - f * v for u, v in zip(rows[i], rows[col])]
    return [rows[i][n] / rows[i][i] for i in range(n)]


def extrema(c):
    """The largest |err| of each run of one sign, merged down to N + 1 alternating points."""
    runs = []
    for r in GRID:
        v = err(c, r)
        if abs(v) < 1e-14:
            continue
        if runs and (runs[-1][1] >= 0) == (v >= 0):
            if abs(v) > abs(runs[-1][1]):
                runs[-1] = (r, v)
        else:
            runs.append((r, v))
    while len(runs) > N + 1:
        runs.pop(min(range(len(runs)), key=lambda i: abs(runs[i][1])))
        merged = []
        for x in runs:
            if merged and (merged[-1][1] >= 0) == (x[1] >= 0):
                if abs(x[1]) > abs(merged[-1][1]):
                    merged[-1] = x
            else:
                merged.append(x)
        runs = merged
    return [r for r, _ in runs]


def main():
    points = [-HALF * math.cos(math.pi * i / N) for i in range(N + 1)]
    for _ in range(12):
        # r_i^2 (P(r_i) - g(r_i)) / e^r_i = (-1)^i E: N coefficients and E.
        rows = [[r * r * r**j / math.exp(r) for j in range(N)] + [-((-1) ** i), r * r * g(r) / math.exp(r)]
                for i, r in enumerate(points)]
        coef = solve(rows)[:N]
        nxt = extrema(coef)
        if len(nxt) != N + 1:
            break
        points = nxt
    c32 = [f32(c) for c in coef]
    worst = max(abs(err(c32, r)) for r in GRID)
    print(f"max relative error with float coefficients: {worst:.3e} ({worst / 2**-24:.3f} x 2^-24)")
    for c in reversed(c32):
        print(f"{c:.10e}")


if __name__ == "__main__":
    main()
