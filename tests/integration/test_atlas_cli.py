"""`fade atlas` end to end: CSV of every profile, PNG and SVG figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from fade_core import atlas
from flows import atlas as atlas_flow
from flows.cli import guard_commands


@pytest.fixture()
def app() -> typer.Typer:
    app = typer.Typer()
    atlas_flow.register(app)

    @app.command("noop", hidden=True)
    def _noop() -> None:  # a second command keeps typer from collapsing the app into `atlas` itself
        pass

    guard_commands(app)
    return app


def test_default_atlas_writes_every_method(app, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no params.yaml here: all defaults
    out = tmp_path / "figs"
    result = CliRunner().invoke(app, ["atlas", "--out", str(out), "--points", "51"])
    assert result.exit_code == 0, result.output
    for name in ("atlas.csv", "atlas.png", "atlas.svg"):
        assert str(out / name) in result.output

    table = pd.read_csv(out / "atlas.csv")
    assert list(table.columns) == atlas.TABLE_COLUMNS
    labels = [e.display() for e in atlas.DEFAULT_ENTRIES]
    assert list(dict.fromkeys(table["label"])) == labels
    assert len(table) == len(labels) * 51
    assert set(table["method"]) == set(atlas.adv_lib.names())  # every method of the registry appears
    assert (table["group_size"] == 16).all()
    grpo = table[table["label"] == "GRPO"]
    assert np.allclose(grpo["m_s"], grpo["m_f"]) and grpo["peak_p"].iloc[0] == 0.5
    power = table[table["label"] == "Power α=2"]
    assert 0.3 <= power["peak_p"].iloc[0] <= 0.36  # ~1/(1+alpha) at G = 16

    png = (out / "atlas.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 100_000
    svg = (out / "atlas.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and len(svg) > 50_000
    assert "FADE explore" in svg and "Power" in svg  # text kept as text (svg.fonttype none)


def test_atlas_method_selection_group_size_and_arms(app, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "a"
    result = CliRunner().invoke(
        app,
        ["atlas", "--methods", "grpo,asym_grpo,power(alpha=3)", "--out", str(out), "--points", "21", "--arms",
         "--set", "train.group_size=4"],
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "atlas.csv")
    labels = list(dict.fromkeys(table["label"]))
    assert labels[:4] == ["GRPO", "AsymGRPO δ=0.5", "AsymGRPO δ=2", "power(alpha=3)"]
    assert any(lab.startswith("arm fade: fade") for lab in labels) and "arm power2: power(alpha=2)" in labels
    assert (table["group_size"] == 4).all() and len(table) == len(labels) * 21

    result = CliRunner().invoke(app, ["atlas", "--group-size", "8", "--methods", "rloo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (pd.read_csv(out / "atlas.csv")["group_size"] == 8).all()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--methods", "grpo,nope"], "valid methods"),
        (["--methods", "power(beta=2)"], "valid parameters: alpha"),
        (["--methods", "pkpo(k=32)"], "k=32 needs k <= 16"),
        (["--set", "train.bogus=1"], "train"),
    ],
)
def test_atlas_errors_exit_2_with_a_clear_message(app, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["atlas", "--out", str(tmp_path / "x"), *args])
    assert result.exit_code == 2
    assert message in result.output
