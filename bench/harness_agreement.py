"""fade's judge beside the official harnesses, row by row, on the real-format samples in shared/realdata.

For every row it runs the reference solution (TACO, LiveCodeBench) or the reference worked solution
(AIME) and deliberately wrong variants of it through fade and through the benchmark's own harness:

    TACO            FlagOpen/TACO metrics/testing_util.py run_test
    LiveCodeBench   LiveCodeBench lcb_runner/evaluation/testing_util.py run_test (+ its extract_code)
    AIME            QwenLM/Qwen2.5-Math evaluation/parser.py extract_answer + grader.py math_equal

The official code is never part of fade: pass the folders of your own clones (``fetch`` them, or
``git clone``); each official run happens in a fresh subprocess (their harnesses disable os functions
and use alarms). The Qwen grader needs sympy, regex, antlr4-python3-runtime==4.11.1 and its vendored
latex2sympy installed in ``--qwen-python``.

Wrong variants (each must fail; which official harness passes it anyway is reported):
    perturbed     the reference's output with its last number changed (integers +1, floats by 1%),
                  or its last token changed; call mode: the returned value changed the same way
    reversed      stdio: the reference's output lines in reverse order (only where that differs)
    as_set        call mode: a returned list given back as a set
    near_int      call mode: an integer result returned as a float 1e-7 away
                  (a variant that does not apply to a row, e.g. as_set where the result is not a
                  list, raises instead, so it can never pass by being the reference itself)
    boxed_plus1   AIME: the right answer plus one, boxed

    python bench/harness_agreement.py --taco-repo ../TACO --lcb-repo ../LiveCodeBench \\
        --qwen-repo ../Qwen2.5-Math --qwen-python ../venv/bin/python [--realdata ../shared/realdata]

Prints a markdown summary (docs/judging.md records one run) and writes every row's verdicts as JSON
lines to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PERTURB_HELPERS = textwrap.dedent(
    '''
    import re as _fade_re
    def _fade_perturb_text(out):
        toks = _fade_re.split(r"(\\s+)", out)
        for i in reversed(range(len(toks))):
            t = toks[i]
            if _fade_re.fullmatch(r"[+-]?\\d+", t):
                toks[i] = str(int(t) + 1)
                return "".join(toks)
            if _fade_re.fullmatch(r"[+-]?(\\d+\\.\\d*|\\.\\d+)([eE][+-]?\\d+)?", t):
                v = float(t)
                toks[i] = repr(v + 0.01 * max(1.0, abs(v)))
                return "".join(toks)
        for i in reversed(range(len(toks))):
            if toks[i].strip():
                toks[i] = toks[i] + "x"
                return "".join(toks)
        return out + "x\\n"
    def _fade_perturb_value(v):
        if isinstance(v, bool):
            return not v
        if isinstance(v, int):
            return v + 1
        if isinstance(v, float):
            return v + 0.01 * max(1.0, abs(v))
        if isinstance(v, str):
            return v + "x"
        if isinstance(v, (list, tuple)):
            return [_fade_perturb_value(v[0]), *v[1:]] if v else [0]
        if isinstance(v, dict):
            return {**v, "__fade_extra__": 0}
        return 0
    '''
)


def stdio_variant(reference: str, how: str) -> str:
    """A stdio program that runs ``reference`` with its stdout captured, then prints it altered."""
    return (
        PERTURB_HELPERS
        + textwrap.dedent(
            f"""
            import io as _fade_io, sys as _fade_sys, threading as _fade_threading
            _fade_real, _fade_buf = _fade_sys.stdout, _fade_io.StringIO()
            _fade_sys.stdout = _fade_buf
            try:
                exec(compile({reference!r}, "<reference>", "exec"), globals())
            except SystemExit:
                pass
            for _t in _fade_threading.enumerate():
                if _t is not _fade_threading.main_thread() and not _t.daemon:
                    _t.join()
            _fade_sys.stdout = _fade_real
            _fade_out = _fade_buf.getvalue()
            if {how!r} == "reversed":
                _fade_lines = _fade_out.strip().split("\\n")
                if [x.strip() for x in _fade_lines] == [x.strip() for x in reversed(_fade_lines)]:
                    raise SystemExit("not applicable: the output reads the same reversed")
                _fade_out = "\\n".join(reversed(_fade_lines)) + "\\n"
            else:
                _fade_out = _fade_perturb_text(_fade_out)
            _fade_sys.stdout.write(_fade_out)
            """
        )
    )


def call_variant(reference: str, fn_name: str, how: str) -> str:
    """A call-mode program whose ``fn_name`` (function or Solution method) returns the reference's
    value altered."""
    alter = {  # a variant that does not apply to a value raises: it never passes by being the reference
        "perturbed": "_fade_perturb_value(v)",
        "as_set": "set(v) if isinstance(v, list) and all(not isinstance(x, (list, dict, set)) for x in v) "
        "else _fade_not_applicable()",
        "near_int": "float(v) + 1e-7 if type(v) is int else _fade_not_applicable()",
    }[how]
    return (
        reference
        + "\n"
        + PERTURB_HELPERS
        + textwrap.dedent(
            f"""
            def _fade_not_applicable():
                raise ValueError("not applicable to this return value")
            def _fade_alter(v):
                return {alter}
            if "Solution" in globals() and hasattr(Solution, {fn_name!r}):
                _fade_orig = getattr(Solution, {fn_name!r})
                setattr(Solution, {fn_name!r}, lambda self, *a, **k: _fade_alter(_fade_orig(self, *a, **k)))
            else:
                _fade_orig_fn = globals()[{fn_name!r}]
                globals()[{fn_name!r}] = lambda *a, **k: _fade_alter(_fade_orig_fn(*a, **k))
            """
        )
    )


# ------------------------------------------------------------------------------------ official runs
TACO_DRIVER = """
import inspect, json, os, sys
inspect.getargspec = inspect.getfullargspec  # removed in Python 3.11; TACO's pyext2 still calls it
sys.path.insert(0, {repo!r})
req = json.loads(sys.stdin.read())
os.chdir(req["cwd"])
from metrics import testing_util as tu
out = tu.run_test({{"input_output": req["input_output"]}}, test=req["program"])
print("@@RESULT@@" + json.dumps([x is True for x in out]))
"""

LCB_DRIVER = """
import json, sys
sys.path.insert(0, {repo!r})
req = json.loads(sys.stdin.read())
from lcb_runner.evaluation import testing_util as tu
res, meta = tu.run_test({{"input_output": req["input_output"]}}, test=req["program"], timeout=6)
print("@@RESULT@@" + json.dumps([x is True for x in res]))
"""


def run_official(driver: str, request: dict[str, Any], python: str, timeout: float = 120) -> bool | None:
    """True when every test passed under the official harness, False otherwise, None on a crash."""
    env = dict(os.environ, PATH=str(Path(python).parent) + os.pathsep + os.environ.get("PATH", ""))
    try:
        p = subprocess.run(
            [python, "-c", driver], input=json.dumps(request), capture_output=True, text=True, timeout=timeout,
            env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("@@RESULT@@"):
            res = json.loads(line[len("@@RESULT@@") :])
            return bool(res) and all(res)
    return None


# --------------------------------------------------------------------------------------------- TACO
def taco_cases(realdata: Path) -> list[dict[str, Any]]:
    """(problem row as fade loads it, raw row, program, variant) for every TACO row and variant."""
    from fade_core import data

    lenient = data.load_result("taco", str(realdata / "taco"), special_judge_without_checker="lenient")
    by_id = {r["problem_id"]: r for r in data.records(lenient.table)}
    cases = []
    for split in ("test", "train"):
        raws = [json.loads(x) for x in (realdata / "taco" / f"{split}.jsonl").read_text().splitlines() if x]
        for i, raw in enumerate(raws):
            pid = f"taco/{split}/{raw.get('taco_test_row', i) if split == 'test' else i}"
            row = by_id[pid]
            ref = json.loads(raw["solutions"])[0]
            io = json.loads(raw["input_output"])
            variants = {"reference": ref}
            if row["kind"] == "code_stdio":
                variants["perturbed"] = stdio_variant(ref, "perturbed")
                outs = ["\n".join(o) if isinstance(o, list) else str(o) for o in io["outputs"]]
                if any(len(o.strip().split("\n")) > 1 for o in outs):
                    variants["reversed"] = stdio_variant(ref, "reversed")
            else:
                for how in ("perturbed", "as_set", "near_int"):
                    variants[how] = call_variant(ref, row["fn_name"], how)
            for how, program in variants.items():
                cases.append({"benchmark": "taco", "problem": row, "raw_io": raw["input_output"], "variant": how,
                              "program": program})  # fmt: skip
    return cases


# ------------------------------------------------------------------------------------ LiveCodeBench
def lcb_cases(realdata: Path) -> list[dict[str, Any]]:
    from fade_core import data, verifiers
    from fade_core.data.livecodebench import decode_private_tests

    res = data.load_result("livecodebench", str(realdata / "livecodebench" / "lcb_sample.jsonl"))
    by_id = {r["problem_id"]: r for r in data.records(res.table)}
    raws = {
        f"livecodebench/{r['question_id']}": r
        for r in (json.loads(x) for x in (realdata / "livecodebench" / "lcb_sample.jsonl").read_text().splitlines() if x)
    }
    cases = []
    for g in (json.loads(x) for x in (realdata / "livecodebench" / "gold.jsonl").read_text().splitlines() if x):
        row, raw = by_id[g["problem_id"]], raws[g["problem_id"]]
        tests = json.loads(raw["public_test_cases"]) + decode_private_tests(raw["private_test_cases"])
        meta = json.loads(raw["metadata"] or "{}")
        io = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests]}
        if meta.get("func_name"):
            io["fn_name"] = meta["func_name"]
        ref = verifiers.extract_code(g["completion"])
        variants = {"reference": ref}
        if row["kind"] == "code_stdio":
            variants["perturbed"] = stdio_variant(ref, "perturbed")
            if any(len(t["output"].strip().split("\n")) > 1 for t in tests):
                variants["reversed"] = stdio_variant(ref, "reversed")
        else:
            for how in ("perturbed", "as_set", "near_int"):
                variants[how] = call_variant(ref, row["fn_name"], how)
        for how, program in variants.items():
            cases.append({"benchmark": "livecodebench", "problem": row, "raw_io": json.dumps(io), "variant": how,
                          "program": program})  # fmt: skip
    return cases


def run_code(cases: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Fill ``fade`` (default settings), ``fade_lenient`` and ``official`` verdicts of code cases."""
    from fade_core import verifiers

    default_problems = []
    for c in cases:
        meta = json.loads(c["problem"]["metadata"])
        meta.pop("judge", None)  # the default: special-judge rows without a checker are undecidable
        default_problems.append({**c["problem"], "metadata": json.dumps(meta)})
    programs = [c["program"] for c in cases]
    scores = verifiers.score_batch(default_problems, programs, extract=False, progress=True)
    lenient = verifiers.score_batch([c["problem"] for c in cases], programs, extract=False, progress=True)
    for c, s, sl in zip(cases, scores, lenient, strict=True):
        c["fade"], c["fade_status"], c["fade_lenient"] = s.passed, s.status, sl.passed
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)

    def official(c: dict[str, Any]) -> bool | None:
        if c["benchmark"] == "taco":
            req = {"input_output": c["raw_io"], "program": c["program"], "cwd": str(work)}
            return run_official(TACO_DRIVER.format(repo=args.taco_repo), req, args.python)
        req = {"input_output": c["raw_io"], "program": c["program"]}
        return run_official(LCB_DRIVER.format(repo=args.lcb_repo), req, args.python)

    with ThreadPoolExecutor(args.jobs) as ex:
        for c, ok in zip(cases, ex.map(official, cases), strict=True):
            c["official"] = ok


