"""Every advantage method against a brute-force or closed-form reference (per-group Python loops)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
import torch

from fade_core import advantages as A

TOL = 1e-6
SIZES = [1, 2, 3, 5, 8, 16]


# ------------------------------------------------------------------------------ reference implementations
def ref_grpo(r, ddof=1, eps=1e-6):
    g = len(r)
    if g - ddof <= 0:
        return [0.0] * g
    mu = sum(r) / g
    sd = math.sqrt(sum((x - mu) ** 2 for x in r) / (g - ddof))
    if sd + eps == 0:
        return [0.0] * g
    return [(x - mu) / (sd + eps) for x in r]


def ref_rloo(r):
    g = len(r)
    if g == 1:
        return [0.0]
    return [r[i] - sum(r[j] for j in range(g) if j != i) / (g - 1) for i in range(g)]


def ref_power_asym(r, alpha, delta):
    mu = sum(r) / len(r)
    w = (1 - mu) ** (alpha - 1) if mu < 1 else 0.0
    return [w * ((x - mu) if x >= mu else (x - mu) / delta) for x in r]


def ref_passk(r, k, eps=1e-6):
    n = len(r)
    c = sum(1 for x in r if x >= 0.5)
    if c in (0, n):
        return [0.0] * n
    n_neg = n - c
    rho = 1 - math.comb(n_neg, k) / math.comb(n, k)
    sigma = math.sqrt(rho * (1 - rho))
    a_pos = (1 - rho) / (sigma + eps)
    extra = math.comb(n_neg - 1, k - 1) / math.comb(n - 1, k - 1) if n_neg >= 1 else 0.0
    a_neg = (1 - rho - extra) / (sigma + eps)
    return [a_pos if x >= 0.5 else a_neg for x in r]


def _max(values):
    return max(values) if values else 0.0


def ref_pkpo(r, k):
    g = len(r)
    subsets = list(itertools.combinations(range(g), k))
    out = []
    for i in range(g):
        s = sum(_max([r[j] for j in b]) - _max([r[j] for j in b if j != i]) for b in subsets if i in b)
        out.append(s / len(subsets))
    return out


def ref_maxpo(r, k):
    g = len(r)
    if g == 1:
        return [0.0]
    out = []
    for i in range(g):
        with_i = [_max([r[j] for j in b]) for b in itertools.combinations(range(g), k) if i in b]
        others = [j for j in range(g) if j != i]
        without_i = [_max([r[j] for j in b]) for b in itertools.combinations(others, k)]
        out.append(sum(with_i) / len(with_i) - sum(without_i) / len(without_i))
    return out


def ref_codapo(r, mean_lp, ddof=1, eps=1e-6):
    acc = sum(r) / len(r)
    conf = math.exp(sum(mean_lp) / len(mean_lp))
    w = conf * 4 * acc * (1 - acc) + 0.1
    return [w * a for a in ref_grpo(r, ddof, eps)]


def ref_bbg_u(m, n, k):
    # Beta-function form: E_{p~Beta(m+1, n-m+1)}[k (1-p)^(k-1)] = k B(m+1, n-m+k) / B(m+1, n-m+1)
    def log_beta(a, b):
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)

    return k * math.exp(log_beta(m + 1, n - m + k) - log_beta(m + 1, n - m + 1))


def ref_bbg(r, k=16, tau=0.01):
    n = len(r)
    m = sum(1 for x in r if x >= 0.5)
    u, u1 = ref_bbg_u(m, n, k), ref_bbg_u(1, n, k)
    if u < tau or m == 0:  # gated, or no success: no update
        return [0.0] * n
    return [u / u1 * a for a in ref_grpo(r)]


REFERENCES = {
    "reinforce": lambda r: list(r),
    "grpo": ref_grpo,
    "dr_grpo": lambda r: [x - sum(r) / len(r) for x in r],
    "rloo": ref_rloo,
    "dapo": lambda r: ref_grpo(r) if len(set(r)) > 1 else [0.0] * len(r),
    "power": lambda r: ref_power_asym(r, 2.0, 1.0),
    "asym_grpo": lambda r: ref_power_asym(r, 1.0, 0.5),
    "power_asym": lambda r: ref_power_asym(r, 2.0, 2.0),
    "w_reinforce": lambda r: [0.1 if x >= 0.5 else -1.0 for x in r],
    "psr": lambda r: [x if x >= 0.5 else 0.0 for x in r],
    "nsr": lambda r: [0.0 if x >= 0.5 else -1.0 for x in r],
    "bbg": ref_bbg,
    "fade": lambda r: ref_power_asym(r, 1.5, 1.0),  # fresh FADE, nothing observed: alpha read at p 0.5; delta 1
}
BINARY_ONLY = {"w_reinforce", "psr", "nsr", "bbg", "passk"}


# ------------------------------------------------------------------------------ random groups
def binary_groups(g: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    probs = torch.rand(12, 1, generator=gen)
    r = (torch.rand(12, g, generator=gen) < probs).to(torch.float64)
    r[0] = 1.0  # all correct
    r[1] = 0.0  # all wrong
    return r


def real_groups(g: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    r = torch.rand(10, g, generator=gen, dtype=torch.float64)
    r[0] = 0.0
    r[1] = 0.7  # constant
    if g > 2:
        r[2, : g // 2] = 0.25  # ties
    return r


def assert_rows_match(adv: torch.Tensor, rewards: torch.Tensor, ref) -> None:
    for row_r, row_a in zip(rewards.tolist(), adv.tolist(), strict=True):
        expected = ref(row_r)
        assert row_a == pytest.approx(expected, abs=TOL, rel=TOL), (row_r, row_a, expected)


# ------------------------------------------------------------------------------ the tests
def test_names_cover_the_spec():
    assert set(A.names()) == {
        "reinforce", "grpo", "dr_grpo", "rloo", "dapo", "power", "asym_grpo", "power_asym", "w_reinforce",
        "psr", "nsr", "passk", "pkpo", "maxpo", "codapo", "bbg", "fade",
    }


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("g", SIZES)
def test_binary_groups_match_reference(name, g):
    r = binary_groups(g, seed=g)
    adv = A.build(name)
    assert_rows_match(adv(r), r, REFERENCES[name])


@pytest.mark.parametrize("name", sorted(set(REFERENCES) - BINARY_ONLY))
@pytest.mark.parametrize("g", SIZES)
def test_real_valued_groups_match_reference(name, g):
    r = real_groups(g, seed=100 + g)
    assert_rows_match(A.build(name)(r), r, REFERENCES[name])


@pytest.mark.parametrize("alpha,delta", [(1.0, 1.0), (1.0, 0.3), (2.5, 1.0), (3.0, 0.7), (1.7, 2.0)])
def test_power_asym_parameters(alpha, delta):
    r = binary_groups(7, seed=3)
    adv = A.build("power_asym", alpha=alpha, delta=delta)
    assert_rows_match(adv(r), r, lambda x: ref_power_asym(x, alpha, delta))
    assert_rows_match(A.build("power", alpha=alpha)(r), r, lambda x: ref_power_asym(x, alpha, 1.0))
    assert_rows_match(A.build("asym_grpo", delta=delta)(r), r, lambda x: ref_power_asym(x, 1.0, delta))


@pytest.mark.parametrize("ddof,eps", [(0, 1e-6), (1, 1e-6), (1, 0.0), (0, 0.1)])
def test_grpo_ddof_and_eps(ddof, eps):
    r = binary_groups(6, seed=11)
    assert_rows_match(A.build("grpo", ddof=ddof, eps=eps)(r), r, lambda x: ref_grpo(x, ddof, eps))


@pytest.mark.parametrize("lam", [0.0, 0.1, 1.0])
def test_w_reinforce_lambda(lam):
    r = binary_groups(5, seed=2)
    assert_rows_match(A.build("w_reinforce", lam=lam)(r), r, lambda x: [lam if v else -1.0 for v in x])


@pytest.mark.parametrize("g", SIZES)
def test_passk_matches_formula(g):
    r = binary_groups(g, seed=40 + g)
    for k in sorted(k for k in {1, 2, g // 2, g} if 1 <= k <= g):
        assert_rows_match(A.build("passk", k=k)(r), r, lambda x, k=k: ref_passk(x, k))


@pytest.mark.parametrize("g", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("kind", ["binary", "real"])
def test_pkpo_against_subset_enumeration(g, kind):
    r = binary_groups(g, seed=7 + g) if kind == "binary" else real_groups(g, seed=70 + g)
    for k in range(1, g + 1):
        assert_rows_match(A.build("pkpo", k=k)(r), r, lambda x, k=k: ref_pkpo(x, k))


@pytest.mark.parametrize("g", [2, 3, 4, 6, 8])
@pytest.mark.parametrize("kind", ["binary", "real"])
def test_maxpo_against_subset_enumeration(g, kind):
    r = binary_groups(g, seed=9 + g) if kind == "binary" else real_groups(g, seed=90 + g)
    for k in range(1, g):
        adv = A.build("maxpo", k=k)(r)
        assert_rows_match(adv, r, lambda x, k=k: ref_maxpo(x, k))
        assert adv.sum(dim=1).abs().max() < 1e-12  # centred exactly


def test_maxpo_single_rollout_group_is_zero():
    assert torch.equal(A.build("maxpo", k=1)(torch.tensor([[1.0], [0.0]], dtype=torch.float64)),
                       torch.zeros(2, 1, dtype=torch.float64))


@pytest.mark.parametrize("g,k", [(4, 2), (8, 3), (16, 4), (16, 8)])
def test_pkpo_and_maxpo_binary_closed_forms(g, k):
    """The spec's closed forms: pkpo successes C(G-c,k-1)/C(G,k); maxpo X = C(G-c-1,k-1)/C(G-2,k-1)."""
    for c in range(g + 1):
        r = torch.tensor([[1.0] * c + [0.0] * (g - c)], dtype=torch.float64)
        pk = A.build("pkpo", k=k)(r)[0].tolist()
        expect_pos = float(Fraction(math.comb(g - c, k - 1), math.comb(g, k)))
        assert pk == pytest.approx([expect_pos] * c + [0.0] * (g - c), abs=1e-12)
        mx = A.build("maxpo", k=k)(r)[0].tolist()
        x = float(Fraction(math.comb(g - c - 1, k - 1) if g - c - 1 >= 0 else 0, math.comb(g - 2, k - 1)))
        expect = [(g - c) / (g - 1) * x] * c + [-c / (g - 1) * x] * (g - c)
        assert mx == pytest.approx(expect, abs=1e-12)


def test_pkpo_large_group_is_finite_and_matches_closed_form():
    g, k = 256, 64
    r = torch.zeros(1, g, dtype=torch.float64)
    r[0, :10] = 1.0
    a = A.build("pkpo", k=k)(r)
    expected = float(Fraction(math.comb(g - 10, k - 1), math.comb(g, k)))
    assert torch.isfinite(a).all()
    assert a[0, 0].item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("g", SIZES)
def test_codapo_matches_reference(g):
    r = binary_groups(g, seed=50 + g)
    gen = torch.Generator().manual_seed(g)
    lp = -torch.rand(r.shape, generator=gen, dtype=torch.float64) * 2
    adv = A.build("codapo")(r, mean_logprob=lp)
    for i in range(r.shape[0]):
        assert adv[i].tolist() == pytest.approx(ref_codapo(r[i].tolist(), lp[i].tolist()), abs=TOL)


def test_bbg_utility_product_equals_beta_integral():
    for n in (1, 4, 16):
        for k in (1, 2, 16):
            for m in range(n + 1):
                got = A.bbg_utility(torch.tensor(float(m)), n, k).item()
                assert got == pytest.approx(ref_bbg_u(m, n, k), rel=1e-10)


@pytest.mark.parametrize("name", [n for n in A.names() if n not in ("codapo",)])
def test_vectorized_equals_per_group_loop(name):
    params = {"k": 3} if name in ("passk", "pkpo", "maxpo") else {}
    r = binary_groups(6, seed=21)
    adv = A.build(name, **params)
    whole = adv(r)
    rows = torch.cat([adv(r[i : i + 1]) for i in range(r.shape[0])])
    assert torch.allclose(whole, rows, atol=1e-12, rtol=0)
    mask_rows = torch.cat([adv.mask(r[i : i + 1]) for i in range(r.shape[0])])
    assert torch.equal(adv.mask(r), mask_rows)


def test_codapo_vectorized_equals_loop():
    r = binary_groups(6, seed=22)
    lp = torch.linspace(-2, 0, r.numel(), dtype=torch.float64).reshape(r.shape)
    adv = A.build("codapo")
    rows = torch.cat([adv(r[i : i + 1], mean_logprob=lp[i : i + 1]) for i in range(r.shape[0])])
    assert torch.allclose(adv(r, mean_logprob=lp), rows, atol=1e-12, rtol=0)


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "dapo", "power", "passk", "maxpo", "codapo", "fade"])
@pytest.mark.parametrize("g", [2, 5, 16])
def test_centred_methods_sum_to_zero(name, g):
    params = {"k": 1} if name in ("passk", "maxpo") else {}
    r = binary_groups(g, seed=g + 1)
    ctx = {"mean_logprob": torch.full_like(r, -0.3)} if name == "codapo" else {}
    assert A.build(name, **params)(r, **ctx).sum(dim=1).abs().max().item() < 1e-9
    if name in ("grpo", "dr_grpo", "rloo", "power", "maxpo"):  # also for real rewards
        rr = real_groups(g, seed=g)
        assert A.build(name, **params)(rr).sum(dim=1).abs().max().item() < 1e-9


def test_fade_with_delta_one_is_centred_and_asym_is_not():
    r = binary_groups(8, seed=5)
    assert A.build("fade", fixed_delta=1.0)(r).sum(dim=1).abs().max() < 1e-12
    mixed = r[(r.mean(dim=1) > 0) & (r.mean(dim=1) < 1)]
    assert (A.build("asym_grpo", delta=0.5)(mixed).sum(dim=1) < 0).all()  # failure-biased


