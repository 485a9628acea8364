"""A cheap flow that proves a worker's environment can run fade.

`smoke` is what a freshly started work pool runs first (the `smoke` deployment of prefect.yaml): the
worker's Python imports `fade_core`, the working directory its pull step chose holds a params.yaml
that validates, and the advantage registry answers. Nothing is trained, written or downloaded; the
flow returns a small summary (fade and Python versions, working directory, the config's fingerprint,
the arms `fade run` would compare, the CUDA devices it sees) that the flow run's result and logs show.

A configuration problem fails the run with the offending key named (fade_core.config.ConfigError),
which is exactly what a smoke test of a new cluster should surface before a long run is queued.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger


def _fade_version() -> str:
    try:
        return metadata.version("fade")
    except metadata.PackageNotFoundError:  # a source checkout that was never pip-installed
        return "unknown (not installed)"


@flow(name="smoke", log_prints=False)
def smoke(params_path: str = "params.yaml", overrides: list[str] | None = None) -> dict[str, Any]:
    """Import fade, validate ``params_path`` (+ dotted ``overrides``) and return a summary of the setup."""
    import torch

    import fade_core
    from fade_core import advantages
    from fade_core import config as fconfig

    logger = get_run_logger()
    cfg = fconfig.load(params_path, overrides or [])
    summary: dict[str, Any] = {
        "fade_version": _fade_version(),
        "fade_core": str(Path(fade_core.__file__).resolve().parent),
        "python": platform.python_version(),
        "cwd": os.getcwd(),
        "params_path": str(Path(params_path).resolve()),
        "params_found": Path(params_path).exists(),
        "config_fingerprint": cfg.fingerprint(),
        "methods": advantages.names(),
        "arms": {k: a.label for k, a in cfg.pipeline.arms.items()},
        "seeds": list(cfg.pipeline.seeds),
        "device": cfg.compute.device,
        "cuda_devices": torch.cuda.device_count(),
        "rollout_engine": cfg.rollout.engine,
        "telemetry_off": os.environ.get("DO_NOT_TRACK") == "1",
    }
    logger.info("fade smoke: %s", summary)
    return summary


if __name__ == "__main__":
    print(smoke())
