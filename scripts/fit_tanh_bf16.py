#!/usr/bin/env python3
"""Fit the coefficients of the JIT's bfloat16 tanh candidate (vmath.h, tanh_bf16_candidate).

Form (x clamped to [-c, c], c = 9; z = x^2):
    tanh(x) ~ x * P(z) / Q(z),   deg P = 3, deg Q = 4,   P(0) = Q(0) = 1
One divide and no sign handling (the form is odd). Its value is only used where it
rounds to the same bfloat16 as dvm's float32 tanh, so it needs a relative error well
below bfloat16's 2^-8, not float32's: the float evaluation lands within 11-12 bit
patterns of tanh over every float (tests/backends/test_math_bf16_tanh.cpp).

Method: minimise max |x P(z) / (Q(z) tanh(x)) - 1| on a grid of [0, c] (Chebyshev
nodes plus a uniform grid) by Loeb's linearised least squares (divide by the previous
Q) with Lawson reweighting (w_i *= |err_i|), in mpmath at 40 digits. Coefficients are
then rounded to float. Runtime: about a minute.
"""
import mpmath as mp

import rational_fit

mp.mp.dps = 40
C = mp.mpf(9)
M, N = 3, 4          # degrees of P and Q in z
NPTS, ITERS = 200, 40


def fit():
    xs = rational_fit.grid(C, NPTS)
    zs = [x * x for x in xs]
    gs = [mp.tanh(x) / x for x in xs]
    return rational_fit.fit(zs, gs, [mp.mpf(1)] * len(zs), M, N, ITERS)


def main():
    emax, p, q = fit()
    print(f"c = {C}; degrees: P {M}, Q {N} (in z = x^2)")
    print(f"max |rel err| of the real fit: {mp.nstr(emax, 4)} (2^{mp.nstr(mp.log(emax, 2), 4)})")
    rational_fit.print_coefficients((("p", p), ("q", q)))


if __name__ == "__main__":
    main()