def test_masks_follow_the_documented_convention():
    r = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    win = r >= 0.5
    assert torch.equal(A.build("psr").mask(r), win)
    assert torch.equal(A.build("nsr").mask(r), ~win)
    dapo = A.build("dapo")
    assert torch.equal(dapo.mask(r), torch.tensor([[True] * 4, [False] * 4, [False] * 4]))
    assert dapo.keep_groups(r).tolist() == [True, False, False]
    for name in ("grpo", "reinforce", "fade", "pkpo"):
        assert A.build(name).mask(r).all()
    # dropped rollouts also get zero advantage
    for name in ("psr", "nsr", "dapo"):
        adv = A.build(name)
        assert (adv(r)[~adv.mask(r)] == 0).all()


def test_bbg_gates_groups_with_low_utility():
    g = 16
    r = torch.zeros(g + 1, g, dtype=torch.float64)
    for c in range(g + 1):
        r[c, :c] = 1.0
    adv = A.build("bbg", k=16, tau=0.01)
    u = [ref_bbg_u(c, g, 16) for c in range(g + 1)]
    keep = adv.mask(r)[:, 0].tolist()
    assert keep == [x >= 0.01 for x in u]
    assert not keep[-1] and keep[0]  # all-correct groups are gated, all-wrong ones are not
    assert (adv(r)[~adv.mask(r)] == 0).all()
    assert adv(r)[0].tolist() == [0.0] * g  # m = 0: no update (no signed REINFORCE term)
    assert keep[0]  # ... and kept in the denominators, like grpo's zero-variance groups


def test_trainer_hints():
    dapo = A.build("dapo")
    assert (dapo.eps_low, dapo.eps_high, dapo.loss_agg) == (0.2, 0.28, "token-mean")
    assert dapo.max_sampling_rounds == dapo.max_gen_batches == 10
    assert A.build("dapo", max_gen_batches=3).max_sampling_rounds == 3
    assert dapo.recommended() == {"loss_agg": "token-mean", "eps_low": 0.2, "eps_high": 0.28}
    assert A.build("dr_grpo").loss_agg == "seq-mean-token-sum-norm"
    assert A.build("grpo").recommended() == {}
    assert A.build("dapo", eps_high=0.3).eps_high == 0.3


def test_dapo_overlong_penalty():
    dapo = A.build("dapo", overlong_buffer=4, overlong_penalty=1.0)
    lengths = torch.tensor([1, 6, 7, 8, 10, 12])
    assert dapo.overlong_penalty(lengths, max_length=10).tolist() == pytest.approx([0, 0, -0.25, -0.5, -1, -1])
    assert A.build("dapo").overlong_penalty(lengths, 10).abs().sum() == 0


