"""The study's learning-rate sweep: every arm at several learning rates, one chosen per arm by a rule fixed
before any run.

Why. Under AdamW a constant scale of the advantage cancels, so an advantage's "mass" does not set the step
size: the learning rate does, and one shared learning rate decides which method collapses (issue 15). So
each arm is trained at every rate of :data:`SWEEP_LRS` for one seed, :data:`SWEEP_SEED`, that is not one of
the final seeds (the choice never selects the very runs it is then judged on), and measured on the
*validation* split (``train.eval_every`` > 0 logs ``eval_pass1``, pass@1 on a fixed set of validation
problems; the test split is not looked at).

The rule (:func:`choose`), fixed in code before the study runs:

    criterion(run)  = mean of the run's last :data:`CRITERION_TAIL` finite ``eval_pass1`` values
                      (its final validation pass@1, averaged over the last evaluations to damp noise)
    chosen lr (arm) = the rate with the highest criterion; a tie (within :data:`TIE_TOL`) goes to the
                      smaller rate; a rate whose run logged no eval_pass1 cannot be chosen
    edge            = when the chosen rate is the smallest (largest) of the arm's rates, the arm is also
                      trained one grid step below (above) it (:func:`next_rate`) and the choice is made again
                      over all its rates, at most :data:`MAX_EXTENSIONS` times (:func:`extensions`); an arm
                      still at an edge after that is named in STUDY.md (:func:`edge_note`)

The final seeds then run at the chosen rate (``Arm.lr``). The sweep's curves (criterion against rate, per
arm) are the sensitivity figure of STUDY.md, :func:`fig_sensitivity`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fade_core.config import Arm

SWEEP_LRS: tuple[float, ...] = (1.11e-5, 3.33e-5, 1e-4)
"""The learning rates every arm is trained at. History: the first redesigned study swept (3e-4, 1e-3, 3e-3) at 32
prompts per step and every arm chose 3e-4, the grid's edge; at 16 prompts the grid (1e-4, 3e-4, 1e-3) saw every
arm choose 1e-4, its edge again, and with 3.33e-5 added ten of eleven arms chose 1e-4 (2026-12-04). On the pool
design (8 prompts, 400 steps, flows/study.py) single-seed probes of fade scored 3.33e-5 and 1e-4 alike (0.114 and
0.110) and 3e-4 lower, so the grid was centred on 1e-4 (2026-12-05): seven arms chose 3.33e-5, six of them
extended to 1.11e-5 (lower for each), and no arm chose 3e-4. At 600 steps (the current design) probes of fade
scored 1e-4 far below 3.33e-5 (0.086 against 0.139: 1e-4 overfits the pool), so the grid moved one step down,
centred on 3.33e-5, before the 600-step study (2026-12-05); the edge rule still extends it either way (an arm
choosing 1e-4 is also trained at 3e-4)."""
SWEEP_SEED = 1000
"""The sweep's one seed: not a final seed, so choosing the rate selects none of the runs judged later."""
CRITERION_TAIL = 3
"""Evaluations averaged at the end of a sweep run (with eval_every = 10: the last 30 steps)."""
TIE_TOL = 1e-9
MAX_EXTENSIONS = 2
"""Times an arm's rates are extended past the edge its chosen rate sits on (each: one more sweep run per arm at
an edge). The 2026-12-04 study at 16 prompts per step saw every arm choose the smallest rate of (1e-4, 3e-4, 1e-3)."""
RULE = (f"criterion = the mean of the last {CRITERION_TAIL} periodic validation pass@1 evaluations of the arm's "
        f"sweep run (seed {SWEEP_SEED}); the rate with the highest criterion is chosen, a tie goes to the smaller "
        "rate; when the chosen rate is the smallest (largest) of the arm's rates, the arm is also trained one grid "
        f"step below (above) it and the choice is made again, at most {MAX_EXTENSIONS} times")
"""The rule in words, as STUDY.md and lr_choice.json state it."""
EVAL_COLUMN = "eval_pass1"


def sweep_label(arm: str, lr: float) -> str:
    """The label of ``arm`` trained at ``lr`` in the sweep, e.g. ``asym_d1__lr0p0003`` (arm names take letters,
    digits and '_' only: '.' is written p, '-' m)."""
    return f"{arm}__lr" + f"{lr:g}".replace(".", "p").replace("-", "m").replace("+", "")


Rates = Sequence[float] | Mapping[str, Sequence[float]]
"""The sweep's rates: one grid for every arm, or each arm's own ({arm: rates}; an arm not named is not swept)."""


def arm_rates(lrs: Rates, arm: str) -> list[float]:
    """``arm``'s rates in ``lrs`` (a shared grid, or {arm: rates}: [] for an arm it does not name)."""
    return [float(x) for x in (lrs.get(arm, []) if isinstance(lrs, Mapping) else lrs)]


