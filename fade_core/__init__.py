"""fade_core: the science library of fade (config and plan, the run folder, advantages, decomposition,
losses, metrics, rollouts, models, the trainer, data, verifiers, sandbox, evaluation, results store,
aggregation, report, study). Pure Python + torch/numpy/duckdb; it never imports Prefect or DVC.
docs/architecture.md describes the layers and how the modules fit together."""

__version__ = "0.1.0"