def test_codapo_resample_indices_pick_top_quarter_by_weight():
    acc = torch.tensor([0.5, 0.1, 0.0, 0.25, 0.5, 1.0, 0.4, 0.9])
    g = 8
    r = (torch.arange(g)[None, :] < (acc[:, None] * g).round()).to(torch.float64)
    lp = torch.zeros_like(r)
    lp[4] = -1.0  # less confident than group 0 at the same accuracy
    adv = A.build("codapo")
    w = adv.weights(r, mean_logprob=lp)
    assert w.tolist() == pytest.approx([math.exp(lp[i, 0].item()) * 4 * a * (1 - a) + 0.1
                                        for i, a in enumerate((r.mean(dim=1)).tolist())])
    idx = adv.resample_indices(r, mean_logprob=lp)
    assert idx.tolist() == [0, 6]  # ceil(0.25 * 8) = 2 groups, highest w_q first
    assert adv.resample_repeats == 4
    assert adv.resample_groups(r, mean_logprob=lp) == [0, 0, 0, 0, 6, 6, 6, 6]  # the training hook
    assert A.build("codapo", resample_fraction=1.0, resample_repeats=1).resample_groups(r[:3], lp[:3]) == [0, 1, 2]


# ---------------------------------------------------------------------------- hooks of the training loop
@pytest.mark.parametrize("name", A.names())
def test_training_hooks_are_no_ops_unless_a_method_needs_them(name):
    """Every method answers every hook; only DAPO shapes and refills, only CoDaPO resamples."""
    r = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    lengths = torch.full_like(r, 14, dtype=torch.long)  # 2 tokens into the overlong buffer of 4: -0.5
    adv = A.build(name, **({"overlong_buffer": 4} if name == "dapo" else {}))
    shaped = adv.shape_rewards(r, lengths, max_length=16)
    keep = adv.keep_groups(r)
    again = adv.resample_groups(r, mean_logprob=torch.full_like(r, -0.5))
    if name == "dapo":
        assert torch.equal(shaped, r - 0.5) and keep.tolist() == [True, False, False]
        assert adv.max_sampling_rounds == 10
    else:
        assert shaped is r and keep is None and adv.max_sampling_rounds == 1
    assert (again != []) == (name == "codapo")
    state = adv.state_record()
    assert set(state) >= {"alpha", "delta"} and all(isinstance(v, float) for v in state.values())


def test_state_record_reports_each_methods_alpha_delta_and_fades_schedule():
    assert A.build("power", alpha=3).state_record() == pytest.approx({"alpha": 3.0, "delta": math.nan}, nan_ok=True)
    assert A.build("power_asym", alpha=2, delta=0.5).state_record() == {"alpha": 2.0, "delta": 0.5}
    grpo = A.build("grpo").state_record()
    assert math.isnan(grpo["alpha"]) and math.isnan(grpo["delta"])
    fade = A.build("fade")
    before = fade.state_record()
    assert before["alpha"] == 1.5 and before["delta"] == 1.0 and math.isnan(before["p_hat"])  # alpha read at 0.5
    assert math.isnan(before["h_hat"]) and math.isnan(before["h_target"])
    fade.observe(solve_rate=0.1, entropy=2.0)
    after = fade.state_record()
    assert after == {"alpha": fade.alpha, "delta": fade.delta, "p_hat": fade.p_hat, "h_hat": 2.0, "h_target": 1.0}


def test_dtypes_and_devices():
    r32 = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float32)
    assert A.build("grpo")(r32).dtype == torch.float32
    assert A.build("grpo")(torch.tensor([[1, 0, 0]])).dtype == torch.float32
    assert A.build("grpo")(r32.double()).dtype == torch.float64
    assert A.build("pkpo", k=2)(r32).dtype == torch.float32


