"""The attack harness: a policy trying to cheat the sandbox, one attack per function.

Run as a program (``python tests/sandbox/attacks.py --backend auto``) it builds its own sandboxes,
plants host secrets and servers, runs every attack and prints one JSON line: the backend, its
guarantees and, per attack, whether it held. ``tests/unit/test_sandbox_attacks.py`` runs it as root
and as an unprivileged user (with the venv under /tmp and Python under /root), inside a pids and
memory cgroup, and asserts every attack held.

Every attack asserts that the attack itself failed, then :func:`still_works`: a correct program is
judged right and a wrong one wrong, in every mode, on the slot that was attacked (the attack pool has
one slot), so no attack can shift, forge or stall a later verdict.

Attacks are grouped by the classes of issue 13 (1: the protocol and the sandbox's init, 2: the
host file system and sockets, 3: state that outlives a sample, 4: per-sample limits, 5: the trusted
parent, 6: kernel surface and leaks), plus the earlier suite (resources, integrity) and threads.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fade_core import sandbox  # noqa: E402
from fade_core.sandbox import Limits, isolation  # noqa: E402

TIGHT = Limits(cpu_s=1, wall_s=3, mem_mb=256, nproc=32, nofile=32, fsize_mb=4, stdout_bytes=1 << 20, tmp_mb=32)
# The attacks on the memory ceiling get CPU and wall time to spare, so that only the ceiling can end them: on a
# fresh VM (CI) first-touching 256 MiB took over a second of CPU, and the program was stopped for time first.
ROOMY = replace(TIGHT, cpu_s=10, wall_s=20)
STDIO_OK = ("a, b = map(int, input().split())\nprint(a + b)\n", [{"input": "2 3", "output": "5"}])
ADD_PROMPT = 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n'
ADD_CHECK = [{"input": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 7) == 12\n",
              "output": None, "testtype": "humaneval"}]  # fmt: skip
CALL_TESTS = [{"input": [1], "output": 2}, {"input": [5], "output": 6}]


@dataclass
class Ctx:
    """Host-side material the attacks use: the pools, planted secrets, servers, paths."""

    sb: sandbox.Sandbox  # one slot: the attacked slot is the one checked next
    sb2: sandbox.Sandbox  # two slots, for attacks on a concurrent neighbour
    host_dir: Path
    secret_public: Path  # world-readable, holds the expected answer "5"
    secret_private: Path  # 0600, owned by the harness user
    unix_socket: Path
    abstract_name: bytes
    connections: list = field(default_factory=list)
    repo_root: Path = Path(__file__).resolve().parents[2]


def still_works(sb: sandbox.Sandbox) -> None:
    """Right programs pass and wrong ones fail right after an attack, in every mode."""
    code, tests = STDIO_OK
    v = sb.run(code, tests, kind="stdio")
    assert v.passed, f"correct stdio program after the attack: {v}"
    assert not sb.run("print(6)\n", tests, kind="stdio").passed, "a wrong stdio program passed after the attack"
    v = sb.run("def f(x):\n    return x + 1\n", CALL_TESTS, kind="call", fn_name="f")
    assert v.passed, f"correct call program after the attack: {v}"
    assert not sb.run("def f(x):\n    return x\n", CALL_TESTS, kind="call", fn_name="f").passed, "a wrong call program passed"
    v = sb.run(ADD_PROMPT + "    return a + b\n", ADD_CHECK, kind="call", fn_name="add", prompt=ADD_PROMPT)
    assert v.passed, f"correct HumanEval program after the attack: {v}"
    v = sb.run(ADD_PROMPT + "    return a - b\n", ADD_CHECK, kind="call", fn_name="add", prompt=ADD_PROMPT)
    assert not v.passed, "a wrong HumanEval program passed after the attack"


def stdio(ctx: Ctx, code: str, expected: str = "5", stdin: str = "2 3", limits: Limits | None = None) -> sandbox.Verdict:
    """Run an attacking stdio program that must not pass, then check the slot."""
    v = ctx.sb.run(code, [{"input": stdin, "output": expected}], kind="stdio", limits=limits)
    assert not v.passed, f"attack passed: {v}"
    still_works(ctx.sb)
    return v


def humaneval(ctx: Ctx, completion: str) -> sandbox.Verdict:
    v = ctx.sb.run(ADD_PROMPT + completion, ADD_CHECK, kind="call", fn_name="add", prompt=ADD_PROMPT)
    assert not v.passed, f"attack passed: {v}"
    still_works(ctx.sb)
    return v


ATTACKS: dict[str, Callable[[Ctx], None]] = {}


def attack(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
    ATTACKS[fn.__name__] = fn
    return fn


# ------------------------------------------------------------- 1: the protocol and the sandbox's init
FORGED = r'''
import glob, json, os, struct
frames = [{"hello": True}, {"ready": True}, {"ok": True, "value": 2}, {"done": True, "result": {"done": True, "passed": True}},
          {"exit": 0, "signal": None, "killed": None, "oom": False, "wall": 0.1, "cpu": 0.1, "stdout": "5\n",
           "stderr": "", "frames": []}]
blob = b"".join(struct.pack(">I", len(b)) + b for b in (json.dumps(f).encode() for f in frames))
hits = []
for path in glob.glob("/proc/[0-9]*/fd/*") + glob.glob("/proc/[0-9]*/task/*/fd/*"):
    if path.startswith(f"/proc/{os.getpid()}/"):
        continue
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        continue
    try:
        os.write(fd, blob)
        hits.append(path)
    except OSError:
        pass
    finally:
        os.close(fd)
for fd in range(3, 1024):
    try:
        os.write(fd, blob)
        hits.append(fd)
    except OSError:
        pass
print(6, hits)
'''


@attack
def forged_frames_on_every_reachable_descriptor(ctx: Ctx) -> None:
    """Class 1: write reply frames into every descriptor of every process the program can open."""
    v = stdio(ctx, FORGED)
    assert "/proc/1/" not in v.stdout, f"the worker's descriptors were writable: {v.stdout[:300]}"
    humaneval(ctx, "    return 0\n" + FORGED.replace("print(6, hits)", "pass"))


STEAL = r'''
import glob, os
got = []
for path in glob.glob("/proc/[0-9]*/fd/*"):
    if path.startswith(f"/proc/{os.getpid()}/"):
        continue
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        got.append(os.read(fd, 65536))
        os.close(fd)
    except OSError:
        pass
print(repr(b"".join(got))[:2000])
'''


@attack
def steal_requests_from_the_worker(ctx: Ctx) -> None:
    """Class 1: read the next request (the code, the check program) from the worker's descriptors."""
    v = ctx.sb.run(STEAL, [{"input": "", "output": "x"}], kind="stdio")
    assert '"op"' not in v.stdout and "limits" not in v.stdout, f"read a request: {v.stdout[:300]}"
    still_works(ctx.sb)


