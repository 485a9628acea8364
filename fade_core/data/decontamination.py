"""Decontamination: find training problems whose statement (near-)duplicates an evaluation problem.

Statements are normalized (Unicode NFKC, lower case, LaTeX/markup symbols and punctuation become
spaces, whitespace collapsed) and cut into word n-grams (default n = 8; a text shorter than n words is
one n-gram). For a training text T and an evaluation text E:

    exact      normalized T == normalized E
    overlap    |ngrams(T) & ngrams(E)| / min(|ngrams(T)|, |ngrams(E)|)
    near       overlap >= threshold (default 0.5)

Dividing by the smaller set makes "E copied inside a longer T" (or the reverse) count fully. Pairs are
found through an inverted index from n-gram to evaluation problems, so the cost is one pass over the
training n-grams. Training benchmarks default to TACO; evaluation ones to LiveCodeBench and HumanEval.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

TRAINING_BENCHMARKS = ("taco",)
EVALUATION_BENCHMARKS = ("livecodebench", "humaneval")
_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalize(text: str) -> str:
    """Text -> lower-case words separated by single spaces (markup, punctuation, LaTeX symbols gone)."""
    t = unicodedata.normalize("NFKC", text).lower()
    return _NON_WORD.sub(" ", t).strip()


def ngrams(text: str, n: int = 8) -> set[tuple[str, ...]]:
    """Word n-grams of the normalized text (the whole text as one gram when shorter than n)."""
    words = normalize(text).split()
    if not words:
        return set()
    if len(words) < n:
        return {tuple(words)}
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@dataclass(frozen=True)
class Overlap:
    """A training problem that duplicates an evaluation problem."""

    train_id: str
    eval_id: str
    kind: str  # "exact" | "near"
    score: float  # n-gram overlap in [0, 1]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_overlaps(
    train: Iterable[tuple[str, str]],
    evaluation: Iterable[tuple[str, str]],
    *,
    n: int = 8,
    threshold: float = 0.5,
) -> list[Overlap]:
    """All (training, evaluation) pairs of (problem_id, text) that are exact or near duplicates,
    sorted by training id then evaluation id."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    eval_norm: dict[str, list[str]] = {}
    eval_grams: dict[str, int] = {}
    index: dict[tuple[str, ...], list[str]] = {}
    for eid, text in evaluation:
        eval_norm.setdefault(normalize(text), []).append(eid)
        grams = ngrams(text, n)
        eval_grams[eid] = len(grams)
        for g in grams:
            index.setdefault(g, []).append(eid)
    out: list[Overlap] = []
    for tid, text in train:
        exact = set(eval_norm.get(normalize(text), ()))
        grams = ngrams(text, n)
        shared: Counter[str] = Counter()
        for g in grams:
            for eid in index.get(g, ()):
                shared[eid] += 1
        for eid in sorted(exact | set(shared)):
            denom = min(len(grams), eval_grams[eid]) or 1
            score = 1.0 if eid in exact else shared[eid] / denom
            if eid in exact:
                out.append(Overlap(tid, eid, "exact", 1.0))
            elif score >= threshold:
                out.append(Overlap(tid, eid, "near", round(score, 4)))
    out.sort(key=lambda o: (o.train_id, o.eval_id))
    return out


def check_tables(
    tables: dict[str, pd.DataFrame],
    *,
    training: Iterable[str] = TRAINING_BENCHMARKS,
    evaluation: Iterable[str] = EVALUATION_BENCHMARKS,
    n: int = 8,
    threshold: float = 0.5,
) -> list[Overlap]:
    """Overlaps between the prompts of the training and evaluation benchmarks present in ``tables``."""
    train_rows = [
        (pid, text)
        for b in training
        if b in tables
        for pid, text in zip(tables[b]["problem_id"], tables[b]["prompt"], strict=True)
    ]
    eval_rows = [
        (pid, text)
        for b in evaluation
        if b in tables
        for pid, text in zip(tables[b]["problem_id"], tables[b]["prompt"], strict=True)
    ]
    if not train_rows or not eval_rows:
        return []
    return find_overlaps(train_rows, eval_rows, n=n, threshold=threshold)


def drop_overlaps(table: pd.DataFrame, overlaps: Iterable[Overlap]) -> tuple[pd.DataFrame, list[str]]:
    """Remove the training problems named in ``overlaps``; returns (kept table, dropped problem_ids)."""
    bad = {o.train_id for o in overlaps}
    mask = table["problem_id"].isin(bad)
    dropped = sorted(table.loc[mask, "problem_id"].tolist())
    return table.loc[~mask].reset_index(drop=True), dropped
