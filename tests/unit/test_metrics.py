"""pass@k against exact combinatorics; rank-1 fraction and effective rank on constructed matrices."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from fade_core.metrics import effective_rank, pass_at_k, rank1_fraction


def brute(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def exact(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def test_pass_at_k_matches_binomial_definition():
    for n in range(1, 26):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(brute(n, c, k), abs=1e-12, rel=1e-12), (n, c, k)


def test_pass_at_k_edges():
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 8, 3) == 1.0  # n - c < k
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert isinstance(pass_at_k(5, 2, 1), float)


def test_pass_at_k_vectorized_broadcast():
    n = np.array([[10], [20], [30]])
    c = np.array([0, 1, 5, 10])
    out = pass_at_k(n, c, 5)
    assert out.shape == (3, 4)
    for i, nn in enumerate([10, 20, 30]):
        for j, cc in enumerate(c):
            assert out[i, j] == pytest.approx(brute(nn, int(cc), 5), abs=1e-12)


@pytest.mark.parametrize("c,k", [(1, 1), (1, 10), (3, 100), (1000, 100), (999_000, 10), (500_000, 1000)])
def test_pass_at_k_large_n_is_exact(c, k):
    n = 10**6
    got = pass_at_k(n, c, k)
    want = exact(n, c, k)
    assert got == pytest.approx(want, rel=1e-10, abs=1e-15)


def test_pass_at_k_errors():
    with pytest.raises(ValueError, match="k must be"):
        pass_at_k(10, 2, 0)
    with pytest.raises(ValueError, match="n must be >= k"):
        pass_at_k(3, 1, 5)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError, match="integers"):
        pass_at_k(3.5, 1, 1)


def test_rank1_fraction_and_effective_rank():
    u = torch.randn(7, 1, dtype=torch.float64)
    v = torch.randn(1, 5, dtype=torch.float64)
    assert rank1_fraction(u @ v) == pytest.approx(1.0, abs=1e-12)
    assert effective_rank(u @ v) == pytest.approx(1.0, abs=1e-6)
    n = 6
    assert rank1_fraction(torch.eye(n)) == pytest.approx(1 / n)
    assert effective_rank(torch.eye(n)) == pytest.approx(float(n))
    d = torch.diag(torch.tensor([3.0, 1.0]))
    assert rank1_fraction(d) == pytest.approx(9 / 10)
    q = torch.tensor([0.9, 0.1])
    assert effective_rank(d) == pytest.approx(math.exp(-(q * q.log()).sum().item()), rel=1e-6)
    assert math.isnan(rank1_fraction(torch.zeros(3, 3))) and math.isnan(effective_rank(torch.zeros(2, 4)))
    with pytest.raises(ValueError, match="2-D"):
        rank1_fraction(torch.ones(3))
