"""fade's Dask workers keep glibc's own malloc trimming (flows.pipeline.keep_glibc_malloc_trim).

Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536 in every worker; measured, that made each training run in a
worker ~1.7x slower (bench/dask_worker_env.py). These tests check the config logic, and (slow) the
environment a real worker of fade's task runner gets.
"""

from __future__ import annotations

import os

import dask
import pytest

from flows import pipeline

KEY = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


@pytest.fixture
def dask_default(monkeypatch):
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    with dask.config.set({KEY: pipeline.DASK_MALLOC_TRIM_DEFAULT}):
        yield


def test_dask_default_is_what_fade_expects():
    """If Dask changes its default, the guard below must be revisited (it only replaces Dask's own value)."""
    import distributed  # noqa: F401  (loads distributed's config defaults)

    with dask.config.set({}):
        defaults = dask.config.get("distributed.nanny.pre-spawn-environ")
    assert defaults.get("MALLOC_TRIM_THRESHOLD_") in (pipeline.DASK_MALLOC_TRIM_DEFAULT, None)


def test_dask_default_threshold_is_unset(dask_default):
    pipeline.keep_glibc_malloc_trim()
    assert dask.config.get(KEY) is None
    from distributed.nanny import _get_env_variables

    assert "MALLOC_TRIM_THRESHOLD_" not in _get_env_variables("distributed.nanny.pre-spawn-environ")


def test_a_users_dask_config_is_kept(dask_default):
    with dask.config.set({KEY: 1 << 20}):
        pipeline.keep_glibc_malloc_trim()
        assert dask.config.get(KEY) == 1 << 20


def test_a_users_environment_is_kept(dask_default, monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    pipeline.keep_glibc_malloc_trim()
    assert dask.config.get(KEY) == pipeline.DASK_MALLOC_TRIM_DEFAULT  # Dask passes the variable on itself


def test_task_runner_applies_it(dask_default):
    from fade_core import config as fconfig

    pipeline.task_runner(fconfig.load(None, ["pipeline.workers=1"]))
    assert dask.config.get(KEY) is None


@pytest.mark.slow
def test_a_real_worker_has_no_trim_threshold(dask_default, tmp_path, monkeypatch):
    """A worker of fade's local cluster: no MALLOC_TRIM_THRESHOLD_, one torch thread (Dask's OMP_NUM_THREADS=1)."""
    from prefect import flow, task

    from fade_core import config as fconfig
    from flows import prefect_api

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))

    @task
    def worker_env() -> tuple[str | None, int, int]:
        import torch

        return os.environ.get("MALLOC_TRIM_THRESHOLD_"), torch.get_num_threads(), os.getpid()

    @flow(task_runner=pipeline.task_runner(fconfig.load(None, ["pipeline.workers=1"])))
    def probe() -> tuple[str | None, int, int]:
        return worker_env.submit().result()

    saved = dict(os.environ)  # the nanny writes its pre-spawn variables into this process; prefect_api its URL
    prefect_api.start()
    try:
        trim, threads, pid = probe()
    finally:
        prefect_api.stop()
        os.environ.clear()
        os.environ.update(saved)
    assert pid != os.getpid()  # it ran in a worker process
    assert trim is None and threads == 1