# --------------------------------------------------------------------------------------------- AIME
QWEN_DRIVER = """
import json, sys
sys.path.insert(0, {repo!r} + "/evaluation")
from grader import math_equal
from parser import extract_answer
for line in sys.stdin:
    pred_text, gold = json.loads(line)
    print(json.dumps(bool(math_equal(extract_answer(pred_text, "aime24"), gold))), flush=True)
"""


def aime_cases(realdata: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    from fade_core import data, verifiers

    cases = []
    for f in sorted((realdata / "aime").iterdir()):
        res = data.load_result("aime", str(f))
        for row in data.records(res.table):
            meta = json.loads(row["metadata"])
            gold = row["answer"]
            variants = {"boxed": f"The answer is $\\boxed{{{gold}}}$.", "fbox": f"So \\fbox{{{gold}}}.",
                        "framebox": f"So $\\framebox{{{gold}}}$ minutes.",
                        "boxed_plus1": f"The answer is $\\boxed{{{int(gold) + 1}}}$."}  # fmt: skip
            if isinstance(meta.get("solution"), str):
                variants["reference_solution"] = meta["solution"]
            for how, text in variants.items():
                cases.append({"benchmark": "aime", "file": f.name, "problem": row, "variant": how, "program": text})
    scores = verifiers.score_batch([c["problem"] for c in cases], [c["program"] for c in cases])
    p = subprocess.run(
        [args.qwen_python, "-c", QWEN_DRIVER.format(repo=args.qwen_repo)],
        input="".join(json.dumps([c["program"], c["problem"]["answer"]]) + "\n" for c in cases),
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    official = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    if len(official) != len(cases):
        raise RuntimeError(f"Qwen grader answered {len(official)} of {len(cases)}: {p.stderr[-2000:]}")
    for c, s, ok in zip(cases, scores, official, strict=True):
        c["fade"], c["fade_status"], c["fade_lenient"], c["official"] = s.passed, s.status, s.passed, ok
    return cases


# ------------------------------------------------------------------------------------------ summary
def summarize(cases: list[dict[str, Any]]) -> str:
    from collections import defaultdict

    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cases:
        groups[(c["benchmark"], c["variant"])].append(c)
    lines = [
        "| benchmark | variant | rows | official passes | fade passes | both | official only | fade only "
        "| fade undecidable | fade, lenient opt-in |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (bench, how), cs in sorted(groups.items()):
        o = sum(1 for c in cs if c["official"])
        f = sum(1 for c in cs if c["fade"])
        both = sum(1 for c in cs if c["official"] and c["fade"])
        und = sum(1 for c in cs if c["fade_status"] == "undecidable")
        lenient = sum(1 for c in cs if c["fade_lenient"])
        lines.append(
            f"| {bench} | {how} | {len(cs)} | {o} | {f} | {both} | {o - both} | {f - both} | {und} | {lenient} |"
        )
    disagreements = [c for c in cases if bool(c["official"]) != bool(c["fade"])]
    lines += ["", "Disagreements:", ""]
    for c in disagreements:
        lines.append(
            f"- {c['problem']['problem_id']} {c['variant']}: official {c['official']}, fade {c['fade']} "
            f"({c['fade_status']})"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--realdata", default=str(ROOT.parent / "shared" / "realdata"))
    ap.add_argument("--taco-repo", required=True)
    ap.add_argument("--lcb-repo", required=True)
    ap.add_argument("--qwen-repo", required=True)
    ap.add_argument("--qwen-python", required=True, help="a Python with the Qwen grader's requirements")
    ap.add_argument("--python", default=sys.executable, help="Python for the TACO/LCB harnesses (needs numpy)")
    ap.add_argument("--workdir", default="/tmp/fade-harness-agreement")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="harness_agreement.jsonl")
    args = ap.parse_args()
    realdata = Path(args.realdata)
    cases = taco_cases(realdata) + lcb_cases(realdata)
    run_code(cases, args)
    cases += aime_cases(realdata, args)
    with open(args.out, "w") as f:
        for c in cases:
            f.write(json.dumps({k: v for k, v in c.items() if k not in ("problem", "raw_io")}
                               | {"problem_id": c["problem"]["problem_id"]}) + "\n")  # fmt: skip
    print(summarize(cases))
    from fade_core import verifiers

    verifiers.shutdown()


if __name__ == "__main__":
    main()
