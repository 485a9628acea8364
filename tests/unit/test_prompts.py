"""The prompt rule training and evaluation share (fade_core.data.prompts)."""

from __future__ import annotations

from fade_core.data.prompts import prompt_text


def test_starter_code_is_appended_once_to_code_prompts_only() -> None:
    assert prompt_text({"prompt": "Solve.", "kind": "code_call", "starter_code": "def f(x):"}) == "Solve.\n\ndef f(x):"
    assert prompt_text({"prompt": "Read n.\n\n", "kind": "code_stdio", "starter_code": "import sys"}) == \
        "Read n.\n\nimport sys"
    # a HumanEval prompt already ends with its signature: nothing added
    assert prompt_text({"prompt": "def f(x):\n", "kind": "code_call", "starter_code": "def f(x):"}) == "def f(x):\n"
    assert prompt_text({"prompt": "3 5 7 -> 22: ", "kind": "expression", "starter_code": ""}) == "3 5 7 -> 22: "
    assert prompt_text({"prompt": "x = ?", "kind": "math", "starter_code": "def f():"}) == "x = ?"
    assert prompt_text({"prompt": "no kind"}) == "no kind"
