"""The registry: each method's parameters (validated), its mask, its training hooks, and ``build``.

An :class:`Advantage` wraps one formula of :mod:`fade_core.advantages.formulas` with validated
parameters (:class:`Param`), the rollout mask and the hooks of the training loop; the subclasses
(:class:`DapoAdvantage`, :class:`CodapoAdvantage`, :class:`FadeAdvantage`) hold every method-specific
piece of training. ``describe(name)`` is each method's parameters with their help (``fade params``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from fade_core.advantages.formulas import (
    Tensor,
    asym_grpo_advantage,
    bbg_advantage,
    bbg_keep_groups,
    codapo_advantage,
    codapo_weight,
    dapo_overlong_penalty,
    dr_grpo_advantage,
    fade_alpha,
    fade_delta,
    grpo_advantage,
    maxpo_advantage,
    nsr_advantage,
    passk_advantage,
    pkpo_advantage,
    power_advantage,
    power_asym_advantage,
    psr_advantage,
    reinforce_advantage,
    rloo_advantage,
    successes,
    w_reinforce_advantage,
    zero_variance_groups,
)

CONTEXT_KEYS = ("mean_logprob",)
"""Keyword context an Advantage accepts (each [num_groups, G])."""


# ============================================================================ parameters
@dataclass(frozen=True)
class Param:
    """One method parameter: default, a validity rule (``check`` returns the cleaned value or raises)."""

    name: str
    default: Any
    rule: str
    help: str
    check: Callable[[Any], Any]


def _number(name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> Callable:
    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, got {v!r}")
        if hi is not None and v > hi:
            raise ValueError(f"{name} must be <= {hi}, got {v!r}")
        return float(v)

    return check


def _integer(name: str, lo: int, hi: int | None = None) -> Callable:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
            raise ValueError(f"{name} must be an integer, got {v!r}")
        if v < lo or (hi is not None and v > hi):
            raise ValueError(f"{name} must be in {lo}..{hi if hi is not None else 'inf'}, got {v!r}")
        return int(v)

    return check


def _optional(check: Callable) -> Callable:
    return lambda v: None if v is None else check(v)


P_INIT_FIRST = "first"
"""FADE's ``p_init`` default: p_hat starts at the first observed batch solve rate."""
P_BEFORE_OBSERVING = 0.5
"""The solve rate FADE's alpha is read at before any batch was observed (alpha = 1.5)."""


def _p_init(v: Any) -> str | float:
    if v == P_INIT_FIRST:
        return P_INIT_FIRST
    return _number("p_init", 0.0, 1.0)(v)


def _target_entropy(v: Any) -> str | float:
    if v == "auto":
        return "auto"
    return _number("target_entropy", 0.0)(v)


P_DDOF = Param("ddof", 1, "0 or 1", "Std degrees-of-freedom correction (1 = Bessel).", _integer("ddof", 0, 1))
P_EPS = Param("eps", 1e-6, "a number >= 0", "Added to the std before dividing.", _number("eps", 0.0))
P_K = Param("k", 4, "an integer >= 1 (and <= G, checked per call)", "The k of pass@k.", _integer("k", 1))


def _alpha(default: float) -> Param:
    return Param("alpha", default, "a number >= 1", "Difficulty focus: weight (1 - rbar)^(alpha-1).",
                 _number("alpha", 1.0))


def _delta(default: float) -> Param:
    return Param("delta", default, "a number > 0", "Failures weighted 1/delta (delta < 1: failure-biased).",
                 _number("delta", 0.0, lo_open=True))


# ============================================================================ the Advantage object
@dataclass
class Method:
    """A registry entry: the pure function, its parameters and the class that wraps it."""

    name: str
    summary: str
    fn: Callable[..., Tensor]
    params: tuple[Param, ...] = ()
    needs: tuple[str, ...] = ()
    keep: Callable[..., Tensor] | None = None  # rollout-level keep mask [num_groups, G]
    cls: type[Advantage] | None = None
    fn_params: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        sig = inspect.signature(self.fn).parameters
        self.fn_params = tuple(p.name for p in self.params if p.name in sig)


