"""The run folder: the one module that names, writes, lists and reads ``runs/<run_id>/``.

Layout of one training run (the pipeline keeps each arm's runs in a folder of their own,
``runs/<arm>/<run_id>/``; every reader here accepts both)::

    <run_id>/
        config.yaml             the resolved config that trained it (fade_core.config.save)
        prompt.json             its prompts: templates, chat template, one rendered prompt (fade_core.data.prompts)
        metrics.jsonl           one JSON object per RL step (the step record, fade_core.train.record)
        metrics.duckdb          the same rows, table ``train_steps`` (written with the JSON line)
        checkpoints/step-N/     the policy in HF format (config.json, model.safetensors, tokenizer files)
                                + trainer_state.pt (optimizer, sampler, advantage, RNG: resume state)
                                [+ deepspeed/ (DeepSpeed's partitioned optimizer state)]
                                + SHA256SUMS (every file's sha256, written last: fade_core.integrity)

A run id is ``<label>-s<seed>-<hash>``: the label is ``train.label`` or the advantage's label
(:attr:`fade_core.advantages.Advantage.label`, e.g. ``power(alpha=3)``), the hash the 8-hex
:meth:`fade_core.config.Config.fingerprint` of the sections that shape the run (naming and bookkeeping
fields of ``train`` left out) together with the digest of the training problems (:func:`problems_digest`).
Reruns of one config on one problem set therefore find their own folder (and resume), and two configs,
or one config on two problem files, never share one. A checkpoint folder outside a run (the warm-started base model
``models/base`` or ``models/base/checkpoints/step-N``) is an untrained baseline named after its folder.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fade_core.integrity import DamagedFile, verify_manifest, write_manifest

CONFIG_FILE = "config.yaml"
PROMPT_FILE = "prompt.json"
ENGINE_FILE = "engine.json"
"""The rollout engine a run sampled with (fade_core.rollout: name, and for vllm its version, device, seeding)."""
CODE_FILE = "code.jsonl"
"""The code each training session of a run ran (fade_core.code_version): one JSON line per start or resume."""
METRICS_JSONL = "metrics.jsonl"
METRICS_DB = "metrics.duckdb"
METRICS_TABLE = "train_steps"
CHECKPOINTS = "checkpoints"
STATE_FILE = "trainer_state.pt"
STEP_DIR_RE = re.compile(r"^step-(\d+)$")
RUN_ID_RE = re.compile(r"^(?P<label>.+)-s(?P<seed>-?\d+)-(?P<hash>[0-9a-f]{8})$")
RUN_HASH_SECTIONS = ("data", "model", "warmstart", "train", "rollout")
RUN_HASH_IGNORED = ("label", "runs_dir", "checkpoint_every", "rank1_every")
NEW_KEYS_UNSET = ("problem_pool",)
"""train keys added after runs were made: left out of the hash while unset, so those runs keep their ids (and
resume); a pool that is set changes the training problems, and so their digest, anyway."""


# ============================================================================ code
def record_code_version(run_dir: str | Path, state: tuple[str | None, bool | None, str | None], step: int) -> None:
    """Append the git ``state`` (commit, uncommitted changes, branch: fade_core.code_version.git_state) of a
    training session that starts at ``step`` (0, or the step it resumed from) to the run's code.jsonl."""
    import json
    from datetime import UTC, datetime

    commit, dirty, branch = state
    line = {"git_commit": commit, "git_dirty": dirty, "git_branch": branch, "from_step": int(step),
            "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")}
    with open(Path(run_dir) / CODE_FILE, "a") as f:
        f.write(json.dumps(line) + "\n")


