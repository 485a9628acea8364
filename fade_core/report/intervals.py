"""Confidence intervals of the report's headline numbers and differences.

Every headline number is a mean over problems of per-problem scores (unbiased pass@k), or over seeds of
per-run values (a peak step). Its uncertainty has two sources: the problems (a finite test set) and, when
an arm has several seeds, the training seeds. The intervals here:

- several seeds in both arms: :func:`fade_core.stats.bootstrap_diff` (problems resampled, paired between
  the arms; the seed level drawn with Welch's t), its percentile interval and two-sided p-value. One arm's
  own mean is the difference from a constant arm of zeros, which that function handles exactly: the zero
  arm adds no variance, so the seed level is a one-sample Student-t with S - 1 degrees of freedom.
- one seed (fade run --quick): :func:`bootstrap_problems`, a paired bootstrap over problems only, written
  here because fade_core.stats needs >= 2 seeds. Training-seed variation is then unknown, and the
  interval says so (``over = "problems"``).
- an untrained model (the base) has no training seed: it counts as a constant over seeds, and its own
  interval is over problems, which is then all there is to resample.

Peak steps (how early a method peaks) are not means over problems: with several seeds their interval is
over seeds (per-run peak steps); with one seed the pass@1 curves are recomputed on resampled problems and
the peak found again in each replicate (:func:`bootstrap_peaks`). All intervals are 95 %, percentile,
from ``N_BOOT`` replicates, seeded, so a report is reproducible. The callers cut intervals to the range the
quantity can take (:meth:`Interval.clip`: a pass@k in [0, 1], a difference of two in [-1, 1]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from fade_core.stats import BootstrapDiff, bootstrap_diff

LEVEL = 0.95
N_BOOT = 2000
OVER_SEEDS_AND_PROBLEMS = "seeds + problems"
OVER_PROBLEMS = "problems"
OVER_SEEDS = "seeds"
OVER_PROBLEMS_UNTRAINED = "problems (untrained: no seed)"


@dataclass(frozen=True)
class Interval:
    """An estimate, its ``LEVEL`` confidence interval, what was resampled, and (differences) a p-value."""

    estimate: float
    low: float
    high: float
    over: str
    p_value: float | None = None

    @classmethod
    def from_bootstrap(cls, boot: BootstrapDiff, over: str, with_p: bool) -> Interval:
        low, high = boot.ci(LEVEL)
        return cls(boot.diff, low, high, over, boot.p_value() if with_p else None)

    def clip(self, lowest: float, highest: float) -> Interval:
        """The interval cut to the values the quantity can take (a pass@k lies in [0, 1]): with few seeds the
        Student-t seed level reaches past them."""
        return replace(self, low=min(max(self.low, lowest), highest), high=max(min(self.high, highest), lowest))


def bootstrap_problems(a: np.ndarray, b: np.ndarray | None = None, *, n_boot: int = N_BOOT, seed: int = 0
                       ) -> BootstrapDiff:
    """Paired bootstrap over problems of mean(a) - mean(b) (``b`` None: of mean(a)).

    a, b: [P] per-problem scores on the same problems in the same order. One set of resampled problem
    indices per replicate serves both, so problem difficulty cancels in the difference.
    """
    xa = np.asarray(a, dtype=np.float64)
    xb = np.zeros_like(xa) if b is None else np.asarray(b, dtype=np.float64)
    if xa.ndim != 1 or xa.shape != xb.shape or xa.size == 0:
        raise ValueError(f"bootstrap_problems: expected two [P] arrays of one length, got {xa.shape} and {xb.shape}")
    d = xa - xb
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(n_boot, d.size))
    return BootstrapDiff(diff=float(d.mean()), replicates=d[idx].mean(axis=1))


def _seed_rows(x: np.ndarray, constant: bool, other_seeds: int) -> np.ndarray:
    """An untrained model's single row repeated to ``other_seeds`` rows (no seed variation), else ``x``."""
    return np.repeat(x[:1], max(other_seeds, 2), axis=0) if constant and x.shape[0] == 1 else x