class Advantage:
    """A configured advantage method: ``adv(rewards, **context) -> advantages``.

    rewards: float tensor [num_groups, G]; result: same shape, rewards' floating dtype (float32 for
    integer/bool rewards), computed in float64. See the package docstring for the mask convention.

    The training loop (fade_core.train) knows no method by name: it calls the hooks below, which do
    nothing here, in this order every step::

        rewards = adv.shape_rewards(rewards, lengths, max_length)      # after scoring each sampling round
        keep = adv.keep_groups(rewards)                                # None: train on the first round as is
        adv.observe(solve_rate=..., entropy=...)                       # batch statistics, before advantages
        A, mask = adv(rewards, **ctx), adv.mask(rewards, **ctx)        # the update
        again = adv.resample_groups(rewards, mean_logprob=...)         # []: no second update
        record.update(adv.state_record())                              # the step record

    A method with a sampling quirk overrides the hooks it needs (DAPO: shape_rewards, keep_groups,
    max_sampling_rounds; CoDaPO: resample_groups; FADE: observe, state_record), so adding one touches
    this package only.
    """

    loss_agg: str | None = None
    eps_low: float | None = None
    eps_high: float | None = None
    max_sampling_rounds: int = 1
    """Sampling rounds per step the trainer may use to refill groups that :meth:`keep_groups` drops."""

    def __init__(self, method: Method, params: dict[str, Any], given: Sequence[str] = ()):
        self.method = method
        self.name = method.name
        self.params = params
        self.given = tuple(given)  # the parameters the caller set (the label shows them)

    # -- computing
    def __call__(self, rewards: Tensor, **context: Tensor) -> Tensor:
        r, ctx = self._prepare(rewards, context)
        adv = self._advantages(r, ctx)
        keep = self._keep(r, ctx)
        if keep is not None:
            adv = torch.where(keep, adv, torch.zeros_like(adv))
        return adv.to(_out_dtype(rewards))

    def mask(self, rewards: Tensor, **context: Tensor) -> Tensor:
        """bool [num_groups, G]: True = the rollout contributes to the loss (module docstring)."""
        r, ctx = self._prepare(rewards, context)
        keep = self._keep(r, ctx)
        return torch.ones_like(r, dtype=torch.bool) if keep is None else keep

    def _advantages(self, r: Tensor, ctx: dict[str, Tensor]) -> Tensor:
        kwargs = {p: self.params[p] for p in self.method.fn_params}
        return self.method.fn(r, **{n: ctx[n] for n in self.method.needs}, **kwargs)

    def _keep(self, r: Tensor, ctx: dict[str, Tensor]) -> Tensor | None:
        if self.method.keep is None:
            return None
        sig = inspect.signature(self.method.keep).parameters
        return self.method.keep(r, **{p: v for p, v in self.params.items() if p in sig})

    def _prepare(self, rewards: Tensor, context: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        if not isinstance(rewards, Tensor):
            raise ValueError(f"{self.name}: rewards must be a torch tensor [num_groups, G], got {type(rewards).__name__}")
        if rewards.ndim != 2 or rewards.shape[1] < 1:
            raise ValueError(f"{self.name}: rewards must have shape [num_groups, G], got {tuple(rewards.shape)}")
        unknown = sorted(set(context) - set(CONTEXT_KEYS))
        if unknown:
            raise ValueError(f"{self.name}: unknown context {unknown}; valid context keys: {list(CONTEXT_KEYS)}")
        r = rewards.to(torch.float64)
        if not torch.isfinite(r).all():
            raise ValueError(f"{self.name}: rewards contain NaN or inf")
        ctx: dict[str, Tensor] = {}
        for need in self.method.needs:
            if context.get(need) is None:
                raise ValueError(f"{self.name} needs context {need}=<tensor {list(rewards.shape)}> (by keyword)")
            value = torch.as_tensor(context[need], device=rewards.device).to(torch.float64)
            if value.shape != rewards.shape:
                raise ValueError(
                    f"{self.name}: {need} must have the rewards' shape {tuple(rewards.shape)}, got {tuple(value.shape)}"
                )
            ctx[need] = value
        return r, ctx

    # -- hooks of the training loop (no-ops; see the class docstring)
    def shape_rewards(self, rewards: Tensor, lengths: Tensor, max_length: int) -> Tensor:
        """Rewards [P, G] float64 after the method's reward shaping, given the completions' lengths [P, G]
        in tokens and the generation budget ``max_length``. Default: unchanged."""
        return rewards

    def keep_groups(self, rewards: Tensor) -> Tensor | None:
        """bool [P]: the sampled groups the step trains on; the trainer samples more prompts to replace
        dropped groups, for at most :attr:`max_sampling_rounds` rounds. Default None: every group, no refill."""
        return None

    def observe(self, **batch_stats: Any) -> None:
        """Update from one step's batch statistics (solve_rate, entropy); static methods ignore them."""

    def resample_groups(self, rewards: Tensor, mean_logprob: Tensor) -> list[int]:
        """Positions of groups of the step's batch (repeats allowed) that get fresh rollouts from the updated
        policy and a second update. Default []: none."""
        return []

    def state_record(self) -> dict[str, float]:
        """The method's state for the step record: ``alpha`` and ``delta`` (the difficulty focus and the
        failure weight; NaN for a method without them) and any state of its own (FADE: p_hat, h_hat, h_target)."""
        return {"alpha": _float_or_nan(self.params.get("alpha")), "delta": _float_or_nan(self.params.get("delta"))}

    # -- checkpoints

    def state_dict(self) -> dict[str, Any]:
        return {"method": self.name}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("method") != self.name:
            raise ValueError(f"state of method {state.get('method')!r} cannot be loaded into {self.name!r}")
        extra = sorted(set(state) - {"method"})
        if extra:
            raise ValueError(f"{self.name}: unexpected state keys {extra}")

    # -- description
    def recommended(self) -> dict[str, Any]:
        """Trainer hints keyed like ``train`` config fields (None entries omitted)."""
        hints = {"loss_agg": self.loss_agg, "eps_low": self.eps_low, "eps_high": self.eps_high}
        return {k: v for k, v in hints.items() if v is not None}

    @property
    def label(self) -> str:
        """The method's one label (of run ids, arms, figures): its name and the parameters it was given, in
        the registry's order with canonical values: ``power``, ``power(alpha=2)``, ``asym_grpo(delta=0.5)``.
        Like the run hash, it follows what the config says; parameters left to their defaults are not shown."""
        shown = {p.name: self.params[p.name] for p in self.method.params if p.name in self.given}
        if not shown:
            return self.name
        return self.name + "(" + ",".join(f"{k}={_fmt(v)}" for k, v in shown.items()) + ")"

    def __repr__(self) -> str:
        return f"<Advantage {self.name} {self.params}>"


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _float_or_nan(v: Any) -> float:
    return math.nan if v is None else float(v)


def _out_dtype(rewards: Tensor) -> torch.dtype:
    return rewards.dtype if rewards.dtype.is_floating_point else torch.float32


class DrGrpoAdvantage(Advantage):
    loss_agg = "seq-mean-token-sum-norm"


class DapoAdvantage(Advantage):
    """DAPO: the grpo advantage + clip-higher, token-mean aggregation, dynamic sampling and soft overlong
    reward shaping.

    Hints: ``eps_low`` / ``eps_high`` / ``loss_agg``. Dynamic sampling: :meth:`keep_groups` drops groups with
    zero reward variance and the trainer refills the batch with fresh prompts, for at most
    ``max_gen_batches`` sampling rounds per step (:attr:`max_sampling_rounds`). Shaping:
    :meth:`shape_rewards` adds ``overlong_penalty(lengths, max_length)`` (0 when ``overlong_buffer`` is None).
    """

    loss_agg = "token-mean"

    def __init__(self, method: Method, params: dict[str, Any], given: Sequence[str] = ()):
        super().__init__(method, params, given)
        self.eps_low = params["eps_low"]
        self.eps_high = params["eps_high"]
        self.max_gen_batches = params["max_gen_batches"]
        self.max_sampling_rounds = params["max_gen_batches"]

    def keep_groups(self, rewards: Tensor) -> Tensor:
        """bool [num_groups]: False for zero-variance groups (rbar in {0, 1}), which dynamic sampling drops."""
        return ~zero_variance_groups(rewards.to(torch.float64))

    def shape_rewards(self, rewards: Tensor, lengths: Tensor, max_length: int) -> Tensor:
        return rewards + self.overlong_penalty(lengths, max_length)

    def overlong_penalty(self, lengths: Tensor, max_length: int) -> Tensor:
        buffer = self.params["overlong_buffer"]
        if buffer is None:
            return torch.zeros_like(lengths, dtype=torch.float64)
        return dapo_overlong_penalty(lengths, max_length, buffer, self.params["overlong_penalty"])


def _dapo_keep(rewards: Tensor) -> Tensor:
    return (~zero_variance_groups(rewards))[:, None].expand_as(rewards)


class CodapoAdvantage(Advantage):
    """CoDaPO. After the normal update, :meth:`resample_groups` names the top ``resample_fraction`` = 25%
    of questions by w_q (at least one), each repeated ``resample_repeats`` = 4 times; the trainer gives
    them fresh rollouts and runs a second update on them.
    """

    def weights(self, rewards: Tensor, mean_logprob: Tensor) -> Tensor:
        """w_q [num_groups] (float64)."""
        r, ctx = self._prepare(rewards, {"mean_logprob": mean_logprob})
        return codapo_weight(r, ctx["mean_logprob"])

    def resample_indices(self, rewards: Tensor, mean_logprob: Tensor) -> Tensor:
        """long [ceil(fraction * num_groups)]: group indices by descending w_q (ties: lower index first)."""
        w = self.weights(rewards, mean_logprob)
        n = max(1, math.ceil(self.params["resample_fraction"] * w.shape[0]))
        order = torch.sort(-w, stable=True).indices
        return order[:n]

    @property
    def resample_repeats(self) -> int:
        return self.params["resample_repeats"]

    def resample_groups(self, rewards: Tensor, mean_logprob: Tensor) -> list[int]:
        idx = self.resample_indices(rewards, mean_logprob=mean_logprob).tolist()
        return [i for i in idx for _ in range(self.resample_repeats)]


class FadeAdvantage(Advantage):
    """FADE: the focal-asymmetric advantage with alpha, delta read from training dynamics.

    Call ``observe(solve_rate=<batch mean reward>, entropy=<batch mean token entropy>)`` once per step
    (other keys are ignored so a trainer can pass one stats dict to every method); the advantage uses
    the ``alpha`` / ``delta`` current at call time. EMAs (beta = 0.02): p_hat starts at the first observed
    batch solve rate (``p_init="first"``, the default; a number starts it there instead, 0.5 being the
    reference's choice), so alpha follows the solve rate from the first step instead of spending ~1/beta
    steps decaying from 0.5; H_hat starts at the first observed entropy, which also resolves
    ``target_entropy="auto"`` to ``target_fraction`` (0.5) x that entropy. Before any observation alpha
    is read at p = 0.5 (1.5) and delta = 1.
    Ablations: ``fixed_alpha`` (no difficulty schedule), ``fixed_delta`` (no entropy schedule).
    """

    def __init__(self, method: Method, params: dict[str, Any], given: Sequence[str] = ()):
        super().__init__(method, params, given)
        self.p_hat: float | None = None if params["p_init"] == P_INIT_FIRST else params["p_init"]
        self.h_hat: float | None = None
        target = params["target_entropy"]
        self.h_target: float | None = None if target == "auto" else float(target)
        self.steps = 0

    @property
    def alpha(self) -> float:
        if self.params["fixed_alpha"] is not None:
            return self.params["fixed_alpha"]
        return fade_alpha(P_BEFORE_OBSERVING if self.p_hat is None else self.p_hat, self.params["alpha_max"])

    @property
    def delta(self) -> float:
        if self.params["fixed_delta"] is not None:
            return self.params["fixed_delta"]
        return fade_delta(self.h_hat, self.h_target, self.params["delta_min"])

    def _advantages(self, r: Tensor, ctx: dict[str, Tensor]) -> Tensor:
        return power_asym_advantage(r, alpha=self.alpha, delta=self.delta)

    def observe(self, solve_rate: float | Tensor | None = None, entropy: float | Tensor | None = None,
                **_other: Any) -> None:
        beta = self.params["beta"]
        if solve_rate is not None:
            p = _scalar("solve_rate", solve_rate)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"fade.observe: solve_rate must be in [0, 1], got {p}")
            self.p_hat = p if self.p_hat is None else (1.0 - beta) * self.p_hat + beta * p
        if entropy is not None:
            h = _scalar("entropy", entropy)
            if h < 0:
                raise ValueError(f"fade.observe: entropy must be >= 0, got {h}")
            if self.h_hat is None:
                self.h_hat = h
                if self.h_target is None:
                    self.h_target = self.params["target_fraction"] * h
            else:
                self.h_hat = (1.0 - beta) * self.h_hat + beta * h
        self.steps += 1

    def state_record(self) -> dict[str, float]:
        return {"alpha": float(self.alpha), "delta": float(self.delta), "p_hat": _float_or_nan(self.p_hat),
                "h_hat": _float_or_nan(self.h_hat), "h_target": _float_or_nan(self.h_target)}

    def state_dict(self) -> dict[str, Any]:
        return {"method": self.name, "p_hat": self.p_hat, "h_hat": self.h_hat, "h_target": self.h_target,
                "steps": self.steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        expected = {"method", "p_hat", "h_hat", "h_target", "steps"}
        if state.get("method") != self.name or set(state) != expected:
            raise ValueError(f"fade: state must have keys {sorted(expected)} with method='fade', got {dict(state)}")
        self.p_hat = None if state["p_hat"] is None else float(state["p_hat"])
        self.h_hat = None if state["h_hat"] is None else float(state["h_hat"])
        self.h_target = None if state["h_target"] is None else float(state["h_target"])
        self.steps = int(state["steps"])


def _scalar(name: str, v: float | Tensor) -> float:
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise ValueError(f"fade.observe: {name} must be a scalar (the batch mean), got shape {tuple(v.shape)}")
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"fade.observe: {name} must be a finite number, got {v!r}")
    return float(v)