def read_code_versions(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's code.jsonl records, oldest first ([] for a run made before fade recorded them); a torn last
    line (a session killed while writing it) is skipped."""
    import json

    path = Path(run_dir) / CODE_FILE
    if not path.is_file():
        return []
    out = []
    for raw in path.read_text().splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


# ============================================================================ identity
def run_label(method: str, params: dict[str, Any], label: str | None = None) -> str:
    """The method label of a run id: ``label`` when given, else the advantage's label (the method and the
    parameters the config sets, e.g. ``power(alpha=3)``)."""
    from fade_core import advantages

    return label or advantages.build(method, **params).label


def problems_digest(problems: Sequence[dict[str, Any]]) -> str:
    """16 hex of the sha256 of the training problems' content (every column of every row, in order), so
    two problem files with the same settings never share a run id, whatever their paths."""
    text = json.dumps(list(problems), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_hash(cfg: Any, problems: str | None = None) -> str:
    """8-hex fingerprint of the sections that shape a run (``train``'s naming and bookkeeping fields left
    out) and, when given, the :func:`problems_digest` of the problems it trains on."""
    ignored = RUN_HASH_IGNORED + (NEW_KEYS_UNSET if cfg.train.problem_pool is None else ())
    base = cfg.fingerprint(*RUN_HASH_SECTIONS, exclude={"train": ignored})
    return base if problems is None else hashlib.sha256(f"{base}:{problems}".encode()).hexdigest()[:8]


def run_id(cfg: Any, problems: str | None = None) -> str:
    """``<label>-s<seed>-<8-hex hash>`` of a validated Config and the digest of its training problems (see
    :func:`run_label`, :func:`run_hash`; the trainer always passes the digest)."""
    label = run_label(cfg.train.method, cfg.train.params, cfg.train.label)
    return f"{label}-s{cfg.train.seed}-{run_hash(cfg, problems)}"


def run_dir(cfg: Any, problems: str | None = None) -> Path:
    """Where the run of ``cfg`` (on problems of that digest) lives: ``<train.runs_dir>/<run_id>``."""
    return Path(cfg.train.runs_dir) / run_id(cfg, problems)


def checkpoint_owner(path: str | Path) -> Path | None:
    """The run folder a checkpoint ``<run>/checkpoints/step-N`` belongs to (None: not inside a run)."""
    path = Path(path).resolve()
    if STEP_DIR_RE.match(path.name) and path.parent.name == CHECKPOINTS and is_run_dir(path.parent.parent):
        return path.parent.parent
    return None


def parse_run_id(name: str) -> tuple[str, int | None]:
    """``"<label>-s<seed>-<8 hex>"`` -> (label, seed); anything else -> (name, None)."""
    m = RUN_ID_RE.match(name)
    if not m:
        return name, None
    return m.group("label"), int(m.group("seed"))


# ============================================================================ checkpoints
@dataclass(frozen=True)
class CheckpointId:
    """Who produced a checkpoint: run id, method label, seed and training step."""

    run_id: str
    method: str
    seed: int
    step: int


def checkpoint_dir(run: str | Path, step: int) -> Path:
    """``<run>/checkpoints/step-<step>``."""
    return Path(run) / CHECKPOINTS / f"step-{step}"


def is_checkpoint(path: Path) -> bool:
    """A complete HF checkpoint folder: config.json and weights present."""
    has_weights = any(path.glob("*.safetensors")) or (path / "pytorch_model.bin").exists()
    return (path / "config.json").exists() and has_weights


def is_resumable(path: Path) -> bool:
    """A checkpoint the trainer can resume from: its trainer state was written (last, before the rename)."""
    return (path / STATE_FILE).exists()


def list_checkpoints(run: str | Path, *, resumable: bool = False) -> list[tuple[int, Path]]:
    """``[(step, path)]`` of ``run/checkpoints/step-N/`` by step: the complete HF checkpoints, or with
    ``resumable`` those holding a trainer state. Half-written ``step-N.tmp`` folders never count."""
    root = Path(run) / CHECKPOINTS
    done = is_resumable if resumable else is_checkpoint
    out = []
    for p in root.iterdir() if root.is_dir() else []:
        m = STEP_DIR_RE.match(p.name)
        if m and p.is_dir() and done(p):
            out.append((int(m.group(1)), p))
    return sorted(out)


SIDE_FILES = ("config.yaml", "warmstart.jsonl", "warmstart_eval.json", METRICS_JSONL, METRICS_DB)
"""Files a model folder may hold beside the model (the warm start's log and resolved config, ...): written or
rewritten after the model, so they are not in its manifest."""


def seal_checkpoint(path: str | Path) -> Path:
    """Record the sha256 of every model file of a checkpoint folder (its ``SHA256SUMS``); call it last,
    before the folder is renamed into place. A base-model folder's own ``checkpoints/`` are left to their
    own manifests, and its :data:`SIDE_FILES` are not model files."""
    return write_manifest(path, skip_dirs=(CHECKPOINTS,), skip_files=SIDE_FILES)


def verify_checkpoint(path: str | Path) -> bool:
    """Check a checkpoint folder against its ``SHA256SUMS`` before it is loaded; raise
    :class:`~fade_core.integrity.DamagedFile` naming the first file that differs. False: written before
    checksums existed (nothing to check against)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: checkpoint folder not found")
    return verify_manifest(path)


def load_verified(load: Any, path: str | Path, **kwargs: Any) -> Any:
    """``load(path, **kwargs)`` (e.g. fade_core.models.load) of a model: a local folder is checked first
    against its SHA256SUMS, and a file of it that the loading library cannot read becomes
    :class:`~fade_core.integrity.DamagedFile` naming the folder, instead of the library's traceback without
    it. Anything else (a hub id, ``builtin:tiny``) is loaded as it is."""
    if not Path(path).is_dir():
        return load(path, **kwargs)
    verify_checkpoint(path)
    try:
        return load(path, **kwargs)
    except (OSError, RuntimeError, ValueError, EOFError) as e:
        first = str(e).splitlines()[0] if str(e) else ""
        raise DamagedFile(path, f"cannot be loaded as a checkpoint ({type(e).__name__}: {first})") from e


def resume_candidates(run: str | Path) -> list[tuple[int, Path]]:
    """The resumable checkpoints of a run, newest first: the trainer resumes from the first that verifies
    and loads, and falls back to the next (an older one) when a file of the newest is damaged."""
    return list(reversed(list_checkpoints(run, resumable=True)))


def select_checkpoints(found: Sequence[tuple[int, Path]], which: str) -> list[tuple[int, Path]]:
    """The checkpoints to evaluate of ``found`` (sorted by step): every one ('all') or the last ('last')."""
    if which not in ("all", "last"):
        raise ValueError(f"which must be 'all' or 'last', got {which!r}")
    return list(found) if which == "all" else list(found[-1:])


def identify_checkpoint(path: str | Path) -> CheckpointId:
    """Run id, method, seed and step of a checkpoint folder (see the module docstring)."""
    path = Path(path).resolve()
    m = STEP_DIR_RE.match(path.name)
    if m and path.parent.name == CHECKPOINTS:
        owner, step = path.parent.parent, int(m.group(1))
    else:
        owner, step = path, 0
    label, seed = parse_run_id(owner.name)
    if seed is None:
        seed = int(((read_run_config(owner).get("train") or {}).get("seed")) or 0)
    return CheckpointId(run_id=owner.name, method=label, seed=int(seed), step=step)


def run_checkpoints(run: str | Path, which: str = "all") -> list[tuple[CheckpointId, Path]]:
    """The identified checkpoints of a run to evaluate: every one ('all') or the last ('last')."""
    found = list_checkpoints(run)
    if not found:
        raise FileNotFoundError(f"{run}: no complete checkpoints under checkpoints/step-N/")
    return [(identify_checkpoint(p), p) for _, p in select_checkpoints(found, which)]


# ============================================================================ finding runs
def is_run_dir(path: Path) -> bool:
    """A training run's folder: its config.yaml beside a training record or checkpoints."""
    return (path / CONFIG_FILE).is_file() and ((path / METRICS_JSONL).exists() or (path / CHECKPOINTS).is_dir())


def find_run_dirs(runs_dir: str | Path) -> list[Path]:
    """Run folders ``runs_dir/<run_id>/`` and, one level deeper, ``runs_dir/<arm>/<run_id>/``."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    found = []
    for p in sorted(root.iterdir()):
        if not p.is_dir():
            continue
        if is_run_dir(p):
            found.append(p)
        else:
            found += [q for q in sorted(p.iterdir()) if q.is_dir() and is_run_dir(q)]
    return found


def iter_run_dirs(runs_dir: str | Path) -> Iterable[Path]:
    """Every run folder under ``runs_dir`` (see :func:`find_run_dirs`) with at least one complete checkpoint."""
    for p in find_run_dirs(runs_dir):
        if list_checkpoints(p):
            yield p


# ============================================================================ the training record
class MetricsLog:
    """Appends step records to ``metrics.jsonl`` (one JSON object a line) and ``metrics.duckdb`` (train_steps).

    Columns are created as records bring them: ``solve_hist`` INTEGER[], run_id / method VARCHAR, seed /
    step BIGINT, everything else DOUBLE (NaN stored as NULL). The DuckDB file stays open for the run, so
    readers fall back to metrics.jsonl while it is written (:func:`read_train_steps`).
    """

    LIST_COLUMNS = ("solve_hist",)
    TEXT_COLUMNS = ("run_id", "method")
    INT_COLUMNS = ("seed", "step")

    def __init__(self, run: Path) -> None:
        self.jsonl = Path(run) / METRICS_JSONL
        self.db = Path(run) / METRICS_DB
        self._con: Any = None
        self._columns: set[str] = set()

    def reset(self) -> None:
        """Delete the record of an earlier attempt (a run that starts from step 0)."""
        for stale in (self.jsonl, self.db):
            stale.unlink(missing_ok=True)

    def truncate(self, last_step: int) -> None:
        """Drop records after ``last_step`` (a resumed run re-logs the steps after its checkpoint)."""
        if self.jsonl.exists():
            keep = []
            for line in self.jsonl.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a torn last line from the killed run
                if int(rec.get("step", 0)) <= last_step:
                    keep.append(line)
            self.jsonl.write_text("".join(k + "\n" for k in keep))
        if self.db.exists():
            import duckdb

            with duckdb.connect(str(self.db)) as con:
                tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
                if METRICS_TABLE in tables:
                    con.execute(f"DELETE FROM {METRICS_TABLE} WHERE step > ?", [last_step])

    def _sql_type(self, key: str, value: Any = None) -> str:
        if key in self.LIST_COLUMNS:
            return "INTEGER[]"
        if key in self.TEXT_COLUMNS or isinstance(value, str | list | dict):
            return "VARCHAR"  # other lists and objects (the step's example completions) as JSON text
        if key in self.INT_COLUMNS:
            return "BIGINT"
        return "DOUBLE"

    def append(self, record: dict[str, Any]) -> None:
        """Append one step: a JSON line (flushed) and a row of train_steps (committed)."""
        with self.jsonl.open("a") as f:
            f.write(json.dumps(record, allow_nan=True) + "\n")
        con = self._connection()
        missing = [k for k in record if k not in self._columns]
        if missing:
            if not self._columns:
                cols = ", ".join(f'"{k}" {self._sql_type(k, v)}' for k, v in record.items())
                con.execute(f"CREATE TABLE IF NOT EXISTS {METRICS_TABLE} ({cols})")
                self._columns = self._existing(con)
            for k in [k for k in record if k not in self._columns]:
                con.execute(f'ALTER TABLE {METRICS_TABLE} ADD COLUMN "{k}" {self._sql_type(k, record[k])}')
                self._columns.add(k)
        keys = list(record)
        names = ", ".join(f'"{k}"' for k in keys)
        values = [json.dumps(record[k]) if k not in self.LIST_COLUMNS and isinstance(record[k], list | dict)
                  else _sql_value(record[k]) for k in keys]
        con.execute(f"INSERT INTO {METRICS_TABLE} ({names}) VALUES ({', '.join('?' for _ in keys)})", values)

    def _connection(self) -> Any:
        if self._con is None:
            import duckdb

            self._con = duckdb.connect(str(self.db))
            self._columns = self._existing(self._con)
        return self._con

    @staticmethod
    def _existing(con: Any) -> set[str]:
        rows = con.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                           [METRICS_TABLE]).fetchall()
        return {r[0] for r in rows}

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def _sql_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else v
    return v


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalars kept, nested dicts flattened with '.', lists and other containers dropped."""
    out: dict[str, Any] = {}
    for k, v in record.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        elif v is None or isinstance(v, bool | int | float | str):
            out[key] = v
    return out


def read_metrics_jsonl(path: Path) -> pd.DataFrame:
    """A run's metrics.jsonl as a frame (one row per line, lists dropped). A torn last line (a writer
    mid-append) is skipped; a bad line elsewhere raises naming the file and line."""
    lines = path.read_text().splitlines()
    rows = []
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines):
                break
            raise ValueError(f"{path}:{i}: not valid JSON: {e}") from e
        if not isinstance(rec, dict):
            raise ValueError(f"{path}:{i}: expected a JSON object per line")
        rows.append(_flatten(rec))
    return pd.DataFrame(rows)


