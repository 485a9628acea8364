"""The one config model: params.yaml mirrors it, every bad key is named before any work starts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from fade_core import config as fconfig
from fade_core.params_yaml import render_yaml

ROOT = Path(__file__).resolve().parents[2]


def _keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _keys(ann, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def _yaml_keys(d: dict, model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        field = model.model_fields.get(k)
        ann = field.annotation if field else None
        if isinstance(v, dict) and isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _yaml_keys(v, ann, f"{prefix}{k}.")
        else:
            out.add(prefix + k)
    return out


def test_params_yaml_mirrors_the_model():
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert _yaml_keys(raw, fconfig.Config) == _keys(fconfig.Config)
    fconfig.load(ROOT / "params.yaml")  # and it validates


# Keys whose params.yaml value deliberately differs from the model's default, and why. Anything else that
# differs is a params file left behind by a changed default (b9161b1 moved the testbed's defaults while
# params.yaml, which overrides them, kept the old testbed: fade run and fade study trained on it).
PARAMS_YAML_CHOICES = {
    "eval.ks": "params.yaml names k = 32 too (the default is 1, 10, 100 up to n_samples)",
    "eval.skip_existing": "the default run re-evaluates; the study turns skipping on",
    "pipeline.arms": "params.yaml writes each arm's params: {} out in full",
}


def _leaves(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v and not prefix.startswith(("pipeline.arms", "data.countdown.levels")):
            out |= _leaves(v, f"{prefix}{k}.")
        else:
            out[prefix + k] = v
    return out


def test_params_yaml_values_are_the_defaults_or_a_stated_choice():
    """A default changed in fade_core.config reaches params.yaml too (the file overrides the default)."""
    written = _leaves(fconfig.load(ROOT / "params.yaml").to_dict())
    default = _leaves(fconfig.Config().to_dict())
    differ = {k for k in default if written.get(k) != default[k] and not k.startswith(tuple(PARAMS_YAML_CHOICES))}
    assert not differ, {k: (written.get(k), default[k]) for k in sorted(differ)}


def test_every_field_is_documented():
    def walk(model: type[BaseModel], prefix: str = "") -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
            elif prefix:
                assert field.description, f"{prefix}{name} has no help line"

    walk(fconfig.Config)


def test_overrides_are_typed():
    cfg = fconfig.from_dict({}, ["train.method=power", "train.params.alpha=2", "pipeline.seeds=[3, 4]"])
    assert cfg.train.method == "power"
    assert cfg.train.params == {"alpha": 2} and isinstance(cfg.train.params["alpha"], int)
    assert cfg.pipeline.seeds == [3, 4]


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["train.lerning_rate=1"], "train.lerning_rate"),
        (["train.group_size=0"], "train.group_size"),
        (["rollout.top_p=1.5"], "rollout.top_p"),
        (["rollout.engine=tpu"], "rollout.engine"),
        (["nosection.x=1"], "nosection"),
        (["train.method=nonsense"], "train"),
        (["train.method=power", "train.params.alpah=2"], "train"),
        (["eval.n_samples=4", "eval.ks=[10, 100]"], "n_samples"),
        (["pipeline.arms={power0.5: {method: power}}"], "power0.5"),  # DVC would read the '.' as a nested key
        (["pipeline.arms={base: {method: grpo}}"], "base"),
        (["pipeline.arms={grpo-s1: {method: grpo}}"], "grpo-s1"),
    ],
)
def test_bad_keys_are_named(overrides, named):
    with pytest.raises(fconfig.ConfigError) as e:
        fconfig.from_dict({}, overrides)
    assert named in str(e.value)


def test_bad_override_syntax():
    with pytest.raises(fconfig.ConfigError, match="KEY=VALUE"):
        fconfig.from_dict({}, ["train.method"])


def test_missing_params_file_is_an_error(tmp_path):
    with pytest.raises(fconfig.ConfigError, match="does not exist"):
        fconfig.load(tmp_path / "nope.yaml")


def test_fingerprint_changes_with_config():
    a = fconfig.from_dict({})
    b = fconfig.from_dict({}, ["train.lr=0.5"])
    assert a.fingerprint() == fconfig.from_dict({}).fingerprint()
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint("data") == b.fingerprint("data")
    assert a.fingerprint("train", exclude={"train": ["lr"]}) == b.fingerprint("train", exclude={"train": ["lr"]})
    assert a.to_dict()["train"]["lr"] == 0.001  # exclude works on a copy


def test_rendered_params_document_the_methods_in_use():
    """advantages.describe() reaches params.yaml: under train.params the method's parameters, under
    pipeline.arms those of the arms' other methods, each once, with default, rule and help."""
    from fade_core import advantages

    cfg = fconfig.from_dict({}, ["train.method=power", "pipeline.arms={a: {method: power}, b: {method: dapo}, "
                                 "c: {method: dapo, params: {eps_high: 0.3}}, d: {method: reinforce}}"])
    text = render_yaml(cfg)
    train = text[text.index("\ntrain:"):text.index("\nrollout:")]
    pipeline = text[text.index("\npipeline:"):text.index("\nreport:")]
    assert "# power: " + advantages.method("power").summary in train
    assert "#   alpha = 2.0  (a number >= 1) Difficulty focus" in train
    assert "# power:" not in pipeline and pipeline.count("# dapo: ") == 1 and "# reinforce: A = r" in pipeline
    assert "#   overlong_buffer = null  (null or an integer >= 1)" in pipeline
    for line in advantages.describe("dapo").splitlines():
        assert line in pipeline
    assert fconfig.from_dict(yaml.safe_load(text)) == cfg  # the comments leave the YAML as it was


