"""`fade verify`: scores a samples file (JSON lines or parquet) against a problems parquet."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from fade_core import verifiers
from flows import verify as verify_flow


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    verifiers.shutdown()


def _problems() -> pd.DataFrame:
    base = {"benchmark": "", "split": "test", "prompt": "", "starter_code": "", "fn_name": None, "tests": "[]",
            "answer": None, "difficulty": "", "difficulty_level": "unknown", "contest_date": None, "source": "test",
            "metadata": "{}"}  # fmt: skip
    rows = [
        dict(base, problem_id="cd/0", benchmark="countdown", kind="expression", prompt="3 5 7 -> 22: ", answer="22",
             metadata=json.dumps({"numbers": [3, 5, 7], "target": 22})),
        dict(base, problem_id="aime/0", benchmark="aime", kind="math", answer="042"),
        dict(base, problem_id="lcb/0", benchmark="lcb", kind="code_stdio",
             tests=json.dumps([{"input": "2 3\n", "output": "5\n", "testtype": "stdin"}])),
        dict(base, problem_id="he/0", benchmark="humaneval", kind="code_call", fn_name="inc",
             prompt='def inc(x):\n    """x + 1"""\n',
             tests=json.dumps([{"input": "def check(candidate):\n    assert candidate(2) == 3\n", "output": None,
                                "testtype": "humaneval"}])),
    ]  # fmt: skip
    return pd.DataFrame(rows)


SAMPLES = [
    ("cd/0", "3*5+7", True), ("cd/0", "3+5+7", False),
    ("aime/0", r"so \boxed{42}", True), ("aime/0", r"\boxed{43}", False),
    ("lcb/0", "```python\nprint(sum(map(int, input().split())))\n```", True), ("lcb/0", "print(6)", False),
    ("he/0", "    return x + 1\n", True), ("he/0", "    import os\n    os._exit(0)\n", False),
]  # fmt: skip


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        pass

    verify_flow.register(app)
    return app


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_verify_cli(tmp_path, fmt):
    problems = tmp_path / "problems.parquet"
    _problems().to_parquet(problems, index=False)
    df = pd.DataFrame([{"problem_id": p, "completion": c, "sample_index": i} for i, (p, c, _) in enumerate(SAMPLES)])
    samples = tmp_path / f"samples.{fmt}"
    if fmt == "jsonl":
        df.to_json(samples, orient="records", lines=True)
    else:
        df.to_parquet(samples, index=False)
    out = tmp_path / ("verdicts.parquet" if fmt == "parquet" else "verdicts.jsonl")
    res = CliRunner().invoke(_app(), ["verify", str(samples), str(problems), "--out", str(out), "--workers", "2"])
    assert res.exit_code == 0, res.output
    assert "pass rate" in res.output and "all" in res.output
    got = pd.read_parquet(out) if fmt == "parquet" else pd.read_json(out, lines=True)
    assert list(got["sample_index"]) == list(range(len(SAMPLES)))
    assert list(got["passed"]) == [s[2] for s in SAMPLES]
    assert set(got.columns) >= {"problem_id", "completion", "reward", "passed", "status", "detail", "benchmark", "kind"}
    assert got.loc[~got["passed"], "status"].isin(["wrong_answer", "runtime_error"]).all()


def test_verify_cli_errors_name_the_problem(tmp_path):
    problems = tmp_path / "problems.parquet"
    _problems().to_parquet(problems, index=False)
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"problem_id": "nope/1", "completion": "x"}\n')
    res = CliRunner().invoke(_app(), ["verify", str(samples), str(problems)])
    assert res.exit_code == 2 and "nope/1" in res.output
    samples.write_text('{"problem_id": "cd/0"}\n')
    res = CliRunner().invoke(_app(), ["verify", str(samples), str(problems)])
    assert res.exit_code == 2 and "completion" in res.output
    samples.write_text("not json\n")
    res = CliRunner().invoke(_app(), ["verify", str(samples), str(problems)])
    assert res.exit_code == 2 and "line 1" in res.output


def test_default_outputs_of_two_samples_files_differ(tmp_path):
    """`fade verify exp.a P` then `fade verify exp.b P`: each its own verdicts file, neither overwritten."""
    problems = tmp_path / "problems.parquet"
    _problems().iloc[:1].to_parquet(problems, index=False)  # countdown only: scored in-process
    for name, completion in (("exp.a", "3*5+7"), ("exp.b", "3+5+7")):
        (tmp_path / name).write_text(json.dumps({"problem_id": "cd/0", "completion": completion}) + "\n")
        res = CliRunner().invoke(_app(), ["verify", str(tmp_path / name), str(problems)])
        assert res.exit_code == 0, res.output
    got = {n: pd.read_json(tmp_path / f"{n}.verdicts.jsonl", lines=True) for n in ("exp.a", "exp.b")}
    assert list(got["exp.a"]["passed"]) == [True] and list(got["exp.b"]["passed"]) == [False]
    assert verify_flow.default_verdicts_path(tmp_path / "run.1.parquet").name == "run.1.verdicts.parquet"
    assert verify_flow.default_verdicts_path(tmp_path / "run.1.jsonl").name == "run.1.verdicts.jsonl"
    res = CliRunner().invoke(_app(), ["verify", str(tmp_path / "exp.a"), str(problems), "--out", str(problems)])
    assert res.exit_code == 2 and "overwrite an input" in res.output
