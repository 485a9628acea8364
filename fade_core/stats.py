"""Statistics for comparing arms: bootstrap confidence intervals of differences, and Holm's correction.

Why not "the difference exceeds sqrt(sd_a^2 + sd_b^2)". With n seeds per arm that rule is
|Welch t| > sqrt(n): at n = 3 it calls a difference 16% of the time when there is none, and the bar rises
with n, so adding seeds lowers its power. A test has a fixed false-positive rate alpha whatever n is.

The design being analysed. An arm is trained with S seeds; every run is evaluated on the same P problems,
giving a score ``x[s, p]`` (for example run s's unbiased pass@k on problem p). The arm's estimate is
``mean_s mean_p x[s, p]``. Two things vary if the experiment is repeated: the seeds (training randomness)
and the problems (a finite test set drawn from the task). :func:`bootstrap_diff` resamples both:

- problems: one set of problem indices per replicate, shared by both arms (paired by problem; both arms
  were scored on the same problems, so problem difficulty cancels in the difference);
- seeds: independently per arm (seed s of arm a and seed s of arm b share nothing but a number).

Seeds are few (5 here), and resampling 5 values is a poor bootstrap: it underestimates the variance of
a mean by (S - 1) / S and has normal-like tails where the truth has Student's t tails; at S = 3 it called
11% of null differences at alpha = 0.05 (measured in tests/unit/test_stats.py). The seed level is
therefore drawn parametrically: in each replicate, after resampling the problems, the difference of the
two arms' means over seeds gets its standard error sqrt(sd_a^2/S_a + sd_b^2/S_b) times a Student-t draw
with the Welch-Satterthwaite degrees of freedom (Welch's small-sample law for a difference of means of
normal seed effects); this measured 0.03 false positives at S = 3 and S = 5. The problem level stays a
plain bootstrap (P is large). A metric measured once per run (an entropy slope, a rank-1 fraction, a
time-to-threshold) is the same design with P = 1.

From the replicates: a percentile confidence interval of the difference, and a two-sided bootstrap p-value
(twice the smaller share of replicates on either side of 0, with the +1 of Davison and Hinkley so that it
is never 0), which is the inversion of the percentile interval: p < alpha exactly when the two-sided
(1 - alpha) interval excludes 0 (up to the +1). Several claims tested at once are corrected with Holm's
step-down method (:func:`holm`), which keeps the family-wise error rate at alpha for any dependence between
the claims. tests/unit/test_stats.py checks the false-positive rate under the null and the power under a
known effect on synthetic data.

The last part turns one claim's test into its verdict and reason (:func:`compare_claim`, :func:`judge`,
:func:`verdict`), as fade_core.claims uses them: a claim alone is a family of one; its ``p_holm`` and
``family`` are replaced when the claims are corrected together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

AGREES = "agrees"
DISAGREES = "disagrees"
INCONCLUSIVE = "inconclusive"
NO_DIFFERENCE = "no difference"
DIFFERENCE = "difference"


def _as_runs_by_problems(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    """``x`` as a float array [S, P]: a 1-D input is S per-run values (P = 1)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected [seeds] or [seeds, problems], got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise ValueError(f"{name}: needs at least 2 seeds to estimate seed-to-seed variation, got {arr.shape[0]}")
    if arr.shape[1] < 1:
        raise ValueError(f"{name}: no problems")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: holds NaN or infinite values")
    return arr