def test_save_round_trip(tmp_path):
    cfg = fconfig.from_dict({}, ["train.method=asym_grpo", "train.params.delta=0.5"])
    path = fconfig.save(cfg, tmp_path / "config.yaml")
    assert fconfig.load(path) == cfg
    rendered = tmp_path / "params.yaml"
    rendered.write_text(render_yaml(cfg))
    assert fconfig.load(rendered) == cfg


def test_model_prompt_options_are_checked_naming_the_key(tmp_path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text("{{ messages[0]['content'] }}")
    cfg = fconfig.load(None, [f"model.chat_template={template}", "model.system_prompt=Be brief."])
    assert cfg.model.chat_template == str(template) and cfg.model.attn_implementation == "auto"
    for override, key in (("model.chat_template=nofile.jinja", "model.chat_template: Value error, not auto, none"),
                          ("model.prompt_templates={maths: x.yaml}", "model.prompt_templates: Value error, 'maths'"),
                          (f"model.prompt_templates={{math: {tmp_path}/x.yaml}}", "is not a file"),
                          ("model.attn_implementation=flash", "model.attn_implementation")):
        with pytest.raises(fconfig.ConfigError, match=re.escape(key)):
            fconfig.load(None, [override])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["eval.ks=[0]"], "eval.ks: k must be at least 1"),
        (["train.eps_low=2"], "train.eps_low: Input should be less than 1"),
        (["eval.n_samples=8", "eval.ks=[1, 4, 16]"], "eval.ks: [16] above eval.n_samples=8"),
        (["train.benchmark=nope"], "train.benchmark: unknown benchmark(s) ['nope']"),
        (["eval.benchmarks=[countdown, nope]"], "eval.benchmarks: unknown benchmark(s) ['nope']"),
        (["train.method=grpo", "train.group_size=1"], "train: method 'grpo' gives advantage 0 to every rollout"),
        (["train.method=psr", "train.group_size=1", "pipeline.arms={a: {method: rloo}}"], "pipeline.arms.a: method 'rloo' gives advantage 0"),
    ],
)
def test_validation_time_checks_name_the_key(overrides, message):
    """Issue 16 point 9: what a later stage would find (a benchmark no loader reads, a k that n cannot
    estimate, a method that cannot learn at the group size) is refused when the config is validated."""
    with pytest.raises(fconfig.ConfigError) as e:
        fconfig.load(None, overrides)
    assert message in str(e.value)


def test_group_size_one_keeps_methods_that_weight_a_lone_rollout():
    """REINFORCE-style weights (no group baseline) still learn from one rollout per prompt."""
    cfg = fconfig.load(None, ["train.method=w_reinforce", "train.group_size=1", "pipeline.arms={a: {method: psr}}"])
    assert cfg.train.group_size == 1


def test_default_ks_are_those_n_estimates_and_given_ks_are_kept():
    assert fconfig.load(None, ["eval.n_samples=4"]).eval.ks == [1]
    assert fconfig.load(None, ["eval.n_samples=200"]).eval.ks == [1, 10, 100]
    assert fconfig.load(None, ["eval.n_samples=16", "eval.ks=[1, 16]"]).eval.ks == [1, 16]


def test_params_file_not_utf8_or_with_a_key_twice_is_named(tmp_path):
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("train:\n  label: café\n".encode("latin-1"))
    with pytest.raises(fconfig.ConfigError, match=r"latin1.yaml: not UTF-8 text \(byte 19"):
        fconfig.load(latin1)
    twice = tmp_path / "twice.yaml"
    twice.write_text("train:\n  steps: 3\n  lr: 0.1\n  steps: 4\n")
    with pytest.raises(fconfig.ConfigError, match=r"twice.yaml: line 4: key 'steps' given twice \(first at line 2\)"):
        fconfig.load(twice)
    sections = tmp_path / "sections.yaml"
    sections.write_text("train: {}\ntrain: {}\n")
    with pytest.raises(fconfig.ConfigError, match="key 'train' given twice"):
        fconfig.load(sections)
