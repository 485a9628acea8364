"""`fade run` on a loaded machine (issue 16): the README's main command on a micro config with CPU hogs beside
it starts one Prefect API for itself and its workers, stops within seconds on Ctrl-C leaving no process
and no half-written output behind, and its rerun finishes only what is missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_pipeline import BIN, MICRO, _env  # noqa: E402

from fade_core.integrity import verify_manifest  # noqa: E402
from fade_core.store import ResultsStore  # noqa: E402

HOGS = 2  # busy processes beside the run: load ~4-5 on the 2-core CI machine with fade's own work


def _hogs() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]


def _wait_for(predicate, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"fade run ended early ({proc.returncode}):\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"timed out:\n{log.read_text()[-4000:]}"
        time.sleep(0.5)


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.slow
def test_fade_run_under_load_stops_on_ctrl_c_and_the_rerun_finishes(tmp_path):
    env = _env(tmp_path)  # no PREFECT_API_URL: fade starts the run's one API itself
    env.pop("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")  # fade's own bound, not Prefect's, applies
    env["FADE_LOG_DIR"] = str(tmp_path / "logs")
    params = tmp_path / "params.yaml"
    sets = MICRO + ["train.steps=12", "train.checkpoint_every=6", "pipeline.name=micro", "pipeline.workers=1",
                    "pipeline.arms={grpo: {method: grpo}}"]  # one run on one Dask worker: lean, still a fan-out
    subprocess.run([str(BIN / "fade"), "params", "--params", "/dev/null", "--write", str(params),
                    *sum((["--set", s] for s in sets), [])], cwd=tmp_path, env=env, check=True, timeout=300)
    command = [str(BIN / "fade"), "run", "--params", str(params), "--results", str(tmp_path / "results")]
    root = tmp_path / "results" / "micro"
    hogs = _hogs()
    try:
        log = tmp_path / "first.log"
        with log.open("w") as out:
            # SIGINT as a terminal's foreground process has it: a test run from a background job (CI scripts,
            # `cmd &`) inherits SIGINT ignored, and the child would never see the Ctrl-C this test sends
            proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True,
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            _wait_for(lambda: any(root.glob("runs/*/*/checkpoints/step-6/SHA256SUMS")), 600, proc, log)
            tree = psutil.Process(proc.pid).children(recursive=True)
            servers = [p for p in _alive(tree) if "uvicorn" in " ".join(p.cmdline())]
            assert len(servers) == 1, [p.cmdline() for p in servers]  # one API for the run and its workers
            t0 = time.monotonic()
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the foreground process group
            code = proc.wait(timeout=60)
            stopped_in = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert code == 130, log.read_text()[-4000:]
        assert stopped_in < 30, f"took {stopped_in:.0f} s to stop"
        deadline = time.monotonic() + 15
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _alive(tree), [p.cmdline() for p in _alive(tree)]  # workers, API server: all gone
        assert "Traceback" not in log.read_text().split("Finished in state")[-1]
        # nothing half-written is visible: every checkpoint folder and results part verifies
        finished = sorted(root.glob("runs/*/*/checkpoints/step-*[0-9]"))
        assert finished and all(verify_manifest(c) for c in finished)
        if (root / "eval").is_dir():
            ResultsStore(root / "eval").verify()
        base = root / "models" / "base" / "model.safetensors"
        stamps = {p: p.stat().st_mtime_ns for p in [base, *(f / "model.safetensors" for f in finished)]}

        rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-4000:]
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert "is current (same inputs, checksums verify): not redone" in rerun.stdout + rerun.stderr
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # warm start and finished checkpoints kept
    assert (root / "reports" / "default" / "index.html").is_file()
    assert len(list(root.glob("runs/*/*/checkpoints/step-12"))) == 1
    assert f"report: {root / 'reports' / 'default' / 'index.html'}" in rerun.stdout + rerun.stderr
    assert (root / "reports" / "default" / "index.html").stat().st_size > 10_000
    assert "grpo" in json.loads((root / "eval" / "metrics.json").read_text())["countdown"]
    # the base and both checkpoints (steps 6 and 12) evaluated once each, 4 problems x 4 samples, though the
    # first run was stopped part-way and the rerun skipped what it had stored
    con = duckdb.connect(str(root / "eval" / "results.duckdb"), read_only=True)
    counts = dict(con.execute("SELECT run_id, count(*) FROM samples GROUP BY run_id").fetchall())
    assert counts.pop("base") == 16 and list(counts.values()) == [32], counts
