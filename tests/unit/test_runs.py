"""The run folder (fade_core.runs): run ids, checkpoint listing and identity, the metrics log and its readers."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import duckdb
import pytest

from fade_core import config, runs


def test_parse_run_id() -> None:
    assert runs.parse_run_id("power(alpha=2)-s3-0a1b2c3d") == ("power(alpha=2)", 3)
    assert runs.parse_run_id("x-s-1-0a1b2c3d") == ("x", -1)
    assert runs.parse_run_id("base") == ("base", None)


def test_run_id_hashes_what_shapes_the_run() -> None:
    cfg = config.load(None, ["train.method=power", "train.params.alpha=3", "train.seed=4"])
    rid = runs.run_id(cfg)
    label, seed = runs.parse_run_id(rid)
    assert (label, seed) == ("power(alpha=3)", 4)
    # the hash: sha256 of the JSON of the sections that shape a run, train's bookkeeping keys left out
    d = {s: cfg.to_dict()[s] for s in runs.RUN_HASH_SECTIONS}
    for key in runs.RUN_HASH_IGNORED + runs.NEW_KEYS_UNSET:  # unset new keys: left out, so old ids stay
        del d["train"][key]
    assert rid.endswith("-" + hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8])
    same = config.load(None, ["train.method=power", "train.params.alpha=3", "train.seed=4", "train.runs_dir=elsewhere",
                              "train.checkpoint_every=7", "train.rank1_every=3", "eval.n_samples=64"])
    assert runs.run_hash(same) == runs.run_hash(cfg)
    assert runs.run_id(config.load(None, ["train.method=power", "train.params.alpha=3", "train.seed=4",
                                          "train.label=mine"])).startswith("mine-s4-")
    other = config.load(None, ["train.method=power", "train.params.alpha=3", "train.seed=4", "train.lr=0.01"])
    assert runs.run_hash(other) != runs.run_hash(cfg)
    assert runs.run_dir(cfg) == Path("runs") / rid


def _checkpoint(path: Path, *, weights: bool = True, state: bool = False) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    if weights:
        (path / "model.safetensors").write_bytes(b"x")
    if state:
        (path / runs.STATE_FILE).write_bytes(b"x")
    return path


def test_checkpoint_listing_and_identity(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "power(alpha=2)-s3-0a1b2c3d"
    _checkpoint(runs.checkpoint_dir(run, 100), state=True)
    _checkpoint(runs.checkpoint_dir(run, 20))
    _checkpoint(run / "checkpoints" / "step-300", weights=False)  # being written: no weights yet
    _checkpoint(run / "checkpoints" / "step-400.tmp", state=True)  # a half-written checkpoint
    assert [s for s, _ in runs.list_checkpoints(run)] == [20, 100]
    assert [s for s, _ in runs.list_checkpoints(run, resumable=True)] == [100]
    assert [c.step for c, _ in runs.run_checkpoints(run, "last")] == [100]
    assert [s for s, _ in runs.select_checkpoints(runs.list_checkpoints(run), "all")] == [20, 100]
    with pytest.raises(ValueError, match="'all' or 'last'"):
        runs.select_checkpoints([], "first")
    ident = runs.identify_checkpoint(run / "checkpoints" / "step-20")
    assert ident == runs.CheckpointId("power(alpha=2)-s3-0a1b2c3d", "power(alpha=2)", 3, 20)
    base = tmp_path / "models" / "base"
    base.mkdir(parents=True)
    assert runs.identify_checkpoint(base) == runs.CheckpointId("base", "base", 0, 0)
    named = tmp_path / "odd"
    named.mkdir()
    (named / "config.yaml").write_text("train: {seed: 7}\n")
    assert runs.identify_checkpoint(named).seed == 7  # no seed in the name: the folder's config says it
    with pytest.raises(FileNotFoundError, match="no complete checkpoints"):
        runs.run_checkpoints(tmp_path / "runs" / "nothing")


def _record(step: int, **extra: object) -> dict:
    return {"run_id": "r-s0-00000000", "method": "r", "seed": 0, "step": step, "reward_mean": step / 10,
            "solve_hist": [1, 2], "alpha": math.nan, **extra}


def test_metrics_log_round_trip_truncate_and_reset(tmp_path: Path) -> None:
    run = tmp_path / "r-s0-00000000"
    run.mkdir()
    (run / "config.yaml").write_text("train: {seed: 0}\n")
    log = runs.MetricsLog(run)
    log.append(_record(1))
    log.append(_record(2, late_metric=0.5))  # a column that appears later is added
    log.append(_record(3))
    df = runs.read_train_steps(run)  # the writer holds the DuckDB file: read from the JSON lines
    assert df["step"].tolist() == [1, 2, 3] and "solve_hist" not in df.columns
    log.close()
    with duckdb.connect(str(run / runs.METRICS_DB), read_only=True) as con:
        rows = con.execute("SELECT step, alpha, late_metric, solve_hist FROM train_steps ORDER BY step").fetchall()
    assert rows == [(1, None, None, [1, 2]), (2, None, 0.5, [1, 2]), (3, None, None, [1, 2])]
    assert runs.last_record(run)["step"] == 3
    log.truncate(2)
    assert [json.loads(x)["step"] for x in (run / runs.METRICS_JSONL).read_text().splitlines()] == [1, 2]
    assert runs.read_train_steps(run)["step"].tolist() == [1, 2]
    log.append(_record(3, reward_mean=0.9))  # the resumed run re-logs step 3
    log.close()
    train, configs = runs.load_training_records(tmp_path)
    assert train["reward_mean"].tolist() == [0.1, 0.2, 0.9] and configs == {run.name: {"train": {"seed": 0}}}
    log.reset()
    assert not (run / runs.METRICS_JSONL).exists() and not (run / runs.METRICS_DB).exists()
    assert runs.last_record(run) == {}


def test_metrics_jsonl_reader_skips_a_torn_last_line_and_names_a_bad_one(tmp_path: Path) -> None:
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "a": {"b": 2}}\n{"step": 2, "a"')
    df = runs.read_metrics_jsonl(p)
    assert df["step"].tolist() == [1] and df["a.b"].tolist() == [2]
    assert runs.last_record(tmp_path) == {"step": 1, "a": {"b": 2}}
    p.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(ValueError, match="metrics.jsonl:2"):
        runs.read_metrics_jsonl(p)


def test_one_label_per_arm() -> None:
    """An arm, a run without train.label and the advantage have one label: the method and the parameters
    the config sets (registry order, canonical values), as the run hash follows what the config says."""
    from fade_core import advantages

    for method, params, label in (("power", {}, "power"), ("power", {"alpha": 2}, "power(alpha=2)"),
                                  ("power", {"alpha": 2.0}, "power(alpha=2)"), ("power", {"alpha": 3}, "power(alpha=3)"),
                                  ("asym_grpo", {"delta": 0.5}, "asym_grpo(delta=0.5)"),
                                  ("power_asym", {"delta": 2, "alpha": 3}, "power_asym(alpha=3,delta=2)"),
                                  ("fade", {"fixed_alpha": 2}, "fade(fixed_alpha=2)")):
        assert config.Arm(method=method, params=params).label == label
        assert runs.run_label(method, params) == label == advantages.build(method, **params).label
    cfg = config.load(None, ["train.method=power", "train.params.alpha=3"])
    assert runs.parse_run_id(runs.run_id(cfg))[0] == "power(alpha=3)"


def test_the_problems_are_part_of_the_run_id() -> None:
    cfg = config.load(None, ["train.method=grpo"])
    a = [{"problem_id": "p/1", "prompt": "x", "answer": "1"}]
    b = [{"problem_id": "p/1", "prompt": "x", "answer": "2"}]  # same settings, another file's content
    assert runs.problems_digest(a) == runs.problems_digest([dict(r) for r in a])
    assert runs.run_id(cfg, runs.problems_digest(a)) != runs.run_id(cfg, runs.problems_digest(b))
    assert runs.run_id(cfg, runs.problems_digest(a)).startswith("grpo-s0-")
    assert runs.run_dir(cfg, runs.problems_digest(a)).name == runs.run_id(cfg, runs.problems_digest(a))


def test_metrics_log_keeps_verdicts_and_examples(tmp_path: Path) -> None:
    run = tmp_path / "r-s0-00000000"
    run.mkdir()
    log = runs.MetricsLog(run)
    examples = [{"problem_id": "p", "prompt": "q", "completion": "c", "reward": 1.0, "verdict": "passed"}]
    log.append({**_record(1), "verdict/passed": 3, "verdict/no_code": 1, "examples": examples})
    log.append({**_record(2), "verdict/passed": 0, "verdict/no_code": 4, "examples": []})
    log.close()
    with duckdb.connect(str(run / runs.METRICS_DB), read_only=True) as con:
        rows = con.execute('SELECT "verdict/passed", "verdict/no_code", examples FROM train_steps ORDER BY step').fetchall()
    assert [(r[0], r[1], json.loads(r[2])) for r in rows] == [(3, 1, examples), (0, 4, [])]
    assert runs.last_record(run)["examples"] == []


def test_checkpoint_owner(tmp_path: Path) -> None:
    run = tmp_path / "grpo-s0-00000000"
    ck = _checkpoint(run / "checkpoints" / "step-2")
    (run / "config.yaml").write_text("model: {system_prompt: hi}\n")
    assert runs.checkpoint_owner(ck) == run.resolve()
    assert runs.checkpoint_owner(_checkpoint(tmp_path / "models" / "base")) is None