# ============================================================================ the registry
_REGISTRY: dict[str, Method] = {}


def _register(method: Method) -> None:
    _REGISTRY[method.name] = method


_register(Method("reinforce", "A = r", reinforce_advantage))
_register(Method("grpo", "A = (r - rbar)/(std + eps)", grpo_advantage, (P_DDOF, P_EPS)))
_register(Method("dr_grpo", "A = r - rbar", dr_grpo_advantage, cls=DrGrpoAdvantage))
_register(Method("rloo", "A = r - mean of the others", rloo_advantage))
_register(Method(
    "dapo", "grpo + clip-higher, token-mean, dynamic sampling", grpo_advantage,
    (P_DDOF, P_EPS,
     Param("eps_low", 0.2, "a number >= 0", "PPO clip below.", _number("eps_low", 0.0)),
     Param("eps_high", 0.28, "a number >= 0", "PPO clip above (clip-higher).", _number("eps_high", 0.0)),
     Param("max_gen_batches", 10, "an integer >= 1", "Sampling rounds per step to refill dropped groups.",
           _integer("max_gen_batches", 1)),
     Param("overlong_buffer", None, "null or an integer >= 1", "Soft overlong punishment buffer (tokens).",
           _optional(_integer("overlong_buffer", 1))),
     Param("overlong_penalty", 1.0, "a number >= 0", "Overlong punishment factor.", _number("overlong_penalty", 0.0))),
    keep=_dapo_keep, cls=DapoAdvantage,
))
_register(Method("power", "A = (1-rbar)^(alpha-1) (r - rbar)", power_advantage, (_alpha(2.0),)))
_register(Method("asym_grpo", "A = r - rbar, failures / delta", asym_grpo_advantage, (_delta(0.5),)))
_register(Method("power_asym", "power and asym combined", power_asym_advantage, (_alpha(2.0), _delta(2.0))))
_register(Method(
    "w_reinforce", "A = lam on successes, -1 on failures", w_reinforce_advantage,
    (Param("lam", 0.1, "a number >= 0", "Weight of successes.", _number("lam", 0.0)),),
))
_register(Method("psr", "A = r on successes, failures dropped", psr_advantage,
                 keep=lambda r: successes(r)))
_register(Method("nsr", "A = -1 on failures, successes dropped", nsr_advantage,
                 keep=lambda r: ~successes(r)))
_register(Method("passk", "Pass@k Training analytic advantage", passk_advantage, (P_K, P_EPS)))
_register(Method("pkpo", "PKPO, leave-one-out baseline", pkpo_advantage, (P_K,)))
_register(Method("maxpo", "MaxPO, leave-two-out baseline", maxpo_advantage, (P_K,)))
_register(Method(
    "codapo", "w_q x grpo, w_q = conf 4 acc(1-acc) + 0.1", codapo_advantage,
    (P_DDOF, P_EPS,
     Param("resample_fraction", 0.25, "a number in (0, 1]", "Share of questions resampled for the second update.",
           _number("resample_fraction", 0.0, 1.0, lo_open=True)),
     Param("resample_repeats", 4, "an integer >= 1", "Times each resampled question is repeated.",
           _integer("resample_repeats", 1))),
    needs=("mean_logprob",), cls=CodapoAdvantage,
))
_register(Method(
    "bbg", "Bayesian Boundary Gating (provisional)", bbg_advantage,
    (Param("k", 16, "an integer >= 1", "pass@k horizon of the utility.", _integer("k", 1)),
     Param("tau", 0.01, "a number >= 0", "Skip groups with utility u(m) < tau.", _number("tau", 0.0)),
     P_DDOF, P_EPS),
    keep=lambda r, k, tau: bbg_keep_groups(r, k, tau)[:, None].expand_as(r),
))
_register(Method(
    "fade", "focal-asymmetric with alpha, delta from training dynamics", power_asym_advantage,
    (Param("alpha_max", 3.0, "a number >= 1", "Upper clip of alpha.", _number("alpha_max", 1.0)),
     Param("delta_min", 0.3, "a number in (0, 1]", "Lower clip of delta.", _number("delta_min", 0.0, 1.0, lo_open=True)),
     Param("beta", 0.02, "a number in (0, 1]", "EMA rate of p_hat and H_hat.", _number("beta", 0.0, 1.0, lo_open=True)),
     Param("p_init", P_INIT_FIRST, "'first' or a number in [0, 1]",
           "Initial p_hat: 'first' = the first batch's solve rate; a number starts the EMA there.", _p_init),
     Param("target_entropy", "auto", "'auto' or a number >= 0", "H_target in nats; auto = target_fraction x H_0.",
           _target_entropy),
     Param("target_fraction", 0.5, "a number > 0", "auto target as a share of the first entropy.",
           _number("target_fraction", 0.0, lo_open=True)),
     Param("fixed_alpha", None, "null or a number >= 1", "Ablation: hold alpha fixed.", _optional(_number("fixed_alpha", 1.0))),
     Param("fixed_delta", None, "null or a number > 0", "Ablation: hold delta fixed.",
           _optional(_number("fixed_delta", 0.0, lo_open=True)))),
    cls=FadeAdvantage,
))