def sweep_arms(arms: Mapping[str, Arm], lrs: Rates = SWEEP_LRS) -> dict[str, Arm]:
    """Every arm at every one of its rates: {sweep label: the arm with ``lr`` set}, arm by arm in ``arms``'
    order (``lrs`` as :data:`Rates`: with {arm: rates}, the arms it names, each at its own rates)."""
    per_arm = {name: arm_rates(lrs, name) for name in arms}
    if not any(per_arm.values()):
        raise ValueError("the learning-rate sweep needs at least one rate")
    bad = [lr for rates in per_arm.values() for lr in rates if not (lr > 0)]
    if bad:
        raise ValueError(f"learning rates must be > 0, got {bad}")
    return {sweep_label(name, lr): arm.model_copy(update={"lr": lr}) for name, arm in arms.items()
            for lr in per_arm[name]}


def next_rate(rates: Sequence[float], lower: bool) -> float:
    """The rate one grid step past the smallest (``lower``) or the largest of ``rates``: the geometric step
    between the two outermost rates on that side (1e-4 / 3.16 for (1e-4, 3e-4, 1e-3); a factor sqrt(10) with
    one rate), to 3 significant digits."""
    r = sorted(float(x) for x in rates)
    if not r or r[0] <= 0:
        raise ValueError(f"next_rate needs positive rates, got {list(rates)}")
    factor = (r[1] / r[0] if lower else r[-1] / r[-2]) if len(r) > 1 else math.sqrt(10.0)
    return float(f"{(r[0] / factor if lower else r[-1] * factor):.3g}")


def sweep_config(placed: Any, lrs: Rates = SWEEP_LRS, folder: str | Path | None = None,
                 tied: Mapping[str, str] | None = None) -> Any:
    """The sweep's config from the placed study config ``placed``: its arms (but those ``tied`` to another
    arm's rate, {arm: partner}) at every rate, seed :data:`SWEEP_SEED`, runs and TensorBoard logs under
    ``folder`` (default: ``sweep/`` beside train.runs_dir). Raises naming train.eval_every when it is 0 (the
    criterion needs the periodic validation pass@1)."""
    if placed.train.eval_every <= 0:
        raise ValueError("train.eval_every is 0: the learning-rate sweep chooses on the periodic validation "
                         "pass@1 (eval_pass1), so it needs train.eval_every > 0")
    if placed.train.eval_split != "validation":
        raise ValueError(f"train.eval_split is {placed.train.eval_split!r}: the learning-rate sweep must choose on "
                         "the validation split")
    out = placed.model_copy(deep=True)
    root = Path(folder) if folder is not None else Path(placed.train.runs_dir).parent / "sweep"
    swept = {a: arm for a, arm in placed.pipeline.arms.items() if a not in (tied or {}) and arm_rates(lrs, a)}
    if not swept:
        raise ValueError("every arm is tied to another's learning rate: nothing to sweep")
    out.pipeline.arms = sweep_arms(swept, lrs)
    out.pipeline.seeds = [SWEEP_SEED]
    out.train.runs_dir = str(root / "runs")
    out.tracking.tensorboard_dir = str(root / "tensorboard")
    return out


def criterion(run: pd.DataFrame, tail: int = CRITERION_TAIL) -> float:
    """The mean of the last ``tail`` finite ``eval_pass1`` values of one run's records (nan without any)."""
    if EVAL_COLUMN not in run.columns:
        return math.nan
    v = pd.to_numeric(run.sort_values("step")[EVAL_COLUMN], errors="coerce").dropna()
    return float(v.iloc[-tail:].mean()) if len(v) else math.nan


@dataclass
class LrChoice:
    """One arm's sweep: the criterion at every rate and the chosen rate (None when no rate was measured)."""

    arm: str
    lr: float | None
    scores: dict[float, float] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["scores"] = {f"{k:g}": (None if not math.isfinite(v) else v) for k, v in self.scores.items()}
        return d


def choose_lr(scores: Mapping[float, float]) -> float | None:
    """The rule: the highest finite score, ties to the smaller rate; None when no score is finite."""
    finite = {lr: s for lr, s in scores.items() if math.isfinite(s)}
    if not finite:
        return None
    best = max(finite.values())
    return min(lr for lr, s in finite.items() if s >= best - TIE_TOL)


def choose(train: pd.DataFrame, arms: Sequence[str], lrs: Rates = SWEEP_LRS,
           tied: Mapping[str, str] | None = None) -> dict[str, LrChoice]:
    """Per arm: the criterion of its sweep run at each rate (training records as
    :func:`fade_core.runs.load_training_records` stacks them, ``method`` = the sweep label) and the chosen
    rate. Several runs of one label (more sweep seeds) are averaged. An arm ``tied`` to a partner
    ({arm: partner}, the partner swept) takes the partner's rate: the study's A/A control must compare two
    arms at one rate."""
    tied = {a: b for a, b in (tied or {}).items() if a in arms}
    bad = [f"{a} -> {b}" for a, b in tied.items() if b not in arms or b in tied]
    if bad:
        raise ValueError(f"learning rates tied to an arm that is not swept: {', '.join(bad)}")
    out = {}
    for arm in [a for a in arms if a not in tied]:
        scores = {}
        for lr in arm_rates(lrs, arm):
            rows = train[train["method"] == sweep_label(arm, lr)] if not train.empty else train
            vals = [criterion(r) for _, r in rows.groupby("run_id")] if len(rows) else []
            vals = [v for v in vals if math.isfinite(v)]
            scores[float(lr)] = float(np.mean(vals)) if vals else math.nan
        lr = choose_lr(scores)
        if lr is None:
            reason = "no sweep run logged eval_pass1: no rate chosen"
        else:
            ties = [x for x, s in scores.items() if math.isfinite(s) and s >= scores[lr] - TIE_TOL and x != lr]
            reason = (f"highest mean validation pass@1 over the last {CRITERION_TAIL} evaluations"
                      + (f" (tied with {', '.join(f'{t:g}' for t in ties)}: the smaller rate)" if ties else ""))
        out[arm] = LrChoice(arm, lr, scores, reason)
    for arm, partner in tied.items():
        out[arm] = LrChoice(arm, out[partner].lr, {}, f"not swept: runs at {partner}'s rate (the same update)")
    return {a: out[a] for a in arms}


