"""Per-sample cgroups: where they go (v1 and v2 layouts), the pool's directories, and the limits and
counters a worker writes and reads. cgroup v2 is exercised against a simulated hierarchy (files in a
temporary directory); v1 also against the real kernel when this runs as root on a v1 machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fade_core.sandbox import cgroups
from fade_core.sandbox._zygote import SampleCgroup

V1_MOUNTINFO = """\
30 25 0:26 / {m}/memory rw,nosuid - cgroup cgroup rw,memory
31 25 0:27 / {m}/pids rw,nosuid - cgroup cgroup rw,pids
32 25 0:28 / {m}/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
33 25 0:29 / {m}/unified rw,nosuid - cgroup2 cgroup2 rw
"""
V1_OWN = "5:memory:/job/a\n4:pids:/job/a\n3:cpu,cpuacct:/\n0::/\n"


def _tree(root: Path, rel: str, files: dict[str, str] | None = None) -> Path:
    d = root / rel.strip("/") if rel.strip("/") else root
    d.mkdir(parents=True, exist_ok=True)
    for name, text in {"cgroup.procs": "", **(files or {})}.items():
        (d / name).write_text(text)
    return d


def test_mountinfo_and_own_cgroups_are_read():
    hier = cgroups.read_mountinfo(V1_MOUNTINFO.format(m="/nonexistent"))
    assert [(h.version, h.controllers) for h in hier] == [(1, ("memory",)), (1, ("pids",)), (1, ("cpu", "cpuacct")), (2, ())]
    own = cgroups.read_own_cgroups(V1_OWN)
    assert own == {"memory": "/job/a", "pids": "/job/a", "cpu": "/", "cpuacct": "/", "unified": "/"}
    h = cgroups.Hierarchy(1, "/m", "/docker/x", ("memory",))
    assert h.dir_of("/docker/x/y") == "/m/y" and h.dir_of("/elsewhere") is None


def test_v1_layout_is_own_cgroup_per_hierarchy(tmp_path):
    for c in ("memory", "pids", "cpu,cpuacct"):
        _tree(tmp_path / c, "/")
    _tree(tmp_path / "memory", "/job/a")
    _tree(tmp_path / "pids", "/job/a")
    layout, why = cgroups.detect(mountinfo=V1_MOUNTINFO.format(m=tmp_path), own_cgroups=V1_OWN)
    assert layout is not None, why
    assert layout.version == 1
    assert layout.bases["memory"] == str(tmp_path / "memory/job/a")
    assert layout.bases["cpu"] == layout.bases["cpuacct"] == str(tmp_path / "cpu,cpuacct")
    layout, _ = cgroups.detect("/fade", mountinfo=V1_MOUNTINFO.format(m=tmp_path), own_cgroups=V1_OWN)
    assert layout is None  # the configured parent does not exist


def test_v2_layout_takes_the_nearest_delegable_ancestor(tmp_path):
    mi = f"40 25 0:30 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    _tree(tmp_path, "/", {"cgroup.controllers": "cpuset cpu io memory pids", "cgroup.subtree_control": "cpu memory pids"})
    _tree(tmp_path, "/user.slice", {"cgroup.controllers": "cpu memory pids", "cgroup.subtree_control": ""})
    _tree(tmp_path, "/user.slice/session.scope")
    layout, why = cgroups.detect(mountinfo=mi, own_cgroups="0::/user.slice/session.scope\n")
    assert layout is not None and layout.version == 2, why
    assert layout.bases == {"unified": str(tmp_path / "user.slice")}  # not our own cgroup: it holds processes
    assert set((tmp_path / "user.slice/cgroup.subtree_control").read_text().split()) == {"+memory", "+pids", "+cpu"}
    layout, _ = cgroups.detect(mountinfo=mi, own_cgroups="0::/\n")
    assert layout.bases == {"unified": str(tmp_path)}


def test_v2_without_controllers_falls_back_with_reason(tmp_path):
    mi = f"40 25 0:30 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    _tree(tmp_path, "/", {"cgroup.controllers": "hugetlb"})
    layout, why = cgroups.detect(mountinfo=mi, own_cgroups="0::/\n")
    assert layout is None and "hugetlb" in why and "v1" in why


def test_pool_and_worker_directories_v2_simulated(tmp_path):
    base = _tree(tmp_path, "/fade-base", {"cgroup.subtree_control": "memory pids cpu"})
    pool = cgroups.PoolCgroups(cgroups.Layout(2, {"unified": str(base)}, "test"), cpu_weight=4)
    (pool_dir,) = set(pool.pools.values())
    assert Path(pool_dir).parent == base and Path(pool_dir).name.startswith(f"fade-{os.getpid()}-")
    assert (Path(pool_dir) / "cpu.weight").read_text() == "400"
    w = pool.new_worker()
    assert w.dirs == {"unified": os.path.join(pool_dir, "w1")}
    fds = w.open()
    try:
        assert w.spec() == f"2:unified={fds['unified']}"
    finally:
        w.close_fds()
    for f in Path(pool_dir).rglob("*"):  # a real cgroup's files vanish with it; these are plain files
        if f.is_file():
            f.unlink()
    pool.close()
    assert not Path(pool_dir).exists()


def test_stale_pools_of_dead_processes_are_removed(tmp_path):
    base = _tree(tmp_path, "/base")
    stale = base / "fade-999999999-abc" / "w1"  # a real empty cgroup's files vanish with it: plain dirs here
    stale.mkdir(parents=True)
    live = _tree(base, f"/fade-{os.getpid()}-abc")
    cgroups.remove_stale_pools({"unified": str(base)})
    assert not stale.parent.exists() and live.exists()


@pytest.mark.parametrize("version", [1, 2])
def test_worker_writes_limits_and_reads_counters(tmp_path, version):
    """The limits are the worker's idle usage plus the request's; counters parse."""
    if version == 2:
        d = _tree(tmp_path, "/w", {"memory.current": "10485760\n", "memory.max": "", "memory.swap.max": "", "pids.max": "",
                                   "cpu.max": "", "cpu.stat": "usage_usec 2500\nuser_usec 2000\n",
                                   "memory.events": "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"})  # fmt: skip
        fds = {"unified": os.open(d, os.O_RDONLY)}
    else:
        d = _tree(tmp_path, "/w", {"memory.usage_in_bytes": "10485760\n", "memory.limit_in_bytes": "", "memory.swappiness": "",
                                   "pids.max": "", "cpu.cfs_period_us": "", "cpu.cfs_quota_us": "", "cpuacct.usage": "2500000\n",
                                   "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"})  # fmt: skip
        fds = {c: os.open(d, os.O_RDONLY) for c in ("memory", "pids", "cpu", "cpuacct")}
    try:
        cg = SampleCgroup.parse(f"{version}:" + ",".join(f"{k}={v}" for k, v in fds.items()))
        cg.configure({"mem_mb": 100, "nproc": 16, "cpus": 0.5})
        mem = (12 << 20) + (100 << 20)  # 10 MiB idle, rounded up to 4 MiB, plus the request's 100 MiB
        if version == 2:
            assert (d / "memory.max").read_text() == str(mem) and (d / "memory.swap.max").read_text() == "0"
            assert (d / "cpu.max").read_text() == "50000 100000"
        else:
            assert (d / "memory.limit_in_bytes").read_text() == str(mem) and (d / "memory.swappiness").read_text() == "0"
            assert (d / "cpu.cfs_quota_us").read_text() == "50000"
        assert (d / "pids.max").read_text() == "17"  # + the worker
        assert cg.cpu_ns() == 2_500_000 and cg.oom_kills() == 1
        (d / "cgroup.procs").write_text(f"{os.getpid()}\n12345\n")
        assert cg.others() == [12345]
    finally:
        for fd in set(fds.values()):
            os.close(fd)


def test_real_v1_pool_when_root():
    layout, why = cgroups.detect()
    if layout is None or os.geteuid() != 0:
        pytest.skip(f"no writable cgroups here: {why or 'not root'}")
    pool = cgroups.PoolCgroups(layout, cpu_weight=2)
    try:
        w = pool.new_worker()
        for d in w.dirs.values():
            assert os.path.isfile(os.path.join(d, "cgroup.procs"))
        w.remove()
        assert not any(os.path.exists(d) for d in w.dirs.values())
    finally:
        pool.close()
    assert not any(os.path.exists(p) for p in pool.pools.values())
