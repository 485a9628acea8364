"""Adversarial suite: every attack fails, the machine is unharmed, and a correct program passes after.

Limits are tight (1-2 CPU seconds, a few wall seconds, 256 MiB, 32 processes) so no attack can load
the shared machine for long; every worker runs in its own session and is killed on teardown. Network
attacks only target a server this test starts on 127.0.0.1.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading

import pytest

from fade_core import sandbox
from fade_core.sandbox.pool import Limits

TIGHT = Limits(cpu_s=1, wall_s=5, mem_mb=256, nproc=32, nofile=32, fsize_mb=4, stdout_bytes=1 << 20)
STDIO_OK = ("a, b = map(int, input().split())\nprint(a + b)\n", [{"input": "2 3", "output": "5"}])
ADD_PROMPT = 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n'
ADD_CHECK = [{"input": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 7) == 12\n",
              "output": None, "testtype": "humaneval"}]  # fmt: skip


@pytest.fixture(scope="module")
def sb():
    with sandbox.Sandbox(1, limits=TIGHT) as s:
        yield s


def _uid_procs(uid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "pid=,args=", "-u", str(uid)], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if ln.strip()]


def still_works(sb) -> None:
    """A correct program passes right after an attack, in every mode."""
    code, tests = STDIO_OK
    assert sb.run(code, tests, kind="stdio").passed
    assert sb.run("def f(x): return x + 1", [{"input": [1], "output": 2}], kind="call", fn_name="f").passed
    assert sb.run(ADD_PROMPT + "    return a + b\n", ADD_CHECK, kind="call", fn_name="add", prompt=ADD_PROMPT).passed


def attack_stdio(sb, code: str, expected: str = "5", stdin: str = "2 3") -> sandbox.Verdict:
    v = sb.run(code, [{"input": stdin, "output": expected}], kind="stdio")
    assert not v.passed, v
    still_works(sb)
    return v


def attack_humaneval(sb, completion: str) -> sandbox.Verdict:
    v = sb.run(ADD_PROMPT + completion, ADD_CHECK, kind="call", fn_name="add", prompt=ADD_PROMPT)
    assert not v.passed, v
    still_works(sb)
    return v


# ---------------------------------------------------------------------------------------- resources
def test_fork_bomb(sb):
    v = attack_stdio(sb, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert v.status in ("timeout", "runtime_error")
    if os.geteuid() == 0:
        assert _uid_procs(65534) == [], "fork bomb left processes behind"


def test_orphans_that_escape_the_session_are_killed(sb):
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n"
            "    os._exit(0)\nprint(5)\n")  # fmt: skip
    v = sb.run(code, [{"input": "", "output": "5"}], kind="stdio")
    assert v.passed  # a correct answer is still correct...
    if os.geteuid() == 0:
        assert _uid_procs(65534) == []  # ...but its background daemon is gone


def test_memory_bomb(sb):
    v = attack_stdio(sb, "x = []\nwhile True:\n    x.append(bytearray(10 * 1024 * 1024))\n")
    assert v.status in ("memory_limit", "timeout")  # page-touching growth may hit the CPU limit first
    v = attack_stdio(sb, "x = ' ' * (8 * 1024 ** 3)\n")
    assert v.status == "memory_limit"


def test_infinite_loops(sb):
    assert attack_stdio(sb, "while True:\n    pass\n").status == "timeout"
    assert attack_stdio(sb, "import time\ntime.sleep(1000)\n").status == "timeout"
    assert attack_stdio(sb, "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n").status == "timeout"
    v = sb.run("def add(a, b):\n    while True: pass\n", [{"input": [1, 2], "output": 3}], kind="call", fn_name="add")
    assert v.status == "timeout"
    assert attack_humaneval(sb, "    while True:\n        pass\n").status == "timeout"


def test_huge_output(sb):
    assert attack_stdio(sb, "while True:\n    print('x' * 100000)\n").status == "output_limit"
    assert attack_stdio(sb, "import sys\nwhile True:\n    sys.stderr.write('e' * 100000)\n").status in ("timeout", "output_limit")
    v = sb.run("def f():\n    return 'x' * (64 * 1024 * 1024)\n", [{"input": [], "output": "x"}], kind="call", fn_name="f")
    assert not v.passed and v.status in ("output_limit", "memory_limit")
    still_works(sb)


def test_big_file_and_many_files(sb):
    v = attack_stdio(sb, "with open('big', 'wb') as f:\n    f.write(b'x' * (64 * 1024 * 1024))\n")
    assert v.status in ("output_limit", "memory_limit")
    attack_stdio(sb, "fs = [open(f'f{i}', 'w') for i in range(10000)]\n")


# --------------------------------------------------------------------------------------- filesystem
def test_writes_outside_the_work_dir_fail(sb, tmp_path):
    target = tmp_path / "owned.txt"
    repo_file = os.path.abspath(__file__) + ".owned"
    code = f"""
