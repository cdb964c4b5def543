#!/usr/bin/env python3
"""Fit the coefficients of dvm's float32 tanh (double-angle rational form).

Form (x clamped to [-c, c], c = 9.5; z = x^2):
    T(x) = 2 tanh(x/2) ~ x + x*z * R(z),   R = P'(z) / Q(z),  deg P' = 2, deg Q = 3, Q(0) = 1
    tanh(x) = T / (1 + T^2/4), evaluated in vmath.h as T - T * T^2 / (4 + T^2)
Why double angle: d tanh / d T = sech(x) * tanh/T, so errors of T (fit and float Horner
rounding) are damped by sech(x) at large |x|, where the plain x*P(z)/Q(z) form loses
~4-5 ULP to Horner rounding in z up to 81.

Method: g(x) = 2 tanh(x/2)/x is fitted as P(z)/Q(z) with P(0) = Q(0) = 1 (degrees 3/3),
minimizing max |P/(Q g) - 1| * sech(x) (= the induced relative error of tanh) on a dense
grid of [0, c], by Loeb's linearised least squares (divide by the previous Q) with Lawson
reweighting (w_i *= |err_i|), all in mpmath at 50 digits. Then P' = (P - Q)/z. The
coefficients are rounded to float; the float implementation was then checked exhaustively
in C++ (all |x| <= 10). Runtime: about a minute.
"""
import struct
import mpmath as mp

mp.mp.dps = 50
C = mp.mpf("9.5")
M, N = 3, 3          # degrees of P and Q in z (P' then has degree 2)
NPTS, ITERS = 300, 60


def f32(v):
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def fit():
    xs = [C * (1 - mp.cos(mp.pi * (i + mp.mpf(1) / 2) / (2 * NPTS))) for i in range(NPTS)]
    xs += [C * mp.mpf(i) / NPTS for i in range(1, NPTS + 1)]
    zs = [x * x for x in xs]
    gs = [2 * mp.tanh(x / 2) / x for x in xs]
    sw = [mp.sech(x) for x in xs]
    K = M + N
    w = [mp.mpf(1) / len(xs)] * len(xs)
    qprev = [mp.mpf(1)] * len(xs)
    best = None
    for _ in range(ITERS):
        A = mp.matrix(K, K)
        b = mp.matrix(K, 1)
        for z, g, wi, qp, s0 in zip(zs, gs, w, qprev, sw):
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
                for z, g, s0 in zip(zs, gs, sw)]
        emax = max(abs(e) for e in errs)
        if best is None or emax < best[0]:
            best = (emax, p, q)
        qprev = [mp.polyval(q[::-1], z) for z in zs]
        w = [wi * abs(e) for wi, e in zip(w, errs)]
        tot = sum(w)
        w = [wi / tot for wi in w]
    return best


def main():
    emax, p, q = fit()
    K = max(M, N)
    r = [(p[k] if k <= M else 0) - (q[k] if k <= N else 0) for k in range(1, K + 1)]  # P' = (P-Q)/z
    # induced max relative error of tanh on a fine grid, real arithmetic with float coefficients
    rf, qf = [mp.mpf(f32(v)) for v in r], [mp.mpf(f32(v)) for v in q]
    worst = mp.mpf(0)
    for i in range(1, 4001):
        x = C * mp.mpf(i) / 4000
        z = x * x
        t = x + x * z * mp.polyval(rf[::-1], z) / mp.polyval(qf[::-1], z)
        worst = max(worst, abs(t / (1 + t * t / 4) / mp.tanh(x) - 1))
    print(f"c = {C}; degrees: P' {len(r) - 1}, Q {N} (in z = x^2)")
    print(f"max |rel err| of tanh(x), real fit (exact coeffs): {mp.nstr(emax, 4)}")
    print(f"max |rel err| of tanh(x), float-rounded coeffs:    {mp.nstr(worst, 4)}")
    for name, vals in (("r", r), ("q", q)):
        for k, v in enumerate(vals):
            fv = f32(v)
            print(f"  {name}{k} = {fv:.9e}f  ({float.hex(fv)})")


if __name__ == "__main__":
    main()
