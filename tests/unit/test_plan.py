"""The plan (fade_core.plan): the paths and work lists every stage and flow derive from a config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fade_core import config, plan, runs


def test_problem_paths_and_base_model(tmp_path: Path) -> None:
    cfg = config.load(None, [f"data.out_dir={tmp_path / 'd'}", "eval.benchmarks=[countdown, aime]",
                             f"warmstart.out_dir={tmp_path / 'base'}"])
    assert plan.problem_path(cfg, "taco") == tmp_path / "d" / "problems" / "taco.parquet"
    assert plan.problem_paths(cfg) == {b: str(tmp_path / "d" / "problems" / f"{b}.parquet") for b in ("countdown", "aime")}
    assert plan.needs_warmstart(cfg)
    with pytest.raises(FileNotFoundError, match="run `fade warmstart` first"):
        plan.base_model_path(cfg)
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "config.json").write_text("{}")
    assert plan.base_model_path(cfg) == str(tmp_path / "base")
    local = config.load(None, [f"model.name_or_path={tmp_path / 'hf'}"])
    assert not plan.needs_warmstart(local)
    with pytest.raises(FileNotFoundError, match="no config.json"):
        plan.base_model_path(local)
    chosen = config.load(None, [f"train.base_checkpoint={tmp_path / 'base'}", f"model.name_or_path={tmp_path / 'hf'}"])
    assert plan.base_model_path(chosen) == str(tmp_path / "base")


def test_place_outputs_moves_the_six_output_folders_only() -> None:
    cfg = config.load(None, ["train.lr=0.01", "pipeline.name=mine"])
    root = plan.results_root(cfg, "out")
    assert root == Path("out") / "mine"
    placed = plan.place_outputs(cfg, root)
    assert (placed.data.out_dir, placed.warmstart.out_dir, placed.train.runs_dir, placed.eval.results_dir,
            placed.report.out_dir, placed.tracking.tensorboard_dir) == (
        "out/mine/data", "out/mine/models/base", "out/mine/runs", "out/mine/eval", "out/mine/reports",
        "out/mine/tensorboard")
    assert plan.tracking_dir(placed, "grpo-s0-0123abcd") == Path("out/mine/tensorboard/grpo-s0-0123abcd")
    assert plan.tensorboard_root(cfg) == Path("tensorboard")  # null: beside train.runs_dir ("runs")
    assert plan.tensorboard_root(config.load(None, ["train.runs_dir=/x/runs"])) == Path("/x/tensorboard")
    before, after = cfg.to_dict(), placed.to_dict()
    for section, key in (("data", "out_dir"), ("warmstart", "out_dir"), ("train", "runs_dir"), ("eval", "results_dir"),
                         ("report", "out_dir"), ("tracking", "tensorboard_dir")):
        after[section][key] = before[section][key]
    assert after == before and cfg.train.runs_dir == "runs"  # the original is untouched
    assert placed == config.from_dict(placed.to_dict())  # assignment validated what a full validation would


def test_run_plans_are_arms_by_seeds_each_a_complete_config() -> None:
    cfg = config.load(None, ["pipeline.seeds=[3, 4]", "pipeline.workers=2", "train.runs_dir=r",
                             "pipeline.arms={a: {method: power, params: {alpha: 3}}, b: {method: grpo}}"])
    plans = plan.run_plans(cfg)
    assert [(p.arm, p.seed) for p in plans] == [("a", 3), ("a", 4), ("b", 3), ("b", 4)]
    first = plans[0].config
    assert (first.train.method, first.train.params, first.train.label, first.train.seed, first.train.runs_dir) == \
        ("power", {"alpha": 3}, "a", 3, str(Path("r") / "a"))
    assert first.compute.torch_threads == max(1, (os.cpu_count() or 1) // 2)
    # the same config a full validation of the edited mapping gives, and the config it came from is untouched
    d = cfg.to_dict()
    d["train"].update(method="power", params={"alpha": 3}, label="a", seed=3, runs_dir=str(Path("r") / "a"))
    d["compute"]["torch_threads"] = first.compute.torch_threads
    d["tracking"]["tensorboard_dir"] = "tensorboard"  # beside runs_dir "r", for every arm alike
    assert first == config.from_dict(d)
    assert cfg.train.method == "fade" and cfg.train.label is None
    assert len({runs.run_id(p.config) for p in plans}) == 4
    assert runs.run_id(plans[2].config).startswith("b-s3-")
    assert [p.arm for p in plan.run_plans(cfg, ["b"])] == ["b", "b"]
    pinned = config.load(None, ["compute.torch_threads=3"])
    assert {p.config.compute.torch_threads for p in plan.run_plans(pinned)} == {3}
    with pytest.raises(ValueError, match="not in pipeline.arms"):
        plan.run_plans(cfg, ["c"])
    single = plan.single_run(cfg)
    assert (single.arm, single.seed, single.config) == (None, 0, cfg)


def _checkpoint(path: Path) -> None:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"x")


def test_evaluation_shards_follow_eval_checkpoints(tmp_path: Path) -> None:
    run_a, run_b = tmp_path / "a" / "a-s0-00000000", tmp_path / "b" / "b-s0-00000000"
    for run, steps in ((run_a, (10, 20)), (run_b, (5,))):
        for s in steps:
            _checkpoint(runs.checkpoint_dir(run, s))
    every = config.load(None, ["eval.checkpoints=all"])
    shards = plan.evaluation_shards(every, [(run_a, "a"), (run_b, "b")], base_model=tmp_path / "base")
    assert shards == [(str(tmp_path / "base"), None), (str(run_a / "checkpoints/step-10"), "a"),
                      (str(run_a / "checkpoints/step-20"), "a"), (str(run_b / "checkpoints/step-5"), "b")]
    last = config.load(None, ["eval.checkpoints=last"])
    assert plan.evaluation_shards(last, [(run_a, None)]) == [(str(run_a / "checkpoints/step-20"), None)]
    with pytest.raises(FileNotFoundError, match="no complete checkpoints"):
        plan.evaluation_shards(last, [(tmp_path / "empty", None)])


def test_sampling_options_come_from_eval_rollout_model_and_compute() -> None:
    cfg = config.load(None, ["eval.temperature=0.7", "rollout.top_p=0.9", "rollout.max_new_tokens=12", "eval.seed=5",
                             "eval.prompts_per_batch=3", "compute.workers=4"])
    opts = plan.sampling_options(cfg)
    assert (opts.engine, opts.temperature, opts.top_p, opts.max_new_tokens, opts.seed, opts.prompts_per_batch,
            opts.dtype, opts.engine_opts, opts.workers) == ("hf", 0.7, 0.9, 12, 5, 3, "float32", {}, 4)
    assert plan.sampling_options(config.load(None, ["eval.max_new_tokens=20"])).max_new_tokens == 20
    gpu = plan.sampling_options(config.load(None, ["rollout.engine=vllm", "rollout.tensor_parallel_size=2",
                                                   "rollout.vllm_dtype=bfloat16", "eval.seed=3"]))
    assert gpu.engine_opts == {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.5, "dtype": "bfloat16",
                               "max_model_len": None, "cpu_kvcache_gb": 2.0, "enforce_eager": None, "seed": 3}
    assert gpu.workers is None
    # vllm_dtype left null: the model's dtype
    assert plan.engine_options(config.load(None, ["rollout.engine=vllm"]))["dtype"] == "float32"


def test_a_hub_id_is_a_base_model_as_it_is() -> None:
    cfg = config.load(None, ["model.name_or_path=Qwen/Qwen2.5-7B-Instruct"])
    assert not plan.needs_warmstart(cfg) and plan.base_model_path(cfg) == "Qwen/Qwen2.5-7B-Instruct"


def test_a_warm_start_sweep_is_one_config(tmp_path: Path) -> None:
    """pipeline.base_checkpoints (a glob over the user's pre-training checkpoints) x arms x seeds: one run each,
    started from that checkpoint, labelled with it, in the arm's folder."""
    for step in (900, 1000, 50):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "config.json").write_text("{}")
    (tmp_path / "checkpoint-notes.txt").write_text("not a folder")
    cfg = config.load(None, [f"pipeline.base_checkpoints=[{tmp_path}/checkpoint-*]", "pipeline.seeds=[0, 1]",
                             "pipeline.arms={grpo: {method: grpo}}", "train.runs_dir=runs"])
    found = plan.base_checkpoints(cfg)
    assert [Path(f).name for f in found] == ["checkpoint-50", "checkpoint-900", "checkpoint-1000"]  # natural order
    plans = plan.run_plans(cfg)
    assert [(p.config.train.label, p.seed) for p in plans] == [
        (f"grpo@checkpoint-{s}", seed) for s in (50, 900, 1000) for seed in (0, 1)]
    assert {p.config.train.base_checkpoint for p in plans} == set(found)
    assert {p.config.train.runs_dir for p in plans} == {str(Path("runs") / "grpo")}
    assert len({runs.run_id(p.config) for p in plans}) == 6 and plan.base_model_path(plans[0].config) == found[0]
    empty = config.load(None, [f"pipeline.base_checkpoints=[{tmp_path}/nothing-*]"])
    with pytest.raises(FileNotFoundError, match="matches no folder"):
        plan.run_plans(empty)