def test_errors_name_what_is_valid():
    with pytest.raises(ValueError, match="valid methods: reinforce, grpo"):
        A.build("ppo")
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['beta'\].*valid parameters: alpha"):
        A.build("power", beta=1)
    with pytest.raises(ValueError, match="valid parameters: none"):
        A.build("reinforce", alpha=2)
    with pytest.raises(ValueError, match="alpha must be >= 1"):
        A.build("power", alpha=0.5)
    with pytest.raises(ValueError, match="delta must be > 0"):
        A.build("asym_grpo", delta=0)
    with pytest.raises(ValueError, match="k must be an integer"):
        A.build("pkpo", k=2.5)
    with pytest.raises(ValueError, match="ddof must be in 0..1"):
        A.build("grpo", ddof=2)
    with pytest.raises(ValueError, match="target_entropy"):
        A.build("fade", target_entropy="high")
    r = torch.zeros(2, 4)
    with pytest.raises(ValueError, match="k=5 needs k <= 4"):
        A.build("pkpo", k=5)(r)
    with pytest.raises(ValueError, match="k=4 needs k <= 3"):
        A.build("maxpo", k=4)(r)
    with pytest.raises(ValueError, match="codapo needs context mean_logprob"):
        A.build("codapo")(r)
    with pytest.raises(ValueError, match="valid context keys"):
        A.build("grpo")(r, logprob=r)
    with pytest.raises(ValueError, match=r"shape \[num_groups, G\]"):
        A.build("grpo")(torch.zeros(4))
    with pytest.raises(ValueError, match="NaN"):
        A.build("grpo")(torch.tensor([[float("nan"), 1.0]]))


def test_config_default_arms_build_cheaply():
    for name, params in [("fade", {}), ("grpo", {}), ("dr_grpo", {}), ("power", {"alpha": 2})]:
        adv = A.build(name, **params)
        assert adv.name == name
    assert A.build("power").label == "power" and A.build("power", alpha=2).label == "power(alpha=2)"
    assert A.build("power", alpha=3).label == "power(alpha=3)"
    from fade_core import config

    config.load(None, ["train.method=power", "train.params.alpha=3"])


def test_static_state_round_trip_and_observe_noop():
    adv = A.build("grpo")
    adv.observe(solve_rate=0.3, entropy=1.0, anything=1)
    state = adv.state_dict()
    A.build("grpo").load_state_dict(state)
    with pytest.raises(ValueError):
        A.build("rloo").load_state_dict(state)


# ------------------------------------------------------------------------------ FADE's schedule
def test_fade_initial_state():
    fade = A.build("fade")
    assert fade.p_hat is None  # p_init "first": set by the first observed batch
    assert fade.alpha == pytest.approx(1.5)  # nothing observed: read at p = 0.5 -> 3 * 0.5 / (2 * 0.5)
    assert fade.delta == 1.0
    assert fade.h_target is None


def test_fade_p_hat_starts_at_the_first_batch():
    fade = A.build("fade")
    fade.observe(solve_rate=0.2, entropy=1.0)
    assert fade.p_hat == 0.2 and fade.alpha == 3.0  # 3 * 0.8 / 0.4 = 6 -> clipped to 3 from step 1
    fade.observe(solve_rate=0.6)
    assert fade.p_hat == pytest.approx(0.98 * 0.2 + 0.02 * 0.6)
    ref = A.build("fade", p_init=0.5)  # the reference's start: the EMA decays from 0.5
    ref.observe(solve_rate=0.2)
    assert ref.p_hat == pytest.approx(0.98 * 0.5 + 0.02 * 0.2) and ref.alpha == pytest.approx(fade_alpha_of(ref.p_hat))
    with pytest.raises(ValueError, match="p_init"):
        A.build("fade", p_init="last")


def test_fade_ema_arithmetic_and_auto_target():
    fade = A.build("fade", p_init=0.5)
    fade.observe(solve_rate=0.1, entropy=2.0)
    assert fade.p_hat == pytest.approx(0.98 * 0.5 + 0.02 * 0.1)
    assert fade.h_hat == 2.0  # starts at the first entropy
    assert fade.h_target == 1.0  # auto: half of it
    assert fade.delta == 1.0  # clip(1 + 2 - 1) = 1
    fade.observe(solve_rate=0.3, entropy=1.0)
    assert fade.p_hat == pytest.approx(0.98 * (0.98 * 0.5 + 0.002) + 0.02 * 0.3)
    assert fade.h_hat == pytest.approx(0.98 * 2.0 + 0.02 * 1.0)
    p = fade.p_hat
    assert fade.alpha == pytest.approx(min(max(3 * (1 - p) / (2 * p), 1), 3))
    fade.observe(loss=3.0)  # other stats are ignored
    assert fade.steps == 3


