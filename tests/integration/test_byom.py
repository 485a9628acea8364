"""Bring your own model, end to end on tiny real architectures made here (no download): a Qwen2 with tied
embeddings and a ChatML tokenizer trained locally, a Llama with Llama-3-style BOS. Training on TACO-layout
and AIME-layout files gets its rewards from the sandbox and math-verify, counts verdicts per step, logs the
chat-rendered prompt with the run, resumes a tied-embedding model exactly, and `fade train` / `fade
evaluate --model` run on both benchmarks."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from fade_core import config, data
from fade_core.data.schema import read_table, records, write_table
from fade_core.rollout.base import RolloutBatch
from fade_core.runs import PROMPT_FILE, problems_digest, run_id
from fade_core.train import Trainer
from fade_core.train.record import TIMING_KEYS
from tests.hf_models import tiny_llama, tiny_qwen2

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
# per problem: a correct completion, a wrong one, and one the judge finds nothing in
CANNED = {
    "sum-two": ["```python\na, b = map(int, input().split())\nprint(a + b)\n```", "```python\nprint(0)\n```",
                "I would add the two numbers."],
    "sum-list": ["```python\ninput()\nprint(sum(map(int, input().split())))\n```", "```python\nprint(-1)\n```",
                 "Sum them all."],
    "add": ["```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(a, b):\n    return a - b\n```",
            "Use the plus operator."],
    "sort-it": ["```python\ndef sort_it(xs):\n    return sorted(xs)\n```",
                "```python\ndef sort_it(xs):\n    return xs[::-1]\n```", "Sorting is easy."],
    "half": ["x = 1/2, so \\boxed{0.5}", "\\boxed{\\frac{1}{3}}", "I cannot tell."],
    "seven": ["Adding: \\boxed{7}", "\\boxed{8}", "hmm"],
}
VERDICTS_OF = {"taco": ("passed", "wrong_answer", "no_code"), "math": ("passed", "wrong_answer", "no_answer")}


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_qwen2(tmp_path_factory.mktemp("qwen2") / "model")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_llama(tmp_path_factory.mktemp("llama") / "model")


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """data/problems/<benchmark>.parquet of a TACO-layout folder and an AIME-layout file (its rows in split
    train), as `fade prepare` writes them."""
    root = tmp_path_factory.mktemp("data")
    aime = root / "aime_2025.jsonl"
    aime.write_text("\n".join(json.dumps(r) for r in (
        {"id": "2025-I-1", "problem": "What is $3 + 4$?", "answer": "7"},
        {"id": "2025-I-2", "problem": "Half of one, as a fraction?", "answer": "1/2"},
        {"id": "2025-I-3", "problem": "What is $3 + 4$ again?", "answer": "007"},
    )) + "\n")
    out = {}
    out["taco"] = write_table(data.load("taco", str(FIXTURES / "taco")), root / "problems" / "taco.parquet")
    # AIME answers are integers 0..999: "1/2" is not one, so that row is dropped; the generic math loader takes it
    aime_table = data.load("aime", str(aime), assign_split="train", on_bad_rows="drop")
    assert len(aime_table) == 2 and set(aime_table.split) == {"train"}
    out["aime"] = write_table(aime_table, root / "problems" / "aime.parquet")
    generic = root / "gsm.jsonl"
    generic.write_text(json.dumps({"id": "half", "question": "Half of one?", "answer": "x is a half.\n#### \\frac{1}{2}"}) + "\n")
    out["math-mine"] = write_table(data.load("math-mine", str(generic)), root / "problems" / "math-mine.parquet")
    return out


def _canned_key(problem: dict[str, Any]) -> str:
    md = json.loads(problem["metadata"])
    if problem["benchmark"] == "taco":
        return str(md.get("name") or problem["problem_id"].rsplit("/", 1)[-1])
    return "half" if "alf" in problem["prompt"] else "seven"


class CannedEngine:
    """A rollout engine that returns fixed completions (correct, wrong, nothing to judge) per prompt, as
    token ids of the real tokenizer ending in EOS, so the trainer updates on them as on sampled ones."""

    name = "canned"

    def __init__(self, tokenizer: Any, by_prompt: dict[str, list[str]]) -> None:
        self.tokenizer, self.by_prompt, self.seen = tokenizer, by_prompt, []

    def sync_weights(self, model: Any) -> None:
        pass

    def generate(self, prompts, n, *, temperature=1.0, top_p=1.0, max_new_tokens=16, seed=None, stop=None):
        self.seen += list(prompts)
        tok = self.tokenizer
        texts = [self.by_prompt[p][j % len(self.by_prompt[p])] for p in prompts for j in range(n)]
        rows = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
        mask = ids != tok.pad_token_id
        for i, r in enumerate(rows):
            mask[i, : len(r)] = True
        return RolloutBatch(
            prompts=list(prompts), prompt_token_ids=[tok(p, add_special_tokens=False)["input_ids"] for p in prompts],
            n=n, prompt_index=torch.arange(len(rows)) // n, completion_ids=ids, completion_mask=mask,
            logprobs=torch.zeros(ids.shape), lengths=mask.sum(1), finish_reasons=["stop"] * len(rows),
            texts=[tok.decode(r, skip_special_tokens=True) for r in rows], entropies=None, pad_token_id=tok.pad_token_id)


class CannedTrainer(Trainer):
    def _setup(self) -> None:
        super()._setup()
        self.engine = CannedEngine(self.tokenizer, {t: CANNED[_canned_key(p)] for t, p in zip(self.prompts, self.problems, strict=True)})
        self.recompute_old = True  # the canned log-probs are not the policy's


def _overrides(tmp: Path, model: Path, bench: str, **extra: object) -> list[str]:
    sets = {"model.name_or_path": str(model), "train.benchmark": bench, "train.runs_dir": str(tmp / "runs"),
            "train.method": "grpo", "train.steps": 1, "train.prompts_per_step": 2, "train.group_size": 3,
            "train.minibatches": 1, "train.checkpoint_every": 100, "train.rank1_every": 100, "compute.torch_threads": 1,
            "rollout.max_new_tokens": 8, "data.gold.enabled": False}
    sets.update(extra)
    return [f"{k}={v}" for k, v in sets.items()]


@pytest.mark.parametrize("bench", ["taco", "aime", "math-mine"])
def test_rewards_come_from_the_real_verifiers(tmp_path: Path, qwen: Path, tables: dict[str, Path], bench: str) -> None:
    """A correct, a wrong and an empty-handed completion per prompt score 1, 0, 0 through the sandbox (TACO:
    stdin and call-based rows) and math-verify (AIME's integers, a generic file's fraction), with verdicts."""
    extra = {"model.gradient_checkpointing": True} if bench == "taco" else {}  # the update without a KV cache
    cfg = config.load(None, _overrides(tmp_path, qwen, bench, **{"train.prompts_per_step": 4, **extra}))
    recs: list[dict] = []
    problems = [r for r in records(read_table(tables[bench])) if r["split"] == "train"]
    trainer = CannedTrainer(cfg, problems=problems, on_step=lambda s, r: recs.append(r))
    res = trainer.train()
    rec = recs[0]
    kinds = VERDICTS_OF["taco" if bench == "taco" else "math"]
    p = 4
    assert rec["reward_mean"] == pytest.approx(1 / 3) and rec["solve_hist"] == [0, p, 0, 0]
    assert {k: rec[f"verdict/{k}"] for k in kinds} == dict.fromkeys(kinds, p)
    assert sum(v for k, v in rec.items() if k.startswith("verdict/")) == 3 * p
    assert {e["verdict"] for e in rec["examples"]} == set(kinds[:2]) and rec["examples"][0]["reward"] == 1.0
    # the chat template is applied, and the rendered prompt is logged with the run
    logged = json.loads((res.run_dir / PROMPT_FILE).read_text())
    assert trainer.engine.seen[0].startswith("<|im_start|>") and trainer.engine.seen[0].endswith("<|im_start|>assistant\n")
    assert logged["example"]["text"] in trainer.engine.seen and logged["chat_template"] == trainer.tokenizer.chat_template
    assert set(logged["templates"]) <= {"code_stdio", "code_call", "math"} and logged["max_new_tokens"] == 8
    assert rec["optimizer_steps"] == 1 and rec["grad_norm"] > 0  # it updated on the canned rollouts


def test_the_run_id_follows_the_problem_file(tmp_path: Path, qwen: Path, tables: dict[str, Path]) -> None:
    cfg = config.load(None, _overrides(tmp_path, qwen, "taco"))
    a = [r for r in records(read_table(tables["taco"])) if r["split"] == "train"]
    b = a[:2]
    assert run_id(cfg, problems_digest(a)) != run_id(cfg, problems_digest(b))
    assert Trainer(cfg, problems=a).run_id == run_id(cfg, problems_digest(a)) != Trainer(cfg, problems=b).run_id


def _strip(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in TIMING_KEYS}


def _records(run: Path) -> list[dict]:
    return [_strip(json.loads(line)) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_tied_embeddings_resume_exactly(tmp_path: Path, qwen: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Train 4 steps; stop after 3 (checkpoint at 2) and resume: the records and weights equal the
    uninterrupted run's. The tied head is written once (as the embedding) and restored through it."""
    sets = _overrides(tmp_path, qwen, "countdown", **{
        "train.method": "w_reinforce", "train.steps": 4, "train.checkpoint_every": 2, "train.group_size": 4,
        "rollout.max_new_tokens": 6, "data.countdown.num_train": 20, "data.countdown.num_test": 5,
        "data.out_dir": str(tmp_path / "nodata")})
    cfg = config.load(None, sets)
    with caplog.at_level(logging.WARNING, logger="fade_core.train.trainer"):
        full = Trainer(cfg, run_dir=tmp_path / "full").train()
    warnings = [r.getMessage() for r in caplog.records if "generation budget" in r.getMessage()]
    assert len(warnings) == 1 and "6 tokens" in warnings[0]  # random weights never stop in 6 tokens: one warning
    ck = load_file(str(full.run_dir / "checkpoints/step-2/model.safetensors"))
    assert "lm_head.weight" not in ck  # what made resuming crash: the tied head is not in the file
    Trainer(cfg, run_dir=tmp_path / "cut", stop_after=3).train()
    res = Trainer(cfg, run_dir=tmp_path / "cut").train()
    assert res.resumed_from == 2
    assert _records(tmp_path / "cut") == _records(full.run_dir)
    a = load_file(str(full.run_dir / "checkpoints/step-4/model.safetensors"))
    b = load_file(str(tmp_path / "cut/checkpoints/step-4/model.safetensors"))
    base = load_file(str(qwen / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], base[k]) for k in a)  # it trained, so equal weights mean something


