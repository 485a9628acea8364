"""The study's claims on synthetic training records and tables whose right verdict is known."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from fade_core import advantages, config, decomposition, study_runtime
from fade_core import claims as cl
from fade_core import study as st

STEPS = 60


def _runs(label: str, seeds: list[int], *, slope: float = -0.1, noise: float = 0.0, m_s: float = 0.1,
          m_f: float = 0.1, rank1: float = 0.5, rank1_noise: float = 0.0, zero_var: float = 0.5,
          columns_drop: tuple[str, ...] = ()) -> pd.DataFrame:
    """Training records of one arm: entropy = 2 + slope/100 * step (+ per-seed slope noise)."""
    rows = []
    for seed in seeds:
        rng = np.random.default_rng(seed + 1000 * len(label))
        s = slope + noise * rng.standard_normal()
        r1 = rank1 + rank1_noise * rng.standard_normal()
        for step in range(1, STEPS + 1):
            rows.append(dict(run_id=f"{label}-s{seed}-0000abcd", method=label, seed=seed, step=step, lr=1e-3,
                             entropy=2.0 + s * step / 100.0, m_s=m_s, m_f=m_f,
                             rank1_frac=r1 if step % 10 == 0 else math.nan, zero_var_frac=zero_var))
    return pd.DataFrame(rows).drop(columns=list(columns_drop))


def _sign_axis(succ_slope: float, fail_slope: float, noise: float, seeds=(0, 1, 2), **kw) -> pd.DataFrame:
    return pd.concat([
        _runs("asym_d2", list(seeds), slope=succ_slope, noise=noise, m_s=0.2, m_f=0.1, **kw),
        _runs("asym_d1", list(seeds), slope=(succ_slope + fail_slope) / 2, noise=noise, **kw),
        _runs("asym_d0_5", list(seeds), slope=fail_slope, noise=noise, m_s=0.1, m_f=0.2, **kw),
    ], ignore_index=True)


# ------------------------------------------------------------------------------------------ arms
def test_study_arms_cover_the_axes_and_validate():
    arms = st.study_arms()
    assert {d: arms[x].params["delta"] for d, x in cl.SIGN_AXIS.items()} == {0.5: 0.5, 1.0: 1.0, 2.0: 2.0}
    assert all(arms[x].method == "asym_grpo" for x in cl.SIGN_AXIS.values())
    assert arms["power_a2"].params == {"alpha": 2.0} and arms["power_a3"].params == {"alpha": 3.0}
    # FADE's entropy target is set for the study (st.FADE_TARGET_FRACTION) and the ablations carry the same one,
    # so each differs from fade in one schedule only
    assert arms["fade"].params == {"target_fraction": st.FADE_TARGET_FRACTION} and st.FADE_TARGET_FRACTION != 0.5
    assert arms["fade_fixed_alpha"].params == {**arms["fade"].params, "fixed_alpha": 2.0}
    assert arms["fade_fixed_delta"].params == {**arms["fade"].params, "fixed_delta": 1.0}
    assert set(st.OTHER_METHODS) <= set(arms) and set(cl.FADE_ARMS) <= set(arms)
    assert arms["pkpo_sloo1"].method == "pkpo" and "pkpo" not in arms and arms["dr_grpo"].method == "dr_grpo"
    assert set(st.DEFAULT_ARMS) <= set(arms) and set(st.ARM_NOTES) <= set(arms)
    # the default arms hold every arm a claim or check reads
    assert set(cl.SIGN_AXIS.values()) | set(cl.DIFFICULTY_AXIS.values()) | set(cl.FADE_ARMS) | set(cl.AA_ARMS) <= set(
        st.DEFAULT_ARMS)
    cfg = config.from_dict({"pipeline": {"arms": {k: a.model_dump() for k, a in arms.items()}}})
    assert list(cfg.pipeline.arms) == list(arms)


def test_alpha_one_arm_is_power_alpha_one():
    """The shared reference arm asym_grpo(delta=1) is exactly power(alpha=1)."""
    r = (torch.rand(64, 8, generator=torch.Generator().manual_seed(0)) < 0.4).double()
    a = advantages.build("asym_grpo", delta=1.0)(r)
    b = advantages.build("power", alpha=1.0)(r)
    assert torch.allclose(a, b)
    assert advantages.build("asym_grpo", delta=1.0).loss_agg == advantages.build("power", alpha=1.0).loss_agg


def test_select_arms():
    assert list(st.select_arms(["asym_d2", "fade"])) == ["asym_d2", "fade"]
    assert list(st.select_arms(None)) == list(st.DEFAULT_ARMS)
    with pytest.raises(ValueError, match="nope"):
        st.select_arms(["fade", "nope"])


# ---------------------------------------------------------------------------------- sign axis
def test_success_biased_collapses_faster_agrees():
    c = cl.claim_entropy_collapse(_sign_axis(-0.8, -0.1, noise=0.02))
    assert c.verdict == cl.AGREES, c.reason
    assert c.values["diff"] == pytest.approx(-0.7, abs=0.1)
    assert "asym_d2" in c.measurement and "m_S/m_F" in c.measurement


def test_entropy_reversed_disagrees():
    c = cl.claim_entropy_collapse(_sign_axis(-0.1, -0.8, noise=0.02))
    assert c.verdict == cl.DISAGREES, c.reason


def test_overlapping_seeds_inconclusive():
    c = cl.claim_entropy_collapse(_sign_axis(-0.3, -0.25, noise=0.5))
    assert c.verdict == cl.INCONCLUSIVE
    assert "no difference detected at family-wise 5%" in c.reason and "[95% CI " in c.reason
    lo, hi = c.values["ci"]
    assert lo < 0 < hi and c.values["p"] > 0.05 and "[95% CI " in c.measurement


def test_one_seed_inconclusive():
    c = cl.claim_entropy_collapse(_sign_axis(-0.8, -0.1, noise=0.0, seeds=(0,)))
    assert c.verdict == cl.INCONCLUSIVE and "fewer than 2 seeds" in c.reason


def test_too_few_steps_for_a_slope_inconclusive():
    train = _sign_axis(-0.8, -0.1, noise=0.02)
    c = cl.claim_entropy_collapse(train[train["step"] <= 2])
    assert c.verdict == cl.INCONCLUSIVE
    assert "no finite value for asym_d2 and asym_d0_5" in c.reason and "3 logged steps" in c.reason


def test_missing_metric_and_arm_inconclusive_with_reason():
    c = cl.claim_entropy_collapse(_sign_axis(-0.8, -0.1, noise=0.02, columns_drop=("entropy",)))
    assert c.verdict == cl.INCONCLUSIVE and "no entropy column" in c.reason
    c = cl.claim_rank1_funnel(_sign_axis(-0.8, -0.1, noise=0.02, columns_drop=("rank1_frac",)))
    assert c.verdict == cl.INCONCLUSIVE and "rank-1" in c.reason
    only = _runs("asym_d2", [0, 1, 2])
    c = cl.claim_entropy_collapse(only)
    assert c.verdict == cl.INCONCLUSIVE and "asym_d0_5" in c.reason
    c = cl.claim_entropy_collapse(pd.DataFrame())
    assert c.verdict == cl.INCONCLUSIVE


def test_rank1_funnel():
    train = pd.concat([_runs("asym_d0_5", [0, 1, 2], rank1=0.9, rank1_noise=0.01),
                       _runs("asym_d2", [0, 1, 2], rank1=0.6, rank1_noise=0.01)])
    c = cl.claim_rank1_funnel(train)
    assert c.verdict == cl.AGREES, c.reason
    assert c.values["diff"] == pytest.approx(0.3, abs=0.05)
    train = pd.concat([_runs("asym_d0_5", [0, 1, 2], rank1=0.6, rank1_noise=0.01),
                       _runs("asym_d2", [0, 1, 2], rank1=0.9, rank1_noise=0.01)])
    assert cl.claim_rank1_funnel(train).verdict == cl.DISAGREES


def _drift_runs(n_runs: int, *, predictive: bool, with_cov: bool, steps: int = 200) -> pd.DataFrame:
    rows = []
    labels = list(cl.SIGN_AXIS.values())
    for i in range(n_runs):
        rng = np.random.default_rng(i)
        h, lr = 2.0, 0.5
        label = labels[i % len(labels)]
        for step in range(1, steps + 1):
            m_s, m_f = rng.uniform(0.0, 0.3), rng.uniform(0.0, 0.3)
            cov = rng.normal(0.0, 0.2)
            rows.append(dict(run_id=f"{label}-s{i}-0000abcd", method=label, seed=i, step=step, lr=lr, entropy=h,
                             m_s=m_s, m_f=m_f, **({"cov_adv_logprob": cov} if with_cov else {})))
            pred = -lr * cov  # the spec's first-order drift; m_S, m_F play no part
            h = h + (pred + rng.normal(0, 0.005) if predictive else rng.normal(0, 0.1))
    return pd.DataFrame(rows)


def test_drift_with_covariance_agrees_or_disagrees():
    good = cl.claim_entropy_drift(_drift_runs(4, predictive=True, with_cov=True))
    assert good.verdict == cl.AGREES, good.reason
    assert good.values["mean_r"] > 0.9 and good.values["covariance_logged"]
    bad = cl.claim_entropy_drift(_drift_runs(6, predictive=False, with_cov=True))
    assert bad.verdict == cl.DISAGREES, bad.reason
    assert abs(bad.values["mean_r"]) < 0.25


def test_drift_uses_the_sign_axis_runs_only():
    """codapo's second update (and dapo's refill, bbg's masks) break the one-step prediction: other arms are
    left out, so unpredictable records of another arm do not change the verdict."""
    good = _drift_runs(4, predictive=True, with_cov=True)
    other = _drift_runs(6, predictive=False, with_cov=True).assign(method="codapo")
    other["run_id"] = other["run_id"].str.replace("asym_", "codapo_", regex=False)
    c = cl.claim_entropy_drift(pd.concat([good, other], ignore_index=True))
    assert c.verdict == cl.AGREES and len(c.values["r_per_run"]) == 4


def test_drift_measurement_keeps_r_when_the_slope_is_undefined():
    run = pd.DataFrame(dict(run_id="asym_d2-s0-0000abcd", method="asym_d2", step=[1, 2, 3, 4], lr=1.0, m_s=0.1,
                            m_f=0.1, entropy=[1.0, 0.9, 0.8, 0.7], cov_adv_logprob=0.0))
    c = cl.claim_entropy_drift(run)  # prediction identically 0: no slope, no r
    assert "Pearson r" in c.measurement and "pooled slope n/a" in c.measurement


def test_drift_without_covariance_is_inconclusive_and_says_what_is_missing():
    train = _drift_runs(3, predictive=True, with_cov=False)
    c = cl.claim_entropy_drift(train)
    assert c.verdict == cl.INCONCLUSIVE
    assert "cov_adv_logprob" in c.reason and "not tested" in c.reason
    assert c.values["covariance_logged"] is False


def test_drift_ignores_the_sign_term():
    """The corrected spec has no (m_S - m_F) H term: entropy that follows eta (m_S - m_F) H while the covariance
    is noise is not predicted (the old formula's term would have made it agree)."""
    rows = []
    for i, label in enumerate(cl.SIGN_AXIS.values()):
        rng, h = np.random.default_rng(10 + i), 2.0
        for step in range(1, 201):
            m_s, m_f, cov = rng.uniform(0, 0.3), rng.uniform(0, 0.3), rng.normal(0, 0.2)
            rows.append(dict(run_id=f"{label}-s{i}-0000abcd", method=label, seed=i, step=step, lr=0.5, entropy=h,
                             m_s=m_s, m_f=m_f, cov_adv_logprob=cov))
            h += 0.5 * (m_s - m_f) * h
    c = cl.claim_entropy_drift(pd.DataFrame(rows))
    assert c.verdict == cl.DISAGREES and abs(c.values["mean_r"]) < 0.25


def test_drift_pairs_skip_gaps():
    run = pd.DataFrame(dict(step=[1, 2, 4, 5], entropy=[1.0, 0.9, 0.7, 0.6], lr=0.5, m_s=0.2, m_f=0.1,
                            cov_adv_logprob=[0.2, 0.4, -0.2, 0.0]))
    pairs = decomposition.drift_pairs(run, {"entropy": "entropy", "lr": "lr", "cov": "cov_adv_logprob"})
    assert pairs["step"].tolist() == [1.0, 4.0]
    assert pairs["measured"].tolist() == pytest.approx([-0.1, -0.1])
    assert pairs["predicted"].tolist() == pytest.approx([-0.5 * 0.2, -0.5 * -0.2])


# ---------------------------------------------------------------------------- difficulty + FADE
def _pass_table(spec: dict[str, tuple[float, float]], seeds=(0, 1, 2), noise: float = 0.005) -> pd.DataFrame:
    """pass_at_k rows: per arm (pass@1, pass@4) at the final step 20 (step 10 is worse, must be ignored)."""
    rows = []
    for label, (p1, p4) in spec.items():
        for seed in seeds:
            eps = noise * (seed - 1)
            for step, scale in ((10, 0.5), (20, 1.0)):
                for k, v in ((1, p1), (4, p4)):
                    rows.append(dict(run_id=f"{label}-s{seed}-0000abcd", method=label, seed=seed, step=step,
                                     benchmark="countdown", bucket="all", k=k, pass_at_k=scale * v + eps))
                rows.append(dict(run_id=f"{label}-s{seed}-0000abcd", method=label, seed=seed, step=step,
                                 benchmark="countdown", bucket="easy", k=1, pass_at_k=0.99))
    return pd.DataFrame(rows)


def test_difficulty_axis():
    tables = {"pass_at_k": _pass_table({"asym_d1": (0.30, 0.50), "power_a2": (0.31, 0.55), "power_a3": (0.30, 0.60)})}
    train = pd.concat([_runs("asym_d1", [0, 1, 2], zero_var=0.6), _runs("power_a3", [0, 1, 2], zero_var=0.4)])
    claims = {c.id: c for c in cl.claims_difficulty(train, tables, "countdown")}
    assert claims["difficulty_passk_a3"].verdict == cl.AGREES, claims["difficulty_passk_a3"].reason
    assert claims["difficulty_passk_a3"].values["k"] == 4
    assert claims["difficulty_passk_a3"].values["diff"] == pytest.approx(0.10, abs=1e-9)
    assert claims["difficulty_pass1_a3"].verdict == cl.INCONCLUSIVE  # equal pass@1
    # +0.01 with seed sd 0.005 over 3 seeds: Welch t = 2.45 > sqrt(3), which the old "exceeds sqrt(sd_a^2 + sd_b^2)"
    # rule called agreement; the test's two-sided p is ~0.07 (t with 4 df): inconclusive
    assert claims["difficulty_pass1_a2"].verdict == cl.INCONCLUSIVE, claims["difficulty_pass1_a2"].reason
    assert 0.05 < claims["difficulty_pass1_a2"].values["p"] < 0.1
    assert claims["difficulty_pass1_a2"].values["ci_over"] == "seeds"  # no pass_at_k_problem table: per run
    assert claims["difficulty_passk_a2"].values["diff"] == pytest.approx(0.05, abs=1e-9)
    assert "pass@4" in claims["difficulty_passk_a2"].statement
    assert claims["difficulty_signal"].verdict == cl.AGREES
    assert claims["difficulty_signal"].values["diff"] == pytest.approx(0.2)
    missing = {c.id: c for c in cl.claims_difficulty(pd.DataFrame(), {}, "countdown")}
    assert all(c.verdict == cl.INCONCLUSIVE for c in missing.values())


def _peak(spec: dict[str, tuple[float, float]], seeds=(0, 1, 2)) -> pd.DataFrame:
    rows = []
    for label, (step, p1) in spec.items():
        for seed in seeds:
            rows.append(dict(run_id=f"{label}-s{seed}-0000abcd", method=label, seed=seed, benchmark="countdown",
                             peak_step=step + seed, peak_pass_at_1=p1 + 0.002 * seed, final_pass_at_1=p1))
    return pd.DataFrame(rows)


def test_frontier_needs_both_significant():
    """pass@1 clearly better but pass@k only +0.002 (seed sd 0.005): not 'together', so inconclusive."""
    peak = _peak({"fade": (10, 0.50), "power_a2": (60, 0.45)})
    tables = {"peak": peak, "pass_at_k": _pass_table({"fade": (0.50, 0.692), "power_a2": (0.45, 0.69)})}
    c = {c.id: c for c in cl.claims_fade(tables, "countdown")}["fade_frontier"]
    assert c.verdict == cl.INCONCLUSIVE, c.reason


def test_final_pass_at_k_reads_each_run_at_its_last_evaluated_step():
    """Rollout budgets end runs at different steps: a run that stopped at step 10 is read at step 10, the
    others at step 20 (not all pulled back to a common step)."""
    pk = _pass_table({"asym_d1": (0.30, 0.50), "power_a3": (0.30, 0.60)})
    pk = pk[~((pk["run_id"] == "power_a3-s0-0000abcd") & (pk["step"] == 20))]
    fin, k = cl.final_pass_at_k({"pass_at_k": pk}, "countdown", 1)
    assert k == 1 and len(fin) == 6
    assert sorted(fin[fin["method"] == "power_a3"]["step"]) == [10, 20, 20]
    assert set(fin[fin["method"] == "asym_d1"]["step"]) == {20}


def test_compute_claims_render_and_json():
    train = _sign_axis(-0.8, -0.1, noise=0.02)
    claims = cl.compute_claims(train, {}, arms=st.study_arms(), benchmark="countdown")
    ids = [c.id for c in claims]
    assert ids[:4] == ["testbed_headroom", "sign_entropy", "sign_rank1", "sign_drift"] and len(ids) == len(set(ids)) == 15
    assert ids[-1] == "aa_control" and ids.index("fade_schedule_engaged") == ids.index("fade_time_to_threshold") - 1
    md = st.render_study_md(claims, command="fade study run --quick", runtime_s=3725, sittings=2,
                            timings={"train": 100.0}, figures={"training_curves": "reports/default/figures/training_curves.png"},
                            arms=st.study_arms(), seeds=[0, 1, 2], n_samples=128, quick=True)
    assert "fade study run --quick" in md and "1 h 02 min over 2 sitting(s)" in md
    assert md.count("| **") == len(claims)
    assert "seed-to-seed spread" not in md and "Holm-adjusted p is at most 0.05" in md and "| p (Holm) |" in md
    assert ("(of 12 claims, Holm over 2). Checks: testbed_headroom inconclusive, fade_schedule_engaged inconclusive, "
            "aa_control inconclusive.") in md
    html = st.render_claims_html(claims)
    assert "<th>p (Holm)</th>" in html and html.count("<tr><td>") == len(claims) and "Holm over 2" in html
    assert "![training_curves](reports/default/figures/training_curves.png)" in md and "Smoke run" in md
    assert "`asym_d0_5` = asym_grpo(delta=0.5)" in md
    data = json.loads(st.claims_json(claims, command="x"))
    assert [c["id"] for c in data["claims"]] == ids
    assert data["claims"][1]["verdict"] == cl.AGREES
    drift = data["claims"][3]["values"]
    assert drift["covariance_logged"] is False  # nan-free JSON (nan -> null)


def test_sign_axis_figure(tmp_path):
    assert st.fig_sign_axis(pd.DataFrame()) is None
    assert st.fig_sign_axis(_runs("rloo", [0])) is None
    fig = st.fig_sign_axis(_sign_axis(-0.8, -0.1, noise=0.02))
    paths = st.save_figure(fig, tmp_path / "figures" / "study_sign_axis", ["png", "svg"])
    assert paths["png"].stat().st_size > 5_000 and paths["svg"].read_text().startswith("<?xml")


# ------------------------------------------------------------------------------- flow helpers
def test_study_overrides_defaults_quick_and_user_win(tmp_path):
    from flows import study as flow_study

    params = tmp_path / "params.yaml"
    params.write_text("pipeline:\n  seeds: [5]\neval:\n  n_samples: 32\n")
    sets = flow_study.study_overrides(str(params), ["eval.max_problems=3"])
    cfg = config.load(params, sets)
    assert cfg.pipeline.name == "study" and cfg.pipeline.seeds == [5, 6, 7, 8, 9] and cfg.train.steps == 600
    assert cfg.eval.n_samples == 128 and cfg.eval.skip_existing and cfg.eval.max_problems == 3
    assert list(cfg.pipeline.arms) == list(st.DEFAULT_ARMS)
    assert cfg.pipeline.arms["asym_d0_5"].params == {"delta": 0.5}
    # periodic validation pass@1 (the sweep's criterion), the last checkpoint evaluated, budgets in rollouts
    assert cfg.train.eval_every == 10 and cfg.train.eval_split == "validation" and cfg.eval.checkpoints == "last"
    assert cfg.train.max_rollouts == cfg.train.steps * cfg.train.prompts_per_step * cfg.train.group_size
    assert cfg.train.prompts_per_step == flow_study.STUDY_PROMPTS_PER_STEP == 8 and cfg.train.max_rollouts == 76800
    wide = config.load(params, flow_study.study_overrides(str(params), ["train.prompts_per_step=32"]))
    assert wide.train.prompts_per_step == 32 and wide.train.max_rollouts == 600 * 32 * 16  # the user's --set wins
    # RL samples a fixed pool of the first 50 easy training problems, and STUDY.md's testbed line says so
    assert cfg.train.problem_pool == flow_study.STUDY_PROBLEM_POOL == 50
    assert "on a fixed pool of its first 50 training problems (train.problem_pool; ~96 visits per problem in " \
           "600 steps)" in st.testbed_text(cfg)
    assert config.load(params, flow_study.study_overrides(str(params), ["train.problem_pool=null"])).train.problem_pool is None
    # RL on the easy level, evaluation on every level, and STUDY.md says so
    assert cfg.train.levels == ["easy"] and cfg.eval.split == "test"
    text = st.testbed_text(cfg)
    assert "RL trains on the easy level(s) only" in text and "medium (4 numbers in 1..9" in text
    assert "warm start of 2000 supervised steps at correct_fraction 0.8" in text
    assert "- testbed: countdown" in st.render_study_md([], command="fade study run", runtime_s=1.0, testbed=text)
    assert config.load(params, flow_study.study_overrides(str(params), ["train.levels=null"])).train.levels is None
    quick = config.load(params, flow_study.study_overrides(str(params), None, quick=True, arms=["fade", "rloo"]))
    assert quick.pipeline.seeds == [0, 1] and quick.eval.n_samples == 16 and list(quick.pipeline.arms) == ["fade", "rloo"]
    assert quick.train.max_rollouts == 20 * quick.train.prompts_per_step * quick.train.group_size  # quick's 20 steps
    steps = config.load(params, flow_study.study_overrides(str(params), ["train.steps=7", "train.group_size=4"]))
    assert steps.train.max_rollouts == 7 * steps.train.prompts_per_step * 4  # follows the user's train section
    user = config.load(params, flow_study.study_overrides(str(params), ["pipeline.seeds=[0]", "eval.n_samples=4",
                                                                        "eval.ks=[1, 2]"], quick=True))
    assert user.pipeline.seeds == [0] and user.eval.n_samples == 4
    with pytest.raises(ValueError, match="unknown study arm"):
        flow_study.study_overrides(str(params), None, arms=["grpo_typo"])


def test_study_command_and_runtime_ledger(tmp_path):
    from flows import study as flow_study

    cmd = flow_study.study_command("p.yaml", ["eval.ks=[1, 2]"], True, ["fade", "rloo"], "out")
    assert cmd == "fade study run --quick --arms fade,rloo --results out --params p.yaml --set 'eval.ks=[1, 2]'"
    assert flow_study.study_command("params.yaml", None, False, None, "results") == "fade study run"
    assert flow_study.study_command("params.yaml", None, False, None, "results", [3e-4, 1e-3]) == (
        "fade study run --lrs 0.0003,0.001")
    assert study_runtime.record_sitting(tmp_path, 60.0, False) == (60.0, 1)
    assert study_runtime.record_sitting(tmp_path, 30.5, False) == (90.5, 2)
    assert json.loads((tmp_path / "runtime.json").read_text())["total_seconds"] == 90.5
    # a sitting without stage times: only the last sitting's stages can be stated
    assert study_runtime.stage_seconds(tmp_path) == (None, False)
    study_runtime.record_sitting(tmp_path, 10.0, False, {"train": 7.0, "report": 3.0})
    assert study_runtime.stage_seconds(tmp_path) == ({"train": 7.0, "report": 3.0}, False)
    other = tmp_path / "other"
    other.mkdir()
    study_runtime.record_sitting(other, 100.0, False, {"train": 90.0, "report": 10.0})
    study_runtime.record_sitting(other, 5.0, False, {"train": 1.5, "evaluate": 2.0, "report": 1.5})
    assert study_runtime.stage_seconds(other) == ({"train": 91.5, "report": 11.5, "evaluate": 2.0}, True)
    md = st.render_study_md([], command="fade study run", runtime_s=105.0, sittings=2, timings={"train": 91.0},
                            timings_all=True, sitting_seconds=[100.0, 5.0])
    assert "stages (summed over the sittings): train 1 min 31 s" in md
    assert "- run time: 1 min 45 s over 2 sitting(s) (1 min 40 s, 0 min 05 s)" in md
    one = st.render_study_md([], command="fade study run", runtime_s=105.0, sittings=1, sitting_seconds=[105.0])
    assert "- run time: 1 min 45 s over 1 sitting(s)\n" in one


def test_a_stopped_study_sitting_is_recorded_and_counted(tmp_path, monkeypatch):
    """A sitting stopped by Ctrl-C / SIGTERM (or a failure) still adds its time to runtime.json, with the stages it
    finished (the sweep here) and the rest under INTERRUPTED_STAGE, and the interruption is re-raised; the
    sitting that then finishes the study adds to the same total."""
    import logging

    from flows import study as flow_study

    cfg = config.load("params.yaml", flow_study.study_overrides("params.yaml", ["pipeline.seeds=[0]"]))

    class _Sweep:
        def with_options(self, **_kw):
            return lambda *_a, **_k: {"choices": {}, "timings": {"warmstart": 0.0}}

    class _Stopped:
        def with_options(self, **_kw):
            def run(*_a, **_k):
                raise KeyboardInterrupt

            return run

    monkeypatch.setattr(flow_study, "get_run_logger", lambda: logging.getLogger("t"))
    monkeypatch.setattr(flow_study, "lr_sweep_phase", _Sweep())
    monkeypatch.setattr(flow_study, "task_runner", lambda _cfg: None)
    monkeypatch.setattr(flow_study.lr_sweep, "with_chosen_lrs", lambda arms, _choices: dict(arms))
    import flows.pipeline as fp

    monkeypatch.setattr(fp, "pipeline", _Stopped())
    with pytest.raises(KeyboardInterrupt):
        flow_study.study.fn(cfg, str(tmp_path), False, "fade study run", [1e-4], 0)
    root = tmp_path / cfg.pipeline.name
    sittings = study_runtime.read_sittings(root / "runtime.json")
    assert len(sittings) == 1 and sittings[0]["interrupted"] is True
    assert set(sittings[0]["stages"]) == {"lr sweep", "warmstart", study_runtime.INTERRUPTED_STAGE}
    assert sum(sittings[0]["stages"].values()) == pytest.approx(sittings[0]["seconds"], abs=0.2)
    total, n = study_runtime.record_sitting(root, 50.0, False, {"train": 50.0})
    assert n == 2 and total == pytest.approx(sittings[0]["seconds"] + 50.0)
    assert "interrupted" not in study_runtime.read_sittings(root / "runtime.json")[1]
    # a runtime.json that cannot be read does not hide why the study stopped
    (root / "runtime.json").write_text("not json")
    with pytest.raises(KeyboardInterrupt):
        flow_study.study.fn(cfg, str(tmp_path), False, "fade study run", [1e-4], 0)


def test_final_pass_at_k_ignores_the_step_0_base_model_for_the_common_step():
    """The base model is evaluated at step 0 only: it must not drag every trained run back to step 0
    (the bug that left every final pass@k claim of the first real study without data)."""
    pk = _pass_table({"asym_d1": (0.30, 0.50), "power_a3": (0.30, 0.60)})
    base = pk[(pk["run_id"] == "asym_d1-s0-0000abcd") & (pk["step"] == 20)].assign(
        run_id="base", method="base", seed=0, step=0, pass_at_k=0.05)
    fin, k = cl.final_pass_at_k({"pass_at_k": pd.concat([pk, base])}, "countdown", 1)
    assert k == 1 and len(fin) == 7
    assert fin[fin["method"] == "base"]["pass_at_k"].tolist() == [0.05]
    assert fin[fin["method"] == "power_a3"]["pass_at_k"].tolist() == pytest.approx(
        pk[(pk["method"] == "power_a3") & (pk["step"] == 20) & (pk["k"] == 1) & (pk["bucket"] == "all")]["pass_at_k"].tolist())
    claims = {c.id: c for c in cl.claims_difficulty(pd.DataFrame(), {"pass_at_k": pd.concat([pk, base])}, "countdown")}
    assert claims["difficulty_passk_a3"].verdict == cl.AGREES, claims["difficulty_passk_a3"].reason


def test_budget_figure_plots_validation_pass1_against_rollouts(tmp_path):
    assert st.fig_budget(_runs("rloo", [0])) is None  # no eval_pass1 logged: nothing to draw
    rows = [dict(run_id=f"{m}-s{s}-0000abcd", method=m, seed=s, step=t, rollouts=r, optimizer_steps=2,
                 eval_pass1=0.1 + t / 1000 if t % 10 == 0 else math.nan)
            for m, r in (("fade", 512), ("codapo", 1024)) for s in (0, 1) for t in range(1, 41)]
    fig = st.fig_budget(pd.DataFrame(rows))
    lines = {ln.get_label(): ln for ln in fig.axes[0].lines if not ln.get_label().startswith("_")}
    assert set(lines) == {"fade", "codapo"}
    # codapo samples twice as much a step: its curve ends at twice the rollouts
    assert lines["codapo"].get_xdata()[-1] == 2 * lines["fade"].get_xdata()[-1] == 2 * 40 * 512
    paths = st.save_figure(fig, tmp_path / "budget", ["png"])
    assert paths["png"].stat().st_size > 5_000


def test_rewrite_study_needs_a_study_run_folder(tmp_path):
    """`fade study claims` keeps a run's command and time only where a `fade study run` left both its ledger and
    its claims.json; elsewhere (a DVC group, a damaged or foreign claims.json) it is not a rewrite."""
    assert st.rewrite_study(tmp_path, None, recomputed_by="fade study claims") is None
    study_runtime.record_sitting(tmp_path, 10.0, False)
    assert st.rewrite_study(tmp_path, None, recomputed_by="fade study claims") is None  # no claims.json
    (tmp_path / "claims.json").write_text("{not json")
    assert st.rewrite_study(tmp_path, None, recomputed_by="fade study claims") is None
    (tmp_path / "claims.json").write_text(json.dumps({"claims": []}))  # no command recorded
    assert st.rewrite_study(tmp_path, None, recomputed_by="fade study claims") is None