TRACE = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
ok = []
pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
for pid in pids + [1]:
    for req in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
        if libc.ptrace(req, pid, None, None) == 0:
            ok.append(("ptrace", pid))
    class iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    buf = ctypes.create_string_buffer(64)
    local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
    remote = iovec(0x400000, 64)
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
        ok.append(("process_vm_readv", pid))
    try:
        with open(f"/proc/{pid}/mem", "rb"):
            ok.append(("mem", pid))
    except OSError:
        pass
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    if pidfd >= 0:
        for target in range(16):
            if libc.syscall(438, pidfd, target, 0) >= 0:  # pidfd_getfd
                ok.append(("pidfd_getfd", pid, target))
print(ok)
'''


@attack
def trace_the_worker_and_init(ctx: Ctx) -> None:
    """Class 1: ptrace, process_vm_readv, /proc/PID/mem and pidfd_getfd on every visible process."""
    v = ctx.sb.run(TRACE, [{"input": "", "output": "[]"}], kind="stdio")
    assert v.stdout.strip() == "[]", f"another process could be traced or read: {v.stdout[:400]} {v.stderr[-300:]}"
    still_works(ctx.sb)


@attack
def only_the_worker_and_own_processes_are_visible(ctx: Ctx) -> None:
    """Class 1: the PID namespace shows the worker (PID 1, non-dumpable) and the program's own
    processes; no bubblewrap init or monitor to attack."""
    code = "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
    v = ctx.sb.run(code, [{"input": "", "output": "x"}], kind="stdio")
    pids = json.loads(v.stdout)
    assert pids[0] == 1 and len(pids) == 2, f"processes visible to the program: {pids}"
    still_works(ctx.sb)


@attack
def signal_and_stop_the_worker(ctx: Ctx) -> None:
    """Class 1 and 5: SIGSTOP, SIGKILL and SIGTERM to PID 1, to every process (kill -1) and to the
    parent; the next program must run at once (a stalled slot would take wall_s + 10 s)."""
    for code in (
        "import os, signal\nos.kill(1, signal.SIGSTOP)\nprint(5)",
        "import os, signal\nos.kill(1, signal.SIGKILL)\nprint(5)",
        "import os, signal\nos.kill(-1, signal.SIGSTOP)\nprint(5)",
        "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint(5)",
        f"import os, signal\ntry:\n    os.kill({os.getpid()}, signal.SIGSTOP)\nexcept OSError:\n    pass\nprint(5)",
    ):
        ctx.sb.run(code, [{"input": "", "output": "5"}], kind="stdio")
        t = time.monotonic()
        still_works(ctx.sb)
        assert time.monotonic() - t < TIGHT.wall_s + 5, f"slot stalled after {code!r}"
    humaneval(ctx, "    import os, signal\n    os.kill(1, signal.SIGSTOP)\n    os.kill(-1, signal.SIGKILL)\n    return 0\n")


# ------------------------------------------------------------------- 2: host files and host sockets
@attack
def planted_expected_output_on_the_host(ctx: Ctx) -> None:
    """Class 2: the expected answer sits in world-readable and private host files; a program that
    finds and prints it would pass."""
    paths = [str(ctx.secret_public), str(ctx.secret_private), str(ctx.repo_root / "README.md"), "/etc/passwd",
             "/etc/shadow", "/root/.bash_history", os.path.expanduser("~/.bash_history")]  # fmt: skip
    code = f"""
import os
found = None
for p in {paths!r}:
    try:
        data = open(p).read()
        if "5" in data[:100]:
            found = data.strip()
    except OSError:
        pass
print(found or 6)
"""
    stdio(ctx, code)


@attack
def list_the_host(ctx: Ctx) -> None:
    """Class 2: only the system and Python directories exist; nothing of /root, /home, /work, the
    host /tmp, /etc beyond the loader's files."""
    code = f"""
import json, os
out = {{"root": sorted(os.listdir("/")), "etc": sorted(os.listdir("/etc")), "tmp": sorted(os.listdir("/tmp"))}}
for p in ("/home", "/root", {str(ctx.repo_root)!r}, {str(ctx.host_dir)!r}, "/var", "/run", "/sys", "/mnt", "/opt", "/srv"):
    try:
        out[p] = sorted(os.listdir(p))
    except OSError:
        out[p] = None
print(json.dumps(out))
"""
    v = ctx.sb.run(code, [{"input": "", "output": "x"}], kind="stdio")
    seen = json.loads(v.stdout)
    allowed_top = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "proc", "dev", "tmp"}
    allowed_top |= {d.strip("/").split("/")[0] for d in isolation.python_dirs()}
    assert set(seen["root"]) <= allowed_top, f"unexpected top-level entries: {set(seen['root']) - allowed_top}"
    assert set(seen["etc"]) <= {Path(f).name for f in isolation.ETC_FILES}, f"/etc holds {seen['etc']}"
    assert seen[str(ctx.host_dir)] is None, "the harness's host directory is visible"
    repo = seen[str(ctx.repo_root)]
    assert repo is None or set(repo) <= {".venv"}, f"the repository is visible: {repo}"
    for p in ("/home", "/var", "/run", "/sys", "/mnt", "/srv"):
        assert seen[p] is None, f"{p} is visible: {seen[p]}"
    still_works(ctx.sb)


@attack
def host_unix_sockets(ctx: Ctx) -> None:
    """Class 2: a unix socket on the host file system and an abstract one in the host network
    namespace (both served by this harness) cannot be reached."""
    code = f"""
import socket
hits = []
for addr in ({str(ctx.unix_socket)!r}, {ctx.abstract_name!r}):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(1)
    try:
        s.connect(addr)
        s.sendall(b"leak")
        hits.append(repr(addr))
    except OSError:
        pass
print(hits)
"""
    v = ctx.sb.run(code, [{"input": "", "output": "[]"}], kind="stdio")
    assert v.stdout.strip() == "[]" and not ctx.connections, f"host socket reached: {v.stdout} {ctx.connections}"
    still_works(ctx.sb)


@attack
def network_is_unreachable(ctx: Ctx) -> None:
    """Class 2: a TCP server of this harness on the host's 127.0.0.1 cannot be reached."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    got: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                got.append(conn.recv(100))
                conn.close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        code = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
                "s.sendall(b'leak')\nprint(5)\n")  # fmt: skip
        v = stdio(ctx, code)
        assert v.status == "runtime_error", v
    finally:
        stop.set()
        t.join(2)
        srv.close()
    assert got == [], got


@attack
def write_outside_the_sample(ctx: Ctx) -> None:
    """Class 2: writes to the host, the system and the sandbox's own directories fail."""
    target = ctx.host_dir / "owned.txt"
    code = f"""
hits = []
for p in [{str(target)!r}, {str(ctx.repo_root / 'owned')!r}, '/etc/owned', '/usr/owned', '/owned', '/root/owned',
          '/dev/owned', '/proc/owned', '/bin/owned']:
    try:
        with open(p, 'w') as f:
            f.write('x')
        hits.append(p)
    except OSError:
        pass
print(hits)
"""
    v = ctx.sb.run(code, [{"input": "", "output": "[]"}], kind="stdio")
    assert v.stdout.strip() == "[]", v.stdout
    assert not target.exists() and not (ctx.repo_root / "owned").exists()
    still_works(ctx.sb)


# -------------------------------------------------------------------- 3: state that outlives a sample
MEMO_WRITE = r'''
import os
for p in ("/tmp/memo", "/dev/shm/memo", "memo", os.path.expanduser("~/memo"), "/var/tmp/memo", "/memo", "/dev/memo"):
    try:
        with open(p, "w") as f:
            f.write("5")
    except OSError:
        pass
