"""The claims' statistics on synthetic data with a known answer: bootstrap-CI verdicts (a real difference
agrees, nulls rarely give a verdict), Holm over the family, the A/A control, and FADE's schedule check
gating the FADE claims."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fade_core import advantages
from fade_core import claims as cl
from fade_core import study as st
from fade_core.claims import checks
from fade_core.stats import compare_claim

SEEDS = (0, 1, 2)


def _tables(spec: dict[str, tuple[float, float]], *, problems: int = 40, seed_sd: float = 0.0,
            noise_sd: float = 0.02, seeds=SEEDS, rng_seed: int = 0) -> dict[str, pd.DataFrame]:
    """pass_at_k (per run) and pass_at_k_problem (per problem) at the final step 20 for k in {1, 4}; per arm
    (pass@1 level, pass@4 level): a per-problem score = difficulty of the problem + level + a per-run offset
    (sd ``seed_sd``) + noise, shared problem difficulties across arms."""
    rng = np.random.default_rng(rng_seed)
    difficulty = rng.uniform(-0.15, 0.15, size=problems)
    per_problem, per_run = [], []
    for label, levels in spec.items():
        for seed in seeds:
            offset = rng.normal(0, seed_sd) if seed_sd else 0.0
            run_id = f"{label}-s{seed}-0000abcd"
            for k, level in zip((1, 4), levels, strict=True):
                scores = np.clip(difficulty + level + offset + rng.normal(0, noise_sd, problems), 0, 1)
                per_problem += [dict(run_id=run_id, method=label, seed=seed, step=20, benchmark="countdown",
                                     problem_id=f"p{i}", k=k, pass_at_k=v) for i, v in enumerate(scores)]
                per_run.append(dict(run_id=run_id, method=label, seed=seed, step=20, benchmark="countdown",
                                    bucket="all", k=k, pass_at_k=float(scores.mean())))
    return {"pass_at_k": pd.DataFrame(per_run), "pass_at_k_problem": pd.DataFrame(per_problem)}


def _fade_records(alpha: np.ndarray, delta: np.ndarray, label: str = "fade", seeds=SEEDS) -> pd.DataFrame:
    rows = []
    for seed in seeds:
        for step, (a, d) in enumerate(zip(alpha, delta, strict=True), start=1):
            rows.append(dict(run_id=f"{label}-s{seed}-0000abcd", method=label, seed=seed, step=step, alpha=a, delta=d))
    return pd.DataFrame(rows)


def _pinned(steps: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """The issue's study: alpha rises to its cap 3 by step ~25 and stays; delta never goes below 0.97."""
    alpha = np.minimum(3.0, np.linspace(1.5, 4.5, steps))
    alpha[25:] = 3.0
    return alpha, np.linspace(1.0, 0.97, steps)


