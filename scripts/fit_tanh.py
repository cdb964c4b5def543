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
import mpmath as mp

import rational_fit

mp.mp.dps = 50
C = mp.mpf("9.5")
M, N = 3, 3          # degrees of P and Q in z (P' then has degree 2)
NPTS, ITERS = 300, 60


def fit():
    xs = rational_fit.grid(C, NPTS)
    zs = [x * x for x in xs]
    gs = [2 * mp.tanh(x / 2) / x for x in xs]
    sw = [mp.sech(x) for x in xs]
    return rational_fit.fit(zs, gs, sw, M, N, ITERS)


def main():
    emax, p, q = fit()
    K = max(M, N)
    r = [(p[k] if k <= M else 0) - (q[k] if k <= N else 0) for k in range(1, K + 1)]  # P' = (P-Q)/z
    # induced max relative error of tanh on a fine grid, real arithmetic with float coefficients
    rf, qf = [mp.mpf(rational_fit.f32(v)) for v in r], [mp.mpf(rational_fit.f32(v)) for v in q]
    worst = mp.mpf(0)
    for i in range(1, 4001):
        x = C * mp.mpf(i) / 4000
        z = x * x
        t = x + x * z * mp.polyval(rf[::-1], z) / mp.polyval(qf[::-1], z)
        worst = max(worst, abs(t / (1 + t * t / 4) / mp.tanh(x) - 1))
    print(f"c = {C}; degrees: P' {len(r) - 1}, Q {N} (in z = x^2)")
    print(f"max |rel err| of tanh(x), real fit (exact coeffs): {mp.nstr(emax, 4)}")
    print(f"max |rel err| of tanh(x), float-rounded coeffs:    {mp.nstr(worst, 4)}")
    rational_fit.print_coefficients((("r", r), ("q", q)))


if __name__ == "__main__":
    main()
