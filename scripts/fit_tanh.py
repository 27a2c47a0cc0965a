#!/usr/bin/env python3
"""Fits lc_tanh (kernels/codegen.cpp): tanh(x) ~ x * P(x^2) / Q(x^2) on [0, C], x clamped to C.

Minimises the maximum relative error: Cheney-Loeb differential correction (a linear programme per
step) to get close, then an L^p least-squares polish with p doubling to 128, which approaches the
minimax fit. Needs numpy and scipy (pip install numpy scipy); not part of the build or the tests,
which check the shipped coefficients on the device (tests/codegen_test.cpp).

    python3 scripts/fit_tanh.py            # C = 9, P of 7 terms (degree 13), Q of 4 (degree 6)

This run prints a max relative error of 1.33e-7 in exact arithmetic. The coefficients shipped
in codegen.cpp come from an earlier run of the same procedure (the polish started from the
differential-correction result printed to 10 digits) and differ from these in the 8th digit;
evaluated in f32 over every float they measure 3.32 * 2^-23 against 3.57 * 2^-23 for these, so
they stayed.
"""
import sys

import numpy as np
from scipy.optimize import least_squares, linprog

C = float(sys.argv[1]) if len(sys.argv) > 1 else 9.0
NP = int(sys.argv[2]) if len(sys.argv) > 2 else 7
NQ = int(sys.argv[3]) if len(sys.argv) > 3 else 4


def samples(n_even, n_cos):
    """Points on (0, C], denser towards C, and the matrices of x P(u) / tanh(x) and Q(u), where
    the fit runs in u = (x / C)^2 in [0, 1] for conditioning."""
    x = np.concatenate([np.linspace(1e-4, C, n_even), C * (1 - np.cos(np.linspace(0, np.pi / 2, n_cos)))])
    x = np.unique(x[x > 0])
    u = (x / C) ** 2
    return (np.stack([x * u**k for k in range(NP)], 1) / np.tanh(x)[:, None],
            np.stack([u**k for k in range(NQ)], 1))


Pm, Qm = samples(8000, 4000)

# Differential correction: each step minimises max(|Q - xP/t| - d_k Q) / Q_k over |b| <= 1.
a, *_ = np.linalg.lstsq(Pm, np.ones(len(Pm)), rcond=None)
b = np.zeros(NQ)
b[0] = 1
for _ in range(60):
    Q = Qm @ b
    d = np.max(np.abs(Pm @ a / Q - 1))
    n = NP + NQ + 1
    rows = np.vstack([np.hstack([-Pm, Qm * (1 - d), -Q[:, None]]),
                      np.hstack([Pm, Qm * (-1 - d), -Q[:, None]])])
    cost = np.zeros(n)
    cost[-1] = 1
    res = linprog(cost, A_ub=rows, b_ub=np.zeros(len(rows)),
                  bounds=[(None, None)] * NP + [(-1, 1)] * NQ + [(None, None)], method="highs")
    if res.status != 0 or res.x[-1] >= -1e-15:
        break
    a, b = res.x[:NP], res.x[NP:NP + NQ]
a, b = a / b[0], b / b[0]

# L^p polish with Q's constant term fixed at 1, on a denser sample.
Pm, Qm = samples(20000, 5000)
z = np.concatenate([a, b[1:]])


def rel(z):
    return (Pm @ z[:NP]) / (Qm[:, 0] + Qm[:, 1:] @ z[NP:]) - 1


for p in [4, 8, 16, 32, 64, 128]:
    s = np.max(np.abs(rel(z)))
    z = least_squares(lambda z: (np.abs(rel(z)) / s) ** (p / 2), z, xtol=1e-15, ftol=1e-15,
                      gtol=1e-15, max_nfev=4000).x
err = np.max(np.abs(rel(z)))
a, b = z[:NP], np.concatenate([[1.0], z[NP:]])
print(f"C={C} P terms {NP} Q terms {NQ}: max relative error {err:.3g} ({err * 2**23:.2f} * 2^-23) in exact arithmetic")
print("P (x^0 first):", ", ".join("%.10e" % (a[k] / C**(2 * k)) for k in range(NP)))
print("Q (x^0 first):", ", ".join("%.10e" % (b[k] / C**(2 * k)) for k in range(NQ)))