def last_record(run: Path) -> dict[str, Any]:
    """The last complete line of a run's metrics.jsonl ({} when there is none)."""
    path = Path(run) / METRICS_JSONL
    for line in reversed(path.read_text().splitlines() if path.exists() else []):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {}


def read_run_config(run: Path) -> dict[str, Any]:
    """The run's config.yaml as a mapping ({} when it has none)."""
    p = Path(run) / CONFIG_FILE
    if not p.exists():
        return {}
    try:
        return yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: not valid YAML: {e}") from e


def read_train_steps(run: Path) -> pd.DataFrame:
    """One run's per-step training record: metrics.duckdb (table train_steps) when it can be opened
    read-only, else metrics.jsonl (a trainer holding the DuckDB file's write lock is still running).
    Adds run_id (and method / seed from the run id when the record lacks them); one row per step."""
    import duckdb

    db = run / METRICS_DB
    df = None
    if db.exists():
        try:
            with duckdb.connect(str(db), read_only=True) as con:
                df = con.execute(f"SELECT * FROM {METRICS_TABLE} ORDER BY step").df()
        except duckdb.Error:
            df = None
    if df is None and (run / METRICS_JSONL).exists():
        df = read_metrics_jsonl(run / METRICS_JSONL)
    if df is None or df.empty:
        return pd.DataFrame()
    if "step" not in df.columns:
        raise ValueError(f"{run}: training record has no 'step' column")
    label, seed = parse_run_id(run.name)
    df = df.copy()
    df["run_id"] = run.name
    if "method" not in df.columns:
        df["method"] = label
    if "seed" not in df.columns:
        df["seed"] = seed if seed is not None else (read_run_config(run).get("train") or {}).get("seed")
    # several lines for one step (a resumed run re-logs): keep the last
    df = df.drop_duplicates("step", keep="last").sort_values("step")
    return df.reset_index(drop=True)


def load_training_records(runs_dir: str | Path | None) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """(every run's train_steps stacked, {run_id: config mapping}) for the runs under ``runs_dir``."""
    if runs_dir is None or not Path(runs_dir).is_dir():
        return pd.DataFrame(), {}
    frames, configs = [], {}
    for run in find_run_dirs(runs_dir):
        configs[run.name] = read_run_config(run)
        df = read_train_steps(run)
        if not df.empty:
            frames.append(df)
    if not frames:
        return pd.DataFrame(), configs
    return pd.concat(frames, ignore_index=True, sort=False), configs