for d in ("/tmp/w1-2", "/tmp/../tmp/next", "next-work"):
    try:
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o777)
    except OSError:
        pass
for d in (".", "/tmp", "/dev/shm", "/"):
    try:
        os.chmod(d, 0)
    except OSError:
        pass
'''
MEMO_READ = r'''
import os
found = None
for p in ("/tmp/memo", "/dev/shm/memo", "memo", os.path.expanduser("~/memo"), "/var/tmp/memo", "/memo", "/dev/memo"):
    try:
        found = open(p).read()
    except OSError:
        pass
print(found or 6)
'''


@attack
def memos_in_writable_places(ctx: Ctx) -> None:
    """Class 3: one program leaves the answer in /tmp, /dev/shm, its cwd, HOME, ..., pre-creates work
    folders and chmods 0 what it can; the next (wrong) program reads the memo."""
    ctx.sb.run(MEMO_WRITE + "print(5)\n", STDIO_OK[1], kind="stdio")
    stdio(ctx, MEMO_READ)
    ctx.sb.run("def f(x):\n" + "".join("    " + ln + "\n" for ln in MEMO_WRITE.splitlines()) + "    return x + 1\n",
               CALL_TESTS, kind="call", fn_name="f")  # fmt: skip
    stdio(ctx, MEMO_READ)


SYSV = r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0xFADE, 4096, 0o1666 if WRITE else 0)
out = "6"
if shm >= 0:
    addr = libc.shmat(shm, None, 0)
    if addr not in (None, ctypes.c_void_p(-1).value):
        if WRITE:
            ctypes.memmove(addr, b"5", 1)
        else:
            out = ctypes.string_at(addr, 1).decode() or "6"
print(out, "shm" if shm >= 0 else "refused")
'''


