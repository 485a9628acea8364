"""The report: metric-name resolution, colours, tables, figures reported missing (never drawn empty), HTML."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from fade_core import aggregate as agg
from fade_core import report as rep
from fade_core.store import SAMPLE_COLUMNS, ResultsStore


def _store(tmp_path, methods=("fade", "grpo"), seeds=(0, 1), steps=(10, 20), n=12):
    store = ResultsStore(tmp_path / "results")
    for m in methods:
        for s in seeds:
            for st in steps:
                c = (3 if m == "grpo" else 5) + s + st // 10
                rows = [dict(run_id=f"{m}-s{s}-0000abcd", method=m, seed=s, step=st, benchmark="countdown",
                             problem_id=f"p{p}", difficulty_level="easy", sample_index=i, completion=f"x{i % 3}",
                             status="passed" if i < c else "wrong", passed=i < c, reward=float(i < c), tokens=3,
                             finish_reason="stop", latency_s=0.0) for p in range(3) for i in range(n)]
                store.write(pd.DataFrame(rows, columns=list(SAMPLE_COLUMNS)))
    return store


def test_method_colors():
    colors = rep.method_colors(["grpo", "fade", "dr_grpo"], fade=["fade"])
    assert colors["fade"] == rep.figures.FADE_COLOR and len(set(colors.values())) == 3
    assert rep.method_colors(["grpo", "fade"], fade=["fade"]) == rep.method_colors(["fade", "grpo"], fade=["fade"])
    study = [f"m{i:02d}" for i in range(14)] + ["fade", "fade_fixed_alpha", "fade_fixed_delta"]
    assert len(set(rep.method_colors(study, fade=study[14:]).values())) == 17  # the study's arms: no colour twice


def test_headline_has_intervals_over_what_varies(tmp_path):
    store = _store(tmp_path)
    agg.aggregate(store.root, runs_dir=None, opts=agg.AggregateOptions(ks=(1, 10)))
    with agg.open_results(store.root) as con:
        long = rep.tables.headline_intervals(con)
        head = rep.headline_table(con)
        seeds = con.execute("SELECT seed, avg(pass_at_k) AS m FROM pass_at_k WHERE method = 'fade' AND step = 20 "
                            "AND k = 1 AND bucket = 'all' GROUP BY seed ORDER BY seed").df()
    assert head.method.tolist() == ["fade", "grpo"] and set(head["CI over"]) == {"seeds + problems"}
    fade1 = long[(long.method == "fade") & (long.k == 1)].iloc[0]
    # fade at step 20: c = 7, 8 of 12 on every problem -> pass@1 58.3 / 66.7 %: the mean of the two seeds
    assert fade1["mean"] == pytest.approx(seeds.m.mean()) and fade1.seeds == 2 and fade1.problems == 3
    assert 0.0 <= fade1.ci_low < fade1["mean"] < fade1.ci_high <= 1.0
    cell = head.loc[head.method == "fade", "pass@1 (%)"].item()
    assert re.fullmatch(r"62\.5 \[\d+\.\d, \d+\.\d\]; seeds 58\.3 / 66\.7", cell), cell  # each seed beside the mean
    # n = 12 < 2 * 10 on every problem of every method: the mark is on the column, not on each of its cells
    assert "pass@10 (%) †" in head.columns and not any(v.endswith("†") for v in head["pass@10 (%) †"])
    md = rep.markdown_table(head)
    assert md.splitlines()[0].startswith("| benchmark | method") and len(md.splitlines()) == 4


def test_too_few_samples_mark_goes_on_the_cells_that_have_it_or_on_a_column_that_all_have_it():
    def row(method, k, few, seeds):
        return dict(benchmark="b", method=method, final_step="9", seeds=len(seeds), problems=5, k=k, mean=0.5,
                    ci_low=0.4, ci_high=0.6, ci_over="seeds + problems", too_few_samples=few, per_seed=seeds)

    long = pd.DataFrame([row("a", 1, False, [0.4, 0.6]), row("a", 8, True, [0.4, 0.6]), row("a", 16, True, [0.4, 0.6]),
                         row("c", 1, False, [0.5]), row("c", 8, False, [0.5]), row("c", 16, True, [0.5]),
                         row("uniform", 16, False, [0.5])])  # exact: never flagged, and not counted
    head = rep.headline_table(long).set_index("method")
    assert list(head.columns[-3:]) == ["pass@1 (%)", "pass@8 (%)", "pass@16 (%) †"]
    assert head.loc["a", "pass@8 (%)"] == "50.0 [40.0, 60.0]; seeds 40.0 / 60.0 †"  # only the flagged cell
    assert head.loc["c", "pass@8 (%)"] == "50.0 [40.0, 60.0]" and head.loc["c", "pass@16 (%) †"] == "50.0 [40.0, 60.0]"


def test_key_comparisons_lead_with_each_method_against_base_and_fade_against_the_best_static():
    pairs = pd.DataFrame([dict(benchmark="b", k=1, method_a=a, method_b=b, mean_a=ma, mean_b=mb, diff=ma - mb,
                               ci_low=ma - mb - 0.01, ci_high=ma - mb + 0.02, p=p, p_holm=1.0, ci_over="x",
                               seeds_a=2, seeds_b=1, problems=9)
                          for a, b, ma, mb, p in [("base", "fade", 0.07, 0.09, 0.01), ("base", "grpo", 0.07, 0.05, 0.02),
                                                  ("fade", "grpo", 0.09, 0.05, 0.03), ("fade", "power2", 0.09, 0.1, 0.4),
                                                  ("base", "uniform", 0.07, 0.03, 0.001),
                                                  ("grpo", "power2", 0.05, 0.1, 0.04)]])
    key = rep.tables.key_comparisons(pairs, ["uniform"], [("b", "fade", "power2")])
    got = [(r.method_a, r.method_b, r.family) for r in key.itertuples()]
    assert got == [("fade", "base", "vs base"), ("grpo", "base", "vs base"), ("fade", "power2", "FADE vs best static")]
    fb = key.iloc[0]  # flipped: base - fade became fade - base, its interval too
    assert fb["diff"] == pytest.approx(0.02) and (fb.ci_low, fb.ci_high) == pytest.approx((-0.0, 0.03))
    from fade_core.stats import holm

    assert list(key.p_holm) == pytest.approx(holm([0.01, 0.02, 0.4]))  # Holm over these three rows only
    shown = rep.tables.comparisons_display(key, rep.tables.HOLM_KEY)
    assert "a - b (pp) [95% CI, unadjusted]" in shown.columns and "p (unadjusted)" in shown.columns
    assert rep.tables.HOLM_KEY in shown.columns


def test_one_seed_intervals_are_over_problems_and_pairs_get_holm(tmp_path):
    store = _store(tmp_path, methods=("fade", "grpo", "power"), seeds=(0,))
    agg.aggregate(store.root, runs_dir=None, opts=agg.AggregateOptions(ks=(1,)))
    with agg.open_results(store.root) as con:
        long = rep.tables.headline_intervals(con)
        pairs = rep.tables.comparisons(con)
    assert set(long.ci_over) == {"problems"}
    # every problem has the same score in this store: resampling problems cannot move the mean
    assert (long.ci_low == long["mean"]).all() and (long.ci_high == long["mean"]).all()
    assert len(pairs) == 3 and set(pairs.ci_over) == {"problems"}
    assert (pairs.p_holm >= pairs.p).all() and pairs.p_holm.max() <= 1.0
    fg = pairs[(pairs.method_a == "fade") & (pairs.method_b == "grpo")].iloc[0]
    assert fg["diff"] == pytest.approx(fg.mean_a - fg.mean_b) and fg["diff"] > 0 and fg.p < 0.01


def test_report_without_training_records_says_what_is_missing(tmp_path):
    store = _store(tmp_path)
    agg.aggregate(store.root, runs_dir=None, opts=agg.AggregateOptions(ks=(1, 10)))
    out = rep.build_report(store.root, tmp_path / "rep", rep.ReportInputs(formats=("svg",)))
    assert set(out["missing"]) == {"training_curves", "mass", "rank1_fraction", "fade_schedules"}
    # the atlas needs only the arms' methods (from the runs table when no run folder says more)
    assert set(out["figures"]) == {"pass_at_k_vs_step", "frontier", "peak_step", "distinct_correct", "atlas"}
    for files in out["figures"].values():  # svg asked for; png drawn too, for the page
        assert set(files) == {"svg", "png"}
        assert files["svg"].read_text().lstrip().startswith("<?xml")
    page = out["html"].read_text()
    assert page.count("data:image/png;base64,") == 5
    assert page.count("not available:") == 4 and "no training records" in page
    assert not re.search(r"src=['\"](https?:|//)", page)  # nothing is fetched from the network
    assert "(no data card found)" in page and "(no provenance recorded)" in page


def test_report_needs_aggregate(tmp_path):
    with pytest.raises(FileNotFoundError, match="fade aggregate"):
        rep.build_report(tmp_path / "nothing", tmp_path / "rep")


def test_fade_schedule_figure_shows_what_drives_alpha_and_delta():
    """alpha and delta, with p_hat against 1/3 and 0.6 and H_hat against H_target: why a schedule did not move."""
    import duckdb

    from fade_core.report import figures as figs

    rows = [(f"fade-s{s}", "fade", s, step, metric, value)
            for s in (0, 1) for step in range(1, 21)
            for metric, value in (("alpha", 3.0 - 0.05 * step), ("delta", 1.0), ("p_hat", 0.2 + 0.01 * step),
                                  ("h_hat", 0.56 - 0.01 * step), ("h_target", 0.28))]
    con = duckdb.connect()
    con.execute("CREATE TABLE train_curves (run_id VARCHAR, method VARCHAR, seed BIGINT, step BIGINT, "
                "metric VARCHAR, value DOUBLE)")
    con.executemany("INSERT INTO train_curves VALUES (?, ?, ?, ?, ?, ?)", rows)
    fig = figs.fig_fade_schedules(con, {"fade": "#123456"}, ["fade"])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 4 and titles[2].startswith("p_hat") and titles[3].startswith("H_hat")
    h_ax = fig.axes[3]
    assert any(line.get_linestyle() == "--" and set(line.get_ydata()) == {0.28} for line in h_ax.get_lines())
    con.execute("DELETE FROM train_curves WHERE metric IN ('p_hat', 'h_hat', 'h_target')")
    assert len([a for a in figs.fig_fade_schedules(con, {}, ["fade"]).axes if a.get_title()]) == 2
    assert figs.fig_fade_schedules(con, {}, ["not_a_fade_arm"]) is None


def _schedule_db(records):
    import duckdb

    con = duckdb.connect()
    con.register("records", pd.DataFrame(records))
    con.execute("CREATE TABLE train_steps AS SELECT * FROM records")
    return con


def test_schedule_check_says_when_fade_did_not_engage():
    """The report runs the study's schedule check on every FADE arm: a run whose alpha sat at 3 and delta at 1
    (pass rate under 1/3, entropy above target) is named as a fixed weighting; one that moved is engaged."""
    from fade_core.report.schedule import schedule_checks

    stuck = [dict(run_id=f"fade-s{s}-x", method="fade", seed=s, step=t, alpha=3.0, delta=1.0, h_target=0.6,
                  p_hat=0.1 + 0.001 * t, h_hat=1.1) for s in (0, 1) for t in range(1, 41)]
    moved = [dict(run_id="fade2-s0-y", method="fade2", seed=0, step=t, alpha=3.0 - 2.0 * t / 40,
                  delta=1.0 - 0.5 * t / 40, h_target=0.6, p_hat=0.3 + 0.01 * t, h_hat=1.0 - 0.02 * t)
             for t in range(1, 41)]
    con = _schedule_db(stuck + moved)
    checks = {c.label: c for c in schedule_checks(con, {"fade": ("fade", {}), "fade2": ("fade", {})})}
    assert checks["fade"].engaged is False and checks["fade2"].engaged is True
    assert "did NOT engage in 2 of 2 runs of arm fade" in checks["fade"].verdict
    assert "trained as Power(alpha=3), a fixed weighting" in checks["fade"].verdict
    assert "highest was 0.140" in checks["fade"].verdict  # why alpha did not move
    assert "under H_target (here 0.600-0.600 nats); these runs' lowest was 1.100" in checks["fade"].verdict
    assert "engaged in all 1 runs of arm fade2" in checks["fade2"].verdict
    assert list(checks["fade"].runs["schedule engaged"]) == ["NO", "NO"]
    none = schedule_checks(_schedule_db([dict(run_id="f", method="fade", seed=0, step=1)]), {"fade": ("fade", {})})
    assert none[0].engaged is None and "Not checked" in none[0].verdict


def test_report_page_shows_the_schedule_check_of_a_fade_arm(tmp_path):
    from fade_core.report.page import PageContent, render
    from fade_core.report.schedule import ScheduleCheck

    page = render(PageContent(title="t", headline=pd.DataFrame(),
                              schedule=[ScheduleCheck("fade", False, "FADE's schedule did NOT engage in 2 of 2 runs")]))
    assert "FADE's schedule: did alpha and delta adapt?" in page and "did NOT engage in 2 of 2 runs" in page
    assert "did alpha and delta adapt" not in render(PageContent(title="t", headline=pd.DataFrame()))


def test_sign_balance_panel_names_the_methods_whose_balance_is_measured_zero():
    import duckdb

    from fade_core.report.figures import fig_mass

    rows = [dict(run_id=f"{m}-s0", method=m, seed=0, step=t, metric=k, value=v)
            for t in range(1, 6) for m, (ms, mf) in {"grpo": (0.2, 0.2), "asym": (0.3, 0.1)}.items()
            for k, v in (("m_s", ms * t), ("m_f", mf * t))]
    con = duckdb.connect()
    con.register("rows", pd.DataFrame(rows))
    con.execute("CREATE TABLE train_curves AS SELECT * FROM rows")
    info: dict = {}
    assert fig_mass(con, {"grpo": "C0", "asym": "C1"}, info) is not None
    assert info["balanced"] == ["grpo"]  # asym's m_S > m_F: not balanced


def test_sign_balance_caption_says_zero_is_measured(tmp_path):
    from fade_core.report.page import PageContent, render

    svg = tmp_path / "mass.svg"
    svg.write_text("<svg xmlns='http://www.w3.org/2000/svg'></svg>")
    page = render(PageContent(title="t", headline=pd.DataFrame(), figures={"mass": {"svg": svg}},
                              train_panels={"balanced": ["fade", "grpo"]}))
    assert "Sign balance 0 at every step (measured, not missing) for fade, grpo" in page
    plain = render(PageContent(title="t", headline=pd.DataFrame(), figures={"mass": {"svg": svg}}))
    assert "measured, not missing" not in plain


def test_report_atlas_is_drawn_for_the_page_width(tmp_path):
    """The page shows figures at most ~1150 px wide: the report's atlas is drawn ~11 inches wide (legend under
    the panels), not 16 inches plus a side legend, whose labels shrank to ~9 px on the page."""
    from PIL import Image

    from fade_core.report.figures import draw_atlas

    drawn = draw_atlas([("fade", "fade", {}), ("grpo", "grpo", {}), ("power2", "power", {"alpha": 2})], 16,
                       tmp_path, ["png"])
    width, _height = Image.open(drawn["png"]).size
    assert width <= 2300, width  # 200 dpi: about 11.5 inches at most