def mean_interval(x: np.ndarray, *, constant: bool = False, seed: int = 0) -> Interval:
    """The arm's mean of ``x`` [S, P] (seeds x problems) and its interval (see the module docstring).

    ``constant``: an untrained model, whose one row has no seed variation."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] >= 2:
        boot = bootstrap_diff(x, np.zeros_like(x), n_boot=N_BOOT, seed=seed)
        return Interval.from_bootstrap(boot, OVER_SEEDS_AND_PROBLEMS, with_p=False)
    over = OVER_PROBLEMS_UNTRAINED if constant else OVER_PROBLEMS
    return Interval.from_bootstrap(bootstrap_problems(x[0], seed=seed), over, with_p=False)


def diff_interval(xa: np.ndarray, xb: np.ndarray, *, constant_a: bool = False, constant_b: bool = False,
                  seed: int = 0) -> Interval:
    """mean(xa) - mean(xb), xa [S_a, P] and xb [S_b, P] on the same problems, with its interval and p-value.

    Seeds and problems when both arms have several seeds (an untrained arm counts as constant over seeds);
    problems only, on each arm's mean over its seeds, otherwise."""
    xa, xb = np.asarray(xa, dtype=np.float64), np.asarray(xb, dtype=np.float64)
    xa2, xb2 = _seed_rows(xa, constant_a, xb.shape[0]), _seed_rows(xb, constant_b, xa.shape[0])
    if xa2.shape[0] >= 2 and xb2.shape[0] >= 2 and not (constant_a and constant_b):
        boot = bootstrap_diff(xa2, xb2, n_boot=N_BOOT, seed=seed)
        return Interval.from_bootstrap(boot, OVER_SEEDS_AND_PROBLEMS, with_p=True)
    boot = bootstrap_problems(xa.mean(axis=0), xb.mean(axis=0), seed=seed)
    over = OVER_PROBLEMS_UNTRAINED if (constant_a and constant_b) else OVER_PROBLEMS
    return Interval.from_bootstrap(boot, over, with_p=True)


def per_run_diff_interval(a: Sequence[float], b: Sequence[float], *, seed: int = 0) -> Interval | None:
    """Difference of the means of per-run values (e.g. peak steps) over seeds; None with fewer than 2 seeds."""
    if len(a) < 2 or len(b) < 2:
        return None
    boot = bootstrap_diff(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), n_boot=N_BOOT, seed=seed)
    return Interval.from_bootstrap(boot, OVER_SEEDS, with_p=True)


@dataclass(frozen=True)
class PeakIntervals:
    """One seed per arm: how many steps earlier arm a peaks than arm b, and a's peak pass@1 minus b's."""

    steps_earlier: Interval
    peak_gain: Interval


def bootstrap_peaks(steps_a: np.ndarray, curves_a: np.ndarray, steps_b: np.ndarray, curves_b: np.ndarray, *,
                    seed: int = 0) -> PeakIntervals:
    """Problems-only intervals of (peak step of b - peak step of a) and (peak of a - peak of b).

    steps_*: [T] evaluated steps (ascending); curves_*: [T, P] per-problem pass@1 at those steps, on the same
    P problems for both arms. The peak is the first step reaching the highest mean over problems (as in the
    aggregated ``peak`` table); each replicate resamples the problems (shared by the arms) and finds both
    peaks again.
    """
    ca, cb = np.asarray(curves_a, dtype=np.float64), np.asarray(curves_b, dtype=np.float64)
    if ca.shape[1] != cb.shape[1] or ca.shape[1] == 0:
        raise ValueError(f"bootstrap_peaks: the arms need the same problems, got {ca.shape[1]} and {cb.shape[1]}")
    sa, sb = np.asarray(steps_a, dtype=np.float64), np.asarray(steps_b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, ca.shape[1], size=(N_BOOT, ca.shape[1]))
    ma, mb = ca[:, idx].mean(axis=2), cb[:, idx].mean(axis=2)  # [T, B]
    earlier = sb[mb.argmax(axis=0)] - sa[ma.argmax(axis=0)]
    gain = ma.max(axis=0) - mb.max(axis=0)
    fa, fb = ca.mean(axis=1), cb.mean(axis=1)
    point_earlier = float(sb[fb.argmax()] - sa[fa.argmax()])
    point_gain = float(fa.max() - fb.max())
    return PeakIntervals(
        Interval.from_bootstrap(BootstrapDiff(point_earlier, earlier), OVER_PROBLEMS, with_p=True),
        Interval.from_bootstrap(BootstrapDiff(point_gain, gain), OVER_PROBLEMS, with_p=True),
    )
