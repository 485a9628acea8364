"""Evaluation and weight-update metrics.

pass@k (Chen et al. 2021): from n samples of a problem with c correct, the unbiased estimate of the
probability that at least one of k fresh samples is correct is

    pass@k = 1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i)   (= 1 when n - c < k).

We evaluate the equal k-factor product C(n-c, k)/C(n, k) = prod_{j=0}^{k-1} (1 - c/(n-j)) in log space,
pass@k = -expm1(sum_j log1p(-c/(n-j))): k terms whatever n is, vectorized over arrays of (n, c), and
accurate to float64 rounding even when pass@k is tiny (n = 10^6, c = 1). Never use best-of-n or a
bootstrap max as pass@k.

The rank-1 fraction of a weight update dW is sigma_1^2 / sum_i sigma_i^2 of its singular values; the
effective rank is exp(entropy of the normalised spectrum sigma_i^2 / sum_j sigma_j^2). The FADE paper
reports that failure-biased advantages funnel the update toward rank 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch


def pass_at_k(n: Any, c: Any, k: int) -> Any:
    """Unbiased pass@k; ``n`` samples, ``c`` correct (ints or integer arrays, broadcast), ``k`` an int.

    Returns a float for scalar inputs, else a float64 array of the broadcast shape. Raises ValueError
    when k < 1, k > n, c < 0 or c > n.
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"pass_at_k: k must be an integer >= 1, got {k!r}")
    n_arr = np.asarray(n)
    c_arr = np.asarray(c)
    for name, arr in (("n", n_arr), ("c", c_arr)):
        if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and np.all(np.mod(arr, 1) == 0)):
            raise ValueError(f"pass_at_k: {name} must hold integers, got {arr.dtype} values")
    n_arr, c_arr = np.broadcast_arrays(n_arr.astype(np.float64), c_arr.astype(np.float64))
    if np.any(n_arr < k):
        raise ValueError(f"pass_at_k: every n must be >= k={k}; smallest n is {int(n_arr.min())}")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ValueError("pass_at_k: every c must satisfy 0 <= c <= n")
    certain = (n_arr - c_arr) < k
    log_fail = np.zeros(n_arr.shape, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(int(k)):
            log_fail += np.log1p(-np.where(certain, 0.0, c_arr / (n_arr - j)))
    out = np.where(certain, 1.0, -np.expm1(log_fail))
    return float(out) if out.ndim == 0 else out


def _spectrum(dw: torch.Tensor) -> torch.Tensor:
    if not isinstance(dw, torch.Tensor) or dw.ndim != 2:
        raise ValueError(f"expected a 2-D weight update tensor, got {getattr(dw, 'shape', type(dw).__name__)}")
    s2 = torch.linalg.svdvals(dw.detach().to(torch.float64)).square()
    return s2


def rank1_fraction(dw: torch.Tensor) -> float:
    """sigma_1^2 / sum_i sigma_i^2 of a 2-D update (1 for rank 1, 1/n for an n x n identity); nan if dW = 0."""
    s2 = _spectrum(dw)
    total = float(s2.sum())
    return float(s2.max()) / total if total > 0 else math.nan


def effective_rank(dw: torch.Tensor) -> float:
    """exp(-sum_i q_i log q_i), q_i = sigma_i^2 / sum_j sigma_j^2 (1 for rank 1, n for identity); nan if dW = 0."""
    s2 = _spectrum(dw)
    total = float(s2.sum())
    if total <= 0:
        return math.nan
    q = s2 / total
    q = q[q > 0]
    return float(torch.exp(-(q * q.log()).sum()))
