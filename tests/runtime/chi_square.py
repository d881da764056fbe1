"""The chi-square critical value the distribution tests bound their statistic with (no SciPy)."""

from __future__ import annotations

import math


def chi_square_critical(degrees_of_freedom: int, tail: float) -> float:
    """x with P(χ²_df > x) = tail: the survival function by its series, inverted by bisection."""
    shape = degrees_of_freedom / 2

    def survival(x: float) -> float:
        half = x / 2
        term = math.exp(shape * math.log(half) - half - math.lgamma(shape + 1))
        lower = 0.0
        n = 0
        while term > 1e-18 * (lower + term):
            lower += term
            n += 1
            term *= half / (shape + n)
        return 1.0 - lower

    low, high = 0.0, 1000.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if survival(middle) > tail else (low, middle)
    return high
