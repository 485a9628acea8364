"""Checksums of what fade writes (issue 16 point 7): a damaged checkpoint file or results part is named in
one line, never loaded silently."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from fade_core import runs
from fade_core.integrity import MANIFEST, DamagedFile, verify_manifest
from fade_core.store import ResultsStore, verify_part
from fade_core.train.checkpoint import _read
from tests.unit.test_store import make_samples


@pytest.fixture
def checkpoint(tmp_path):
    """A sealed checkpoint folder: weights, trainer state, a side file written later (not a model file)."""
    folder = tmp_path / "checkpoints" / "step-4"
    folder.mkdir(parents=True)
    save_file({"w": torch.arange(4096, dtype=torch.float32)}, str(folder / "model.safetensors"))
    torch.save({"step": 4, "opt": torch.ones(256)}, folder / runs.STATE_FILE)
    (folder / "config.json").write_text("{}")
    runs.seal_checkpoint(folder)
    (folder / "config.yaml").write_text("written after the seal\n")  # SIDE_FILES: not listed
    return folder


def test_an_intact_checkpoint_verifies_and_its_manifest_is_sha256sum_format(checkpoint):
    assert verify_manifest(checkpoint) is True
    lines = (checkpoint / MANIFEST).read_text().splitlines()
    assert sorted(line.split("  ")[1] for line in lines) == ["config.json", "model.safetensors", runs.STATE_FILE]
    assert all(len(line.split("  ")[0]) == 64 for line in lines)


@pytest.mark.parametrize("name", [runs.STATE_FILE, "model.safetensors"])
def test_a_truncated_checkpoint_file_is_named(checkpoint, name):
    path = checkpoint / name
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DamagedFile) as e:
        runs.verify_checkpoint(checkpoint)
    assert e.value.path == path and str(e.value).startswith(f"{path}: damaged file: sha256")
    assert "\n" not in str(e.value)


def test_flipped_bytes_in_safetensors_load_silently_without_the_manifest_and_are_caught_with_it(checkpoint):
    path = checkpoint / "model.safetensors"
    raw = bytearray(path.read_bytes())
    raw[-9] ^= 0x40  # a weight's exponent bit: the file still parses
    path.write_bytes(bytes(raw))
    assert not torch.equal(load_file(str(path))["w"], torch.arange(4096, dtype=torch.float32))  # silent without
    with pytest.raises(DamagedFile, match="model.safetensors: damaged file"):
        runs.load_verified(lambda p: pytest.fail("loaded a damaged checkpoint"), checkpoint)


def test_an_unreadable_state_file_without_a_manifest_is_named(checkpoint):
    """A checkpoint written before checksums: the library's error becomes one naming the file."""
    (checkpoint / MANIFEST).unlink()
    state = checkpoint / runs.STATE_FILE
    state.write_bytes(state.read_bytes()[:50])
    assert runs.verify_checkpoint(checkpoint) is False  # nothing to compare with
    with pytest.raises(DamagedFile) as e:
        _read(state, lambda p: torch.load(p, weights_only=False))
    assert e.value.path == state and "cannot be read" in str(e.value)


def test_single_bit_flips_in_a_results_part_never_change_rows_silently(tmp_path):
    """Every single-bit flip in the part's data pages either leaves the decoded rows as written or is
    named by verify_part (the issue: 8 of 120 rows changed silently, passed/reward included)."""
    store = ResultsStore(tmp_path)
    df = make_samples("grpo-s0-abcdef12", "countdown", 50, problems=30, n=4)  # 120 rows
    path = store.write(df, {"n_samples": 4})
    original = path.read_bytes()
    before = store.read().sort_values(["problem_id", "sample_index"]).reset_index(drop=True)
    assert verify_part(path) is True
    detected = unchanged = 0
    for offset in range(4, len(original) - 8, max(1, len(original) // 80)):
        flipped = bytearray(original)
        flipped[offset] ^= 1 << (offset % 8)
        path.write_bytes(bytes(flipped))
        try:
            verify_part(path)
        except DamagedFile as e:
            assert e.path == path and "\n" not in str(e)
            detected += 1
            continue
        after = store.read().sort_values(["problem_id", "sample_index"]).reset_index(drop=True)
        assert after.equals(before), f"bit flip at byte {offset} changed rows without an error"
        unchanged += 1
    assert detected > 25  # most bytes of a part are data: flipping them is caught
    path.write_bytes(original)
    assert store.verify() == 1
