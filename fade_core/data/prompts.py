"""The prompt: the one function, shared by training and evaluation, that turns a problem into model input.

Training (fade_core.train) and evaluation (fade_core.evaluate) both call :func:`build_prompt`, so a policy
is evaluated on exactly the text it was trained on. A prompt is made of three parts:

1. The benchmark kind's **template** (:func:`template_for`), one YAML file per kind under
   ``fade_core/data/prompt_templates/`` (``model.prompt_templates`` may replace one)::

       code_stdio  stdin/stdout programs (TACO, LiveCodeBench)   LiveCodeBench's official wording
       code_call   functions called with arguments (starter code) LiveCodeBench's official wording
       humaneval   HumanEval's signature + docstring               completion (plain) / whole function (chat)
       math        a final answer (AIME, MATH, GSM8K)              "... put your final answer within \\boxed{}."
       countdown   the built-in task                               the prompt as it is

   Each template gives the user turn (``chat.user``), the text for models without a chat template
   (``plain.text``), a default system message, stop sequences and a generation budget
   (``max_new_tokens``, used when ``rollout.max_new_tokens`` / ``eval.max_new_tokens`` are null).
2. The **chat template** of the tokenizer, applied when it has one and ``model.chat_template`` is not
   ``none`` (:class:`PromptStyle`), with ``add_generation_prompt``: the text then ends where the
   assistant's answer starts. Without one the template's plain text is used.
3. The **system message**: ``model.system_prompt`` when set ('' for none), else the template's.

Placeholders ``{prompt}`` (the problem statement) and ``{starter_code}`` are filled in one pass, so braces
in a statement are never read as placeholders. :func:`prompt_record` is what a run saves beside its
config (``prompt.json``): the resolved templates, the chat template and one rendered prompt.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

CODE_KINDS = ("code_stdio", "code_call")
TEMPLATE_DIR = Path(__file__).resolve().parent / "prompt_templates"
TEMPLATE_NAMES = ("countdown", "math", "code_stdio", "code_call", "humaneval")
_PLACEHOLDER = re.compile(r"\{(prompt|starter_code)\}")


class PromptError(ValueError):
    """A prompt template or chat template that cannot be used; the message names the file or the option."""


@dataclass(frozen=True)
class PromptTemplate:
    """How one kind of benchmark is asked (one YAML file; see the module docstring and the shipped files).

    system: default system message (None: none); chat_user: the user turn; plain_text: the text of a model
    without a chat template, preceded by the system message when ``plain_system``; stops: where a
    completion ends besides EOS, per form; max_new_tokens: the kind's generation budget.
    """

    name: str
    source: str
    max_new_tokens: int
    system: str | None
    chat_user: str
    chat_stop: tuple[str, ...]
    plain_text: str
    plain_system: bool
    plain_stop: tuple[str, ...]
    path: str = ""

    @classmethod
    def from_file(cls, path: str | Path) -> PromptTemplate:
        """Read and check a template file; a missing or wrong key raises PromptError naming file and key."""
        p = Path(path)
        try:
            raw = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise PromptError(f"prompt template {p}: cannot read ({e})") from None
        if not isinstance(raw, dict):
            raise PromptError(f"prompt template {p}: expected a mapping")

        def get(section: str | None, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
            where = raw if section is None else raw.get(section)
            label = key if section is None else f"{section}.{key}"
            if not isinstance(where, dict) or key not in where:
                if default is not ...:
                    return default
                raise PromptError(f"prompt template {p}: missing key {label!r}")
            value = where[key]
            if not isinstance(value, kind):
                raise PromptError(f"prompt template {p}: {label} must be {kind}, got {type(value).__name__}")
            return value

        budget = get(None, "max_new_tokens", int)
        if budget < 1:
            raise PromptError(f"prompt template {p}: max_new_tokens must be >= 1, got {budget}")
        stops = {}
        for section in ("chat", "plain"):
            stop = get(section, "stop", list, [])
            if not all(isinstance(s, str) and s for s in stop):
                raise PromptError(f"prompt template {p}: {section}.stop must be a list of non-empty strings")
            stops[section] = tuple(stop)
        return cls(
            name=get(None, "name", str), source=get(None, "source", str, ""), max_new_tokens=budget,
            system=get(None, "system", (str, type(None)), None), chat_user=get("chat", "user", str),
            chat_stop=stops["chat"], plain_text=get("plain", "text", str),
            plain_system=get("plain", "system", bool, False), plain_stop=stops["plain"], path=str(p),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PromptStyle:
    """The prompt options of a config's ``model`` section.

    chat: apply the tokenizer's chat template when it has one (model.chat_template != "none");
    system_prompt: None for the template's own system message, "" for none, else this text;
    templates: {template name: YAML file} replacing shipped templates (model.prompt_templates).
    """

    chat: bool = True
    system_prompt: str | None = None
    templates: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_model_config(cls, model: Any) -> PromptStyle:
        """The style of a ``ModelConfig`` (or a mapping with its keys, as a run's config.yaml holds)."""
        get = (lambda k, d=None: model.get(k, d)) if isinstance(model, Mapping) else (lambda k, d=None: getattr(model, k, d))
        return cls(chat=get("chat_template", "auto") != "none", system_prompt=get("system_prompt"),
                   templates=dict(get("prompt_templates") or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"chat": self.chat, "system_prompt": self.system_prompt, "templates": dict(self.templates)}


@dataclass(frozen=True)
class Prompt:
    """One rendered prompt: the text the policy continues, which template and form made it, where its
    completions stop (besides EOS) and the template's generation budget."""

    text: str
    template: str
    chat: bool
    stop: tuple[str, ...]
    max_new_tokens: int


# ------------------------------------------------------------------------------------------ templates
def template_name(problem: Mapping[str, Any]) -> str:
    """The template of a problem row: by ``kind``, and for code_call rows judged by HumanEval's check
    program (tests of testtype "humaneval") the HumanEval template."""
    kind = problem.get("kind")
    if kind == "expression":
        return "countdown"
    if kind == "math":
        return "math"
    if kind == "code_stdio":
        return "code_stdio"
    if kind == "code_call":
        tests = problem.get("tests") or "[]"
        parsed = json.loads(tests) if isinstance(tests, str) else tests
        is_humaneval = any(isinstance(t, Mapping) and t.get("testtype") == "humaneval" for t in parsed or [])
        return "humaneval" if is_humaneval else "code_call"
    raise PromptError(f"problem {problem.get('problem_id')!r}: kind={kind!r} has no prompt template")


@functools.lru_cache(maxsize=64)
def _read_template(path: str) -> PromptTemplate:
    return PromptTemplate.from_file(path)


def load_template(name: str, style: PromptStyle | None = None) -> PromptTemplate:
    """The template called ``name``: the style's replacement file when it has one, else the shipped file."""
    if name not in TEMPLATE_NAMES:
        raise PromptError(f"unknown prompt template {name!r}; one of {', '.join(TEMPLATE_NAMES)}")
    override = (style.templates if style else {}).get(name)
    return _read_template(str(Path(override).resolve()) if override else str(TEMPLATE_DIR / f"{name}.yaml"))


def template_for(problem: Mapping[str, Any], style: PromptStyle | None = None) -> PromptTemplate:
    """The template that asks ``problem`` (see :func:`template_name`)."""
    return load_template(template_name(problem), style)


# ------------------------------------------------------------------------------------------ rendering
def fill(text: str, problem: Mapping[str, Any]) -> str:
    """``text`` with ``{prompt}`` and ``{starter_code}`` replaced by the problem's, in one pass."""
    values = {"prompt": str(problem.get("prompt") or ""), "starter_code": str(problem.get("starter_code") or "")}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def uses_chat(tokenizer: Any, style: PromptStyle) -> bool:
    """Whether prompts for ``tokenizer`` go through its chat template."""
    return bool(style.chat and tokenizer is not None and getattr(tokenizer, "chat_template", None))


def system_message(template: PromptTemplate, style: PromptStyle) -> str | None:
    """The system message: the style's when set ('' means none), else the template's."""
    text = template.system if style.system_prompt is None else style.system_prompt
    return text.strip() if text and text.strip() else None


def render_chat(tokenizer: Any, system: str | None, user: str) -> str:
    """The chat template applied to an optional system turn and the user turn, ending where the assistant
    answers. A template that refuses a system turn gets the system message at the top of the user turn."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as e:  # jinja2's TemplateError ("System role not supported") and the like
        if not system:
            raise PromptError(f"the tokenizer's chat template failed: {type(e).__name__}: {e}") from None
        return render_chat(tokenizer, None, f"{system}\n\n{user}")


def build_prompt(problem: Mapping[str, Any], tokenizer: Any = None, style: PromptStyle | None = None) -> Prompt:
    """The prompt of one problem row (a mapping with ``prompt``, ``kind`` and optionally ``starter_code``,
    ``tests``) for a model with ``tokenizer`` (None: no chat template) under ``style``."""
    style = style or PromptStyle()
    template = template_for(problem, style)
    system = system_message(template, style)
    if uses_chat(tokenizer, style):
        text = render_chat(tokenizer, system, fill(template.chat_user, problem))
        return Prompt(text, template.name, True, template.chat_stop, template.max_new_tokens)
    text = fill(template.plain_text, problem)
    if template.plain_system and system:
        text = f"{system}\n\n{text}"
    return Prompt(text, template.name, False, template.plain_stop, template.max_new_tokens)


def prompt_text(problem: Mapping[str, Any], tokenizer: Any = None, style: PromptStyle | None = None) -> str:
    """The text of :func:`build_prompt`."""
    return build_prompt(problem, tokenizer, style).text


def generation_budget(prompts: Sequence[Prompt]) -> int:
    """The budget that fits every one of ``prompts``' templates (the largest); 16 when there are none."""
    return max((p.max_new_tokens for p in prompts), default=16)


def prompt_record(problems: Sequence[Mapping[str, Any]], prompts: Sequence[Prompt], tokenizer: Any,
                  style: PromptStyle) -> dict[str, Any]:
    """What a run or an evaluation saves about its prompts: the style, every template used (resolved, with
    its file), the chat template's text (None when not applied) and the first rendered prompt."""
    names = list(dict.fromkeys(p.template for p in prompts))
    chat = any(p.chat for p in prompts)
    example = {"problem_id": problems[0].get("problem_id"), "text": prompts[0].text} if prompts else None
    return {
        "style": style.to_dict(),
        "chat_template": getattr(tokenizer, "chat_template", None) if chat else None,
        "templates": {n: load_template(n, style).to_dict() for n in names},
        "example": example,
    }
