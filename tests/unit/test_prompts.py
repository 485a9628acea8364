"""The prompt both training and evaluation build (fade_core.data.prompts): one template per benchmark kind,
the tokenizer's chat template, the system message, stops and budgets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fade_core.data import prompts as pr
from tests.hf_models import train_tokenizer

STDIO = {"problem_id": "taco/1", "prompt": "Read a and b; print a+b. Input like {x}.", "kind": "code_stdio",
         "starter_code": "", "tests": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}])}
CALL = {"problem_id": "lcb/2", "prompt": "Return the sum.", "kind": "code_call",
        "starter_code": "class Solution:\n    def add(self, a: int, b: int) -> int:",
        "tests": json.dumps([{"input": [1, 2], "output": 3, "testtype": "functional"}])}
HUMANEVAL = {"problem_id": "HumanEval/0", "prompt": "def f(x):\n    \"\"\"Double x.\"\"\"\n", "kind": "code_call",
             "starter_code": "", "tests": json.dumps([{"input": "def check(c): pass", "output": None, "testtype": "humaneval"}])}
MATH = {"problem_id": "aime/1", "prompt": "Find $x$ if $x^{2} = 4$ and $x > 0$.", "kind": "math", "tests": "[]"}
COUNTDOWN = {"problem_id": "countdown/0", "prompt": "3 5 7 -> 22: ", "kind": "expression", "tests": "[]"}


@pytest.fixture(scope="module")
def chatml():
    return train_tokenizer("chatml")


def test_every_shipped_template_loads_and_names_itself() -> None:
    files = sorted(p.stem for p in pr.TEMPLATE_DIR.glob("*.yaml"))
    assert files == sorted(pr.TEMPLATE_NAMES)
    for name in pr.TEMPLATE_NAMES:
        t = pr.load_template(name)
        assert t.name == name and t.source and t.max_new_tokens >= 16
    assert pr.load_template("countdown").max_new_tokens == 16  # the built-in task keeps its budget
    assert pr.load_template("code_stdio").max_new_tokens == pr.load_template("math").max_new_tokens == 4096


def test_template_by_kind() -> None:
    assert [pr.template_name(p) for p in (STDIO, CALL, HUMANEVAL, MATH, COUNTDOWN)] == [
        "code_stdio", "code_call", "humaneval", "math", "countdown"]
    with pytest.raises(pr.PromptError, match="kind='essay'"):
        pr.template_name({"problem_id": "x", "kind": "essay", "prompt": "?"})


def test_plain_prompts_of_models_without_a_chat_template() -> None:
    stdio = pr.build_prompt(STDIO)
    assert not stdio.chat and stdio.template == "code_stdio" and stdio.stop == ()
    # LiveCodeBench's wording: system message first, then question, format block, answer line
    assert stdio.text.startswith("You are an expert Python programmer.")
    assert "### Question:\nRead a and b; print a+b. Input like {x}.\n\n### Format: Read the inputs from stdin" in stdio.text
    assert stdio.text.endswith("```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the provided format with backticks)\n\n")
    call = pr.build_prompt(CALL).text
    assert "starter code" in call and "```python\nclass Solution:\n    def add(self, a: int, b: int) -> int:\n```" in call
    he = pr.build_prompt(HUMANEVAL)
    assert he.text == HUMANEVAL["prompt"] and "\ndef" in he.stop  # completion, cut at the next top-level line
    math = pr.build_prompt(MATH).text
    assert MATH["prompt"] in math and "\\boxed{}" in math  # braces of the statement kept as they are
    assert pr.build_prompt(COUNTDOWN).text == "3 5 7 -> 22: "  # what the built-in model was warm-started on


def test_chat_prompts_apply_the_tokenizers_template(chatml) -> None:
    p = pr.build_prompt(STDIO, chatml)
    assert p.chat and p.text.startswith("<|im_start|>system\nYou are an expert Python programmer.")
    assert "<|im_start|>user\n### Question:\nRead a and b" in p.text and p.text.endswith("<|im_start|>assistant\n")
    # math has no system message of its own; model.system_prompt adds one, '' removes the code one
    assert not pr.build_prompt(MATH, chatml).text.startswith("<|im_start|>system")
    style = pr.PromptStyle(system_prompt="Be brief.")
    assert pr.build_prompt(MATH, chatml, style).text.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    assert "<|im_start|>system" not in pr.build_prompt(STDIO, chatml, pr.PromptStyle(system_prompt="")).text
    # model.chat_template=none: the plain text even though the tokenizer has a template
    assert pr.build_prompt(STDIO, chatml, pr.PromptStyle(chat=False)).text == pr.build_prompt(STDIO).text
    # a HumanEval prompt asks for the whole function in a block (the judge runs prompt + block)
    he = pr.build_prompt(HUMANEVAL, chatml)
    assert he.stop == () and "```python\ndef f(x):" in he.text


def test_a_template_that_refuses_a_system_turn_gets_it_in_the_user_turn(chatml) -> None:
    chatml.chat_template = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not "
                            "supported') }}{% endif %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>")
    text = pr.build_prompt(STDIO, chatml).text
    assert text.startswith("<user>You are an expert Python programmer.") and "### Question:" in text


def test_a_template_file_replaces_a_shipped_one(tmp_path: Path) -> None:
    f = tmp_path / "math.yaml"
    f.write_text('name: math\nmax_new_tokens: 64\nchat: {user: "Q: {prompt}"}\nplain: {text: "Q: {prompt} A:", stop: ["\\n"]}\n')
    p = pr.build_prompt(MATH, None, pr.PromptStyle(templates={"math": str(f)}))
    assert p.text == f"Q: {MATH['prompt']} A:" and p.stop == ("\n",) and p.max_new_tokens == 64
    (tmp_path / "bad.yaml").write_text("name: math\nchat: {user: x}\nplain: {text: y}\n")
    with pytest.raises(pr.PromptError, match="missing key 'max_new_tokens'"):
        pr.PromptTemplate.from_file(tmp_path / "bad.yaml")


def test_prompt_record_holds_templates_chat_template_and_an_example(chatml) -> None:
    rows = [STDIO, CALL]
    built = [pr.build_prompt(r, chatml) for r in rows]
    rec = pr.prompt_record(rows, built, chatml, pr.PromptStyle())
    assert sorted(rec["templates"]) == ["code_call", "code_stdio"] and rec["chat_template"] == chatml.chat_template
    assert rec["example"] == {"problem_id": "taco/1", "text": built[0].text}
    assert pr.generation_budget(built) == 4096 and pr.generation_budget([]) == 16