def _arm_moments(x: np.ndarray, problems: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per replicate (row of ``problems``, [B, P] problem indices): the arm's mean over seeds of each run's
    mean over the replicate's problems, and the squared standard error of that mean over seeds.

    x: [S, P]. Returns (centre [B], se2 [B]) with se2 = var(per-seed means, ddof=1) / S.
    """
    per_seed = x[:, problems].mean(axis=2).T  # [B, S]: run s's mean over the replicate's problems
    return per_seed.mean(axis=1), per_seed.var(axis=1, ddof=1) / x.shape[0]


@dataclass(frozen=True)
class BootstrapDiff:
    """mean(a) - mean(b) and its bootstrap replicates (``replicates``: [n_boot])."""

    diff: float
    replicates: np.ndarray

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Two-sided percentile interval at ``level`` (e.g. 0.95)."""
        if not 0.0 < level < 1.0:
            raise ValueError(f"confidence level must be in (0, 1), got {level}")
        tail = (1.0 - level) / 2.0
        lo, hi = np.quantile(self.replicates, [tail, 1.0 - tail])
        return float(lo), float(hi)

    def p_value(self) -> float:
        """Two-sided bootstrap p-value of 'no difference' (see the module docstring)."""
        r = self.replicates
        below = (np.count_nonzero(r <= 0.0) + 1) / (r.size + 1)
        above = (np.count_nonzero(r >= 0.0) + 1) / (r.size + 1)
        return float(min(1.0, 2.0 * min(below, above)))


def bootstrap_diff(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    n_boot: int = 4000,
    seed: int = 0,
) -> BootstrapDiff:
    """Bootstrap of mean(a) - mean(b) over seeds (independent per arm) and problems (paired).

    a: [S_a, P] per-run, per-problem scores (or [S_a] per-run values); b: [S_b, P] on the same P problems
    in the same order (or [S_b]). Deterministic by ``seed``.
    """
    xa = _as_runs_by_problems(a, "a")
    xb = _as_runs_by_problems(b, "b")
    if xa.shape[1] != xb.shape[1]:
        raise ValueError(f"a and b must be scored on the same problems: {xa.shape[1]} vs {xb.shape[1]} columns")
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100, got {n_boot}")
    rng = np.random.default_rng(seed)
    p = xa.shape[1]
    problems = rng.integers(0, p, size=(n_boot, p)) if p > 1 else np.zeros((n_boot, 1), dtype=np.int64)
    ca, va = _arm_moments(xa, problems)
    cb, vb = _arm_moments(xb, problems)
    se2 = va + vb
    # Welch-Satterthwaite degrees of freedom; 0/0 (no seed variation in either arm) gives no seed part
    with np.errstate(divide="ignore", invalid="ignore"):
        df = se2 ** 2 / (va ** 2 / (xa.shape[0] - 1) + vb ** 2 / (xb.shape[0] - 1))
    df = np.where(np.isfinite(df) & (df > 0), df, 1.0)
    reps = (ca - cb) + np.sqrt(se2) * rng.standard_t(df)
    return BootstrapDiff(diff=float(xa.mean() - xb.mean()), replicates=reps)


def bootstrap_problems(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, n_boot: int = 4000,
                       seed: int = 0) -> BootstrapDiff:
    """Bootstrap of mean(a) - mean(b) over problems only, paired: ``a`` and ``b`` are one run each ([P]
    per-problem scores on the same problems in the same order), e.g. the base model against the uniform
    sampler (one model, one exact baseline: no seeds to resample). Deterministic by ``seed``."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.ndim != 1 or xa.shape != xb.shape or xa.size < 2:
        raise ValueError(f"expected two [P] arrays of the same P >= 2 problems, got {xa.shape} and {xb.shape}")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(xb))):
        raise ValueError("per-problem scores hold NaN or infinite values")
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100, got {n_boot}")
    d = xa - xb
    idx = np.random.default_rng(seed).integers(0, d.size, size=(n_boot, d.size))
    return BootstrapDiff(diff=float(d.mean()), replicates=d[idx].mean(axis=1))


@dataclass(frozen=True)
class ArmComparison:
    """Arm a against arm b: mean(a) - mean(b) with its bootstrap interval and two-sided p-value
    (:func:`bootstrap_diff`), and each arm's mean, sample std over seeds of its per-run means, and seeds.
    ``problems``: the paired problems resampled (1: per-run values, resampled over seeds only)."""

    diff: float
    ci: tuple[float, float]
    p: float
    mean_a: float
    sd_a: float
    n_a: int
    mean_b: float
    sd_b: float
    n_b: int
    problems: int

    @property
    def over(self) -> str:
        """What was resampled, in words."""
        return "seeds" if self.problems == 1 else f"seeds and {self.problems} problems (paired)"


def compare_arms(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, level: float = 0.95,
                 n_boot: int = 4000, seed: int = 0) -> ArmComparison:
    """:func:`bootstrap_diff` of a and b ([S, P] per-problem scores paired by problem, or [S] per-run values)
    summarised: the difference, its ``level`` percentile interval, its p-value and each arm's seed summary."""
    boot = bootstrap_diff(a, b, n_boot=n_boot, seed=seed)
    xa, xb = _as_runs_by_problems(a, "a"), _as_runs_by_problems(b, "b")
    ra, rb = xa.mean(axis=1), xb.mean(axis=1)  # per-run means over the problems
    return ArmComparison(boot.diff, boot.ci(level), boot.p_value(), float(ra.mean()), float(ra.std(ddof=1)),
                         ra.size, float(rb.mean()), float(rb.std(ddof=1)), rb.size, xa.shape[1])


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (same order as given): reject claim i at family-wise level alpha when
    adjusted[i] <= alpha. Step-down: sort ascending, multiply the j-th smallest (0-based) by (m - j), take
    the running maximum, cap at 1."""
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError("holm: expected a flat list of p-values")
    if np.any((p < 0) | (p > 1) | ~np.isfinite(p)):
        raise ValueError("holm: p-values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted_sorted = np.maximum.accumulate(np.minimum(1.0, p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted_sorted
    return out.tolist()


def verdict(diff: float, p_adjusted: float, expect: int, alpha: float = 0.05) -> str:
    """The verdict of one claim from its difference and its Holm-adjusted p-value.

    expect: +1 (the paper says a > b), -1 (a < b), or 0 (a control: the two arms should not differ).
    A claim with a direction: ``agrees`` / ``disagrees`` when significant with that sign / the other,
    else ``inconclusive`` (not significant is not evidence of no effect). A control: ``no difference``
    unless significant, then ``difference`` (a failed control: the test or the setup is not sound).
    """
    if expect not in (-1, 0, 1):
        raise ValueError(f"expect must be -1, 0 or +1, got {expect}")
    significant = p_adjusted <= alpha
    if expect == 0:
        return DIFFERENCE if significant else NO_DIFFERENCE
    if not significant:
        return INCONCLUSIVE
    return AGREES if np.sign(diff) == expect else DISAGREES


# ------------------------------------------------------------------------------- a claim's verdict
LEVEL, ALPHA = 0.95, 0.05
"""The claims' confidence level and family-wise error rate."""
N_BOOT = 4000
NOT_DETECTED = "no difference detected at family-wise 5%"


def seed_stats(values: Sequence[float]) -> tuple[float, float, int]:
    """(mean, sample std, count) of the finite values; std is nan below 2 values, mean nan for none."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    if v.size == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else math.nan, int(v.size)


def fmt_seeds(mean: float, sd: float, n: int, digits: int = 3) -> str:
    """"mean ± sd (n=seeds)" of :func:`seed_stats`; n/a without a value."""
    if n == 0 or not np.isfinite(mean):
        return "n/a"
    sd_s = f" ± {sd:.{digits}g}" if np.isfinite(sd) else ""
    return f"{mean:.{digits}g}{sd_s} (n={n})"


def fmt_p(p: float | None) -> str:
    """A p-value: three decimals, "<0.001" below that, n/a for none."""
    if p is None or not np.isfinite(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def ci_text(diff: float, ci: Sequence[float], digits: int = 3) -> str:
    """"+0.05 [95% CI +0.02, +0.08]"."""
    return f"{diff:+.{digits}g} [95% CI {ci[0]:+.{digits}g}, {ci[1]:+.{digits}g}]"


def compare_claim(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, expect: int,
               what: str = "the difference", names: tuple[str, str] = ("a", "b"), *, n_boot: int = N_BOOT
               ) -> tuple[ArmComparison | None, str, str, dict]:
    """Test "mean(a) - mean(b) has the sign of ``expect``" (+1 or -1) alone (a family of one: no Holm yet).

    a, b: per-run values (non-finite ones left out) or [seeds, problems] scores paired by problem. Returns
    (comparison or None, verdict, reason, the test: diff, ci, p, p_holm (= p), family (1), expect, sign,
    ci_over, what, evidence; {} when untested: an arm without a value or with fewer than 2 seeds)."""
    xa, xb = (_finite(x) for x in (a, b))
    if len(xa) == 0 or len(xb) == 0:
        empty = [n for n, x in zip(names, (xa, xb), strict=True) if len(x) == 0]
        return None, INCONCLUSIVE, f"no finite value for {' and '.join(empty)}", {}
    if len(xa) < 2 or len(xb) < 2:
        return None, INCONCLUSIVE, (f"fewer than 2 seeds ({names[0]}: {len(xa)}, {names[1]}: {len(xb)}): "
                                    "no seed-to-seed variation to test against"), {}
    c = compare_arms(xa, xb, level=LEVEL, n_boot=n_boot)
    test = {"diff": c.diff, "ci": list(c.ci), "p": c.p, "p_holm": c.p, "family": 1, "expect": expect,
            "sign": int(np.sign(c.diff)), "ci_over": c.over, "what": what,
            "evidence": f"{what} {ci_text(c.diff, c.ci, 4)} over {c.over}, p {fmt_p(c.p)}"}
    return (c, *judge(test), test)


def _finite(x: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    return arr[np.isfinite(arr)] if arr.ndim == 1 else arr


def judge(test: dict) -> tuple[str, str]:
    """(verdict, reason) of a tested claim: :func:`verdict` of its ``sign`` and ``p_holm`` (over a family of
    ``family`` claims) against ``expect``, the reason built from its ``evidence``, an optional ``veto`` (why
    an agreement is not the paper's claim: it becomes inconclusive) and an optional ``note``."""
    v = verdict(test["sign"], test["p_holm"], test["expect"], ALPHA)
    m = test["family"]
    holm_s = f"Holm-adjusted p {fmt_p(test['p_holm'])} over {m} claims" if m > 1 else "one claim alone (no Holm adjustment)"
    why = {AGREES: "the paper's sign, significant at family-wise 5%", INCONCLUSIVE: NOT_DETECTED,
           DISAGREES: "the opposite sign, significant at family-wise 5%"}[v]
    if v == AGREES and test.get("veto"):
        v, why = INCONCLUSIVE, f"{why}; but {test['veto']}"
    return v, f"{test['evidence']}; {holm_s}: {why}{test.get('note', '')}"
