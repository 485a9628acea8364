"""train.levels: RL samples the training problems of the named difficulty levels only."""

from __future__ import annotations

import pytest

from fade_core import config as fconfig
from fade_core.train.trainer import load_problems, select_levels, select_pool


def _cfg(tmp_path, levels):
    sets = [f"data.out_dir={tmp_path / 'data'}", "data.countdown.num_train=60", "data.countdown.num_validation=12",
            "data.countdown.num_test=12"]
    if levels is not None:
        sets.append(f"train.levels={levels}")
    return fconfig.load(None, sets)


def test_levels_keep_only_the_named_levels_of_the_training_split(tmp_path):
    every = load_problems(_cfg(tmp_path, None))
    assert {r["difficulty_level"] for r in every} == {"easy", "medium", "hard"}
    easy = load_problems(_cfg(tmp_path, "[easy]"))
    assert easy == [r for r in every if r["difficulty_level"] == "easy"] and easy
    two = load_problems(_cfg(tmp_path, "[easy, hard]"))
    assert {r["difficulty_level"] for r in two} == {"easy", "hard"}
    # the periodic pass@1's split keeps every level
    val = load_problems(_cfg(tmp_path, "[easy]"), split="validation")
    assert {r["difficulty_level"] for r in val} == {"easy", "medium", "hard"}


def test_an_unknown_or_empty_level_list_is_an_error_naming_the_key():
    rows = [{"difficulty_level": "easy"}, {"difficulty_level": "hard"}]
    with pytest.raises(ValueError, match=r"train.levels: \['medium'\] not among .*\['easy', 'hard'\]"):
        select_levels(rows, ["medium"])
    with pytest.raises(ValueError, match="train.levels"):
        select_levels(rows, [])
    assert select_levels(rows, ["hard"]) == [{"difficulty_level": "hard"}]


def test_an_empty_level_list_is_refused_by_the_config():
    with pytest.raises(ValueError, match="train.levels"):
        fconfig.load(None, ["train.levels=[]"])


def test_problem_pool_keeps_the_first_n_training_problems_after_the_levels(tmp_path):
    easy = load_problems(_cfg(tmp_path, "[easy]"))
    pool = load_problems(fconfig.load(None, [f"data.out_dir={tmp_path / 'data'}", "data.countdown.num_train=60",
                                             "data.countdown.num_validation=12", "data.countdown.num_test=12",
                                             "train.levels=[easy]", "train.problem_pool=5"]))
    assert pool == easy[:5] and len(easy) > 5
    val = load_problems(fconfig.load(None, [f"data.out_dir={tmp_path / 'data'}", "data.countdown.num_train=60",
                                            "data.countdown.num_validation=12", "data.countdown.num_test=12",
                                            "train.problem_pool=5"]), split="validation")
    assert len(val) == 12  # the pool limits RL's training problems only
    with pytest.raises(ValueError, match=r"train.problem_pool: 999 problems asked, the training split has \d+"):
        select_pool(easy, 999)
    with pytest.raises(ValueError, match="problem_pool"):
        fconfig.load(None, ["train.problem_pool=0"])


def test_an_unset_pool_leaves_run_ids_as_they_were_and_a_set_one_changes_them():
    from fade_core import runs

    cfg = fconfig.load(None, [])
    unset = runs.run_hash(cfg)
    # the id of a run made before train.problem_pool existed: the same fingerprint without the key
    assert unset == cfg.fingerprint(*runs.RUN_HASH_SECTIONS, exclude={"train": runs.RUN_HASH_IGNORED + ("problem_pool",)})
    assert runs.run_hash(fconfig.load(None, ["train.problem_pool=100"])) != unset