def test_fade_target_fraction_sets_the_auto_target_and_delta_follows():
    """The study's FADE arms set target_fraction (fade_core.study.FADE_TARGET_FRACTION): H_target is that share of
    the first entropy, and delta = clip(1 + H_hat - H_target, delta_min, 1) falls as soon as H_hat is below it."""
    fade = A.build("fade", target_fraction=0.65)
    fade.observe(solve_rate=0.5, entropy=0.6)
    assert fade.h_target == pytest.approx(0.39) and fade.delta == 1.0
    for _ in range(200):  # the entropy EMA falls toward 0.1: delta -> 1 + 0.1 - 0.39 = 0.71
        fade.observe(solve_rate=0.5, entropy=0.1)
    h = fade.h_hat
    assert h == pytest.approx(0.1 + 0.5 * 0.98 ** 200) and fade.delta == pytest.approx(1 + h - 0.39)
    assert A.build("fade").params["target_fraction"] == 0.5  # the spec's auto stays the default
    with pytest.raises(ValueError, match="target_fraction"):
        A.build("fade", target_fraction=0)


def test_fade_schedule_boundaries():
    assert A.build("fade", p_init=0.2).alpha == 3.0  # 6 -> clipped to alpha_max
    assert A.build("fade", p_init=0.0).alpha == 3.0
    assert A.build("fade", p_init=0.8).alpha == 1.0  # 0.375 -> clipped to 1
    assert A.build("fade", p_init=0.4).alpha == pytest.approx(2.25)  # interior
    assert A.build("fade", p_init=0.2, alpha_max=5).alpha == 5.0
    fade = A.build("fade")
    fade.observe(entropy=2.0)
    for _ in range(400):
        fade.observe(entropy=0.2)
    h = 0.2 + 1.8 * 0.98**400
    assert fade.h_hat == pytest.approx(h)
    assert fade.delta == 0.3  # 1 + h - 1 = h < 0.3 -> clipped to delta_min
    fade = A.build("fade", target_entropy=1.5)
    fade.observe(entropy=1.0)
    assert fade.h_target == 1.5
    assert fade.delta == pytest.approx(0.5)
    fade = A.build("fade", target_entropy=0.5, delta_min=0.6)
    fade.observe(entropy=0.05)
    assert fade.delta == 0.6
    assert A.fade_delta(5.0, 1.0) == 1.0


def test_fade_ablations_fix_alpha_or_delta():
    fade = A.build("fade", fixed_alpha=2.0, target_entropy=1.0)
    fade.observe(solve_rate=0.0, entropy=0.1)
    fade.observe(solve_rate=0.0, entropy=0.0)
    assert fade.alpha == 2.0 and fade.delta < 1.0
    fade = A.build("fade", fixed_delta=0.5)
    fade.observe(solve_rate=1.0, entropy=3.0)
    assert fade.delta == 0.5 and fade.alpha == pytest.approx(fade_alpha_of(fade.p_hat))


def fade_alpha_of(p):
    return min(max(3 * (1 - p) / (2 * p), 1), 3)


def test_fade_advantage_uses_current_alpha_delta():
    fade = A.build("fade", target_entropy=1.0)
    fade.observe(solve_rate=0.2, entropy=0.6)
    r = binary_groups(8, seed=1)
    expected = A.build("power_asym", alpha=fade.alpha, delta=fade.delta)(r)
    assert torch.allclose(fade(r), expected, atol=1e-12)
    assert fade.delta == pytest.approx(0.6)


def test_fade_state_dict_round_trip():
    fade = A.build("fade")
    for s, h in [(0.1, 1.4), (0.2, 1.0), (0.35, 0.5)]:
        fade.observe(solve_rate=s, entropy=h)
    state = fade.state_dict()
    fresh = A.build("fade")
    fresh.load_state_dict(state)
    assert (fresh.alpha, fresh.delta, fresh.state_dict()) == (fade.alpha, fade.delta, state)
    r = binary_groups(4, seed=0)
    assert torch.equal(fresh(r), fade(r))
    with pytest.raises(ValueError, match="keys"):
        fresh.load_state_dict({"method": "fade", "p_hat": 0.5})
    unobserved = A.build("fade")
    again = A.build("fade")
    again.load_state_dict(unobserved.state_dict())
    assert again.p_hat is None
    with pytest.raises(ValueError):
        fresh.observe(solve_rate=1.5)
    with pytest.raises(ValueError):
        fresh.observe(entropy=torch.ones(3))
    fresh.observe(solve_rate=torch.tensor(0.5), entropy=torch.tensor(1.0))