def names() -> list[str]:
    """Every registered method name, in registration order."""
    return list(_REGISTRY)


def method(name: str) -> Method:
    """The registry entry of ``name`` (ValueError listing valid names)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown advantage method {name!r}; valid methods: {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def describe(name: str) -> str:
    """The method's summary, then one line per parameter: name, default (null: None), rule, help. ``fade params``
    and params.yaml show it under ``train.params`` and ``pipeline.arms``."""
    m = method(name)
    lines = [f"{m.name}: {m.summary}"]
    lines += [f"  {p.name} = {'null' if p.default is None else repr(p.default)}  ({p.rule}) {p.help}" for p in m.params]
    return "\n".join(lines)


def build(name: str, **params: Any) -> Advantage:
    """Validate ``params`` against the method's parameters and return its Advantage (cheap).

    Unknown names, unknown parameters and out-of-range values raise ValueError naming what is valid.
    """
    m = method(name)
    valid = {p.name: p for p in m.params}
    unknown = sorted(set(params) - set(valid))
    if unknown:
        rules = ", ".join(f"{p.name} ({p.rule}, default {p.default!r})" for p in m.params) or "none"
        raise ValueError(f"{name}: unknown parameter(s) {unknown}; valid parameters: {rules}")
    resolved: dict[str, Any] = {}
    for p in m.params:
        value = params.get(p.name, p.default)
        try:
            resolved[p.name] = p.check(value)
        except ValueError as e:
            raise ValueError(f"{name}: {e} (valid: {p.rule})") from None
    cls = m.cls or Advantage
    return cls(m, resolved, given=list(params))