def _moving(steps: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """A schedule that runs: alpha falls from 3 to 1 as the solve rate rises, delta falls from 1 to 0.5."""
    return np.linspace(3.0, 1.0, steps), np.linspace(1.0, 0.5, steps)


# --------------------------------------------------------------------------------------- verdicts
def test_a_real_per_problem_difference_agrees_and_is_paired():
    tables = _tables({"asym_d1": (0.30, 0.50), "power_a2": (0.36, 0.58)}, seed_sd=0.01)
    c = {c.id: c for c in cl.claims_difficulty(pd.DataFrame(), tables, "countdown")}["difficulty_pass1_a2"]
    assert c.verdict == cl.AGREES, c.reason
    assert c.values["ci_over"] == "seeds and 40 problems (paired)"
    lo, hi = c.values["ci"]
    assert 0 < lo < 0.06 < hi and c.values["p"] < 0.01 and c.values["diff"] == pytest.approx(0.06, abs=0.02)
    assert "[95% CI" in c.measurement and "[95% CI" in c.reason


def test_problem_variation_widens_the_interval_when_seeds_agree():
    """Every run of an arm scores the same per-run mean, so a seeds-only interval has no width; resampling the
    problems (paired) gives the finite test set's uncertainty, so the table of problems is what is read."""
    tables = _tables({"asym_d1": (0.30, 0.50), "power_a2": (0.31, 0.51)}, noise_sd=0.0, problems=30)
    pp = tables["pass_at_k_problem"]
    pp.loc[pp["method"] == "power_a2", "pass_at_k"] += np.tile(np.repeat([0.2, -0.2], 15), 6)  # mean unchanged
    c = {c.id: c for c in cl.claims_difficulty(pd.DataFrame(), tables, "countdown")}["difficulty_pass1_a2"]
    assert c.values["ci_over"].endswith("(paired)") and c.values["ci"][1] - c.values["ci"][0] > 0.05
    assert c.verdict == cl.INCONCLUSIVE, c.reason
    per_run = {c.id: c for c in cl.claims_difficulty(pd.DataFrame(), {"pass_at_k": tables["pass_at_k"]},
                                                     "countdown")}["difficulty_pass1_a2"]
    assert per_run.values["ci_over"] == "seeds" and per_run.verdict == cl.AGREES  # no width over seeds


def test_arm_scores_use_the_final_step_and_the_shared_problems():
    tables = _tables({"rloo": (0.3, 0.5), "asym_d1": (0.3, 0.5)}, problems=5)
    pp = tables["pass_at_k_problem"]
    older = pp.assign(step=10, pass_at_k=-1.0)  # an earlier step must not be read
    pp = pp[~((pp["run_id"] == "rloo-s1-0000abcd") & (pp["problem_id"] == "p4"))]  # one run lacks p4
    tables["pass_at_k_problem"] = pd.concat([older, pp])
    fin, _ = cl.final_pass_at_k(tables, "countdown", 1)
    x = cl.arm_scores(tables, fin, "countdown", 1, ["rloo", "asym_d1"])
    assert x["rloo"].shape == x["asym_d1"].shape == (3, 4) and (x["rloo"] >= 0).all()


def test_nulls_rarely_give_a_verdict_with_three_seeds():
    """200 synthetic nulls (3 seeds per arm, no true difference): the share of decisive verdicts is near or
    below 5%, per run and per problem, where the old rule |diff| > sqrt(sd_a^2 + sd_b^2) gives ~16%."""
    rng = np.random.default_rng(11)
    sims, decisive, decisive_pp, old_rule = 200, 0, 0, 0
    for _ in range(sims):
        a, b = rng.normal(0, 1, 3), rng.normal(0, 1, 3)
        _c, verdict, _r, _t = compare_claim(a, b, +1, n_boot=400)
        decisive += verdict != cl.INCONCLUSIVE
        old_rule += abs(a.mean() - b.mean()) > math.sqrt(a.var(ddof=1) + b.var(ddof=1))
        problems = rng.uniform(0, 1, 30)
        xa = problems + rng.normal(0, 0.03, (3, 1)) + rng.normal(0, 0.05, (3, 30))
        xb = problems + rng.normal(0, 0.03, (3, 1)) + rng.normal(0, 0.05, (3, 30))
        decisive_pp += compare_claim(xa, xb, -1, n_boot=400)[1] != cl.INCONCLUSIVE
    # binomial sd at 200 sims around 0.05 is 0.015; the old rule lands far above the bound
    assert decisive / sims <= 0.08 and decisive_pp / sims <= 0.08, (decisive, decisive_pp)
    assert old_rule / sims >= 0.1


# ------------------------------------------------------------------------------------------ Holm
def _rank1_train(gap: float, sd: float = 0.02, seeds=(0, 1, 2, 3, 4)) -> pd.DataFrame:
    """Final rank-1 fractions per run, with fixed per-seed offsets, so the p-value is known in advance."""
    offsets = np.array([-1.2, -0.6, 0.0, 0.6, 1.2])[: len(seeds)] * sd
    rows = []
    for label, base, sign in (("asym_d0_5", 0.6 + gap, 1), ("asym_d2", 0.6, -1)):
        for s, off in zip(seeds, offsets, strict=True):
            rows.append(dict(run_id=f"{label}-s{s}-0000abcd", method=label, seed=s, step=10, rank1_frac=base + sign * off,
                             entropy=2.0 - 0.01 * s, zero_var_frac=0.5))
            rows.append(dict(run_id=f"{label}-s{s}-0000abcd", method=label, seed=s, step=1, rank1_frac=math.nan,
                             entropy=2.0, zero_var_frac=0.5))
    return pd.DataFrame(rows)


def test_holm_turns_a_borderline_agreement_inconclusive():
    borderline = cl.claim_rank1_funnel(_rank1_train(0.033))
    assert borderline.verdict == cl.AGREES and 0.01 < borderline.values["p"] < 0.04, borderline.values["p"]
    nulls = [cl.claim_rank1_funnel(_rank1_train(g)) for g in (0.0, 0.005)]
    assert all(c.values["p"] > 0.3 for c in nulls)
    family = cl.apply_holm([borderline, *nulls])
    assert len(family) == 3 and borderline.values["family"] == 3
    assert borderline.values["p_holm"] == pytest.approx(3 * borderline.values["p"])
    assert borderline.verdict == cl.INCONCLUSIVE and "no difference detected at family-wise 5%" in borderline.reason
    assert "Holm-adjusted p" in borderline.reason
    clear = cl.claim_rank1_funnel(_rank1_train(0.2))
    cl.apply_holm([clear, *nulls])
    assert clear.verdict == cl.AGREES  # a clear effect survives the correction


# ------------------------------------------------------------------------------------------- A/A
def test_aa_control_passes_on_identical_arms_and_fails_on_different_ones():
    same = _tables({"rloo": (0.30, 0.5), "asym_d1": (0.30, 0.5)}, seed_sd=0.01)
    c = cl.claim_aa_control(same, "countdown")
    assert c.verdict == cl.PASSES and c.reason.startswith("passes: no difference detected"), c.reason
    assert c.values["ci_over"].endswith("(paired)") and c.values["p_holm"] is None
    identical = dict(same)
    pp = same["pass_at_k_problem"]
    identical["pass_at_k_problem"] = pd.concat([pp[pp.method == "asym_d1"],
                                                pp[pp.method == "asym_d1"].assign(method="rloo", run_id=lambda d: "r" + d.run_id)])
    pk = same["pass_at_k"]
    identical["pass_at_k"] = pd.concat([pk[pk.method == "asym_d1"],
                                        pk[pk.method == "asym_d1"].assign(method="rloo", run_id=lambda d: "r" + d.run_id)])
    c = cl.claim_aa_control(identical, "countdown")
    assert c.verdict == cl.PASSES and c.values["diff"] == 0.0 and c.values["p"] > 0.9
    different = _tables({"rloo": (0.40, 0.5), "asym_d1": (0.30, 0.5)}, seed_sd=0.01)
    c = cl.claim_aa_control(different, "countdown")
    assert c.verdict == cl.FAILS
    assert c.reason.startswith("FAILS: the verdict machinery found a difference between two arms that are the same update")
    assert cl.claim_aa_control({}, "countdown").verdict == cl.INCONCLUSIVE


def test_aa_control_stays_out_of_holms_family():
    tables = _tables({"rloo": (0.40, 0.5), "asym_d1": (0.30, 0.5), "power_a2": (0.36, 0.58), "power_a3": (0.30, 0.5)},
                     seed_sd=0.01)
    claims = {c.id: c for c in cl.compute_claims(pd.DataFrame(), tables, arms=st.study_arms(), benchmark="countdown")}
    assert claims["aa_control"].verdict == cl.FAILS and claims["aa_control"].values["p_holm"] is None
    assert claims["difficulty_pass1_a2"].values["family"] == 4  # pass@1 and pass@4 of alpha = 2 and 3
    md = st.render_study_md(list(claims.values()), command="x", runtime_s=1.0)
    assert "aa_control FAILS" in md and "(unadjusted)" in md


# ------------------------------------------------------------------------------ FADE's schedule
def test_schedule_thresholds_match_fades_ranges():
    fade = advantages.build("fade")
    assert fade.params["alpha_max"] == cl.FADE_ALPHA_MAX and fade.params["delta_min"] < cl.DELTA_MAX_LOWEST < 1.0
    assert (cl.ALPHA_MIN_COVERAGE, cl.ALPHA_MAX_SHARE_AT_BOUND, cl.DELTA_MIN_COVERAGE, cl.DELTA_MAX_LOWEST) == (
        0.5, 0.9, 0.5, 0.9)


@pytest.mark.parametrize("case, engaged", [
    ("moving", True), ("pinned", False), ("narrow alpha", False), ("alpha at a bound", False), ("delta stays", False)])
def test_schedule_check(case, engaged):
    steps = 300
    alpha, delta = _moving(steps)
    if case == "pinned":
        alpha, delta = _pinned(steps)
    elif case == "narrow alpha":  # 1.2 to 1.9: 35% of [1, 3]
        alpha = np.linspace(1.9, 1.2, steps)
    elif case == "alpha at a bound":  # covers the range, but sits at 3 in 95% of steps
        alpha = np.full(steps, 3.0)
        alpha[:15] = np.linspace(1.0, 2.9, 15)
    elif case == "delta stays":
        delta = np.linspace(1.0, 0.85, steps)
    c = cl.claim_schedule_engaged(_fade_records(alpha, delta), st.study_arms())
    assert c.verdict == (cl.PASSES if engaged else cl.FAILS), c.reason
    assert len(c.values["runs"]) == 3


@pytest.mark.parametrize("h_target, lowest, engaged", [
    (0.28, 0.86, True),    # floor 0.72: 0.14 / 0.28 = 50% of [0.72, 1]
    (0.28, 0.87, False),   # 46%
    (None, 0.86, False),   # no H_target logged: the floor is delta_min 0.3, 0.14 / 0.7 = 20%
    (None, 0.65, True),    # 50% of [0.3, 1]
    (0.05, 0.95, False),   # the whole reachable range [0.95, 1], but delta moved only 0.05 (> DELTA_MAX_LOWEST)
    (0.15, 0.9, True),     # [0.85, 1]: 67%, and 0.9 is low enough
])
def test_schedule_check_measures_delta_against_its_reachable_range(h_target, lowest, engaged):
    alpha, _ = _moving()
    delta = np.linspace(1.0, lowest, len(alpha))
    records = _fade_records(alpha, delta)
    if h_target is not None:
        records = records.assign(h_target=h_target)
    c = cl.claim_schedule_engaged(records, st.study_arms())
    assert c.verdict == (cl.PASSES if engaged else cl.FAILS), c.reason
    floor = 0.3 if h_target is None else max(0.3, 1 - h_target)
    for r in c.values["runs"].values():
        assert r["delta_coverage"] == pytest.approx((1 - lowest) / (1 - floor))
    assert f"covered {(1 - lowest) / (1 - floor):.0%} of its reachable range at worst" in c.values["summary"]


def test_schedule_check_states_delta_floor_of_a_low_entropy_policy():
    """With H_target = 0.28 nats (half a first entropy of 0.56), delta cannot go below 0.72: the check says so."""
    alpha, delta = _pinned()
    records = _fade_records(alpha, delta).assign(h_target=0.28)
    c = cl.claim_schedule_engaged(records, st.study_arms())
    assert c.verdict == cl.FAILS
    assert all(r["delta_floor"] == pytest.approx(0.72) for r in c.values["runs"].values())
    assert "its floor at zero entropy: 0.72, with H_target 0.28 nats" in c.measurement
    assert "H_hat's lowest" not in c.measurement and "p_hat's highest" not in c.measurement  # not logged here


def test_schedule_check_says_how_far_p_hat_and_h_hat_were_from_moving_the_schedule():
    """The measurement names the p_hat and H_hat a run reached against the values that would move alpha and
    delta (alpha = 3 (1 - p)/(2 p): 3 at p = 1/3, 2 at 3/7; with H_target 0.28 delta covers half of [0.72, 1] at
    0.86, which needs H_hat <= 0.14)."""
    assert [round(checks.p_hat_for_alpha(a), 6) for a in (3.0, 2.0, 1.0)] == [round(1 / 3, 6), round(3 / 7, 6), 0.6]
    for a in (1.0, 1.7, 2.5, 3.0):  # the inverse of fade's own alpha formula
        p = checks.p_hat_for_alpha(a)
        assert 3 * (1 - p) / (2 * p) == pytest.approx(a)
    alpha, delta = _pinned()
    n = len(alpha)
    records = _fade_records(alpha, delta).assign(h_target=0.28)
    records["p_hat"] = np.tile(np.linspace(0.15, 0.33, n), len(records) // n)
    records["h_hat"] = np.tile(np.linspace(0.56, 0.31, n), len(records) // n)
    c = cl.claim_schedule_engaged(records, st.study_arms())
    assert c.verdict == cl.FAILS
    assert "p_hat's highest 0.33 (alpha leaves 3 above 0.333, reaches 2 at 0.429)" in c.measurement
    assert "H_hat's lowest 0.31 nats (delta <= 0.86 needs <= 0.14)" in c.measurement
    assert "p_hat reached 0.33 at most (alpha leaves 3 above 0.333)" in c.values["summary"]
    assert all(r["p_hat_max"] == pytest.approx(0.33) and r["h_hat_min"] == pytest.approx(0.31)
               for r in c.values["runs"].values())
    high = cl.claim_schedule_engaged(_fade_records(alpha, delta).assign(h_target=1.0), st.study_arms())
    assert all(r["delta_floor"] == pytest.approx(0.3) for r in high.values["runs"].values())  # delta_min's clip
    own = {**st.study_arms(), "fade": st.study_arms()["fade"].model_copy(update={"params": {"delta_min": 0.5}})}
    mine = cl.claim_schedule_engaged(_fade_records(alpha, delta).assign(h_target=1.0), own)
    assert all(r["delta_floor"] == pytest.approx(0.5) for r in mine.values["runs"].values())  # the arm's own clip


def _fade_tables() -> dict[str, pd.DataFrame]:
    """FADE clearly better than its ablations and the best static baseline on every metric."""
    return _tables({"fade": (0.50, 0.75), "power_a2": (0.45, 0.65), "fade_fixed_alpha": (0.40, 0.6),
                    "fade_fixed_delta": (0.40, 0.6)}, seed_sd=0.005)


def _curve(label: str, reach: int, plateau: float, steps: int = 300, seeds=SEEDS, per_step: int = 512) -> pd.DataFrame:
    """Training records with a validation curve every 10 steps: plateau x min(1, step / reach) (+ seed noise)."""
    rows = []
    for seed in seeds:
        for step in range(1, steps + 1):
            v = plateau * min(1.0, step / reach) + 0.003 * (seed - 1) if step % 10 == 0 else math.nan
            rows.append(dict(run_id=f"{label}-s{seed}-0000abcd", method=label, seed=seed, step=step, eval_pass1=v,
                             rollouts=per_step, optimizer_steps=2))
    return pd.DataFrame(rows)


def _fade_train(alpha: np.ndarray, delta: np.ndarray) -> pd.DataFrame:
    """FADE's schedule and a fast curve; the best static baseline (power_a2) reaches a little lower, later."""
    fade = _fade_records(alpha, delta).merge(_curve("fade", 50, 0.50, steps=len(alpha)), on=["run_id", "method", "seed",
                                                                                              "step"])
    return pd.concat([fade, _curve("power_a2", 250, 0.48, steps=len(alpha))], ignore_index=True)


def test_fade_claims_not_tested_when_the_schedule_is_pinned():
    """The issue's case: alpha at its cap 3, delta >= 0.97. Measured alone the FADE claims agree; gated by the
    schedule check, each is inconclusive, "not tested", and none is in Holm's family."""
    fade_ids = ["fade_time_to_threshold", "fade_frontier", "fade_vs_fixed_alpha", "fade_vs_fixed_delta"]
    alone = {c.id: c for c in cl.claims_fade(_fade_tables(), "countdown", st.study_arms(), _fade_train(*_pinned()))}
    assert [alone[i].verdict for i in fade_ids] == [cl.AGREES] * 4, [alone[i].reason for i in fade_ids]
    claims = {c.id: c for c in cl.compute_claims(_fade_train(*_pinned()), _fade_tables(), arms=st.study_arms(),
                                                 benchmark="countdown")}
    check = claims["fade_schedule_engaged"]
    assert check.verdict == cl.FAILS and "at 3 in 92% of steps" in check.measurement
    for i in fade_ids:
        c = claims[i]
        assert c.verdict == cl.INCONCLUSIVE, (i, c.reason)
        assert c.reason.startswith("not tested: FADE's schedule did not engage (alpha covered"), c.reason
        assert "delta's lowest value was 0.97" in c.reason and c.values["tested"] is False
        assert c.values["p_holm"] is None
    md = st.render_study_md(list(claims.values()), command="x", runtime_s=1.0)
    assert md.count("| not tested |") == 4 and "fade_schedule_engaged FAILS" in md


def test_fade_claims_judged_when_the_schedule_moves():
    claims = {c.id: c for c in cl.compute_claims(_fade_train(*_moving()), _fade_tables(), arms=st.study_arms(),
                                                 benchmark="countdown")}
    assert claims["fade_schedule_engaged"].verdict == cl.PASSES
    for i in ("fade_time_to_threshold", "fade_frontier", "fade_vs_fixed_alpha", "fade_vs_fixed_delta"):
        assert claims[i].verdict == cl.AGREES, (i, claims[i].reason)
        assert claims[i].values["family"] == 4 and "Holm-adjusted p" in claims[i].reason


def test_load_tables_reads_the_per_problem_scores(tmp_path):
    """The claims pair pass@k by problem only if the study loads pass_at_k_problem (its needed columns)."""
    import duckdb

    tables = _tables({"rloo": (0.3, 0.5), "asym_d1": (0.3, 0.5)}, problems=3)
    pp = tables["pass_at_k_problem"].assign(n=8, c=2, difficulty_level="easy")
    db = tmp_path / "results.duckdb"
    with duckdb.connect(str(db)) as con:
        con.register("pp", pp)
        con.register("pk", tables["pass_at_k"])
        con.execute("CREATE TABLE pass_at_k_problem AS SELECT * FROM pp")
        con.execute("CREATE TABLE pass_at_k AS SELECT * FROM pk")
    loaded = st.load_tables(db)
    assert set(loaded) == {"pass_at_k", "pass_at_k_problem"}
    assert list(loaded["pass_at_k_problem"].columns) == ["run_id", "method", "seed", "step", "benchmark", "problem_id",
                                                         "k", "pass_at_k"]
    assert cl.claim_aa_control(loaded, "countdown").values["ci_over"] == "seeds and 3 problems (paired)"