@attack
def sysv_shared_memory_memo(ctx: Ctx) -> None:
    """Class 3: SysV shared memory (a segment with a fixed key survives its creator)."""
    v = ctx.sb.run("WRITE = True\n" + SYSV, [{"input": "", "output": "6 refused"}], kind="stdio")
    assert v.passed, f"SysV shared memory was allowed: {v.stdout}"
    stdio(ctx, "WRITE = False\n" + SYSV, expected="5 shm")
    if Path("/proc/sysvipc/shm").exists():
        assert "64222" not in Path("/proc/sysvipc/shm").read_text(), "a segment with key 0xFADE exists on the host"


KEYRING = r'''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
key = libc.syscall(NR_ADD_KEY, b"user", b"fade-memo", b"5", 1, -4)  # KEY_SPEC_USER_KEYRING
found = libc.syscall(NR_REQUEST_KEY, b"user", b"fade-memo", None, 0)
print("refused" if key < 0 and found < 0 else "keyring")
'''


@attack
def kernel_keyring_memo(ctx: Ctx) -> None:
    """Class 3: the per-uid kernel keyring (shared by every slot and run, kept on the host)."""
    from fade_core.sandbox import syscall_filter

    nr = syscall_filter.SYSCALLS[syscall_filter.machine()]
    code = f"NR_ADD_KEY = {nr['add_key']}\nNR_REQUEST_KEY = {nr['request_key']}\n" + KEYRING
    v = ctx.sb.run(code, [{"input": "", "output": "refused"}], kind="stdio")
    assert v.passed, f"the keyring was reachable: {v.stdout} {v.stderr[-200:]}"
    still_works(ctx.sb)


DAEMON = r'''
import os, socket, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 45678))
        s.listen(5)
        with open("/tmp/daemon-up", "w"):
            pass
        while True:
            c, _ = s.accept()
            c.sendall(b"5")
            c.close()
    os._exit(0)
for _ in range(100):
    if os.path.exists("/tmp/daemon-up"):
        break
    time.sleep(0.01)
print(5)
'''
DAEMON_ASK = r'''
import socket
try:
    s = socket.create_connection(("127.0.0.1", 45678), timeout=1)
    print(s.recv(10).decode())
except OSError:
    print(6)
'''


@attack
def daemon_serves_the_answer(ctx: Ctx) -> None:
    """Class 3: a daemon (double fork, own session) listening on the sandbox's loopback would hand the
    answer to a later program of the slot."""
    ctx.sb.run(DAEMON, STDIO_OK[1], kind="stdio")
    stdio(ctx, DAEMON_ASK)


# ------------------------------------------------------------------------ 4: limits are per sample
@attack
def memory_across_processes(ctx: Ctx) -> None:
    """Class 4: five processes of 80 MiB each at once (400 MiB) under a 256 MiB sample limit."""
    code = r'''
import os, time
kids = []
for _ in range(5):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        b = bytearray(80 * 1024 * 1024)
        os.write(w, b"1")
        time.sleep(1.5)
        os._exit(0)
    kids.append((pid, r))
ok = 0
for pid, r in kids:
    ok += len(os.read(r, 1))
    os.waitpid(pid, 0)
print(ok)
'''
    v = stdio(ctx, code, expected="5", stdin="", limits=ROOMY)
    assert v.status in ("memory_limit", "wrong_answer", "runtime_error"), v
    v = stdio(ctx, "x = ' ' * (1 << 30)\nprint(5)\n", limits=ROOMY)
    assert v.status == "memory_limit", v


@attack
def tasks_of_a_neighbour(ctx: Ctx) -> None:
    """Class 4: a thread bomb holds every task it can get while an honest neighbour in the other slot
    starts 8 threads."""
    bomb = r'''
import threading, time
n = 0
try:
    while True:
        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
        n += 1
except RuntimeError:
    pass
print(n)
time.sleep(1.5)
'''
    honest = "import threading\nts = [threading.Thread(target=sum, args=([1, 2],)) for _ in range(8)]\n" \
             "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('ok')\n"
    lim = Limits(cpu_s=2, wall_s=4, mem_mb=256, nproc=32)
    jobs = [sandbox.Job(bomb, [{"input": "", "output": "x"}], "stdio", limits=lim),
            sandbox.Job(honest, [{"input": "", "output": "ok"}], "stdio", limits=lim)]  # fmt: skip
    vb, vh = ctx.sb2.run_batch(jobs)
    assert vh.passed, f"the honest neighbour failed: {vh}"
    assert vb.stdout.strip().isdigit() and int(vb.stdout) < 32, f"the bomb started {vb.stdout.strip()} threads"
    still_works(ctx.sb)


@attack
def cpu_of_a_neighbour(ctx: Ctx) -> None:
    """Class 4: 16 spinners in their own sessions beside an honest program that needs ~0.1 s of CPU;
    the spinners' sample is held to one CPU and its CPU-time limit."""
    spin = ("import os\nfor _ in range(16):\n    if os.fork() == 0:\n        os.setsid()\n        while True:\n"
            "            pass\nwhile True:\n    pass\n")  # fmt: skip
    honest = "print(sum(range(3_000_000)) > 0)\n"
    jobs = [sandbox.Job(spin, [{"input": "", "output": "x"}], "stdio", limits=Limits(cpu_s=2, wall_s=6)),
            sandbox.Job(honest, [{"input": "", "output": "True"}], "stdio", limits=Limits(cpu_s=2, wall_s=5))]  # fmt: skip
    t = time.monotonic()
    vs, vh = ctx.sb2.run_batch(jobs)
    assert vh.passed, f"the honest neighbour failed: {vh}"
    assert vs.status == "timeout", vs
    assert time.monotonic() - t < 6 + 5
    assert vs.cpu_s < 2 + 1.5, f"the spinners' sample used {vs.cpu_s} s of CPU at cpu_s=2"
    still_works(ctx.sb)


@attack
def call_mode_wall_limit_covers_the_program(ctx: Ctx) -> None:
    """Class 4: eight calls of 1.2 s each at wall_s=2 (each call under the limit, the program over)."""
    tests = [{"input": [i], "output": i} for i in range(8)]
    t = time.monotonic()
    v = ctx.sb.run("import time\ndef f(x):\n    time.sleep(1.2)\n    return x\n", tests, kind="call", fn_name="f",
                   limits=Limits(cpu_s=2, wall_s=2))  # fmt: skip
    assert not v.passed and v.status == "timeout", v
    assert time.monotonic() - t < 6, "the program ran past its wall limit"
    still_works(ctx.sb)


# --------------------------------------------------------------------------- 5: the trusted parent
DEEP = "def f(x):\n    v = []\n    for _ in range(DEPTH):\n        v = [v]\n    return v\n"


@attack
def deeply_nested_replies(ctx: Ctx) -> None:
    """Class 5: values nested 990 and 100000 deep (the parent used to raise RecursionError and lose
    every verdict of the batch); a 150-deep value still compares."""
    for depth in (990, 100_000):
        v = ctx.sb.run(DEEP.replace("DEPTH", str(depth)), [{"input": [1], "output": 0}], kind="call", fn_name="f")
        assert not v.passed and v.status != "sandbox_error", v
        still_works(ctx.sb)
    expected: list = []
    for _ in range(150):
        expected = [expected]
    v = ctx.sb.run(DEEP.replace("DEPTH", "150"), [{"input": [1], "output": expected}], kind="call", fn_name="f")
    assert v.passed, v
    humaneval(ctx, "    v = []\n    for _ in range(990):\n        v = [v]\n    return v\n")
    vs = ctx.sb.run_batch([sandbox.Job(DEEP.replace("DEPTH", "990"), [{"input": [1], "output": 0}], "call", fn_name="f"),
                           sandbox.Job(*STDIO_OK, "stdio")])  # fmt: skip
    assert [v.passed for v in vs] == [False, True], vs


@attack
def garbage_frames(ctx: Ctx) -> None:
    """Class 5: garbage and a 4 GiB length prefix on the program's result pipe, then silence."""
    for junk in ("b'\\xff\\xff\\xff\\xffgarbage'", "b'\\x00\\x00\\x00\\x05[[[[['", "b'\\x00\\x00\\x00\\x02{}'"):
        code = f"import os, time\ndef f(x):\n    os.write(4, {junk})\n    time.sleep(0.2)\n    return x + 1\n"
        v = ctx.sb.run(code, CALL_TESTS, kind="call", fn_name="f")
        assert v.status != "sandbox_error" or "lost" in v.detail, v
        still_works(ctx.sb)
    humaneval(ctx, "    import os\n    os.write(4, b'\\xff\\xff\\xff\\xffjunk')\n    return a + b + 1\n")


FRAME_WRITER = ("import json, os, struct\ndef w(fd, o):\n    b = json.dumps(o).encode()\n"
                "    os.write(fd, struct.pack('>I', len(b)) + b)\n")  # fmt: skip


@attack
def forged_status_reports(ctx: Ctx) -> None:
    """Class 5: a program writes setup-, compile- and sandbox-error reports on its own pipes (while
    loading and as an answer); its failure stays its own: never sandbox_error or compile_error, and
    the slot is not reset for it."""
    load = FRAME_WRITER + "w(5, {'setup_error': 'x'})\nw(5, {'compile_error': 'x'})\nos._exit(1)\ndef f(x):\n    return x\n"
    v = ctx.sb.run(load, CALL_TESTS, kind="call", fn_name="f")
    assert v.status == "runtime_error", v
    answer = FRAME_WRITER + "def f(x):\n    w(4, {'ok': False, 'error': 'x', 'sandbox_error': 'forged'})\n    return x + 1\n"
    v = ctx.sb.run(answer, CALL_TESTS, kind="call", fn_name="f")
    assert v.status == "runtime_error" and "forged" not in v.detail, v
    v = ctx.sb.run(FRAME_WRITER + "import sys\nfor fd in range(3, 64):\n    try:\n        w(fd, {'sandbox_error': 'x'})\n"
                   "    except OSError:\n        pass\nprint(6)\n", STDIO_OK[1], kind="stdio")  # fmt: skip
    assert v.status == "wrong_answer", v
    humaneval(ctx, "    " + FRAME_WRITER.replace("\n", "\n    ") + "w(5, {'setup_error': 'x'})\n    return a - b\n")
    still_works(ctx.sb)


@attack
def huge_values_and_output(ctx: Ctx) -> None:
    """Class 5: floods of stdout and stderr, a 64 MiB return value, a file past the size limit."""
    assert stdio(ctx, "while True:\n    print('x' * 100000)\n").status == "output_limit"
    assert stdio(ctx, "import sys\nwhile True:\n    sys.stderr.write('e' * 100000)\n").status in ("timeout", "output_limit")
    v = ctx.sb.run("def f():\n    return 'x' * (64 * 1024 * 1024)\n", [{"input": [], "output": "x"}], kind="call", fn_name="f",
                   limits=ROOMY)
    assert not v.passed and v.status in ("output_limit", "memory_limit"), v
    still_works(ctx.sb)
    v = stdio(ctx, "with open('big', 'wb') as f:\n    f.write(b'x' * (64 * 1024 * 1024))\nprint(5)\n", limits=ROOMY)
    assert v.status in ("output_limit", "memory_limit"), v


# ------------------------------------------------------------------------- 6: kernel surface, leaks
KERNEL = r'''
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
allowed = []
for name, flags in (("user", 0x10000000), ("mount", 0x20000), ("net", 0x40000000), ("pid", 0x20000000), ("ipc", 0x08000000)):
    if libc.unshare(flags) == 0:
        allowed.append("unshare " + name)
if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0:
    allowed.append("mount")
for name, nr, args in NR_CALLS:
    if libc.syscall(nr, *args) >= 0:
        allowed.append(name)
try:
    if subprocess.run(["unshare", "-r", "true"], capture_output=True, timeout=5).returncode == 0:
        allowed.append("unshare -r")
except OSError:
    pass
print(allowed)
'''


@attack
def namespaces_mounts_and_kernel_surface(ctx: Ctx) -> None:
    """Class 6: new user/mount/... namespaces, mount, and bpf, perf, io_uring, userfaultfd, keyctl."""
    from fade_core.sandbox import syscall_filter

    nr = syscall_filter.SYSCALLS[syscall_filter.machine()]
    calls = [("bpf", nr["bpf"], (0, 0, 0)), ("perf_event_open", nr["perf_event_open"], (0, 0, -1, -1, 0)),
             ("io_uring_setup", nr["io_uring_setup"], (1, 0)), ("userfaultfd", nr["userfaultfd"], (0,)),
             ("keyctl", nr["keyctl"], (0, -4, 0))]  # fmt: skip
    v = ctx.sb.run(f"NR_CALLS = {calls!r}\n" + KERNEL, [{"input": "", "output": "[]"}], kind="stdio")
    assert v.stdout.strip() == "[]", f"allowed: {v.stdout} {v.stderr[-300:]}"
    still_works(ctx.sb)


@attack
def foreign_syscall_abi(ctx: Ctx) -> None:
    """Class 6: a 32-bit system call (int 0x80) from a 64-bit program bypasses a filter keyed on
    64-bit numbers unless the filter checks the ABI: the program is killed."""
    from fade_core.sandbox import syscall_filter

    if syscall_filter.machine() != "x86_64":
        return
    code = r'''
import ctypes, mmap
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")  # mov eax, 20 (getpid); int 0x80; ret
fn = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
print("survived", fn())
'''
    v = stdio(ctx, code, expected="x")
    assert "survived" not in v.stdout and v.status == "runtime_error", v


def _source_root(path: str) -> str:
    """The path of ``path`` inside its file system as this harness's mount table shows it (what a bind
    of it shows as its root: itself, unless it is itself bound from elsewhere)."""
    best = ("", "/")
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        point, root = f[4], f[3]
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best[0]):
            best = (point, root)
    point, root = best
    rest = path[len(point.rstrip("/")) :]
    return (root.rstrip("/") + rest) or "/"


@attack
def mountinfo_shows_no_host_paths(ctx: Ctx) -> None:
    """Class 6: every mount a program sees is a system or Python directory at its own path."""
    code = r"""
import json
rows = []
for line in open("/proc/self/mountinfo"):
    f = line.split()
    fstype = f[f.index("-") + 1]
    if fstype not in ("tmpfs", "proc", "devpts", "mqueue", "devtmpfs"):  # sandbox-made, or device nodes
        rows.append((f[3], f[4]))
print(json.dumps(rows))
"""
    v = ctx.sb.run(code, [{"input": "", "output": "x"}], kind="stdio")
    allowed = ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", *isolation.python_dirs()]
    allowed += [_source_root(d) for d in isolation.python_dirs()]  # where this host's own mounts have them
    rows = json.loads(v.stdout)
    assert rows, v
    for root, point in rows:
        for path in (root, point):  # a bind of a host directory: only system and Python ones, at their paths
            line = f"{root} on {point}"
            assert any(path == a or path.startswith(a + "/") for a in allowed), f"mount shows {path!r}: {line}"
    still_works(ctx.sb)


@attack
def memory_error_written_to_stderr(ctx: Ctx) -> None:
    """Class 6: writing "MemoryError" to stderr does not relabel a failure as memory_limit."""
    v = stdio(ctx, "import sys\nsys.stderr.write('MemoryError\\nCannot allocate memory\\nstd::bad_alloc\\n')\nsys.exit(1)\n")
    assert v.status == "runtime_error", v


@attack
def standard_library_and_numpy_import(ctx: Ctx) -> None:
    """Class 6: with Python outside /usr (a pyenv under /root) or a venv under /tmp, modules the worker
    did not preload import, so correct programs pass."""
    mods = "base64, pickle, csv, subprocess, json, decimal"
    code = f"import {mods}\nprint(int(input()) * 2)\n"
    assert ctx.sb.run(code, [{"input": "21", "output": "42"}], kind="stdio").passed
    try:
        import numpy  # noqa: F401
    except ImportError:
        return
    v = ctx.sb.run("import numpy as np\nprint(int(np.arange(10).sum()))\n", [{"input": "", "output": "45"}], kind="stdio")
    assert v.passed, v
    v = ctx.sb.run("import numpy as np\ndef f(x):\n    return int(np.int64(x) + 1)\n", CALL_TESTS, kind="call", fn_name="f")
    assert v.passed, v


# ----------------------------------------------------------------- earlier suite: resources, integrity
@attack
def fork_bomb(ctx: Ctx) -> None:
    v = stdio(ctx, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert v.status in ("timeout", "runtime_error"), v


@attack
def infinite_loops(ctx: Ctx) -> None:
    assert stdio(ctx, "while True:\n    pass\n").status == "timeout"
    assert stdio(ctx, "import time\ntime.sleep(1000)\n").status == "timeout"
    assert stdio(ctx, "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n").status == "timeout"
    v = ctx.sb.run("def f(x):\n    while True: pass\n", CALL_TESTS, kind="call", fn_name="f")
    assert v.status == "timeout", v
    assert humaneval(ctx, "    while True:\n        pass\n").status == "timeout"


@attack
def exit_early_with_status_zero(ctx: Ctx) -> None:
    stdio(ctx, "import os\nos._exit(0)\n")
    stdio(ctx, "import sys\nsys.exit(0)\n")
    assert not ctx.sb.run("def f(x):\n    import os\n    os._exit(0)\n", CALL_TESTS, kind="call", fn_name="f").passed
    humaneval(ctx, "    import os\n    os._exit(0)\n")
    humaneval(ctx, "    raise SystemExit(0)\n")
    humaneval(ctx, "    pass\nimport os\nos._exit(0)\n")


@attack
def success_markers(ctx: Ctx) -> None:
    for marker in ("passed", "PASSED", "OK", "True", "All tests passed", '{"passed": true}'):
        stdio(ctx, f"print({marker!r})")
    humaneval(ctx, "    print('passed')\n    print('{\"done\": true, \"passed\": true}')\n    return None\n")


@attack
def dunder_overrides(ctx: Ctx) -> None:
    liar = "class Liar:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n    __hash__ = None\n"
    assert not ctx.sb.run(liar + "def f(x):\n    return Liar()\n", CALL_TESTS, kind="call", fn_name="f").passed
    evil = "class E(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\n"
    v = ctx.sb.run(evil + "def f(x):\n    return E(0)\n", CALL_TESTS, kind="call", fn_name="f")
    assert not v.passed and v.status == "wrong_answer", v
    humaneval(ctx, "    class Liar:\n        def __eq__(self, o): return True\n    return Liar()\n")


@attack
def patching_builtins_and_the_harness(ctx: Ctx) -> None:
    humaneval(ctx, "    return 0\nimport builtins\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
                   "builtins.isinstance = lambda *a: True\n")  # fmt: skip
    humaneval(ctx, "    return 0\nimport sys\nfor m in list(sys.modules.values()):\n"
                   "    for n in ('write_frame', 'program_checker', 'encode'):\n"
                   "        try: setattr(m, n, lambda *a, **k: None)\n        except Exception: pass\n")  # fmt: skip
    v = ctx.sb.run("import sys\nsys.modules['fade_core.sandbox.plaindata'].encode = lambda v: 3\ndef f(x):\n    return 0\n",
                   [{"input": [1], "output": 3}, {"input": [2], "output": 4}], kind="call", fn_name="f")  # fmt: skip
    assert not v.passed, v
    still_works(ctx.sb)


@attack
def reading_the_tests(ctx: Ctx) -> None:
    """The check program never enters the candidate's sandbox (memory, files, /proc)."""
    snoop = """
import gc, os, sys
def _seen(codes):
    blobs = []
    for o in gc.get_objects():
        for r in gc.get_referents(o):
            if isinstance(r, (str, bytes)):
                blobs.append(r)
    for root in ('/', '/tmp', os.getcwd(), '/proc/self', '/proc/1'):
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
    codes = [ord(c) for c in mark]
    check = [{"input": f"def check(candidate):\n    # {mark}\n    assert candidate(1, 2) == 3\n", "output": None,
              "testtype": "humaneval"}]  # fmt: skip
    v = ctx.sb.run(ADD_PROMPT + f"    return a + b if _seen({codes}) else -1\n" + snoop, check, kind="call", fn_name="add",
                   prompt=ADD_PROMPT)  # fmt: skip
    assert not v.passed, v
    v = ctx.sb.run(ADD_PROMPT + f"    return a + b if _seen({codes}) else -1\nSTASH = {mark!r}\n" + snoop, check,
                   kind="call", fn_name="add", prompt=ADD_PROMPT)  # fmt: skip
    assert v.passed, f"control: the snoop finds a marker in its own memory: {v}"
    still_works(ctx.sb)


# ------------------------------------------------------------------------------------------ threads
@attack
def main_in_a_thread_is_joined(ctx: Ctx) -> None:
    """Issue 14.5: the deep-recursion idiom (main() in a thread with a big stack) prints its answer;
    a thread that never ends is a timeout, not a hang; call mode joins threads at the end too."""
    idiom = ("import sys, threading\ndef main():\n    sys.setrecursionlimit(100000)\n    def depth(n):\n"
             "        return 0 if n == 0 else 1 + depth(n - 1)\n    a, b = map(int, input().split())\n"
             "    print(a + b + depth(20000) - 20000)\nthreading.stack_size(256 * 1024 * 1024)\n"
             "threading.Thread(target=main).start()\n")  # fmt: skip
    v = ctx.sb.run(idiom, STDIO_OK[1], kind="stdio")
    assert v.passed, v
    forever = "import threading, time\nthreading.Thread(target=lambda: time.sleep(1000)).start()\nprint(5)\n"
    t = time.monotonic()
    v = stdio(ctx, forever)
    assert v.status == "timeout" and time.monotonic() - t < 30, v
    v = ctx.sb.run("import threading, time\ndef f(x):\n    threading.Thread(target=time.sleep, args=(1000,)).start()\n"
                   "    return x + 1\n", CALL_TESTS, kind="call", fn_name="f")  # fmt: skip
    assert v.status == "timeout", v
    still_works(ctx.sb)


# ----------------------------------------------------------------------------------------- harness
def _serve_unix(ctx: Ctx) -> list[socket.socket]:
    servers = []
    for addr in (str(ctx.unix_socket), ctx.abstract_name):
        s = socket.socket(socket.AF_UNIX)
        s.bind(addr)
        s.listen(5)
        s.settimeout(0.2)
        servers.append(s)

    def accept(s: socket.socket) -> None:
        while True:
            try:
                conn, _ = s.accept()
                ctx.connections.append(conn.recv(100))
                conn.close()
            except TimeoutError:
                continue
            except OSError:
                return

    for s in servers:
        threading.Thread(target=accept, args=(s,), daemon=True).start()
    return servers


def join_cgroups(dirs: list[str]) -> None:
    """Move this harness (and so every worker and program it starts) into containment cgroups."""
    for d in dirs:
        with open(os.path.join(d, "cgroup.procs"), "w") as f:
            f.write("0")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--join-cgroup", action="append", default=[], help="cgroup directory to move into first")
    ap.add_argument("--only", nargs="*", help="attack names (default: all)")
    a = ap.parse_args(argv)
    join_cgroups(a.join_cgroup)
    names = a.only or list(ATTACKS)
    report: dict = {"uid": os.getuid(), "prefix": sys.prefix, "results": {}}
    with tempfile.TemporaryDirectory(prefix="fade-attack-host-") as tmp:
        host = Path(tmp)
        os.chmod(host, 0o755)
        public, private = host / "expected.txt", host / "private.txt"
        public.write_text("5\n")
        public.chmod(0o644)
        private.write_text("5\n")
        private.chmod(0o600)
        with sandbox.Sandbox(1, backend=a.backend, limits=TIGHT) as sb, sandbox.Sandbox(2, backend=a.backend, limits=TIGHT) as sb2:
            ctx = Ctx(sb, sb2, host, public, private, host / "host.sock", b"\0fade-attack-" + str(os.getpid()).encode())
            servers = _serve_unix(ctx)
            report["backend"] = sb.isolation.backend
            report["guarantees"] = sb.guarantees.lines()
            report["missing"] = sb.guarantees.missing()
            for name in names:
                t = time.monotonic()
                try:
                    ATTACKS[name](ctx)
                    res = {"held": True}
                except BaseException as e:  # noqa: BLE001 - every failure is reported, the run goes on
                    res = {"held": False, "error": "".join(traceback.format_exception_only(type(e), e)).strip()[-1500:]}
                res["s"] = round(time.monotonic() - t, 2)
                report["results"][name] = res
            for s in servers:
                s.close()
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