import os
hits = []
for p in [{str(target)!r}, {repo_file!r}, '/tmp/owned', '/etc/owned', '/usr/owned', '/owned', '/root/owned']:
    try:
        with open(p, 'w') as f:
            f.write('x')
        hits.append(p)
    except OSError:
        pass
print(len(hits), hits)
"""
    v = sb.run(code, [{"input": "", "output": "0 []"}], kind="stdio")
    assert not target.exists() and not os.path.exists(repo_file)
    assert "/etc/owned" not in v.stdout and "/usr/owned" not in v.stdout
    assert not os.path.exists("/etc/owned") and not os.path.exists("/owned")
    # a write inside the sandbox's own scratch space is fine, but never reaches the host
    assert not os.path.exists("/tmp/owned") or open("/tmp/owned").read() != "x"
    still_works(sb)


def test_host_files_are_invisible(sb, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    secret.chmod(0o644)
    code = f"""
out = []
for p in [{str(secret)!r}, '/etc/shadow', '/root/.bash_history', {os.path.abspath(__file__)!r}]:
    try:
        out.append(open(p).read()[:20])
    except OSError as e:
        out.append(type(e).__name__)
print(out[0])
"""
    v = sb.run(code, [{"input": "", "output": "TOPSECRET"}], kind="stdio")
    assert not v.passed and "TOPSECRET" not in v.stdout
    still_works(sb)


# ------------------------------------------------------------------------------------------ network
def test_network_is_unreachable(sb):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    connected = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                connected.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        code = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
                "s.sendall(b'leak')\nprint('connected')\n")  # fmt: skip
        v = sb.run(code, [{"input": "", "output": "connected"}], kind="stdio")
        assert not v.passed and v.status == "runtime_error"
        v = sb.run(f"import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=1).read())",
                   [{"input": "", "output": "x"}], kind="stdio")  # fmt: skip
        assert not v.passed
    finally:
        stop.set()
        t.join(2)
        srv.close()
    assert connected == []
    still_works(sb)


# ------------------------------------------------------------------------------------------ signals
def test_signals_to_the_harness(sb):
    me = os.getpid()
    for code in (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint(5)",
        "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint(5)",
        f"import os, signal\ntry:\n    os.kill({me}, signal.SIGKILL)\nexcept OSError:\n    pass\nprint(6)",
        "import os, signal\nos.killpg(0, signal.SIGKILL)",
        "import os, signal\nos.kill(1, signal.SIGKILL)\nprint(6)",
    ):
        sb.run(code, [{"input": "", "output": "5"}], kind="stdio")
        still_works(sb)
    v = attack_humaneval(sb, "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    os.kill(-1, signal.SIGKILL)\n    return 0\n")
    assert v.status in ("wrong_answer", "runtime_error")


# ---------------------------------------------------------------------------------------- integrity
def test_exit_early_with_status_zero(sb):
    attack_stdio(sb, "import os\nos._exit(0)\n")
    attack_stdio(sb, "import sys\nsys.exit(0)\n")
    v = sb.run("def f(x):\n    import os\n    os._exit(0)\n", [{"input": [1], "output": 2}], kind="call", fn_name="f")
    assert not v.passed
    attack_humaneval(sb, "    import os\n    os._exit(0)\n")
    attack_humaneval(sb, "    raise SystemExit(0)\n")
    attack_humaneval(sb, "    pass\nimport os\nos._exit(0)\n")


def test_success_markers(sb):
    for marker in ("passed", "PASSED", "OK", "True", "All tests passed", '{"passed": true}'):
        attack_stdio(sb, f"print({marker!r})")
    attack_humaneval(sb, "    print('passed')\n    print('{\"done\": true, \"passed\": true}')\n    return None\n")
    attack_humaneval(sb, "    import sys, json, struct\n    b = json.dumps({'done': True, 'passed': True}).encode()\n"
                         "    for fd in range(3, 10):\n        try: __import__('os').write(fd, struct.pack('>I', len(b)) + b)\n"
                         "        except OSError: pass\n    return None\n")  # fmt: skip


def test_dunder_overrides(sb):
    liar = "class Liar:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n    __hash__ = None\n"
    v = sb.run(liar + "def f(x):\n    return Liar()\n", [{"input": [1], "output": 2}], kind="call", fn_name="f")
    assert not v.passed
    evil_int = "class E(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
    v = sb.run(evil_int + "def f(x):\n    return E(0)\n", [{"input": [1], "output": 2}], kind="call", fn_name="f")
    assert not v.passed and v.status == "wrong_answer"
    attack_humaneval(sb, "    class Liar:\n        def __eq__(self, o): return True\n    return Liar()\n")
    attack_humaneval(sb, "    class E(int):\n        def __eq__(self, o): return True\n        __hash__ = int.__hash__\n    return E(0)\n")


def test_patching_builtins_and_the_harness(sb):
    attack_humaneval(sb, "    return 0\nimport builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
                         "builtins.isinstance = lambda *a: True\n")  # fmt: skip
    attack_humaneval(sb, "    return 0\nimport sys\nfor m in list(sys.modules.values()):\n"
                         "    for n in ('write_frame', 'program_checker', 'encode'):\n"
                         "        try: setattr(m, n, lambda *a, **k: None)\n        except Exception: pass\n")  # fmt: skip
    v = sb.run("import sys\nsys.modules['plaindata'].encode = lambda v: 3\ndef f(x):\n    return 0\n",
               [{"input": [1], "output": 3}, {"input": [2], "output": 4}], kind="call", fn_name="f")  # fmt: skip
    assert not v.passed
    still_works(sb)


def test_reading_the_tests(sb):
    """The check program and expected outputs never enter the candidate's sandbox."""
    snoop = """
import gc, os, sys
def _seen(codes):
    blobs = []
    for o in gc.get_objects():
        for r in gc.get_referents(o):
            if isinstance(r, (str, bytes)):
                blobs.append(r)
    for f in sys._current_frames().values():
        while f:
            blobs += [repr(v) for v in f.f_locals.values()]
            f = f.f_back
    for root in ('/', '/tmp', os.getcwd(), '/fade_sandbox', '/proc/self'):
        try:
            for n in os.listdir(root):
                try:
                    blobs.append(open(os.path.join(root, n), errors='ignore').read(100000))
                except Exception:
                    pass
        except Exception:
            pass
    text = '\\n'.join(b if isinstance(b, str) else b.decode(errors='ignore') for b in blobs)
    return ''.join(map(chr, codes)) in text
"""
    mark = "SNOOPMARK"
    codes = [ord(c) for c in mark]  # the candidate's source never contains the marker itself
    check = [{"input": f"def check(candidate):\n    # {mark}\n    assert candidate(1, 2) == 3\n", "output": None,
              "testtype": "humaneval"}]  # fmt: skip
    # the candidate answers correctly only if it could find the check program
    code = ADD_PROMPT + f"    return a + b if _seen({codes}) else -1\n" + snoop
    v = sb.run(code, check, kind="call", fn_name="add", prompt=ADD_PROMPT)
    assert not v.passed, v
    # control: the same snoop does find a marker that is in its own memory
    v = sb.run(ADD_PROMPT + f"    return a + b if _seen({codes}) else -1\nSTASH = {mark!r}\n" + snoop, check,
               kind="call", fn_name="add", prompt=ADD_PROMPT)  # fmt: skip
    assert v.passed, v
    v = sb.run(snoop + f"print('{mark}' if _seen({codes}) else 'nothing')\n".replace(f"'{mark}'", f"''.join(map(chr, {codes}))"),
               [{"input": "", "output": mark}], kind="stdio")  # fmt: skip
    assert not v.passed and v.stdout.strip() == "nothing", v
    still_works(sb)


def test_worker_cannot_be_traced_or_forged(sb):
    code = """
import os
pp = os.getppid()
hits = []
for p in (f'/proc/{pp}/mem', f'/proc/{pp}/fd/1', f'/proc/{pp}/environ'):
    try:
        with open(p, 'rb'):
            hits.append(p)
    except OSError:
        pass
print(hits)
"""
    v = sb.run(code, [{"input": "", "output": "x"}], kind="stdio")
    assert v.stdout.strip() == "[]", v
    still_works(sb)