def extensions(choices: Mapping[str, LrChoice]) -> dict[str, float]:
    """The edge rule's next runs: {arm: the rate one grid step past its chosen rate} for every swept arm whose
    chosen rate is the smallest or the largest of its rates, when two or more of them were measured (a single
    rate is no choice). Tied arms (no scores) and arms without a choice get none."""
    out = {}
    for arm, c in choices.items():
        measured = [lr for lr, v in c.scores.items() if math.isfinite(v)]
        if c.lr is None or len(measured) < 2:
            continue
        if c.lr == min(c.scores):
            out[arm] = next_rate(list(c.scores), lower=True)
        elif c.lr == max(c.scores):
            out[arm] = next_rate(list(c.scores), lower=False)
    return out


def with_chosen_lrs(arms: Mapping[str, Arm], choices: Mapping[str, LrChoice]) -> dict[str, Arm]:
    """The arms with their chosen rates; an arm without a choice raises, naming it."""
    missing = [a for a in arms if a not in choices or choices[a].lr is None]
    if missing:
        raise ValueError(f"no learning rate chosen for arm(s) {', '.join(missing)}: their sweep runs logged no "
                         "eval_pass1 (train.eval_every must be > 0)")
    return {a: arm.model_copy(update={"lr": choices[a].lr}) for a, arm in arms.items()}


def markdown_table(choices: Mapping[str, LrChoice]) -> str:
    """STUDY.md's sweep table: one row per arm, the criterion at each rate, the chosen one in bold."""
    lrs = sorted({lr for c in choices.values() for lr in c.scores})
    head = "| arm | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " | chosen |"
    rows = [head, "|---|" + "---|" * (len(lrs) + 1)]
    for c in choices.values():
        cells = []
        for lr in lrs:
            s = c.scores.get(lr, math.nan)
            text = f"{s:.3f}" if math.isfinite(s) else "–"
            cells.append(f"**{text}**" if c.lr is not None and lr == c.lr and math.isfinite(s) else text)
        chosen = "–" if c.lr is None else f"{c.lr:g}" + ("" if c.scores else f" ({c.reason})")
        rows.append(f"| {c.arm} | " + " | ".join(cells) + f" | {chosen} |")
    return "\n".join(rows)


def edge_note(choices: Mapping[str, LrChoice]) -> str:
    """A sentence naming the swept arms whose chosen rate is the grid's smallest or largest ("" when none): their
    best rate may lie outside the grid, which the sweep did not test."""
    swept = {a: c for a, c in choices.items() if c.scores and c.lr is not None}
    if not swept:
        return ""
    lo = sorted(a for a, c in swept.items() if c.lr == min(c.scores))
    hi = sorted(a for a, c in swept.items() if c.lr == max(c.scores))
    parts = [f"{len(lo)} of {len(swept)} swept arms chose the grid's smallest rate ({', '.join(lo)})"] if lo else []
    parts += [f"{len(hi)} of {len(swept)} its largest ({', '.join(hi)})"] if hi else []
    if not parts:
        return ""
    return ("; ".join(parts) + ": their best rate may lie outside the grid (not tested); the comparison is between "
            "arms at their best rate on this grid.")


def fig_sensitivity(choices: Mapping[str, LrChoice]) -> Any:
    """Criterion against learning rate, one line per arm, the chosen rate circled (None without scores)."""
    if not any(math.isfinite(s) for c in choices.values() for s in c.scores.values()):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    cmap = plt.get_cmap("tab20")
    for i, c in enumerate(c for c in choices.values() if c.scores):  # a tied arm (not swept) has no curve
        xs = sorted(c.scores)
        ax.plot(xs, [c.scores[x] for x in xs], "-o", ms=3, lw=1, color=cmap(i % 20), label=c.arm)
        if c.lr is not None and c.lr in c.scores:
            ax.plot([c.lr], [c.scores[c.lr]], "o", ms=9, mfc="none", color=cmap(i % 20))
    ax.set_xscale("log")
    ax.set_xlabel("learning rate (AdamW)")
    ax.set_ylabel(f"validation pass@1 (mean of last {CRITERION_TAIL} evals)")
    ax.set_title(f"Learning-rate sensitivity (seed {SWEEP_SEED}; circled: chosen)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig
