"""Every attack of tests/sandbox/attacks.py holds, as root and as an unprivileged user.

The harness runs as a separate process inside a containment cgroup (memory and pids limited: a
regression cannot take the machine down), with tight limits, and reports per attack; each attack is
followed by correct and wrong programs in every mode on the attacked slot. Modes:

- root, ``auto`` backend (must pick bubblewrap), the venv where it is;
- an unprivileged uid (``setpriv``, no passwd entry needed), ``auto`` backend, with the venv bound
  under /tmp and the Python installation under a directory the user cannot list (/root here): the
  run's own mount namespace makes them reachable without changing the host;
- both with the ``unshare`` backend and the venv under /tmp (slow).

The two fast modes run concurrently. Needs root (to create the unprivileged run and the cgroups);
skips with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fade_core.sandbox import cgroups, isolation

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "tests" / "sandbox" / "attacks.py"
TEST_UID = 63999  # an unprivileged uid with no passwd entry (below the sandbox's 64000+ range)
CONTAIN_MEMORY = 3 << 30
CONTAIN_TASKS = 1200
MODES = {  # mode: (as the unprivileged uid, backend, venv bound under /tmp)
    "root": (False, "auto", False), "user": (True, "auto", True),
    "root-unshare": (False, "unshare", True), "user-unshare": (True, "unshare", True),
}  # fmt: skip
FAST = ("root", "user")

sys.path.insert(0, str(REPO))
from tests.sandbox.attacks import ATTACKS  # noqa: E402


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("the attack runs need root (an unprivileged uid and containment cgroups are made for them)")
    for tool in ("setpriv", "unshare", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} (util-linux) is not installed")


@contextlib.contextmanager
def containment(name: str, uid: int | None):
    """A memory- and pids-limited cgroup for one harness run (delegated to ``uid``): yields (directories
    the harness joins, environment for it)."""
    layout, why = cgroups.detect()
    if layout is None:
        pytest.skip(f"no cgroup to contain the attacks in: {why}")
    made: list[str] = []

    def mk(d: str) -> str:
        os.mkdir(d)
        made.append(d)
        if uid is not None:
            for f in ("", "cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads"):
                with contextlib.suppress(FileNotFoundError):
                    os.chown(os.path.join(d, f), uid, uid)
        return d

    def put(d: str, f: str, value: str) -> None:
        with open(os.path.join(d, f), "w") as fh:
            fh.write(value)

    try:
        if layout.version == 1:
            dirs = {c: mk(os.path.join(base, name)) for c, base in layout.bases.items()}
            put(dirs["memory"], "memory.limit_in_bytes", str(CONTAIN_MEMORY))
            put(dirs["pids"], "pids.max", str(CONTAIN_TASKS))
            yield sorted(set(dirs.values())), {}
        else:
            base = layout.bases["unified"]
            top = mk(os.path.join(base, name))
            put(top, "memory.max", str(CONTAIN_MEMORY))
            put(top, "pids.max", str(CONTAIN_TASKS))
            put(top, "cgroup.subtree_control", "+memory +pids +cpu")
            harness = mk(os.path.join(top, "harness"))
            v2 = next(h for h in cgroups.read_mountinfo(Path("/proc/self/mountinfo").read_text()) if h.version == 2)
            rel = "/" + os.path.relpath(top, v2.mountpoint)
            yield [harness], {"FADE_SANDBOX_CGROUP": rel}
    finally:
        for d in reversed(made):
            cgroups._rmdir_tree(d)


def _blocked_ancestors(paths: list[str], uid: int) -> dict[str, list[str]]:
    """For each directory the test uid cannot traverse (like /root), the needed paths under it."""
    out: dict[str, list[str]] = {}
    for p in paths:
        parts = Path(p).parts
        for i in range(2, len(parts)):
            a = str(Path(*parts[:i]))
            st = os.stat(a)
            if not st.st_mode & 0o001 and st.st_uid != uid:
                out.setdefault(a, []).append(p)
                break
    return out


def _script(stage: str, join: list[str], backend: str, env: dict[str, str], as_user: bool) -> str:
    """Shell run as root in a private mount namespace: bind the venv under /tmp (as a clone there would
    have it); for the test uid, make the Python installation and the repository reachable and drop to
    the uid; then run the harness."""
    venv = os.path.realpath(sys.prefix)
    lines = ["set -e", f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(stage)}"]
    if as_user:
        needed = sorted({*isolation.python_dirs(), str(REPO)})
        for i, (blocked, paths) in enumerate(sorted(_blocked_ancestors(needed, TEST_UID).items())):
            for k, p in enumerate(paths):
                lines += [f"mkdir -p {stage}/keep{i}-{k}", f"mount --rbind {shlex.quote(p)} {stage}/keep{i}-{k}"]
            lines.append(f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(blocked)}")
            for k, p in enumerate(paths):
                lines += [f"mkdir -p {shlex.quote(p)}", f"mount --move {stage}/keep{i}-{k} {shlex.quote(p)}"]
    clone = f"{stage}/clone/.venv"
    lines += [f"mkdir -p {clone} {stage}/home", f"mount --bind {shlex.quote(venv)} {clone}"]
    args = [f"{clone}/bin/python", str(HARNESS), "--backend", backend, *[x for d in join for x in ("--join-cgroup", d)]]
    env_args = [f"{k}={v}" for k, v in {"HOME": f"{stage}/home", "PATH": "/usr/bin:/bin", **env}.items()]
    run = "env -i " + " ".join(shlex.quote(a) for a in env_args + args)
    if as_user:
        lines.append(f"chown {TEST_UID}:{TEST_UID} {stage}/home")
        run = f"setpriv --reuid={TEST_UID} --regid={TEST_UID} --clear-groups --inh-caps=-all -- " + run
    return "\n".join([*lines, "exec " + run])


@contextlib.contextmanager
def _traversable(paths: list[str], uid: int):
    """Let ``uid`` traverse each of ``paths`` itself (o+x) while the harness runs, restoring the mode after: a
    clone made with ``mktemp -d`` is a 0700 root directory, which the blocked-ancestor mounts of :func:`_script`
    cannot open up (they re-expose the needed paths, not the paths' own permission bits)."""
    changed: list[tuple[str, int]] = []
    try:
        for p in paths:
            st = os.stat(p)
            if os.path.isdir(p) and not st.st_mode & 0o001 and st.st_uid != uid:
                changed.append((p, st.st_mode & 0o7777))
                os.chmod(p, (st.st_mode & 0o7777) | 0o001)
        yield
    finally:
        for p, mode in changed:
            os.chmod(p, mode)


@contextlib.contextmanager
def harness_run(mode: str):
    """Start the harness for ``mode``; yields a function that waits and returns its report."""
    as_user, backend, tmp_venv = MODES[mode]
    uid = TEST_UID if as_user else None
    needed = sorted({*isolation.python_dirs(), str(REPO)}) if as_user else []
    with _traversable(needed, TEST_UID), containment(f"fade-attack-{os.getpid()}-{mode}", uid) as (join, env):
        with tempfile.TemporaryDirectory(prefix="fade-attack-stage-") as stage:
            if tmp_venv:
                os.chmod(stage, 0o755)
                cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _script(stage, join, backend, env, as_user)]
                run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            else:
                cmd = [sys.executable, str(HARNESS), "--backend", backend, *[x for d in join for x in ("--join-cgroup", d)]]
                run_env = {k: v for k, v in os.environ.items() if not k.startswith("FADE_SANDBOX_")} | env
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_env, cwd=stage)

            def wait() -> dict:
                out, err = proc.communicate(timeout=900)
                assert proc.returncode == 0, f"{mode} harness failed (exit {proc.returncode}): {err[-3000:]}"
                return json.loads(out.strip().splitlines()[-1])

            try:
                yield wait
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


@pytest.fixture(scope="module")
def fast_reports():
    _needs_root()
    with harness_run(FAST[0]) as wait_root, harness_run(FAST[1]) as wait_user:
        yield {FAST[0]: wait_root(), FAST[1]: wait_user()}


@pytest.fixture(scope="module")
def slow_reports():
    _needs_root()
    with harness_run("root-unshare") as wait_root, harness_run("user-unshare") as wait_user:
        yield {"root-unshare": wait_root(), "user-unshare": wait_user()}


def _check(report: dict, mode: str, name: str) -> None:
    as_user, backend, tmp_venv = MODES[mode]
    assert report["uid"] == (TEST_UID if as_user else 0)
    # the tmp modes bind the venv under /tmp; the others run it where it is, which is under /tmp too when the
    # checkout is (a clone in /tmp: the sandbox binds such a venv over its fresh /tmp, which these attacks cover)
    assert report["prefix"].startswith("/tmp/") == (tmp_venv or os.path.realpath(sys.prefix).startswith("/tmp/")), \
        report["prefix"]
    assert report["backend"] == ("bwrap" if backend == "auto" else backend), report["guarantees"]
    assert report["missing"] == [], report["guarantees"]
    res = report["results"][name]
    assert res["held"], f"{mode}: {name} did not hold: {res.get('error')}"


@pytest.mark.parametrize("name", list(ATTACKS))
@pytest.mark.parametrize("mode", FAST)
def test_attack_holds(fast_reports, mode, name):
    _check(fast_reports[mode], mode, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ATTACKS))
@pytest.mark.parametrize("mode", ["root-unshare", "user-unshare"])
def test_attack_holds_with_unshare(slow_reports, mode, name):
    _check(slow_reports[mode], mode, name)


def test_guarantees_in_force(fast_reports):
    """Both fast modes run with every per-sample limit from a cgroup, not rlimits."""
    for mode in FAST:
        lines = "\n".join(fast_reports[mode]["guarantees"])
        assert "memory limit: per sample" in lines and "task limit: per sample" in lines, lines
