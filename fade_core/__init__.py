"""fade_core: the science library of fade (advantages, decomposition, losses, metrics, rollouts,
sandbox, verifiers, data, models, trainer, results store). Pure Python + torch/numpy/duckdb; it never
imports Prefect or DVC."""

__version__ = "0.1.0"
