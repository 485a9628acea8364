"""The data card: counts agree with the tables; dropped rows and overlaps are listed; deterministic."""

from __future__ import annotations

import json
from pathlib import Path

from fade_core import data
from fade_core.data import card
from fade_core.data.decontamination import Overlap

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "data"


def make_card():
    taco = data.load_result("taco", str(FIX / "bad" / "taco"), on_bad_rows="drop")
    lcb = data.load_result("livecodebench", str(FIX / "livecodebench"), date_from="2023-09-01")
    cdn = data.load_result("countdown", num_train=40, num_test=10)
    summaries = {
        "taco": card.benchmark_summary(
            taco.table, source="bad/taco", dropped=taco.dropped, filtered=taco.filtered
        ),
        "livecodebench": card.benchmark_summary(
            lcb.table, source="lcb", dropped=lcb.dropped, filtered=lcb.filtered
        ),
        "countdown": card.benchmark_summary(cdn.table, dropped=cdn.dropped, filtered=cdn.filtered),
    }
    ov = [Overlap("taco/train/0", "livecodebench/1850_b", "near", 0.75)]
    c = card.build(summaries, overlaps=ov, decontaminated={"taco": ["taco/train/0"]}, settings={"ngram": 8})
    return c, cdn.table


def test_counts_agree_with_tables() -> None:
    c, cdn = make_card()
    b = c["benchmarks"]
    assert b["countdown"]["rows"] == 50 and b["countdown"]["splits"] == {"test": 10, "train": 40}
    assert b["countdown"]["difficulty_level"] == cdn["difficulty_level"].value_counts().sort_index().to_dict()
    assert sum(b["countdown"]["difficulty_level"].values()) == 50
    assert b["livecodebench"]["filtered"] == {"contest_date before date_from": 2}
    assert b["livecodebench"]["kinds"] == {"code_call": 1, "code_stdio": 4}
    assert b["livecodebench"]["difficulty"] == {"easy": 1, "hard": 2, "medium": 2}
    assert b["taco"]["dropped_bad_rows"] == 6 and len(b["taco"]["bad_row_issues"]) == 6
    dec = c["decontamination"]
    assert (dec["exact"], dec["near"], dec["training_problems_flagged"]) == (0, 1, 1)
    assert dec["dropped"] == {"taco": ["taco/train/0"]}


def test_markdown_and_json_written(tmp_path: Path) -> None:
    c, _ = make_card()
    md, js = card.write(c, tmp_path)
    assert json.loads(js.read_text()) == json.loads(json.dumps(c))
    text = md.read_text()
    assert text.startswith("# Data card")
    assert "| countdown | 50 | test 10, train 40 |" in text
    assert "Bad rows dropped: 6" in text and "2 inputs but 1 outputs" in text
    assert "| taco/train/0 | livecodebench/1850_b | near | 0.75 |" in text
    assert "Left out on purpose: contest_date before date_from: 2" in text
    c2, _ = make_card()
    md2, _ = card.write(c2, tmp_path / "again")
    assert md2.read_text() == text  # deterministic: no timestamps


def test_numeric_difficulty_labels_are_summarized() -> None:
    cdn = data.load("countdown", num_train=300, num_test=10,
                    levels={"hard": {"num_numbers": 4, "max_number": 9, "share": 1.0}})
    s = card.benchmark_summary(cdn)
    assert s["difficulty"]["numeric"] is True
    shares = cdn["difficulty"].astype(float)
    assert s["difficulty"]["min"] == shares.min() and s["difficulty"]["max"] == shares.max()


def test_notes_and_special_judge_counts_reach_the_card(tmp_path: Path) -> None:
    res = data.load_result("taco", str(FIX / "taco_subset"), special_judge_without_checker="lenient")
    s = card.benchmark_summary(res.table, source="subset", filtered=res.filtered, notes=res.notes)
    assert s["special_judge"] == {"numeric": 1, "special_lenient": 1} and s["gold"] is None
    text = card.to_markdown(card.build({"taco": s}))
    assert "LENIENT any-order tokens (passes some invalid answers) 1" in text
    assert "notes.jsonl: ignored" in text and "| not run |" in text
    excluded = data.load_result("taco", str(FIX / "taco_subset"))
    s = card.benchmark_summary(excluded.table, filtered=excluded.filtered)
    assert s["filtered"] == {"special-judge rows nothing can decide (no checker): excluded": 1}


def test_a_runs_card_says_which_prepared_benchmarks_it_used() -> None:
    from fade_core.data.card import usage_note

    note = usage_note(["countdown", "humaneval"], ["countdown"], ["countdown"])
    assert note.startswith("This run trained on countdown and evaluated on countdown")
    assert "neither trained on nor evaluated: humaneval" in note
    assert "neither" not in usage_note(["countdown"], ["countdown"], ["countdown"])