@pytest.mark.slow
def test_fade_train_and_evaluate_on_taco_and_aime(tmp_path: Path, qwen: Path, llama: Path, tables: dict[str, Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`fade train` on the TACO- and AIME-layout tables (Qwen2, tied), `fade evaluate` on both for the trained
    checkpoint and for a model fade did not train (`--model`, the Llama), and one-line errors for a missing
    model or an unprepared benchmark."""
    from typer.testing import CliRunner

    from flows.cli import app

    monkeypatch.chdir(tmp_path)
    problems = tmp_path / "data" / "problems"
    problems.mkdir(parents=True)
    for bench in ("taco", "aime"):
        (problems / f"{bench}.parquet").write_bytes(tables[bench].read_bytes())
    runner = CliRunner()
    common = ["--set", "compute.torch_threads=1", "--set", "rollout.max_new_tokens=6", "--set", "eval.n_samples=2",
              "--set", "eval.ks=[1,2]", "--set", "eval.split=all", "--set", "eval.max_problems=2"]
    for bench in ("taco", "aime"):
        r = runner.invoke(app, ["train", "--no-progress", *common, *_cli(_overrides(tmp_path, qwen, bench))])
        assert r.exit_code == 0, r.output
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all((run / PROMPT_FILE).exists() for run in runs)
    r = runner.invoke(app, ["evaluate", "--run", str(runs[0]), "-b", "taco", "-b", "aime", *common])
    assert r.exit_code == 0, r.output
    assert r.output.count(" samples, pass rate ") == 2
    r = runner.invoke(app, ["evaluate", "--model", str(llama), "-b", "taco", "-b", "aime", *common])
    assert r.exit_code == 0, r.output
    assert "model step 0 taco: 4 samples" in r.output and "model step 0 aime: 4 samples" in r.output
    parts = list((tmp_path / "eval" / "samples" / "model").rglob("*.parquet"))
    assert len(parts) == 2
    import pyarrow.parquet as pq

    meta = json.loads(pq.read_schema(parts[0]).metadata[b"fade.eval"])
    assert meta["prompt"]["example"]["text"].startswith("<|begin_of_text|><|start_header_id|>system")
    r = runner.invoke(app, ["evaluate", "--model", str(tmp_path / "missing"), "-b", "taco", *common])
    assert r.exit_code == 2 and "missing: no such folder" in r.output
    r = runner.invoke(app, ["evaluate", "--model", str(llama), "-b", "livecodebench", *common])
    assert r.exit_code == 2 and "livecodebench not prepared" in r.output
    r = runner.invoke(app, ["train", *common, "--set", f"model.name_or_path={tmp_path / 'missing'}"])
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0 and "missing" in r.output


def _cli(sets: list[str]) -> list[str]:
    return [arg for s in sets for arg in ("--set", s)]
