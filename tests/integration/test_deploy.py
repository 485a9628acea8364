"""prefect.yaml, the work-pool templates and a real deployment round trip on a local Prefect server.

Fast checks (no server): every deployment of prefect.yaml names a work pool whose template declares
the job variables it sets, parameters match the flow's signature where the entrypoint exists (and
the documented signature of pipeline/sweep where it does not yet), and the kubernetes template,
rendered with a deployment's job variables, asks for the GPUs, mounts the shared volume and keeps
telemetry off.

Slow check: a Prefect server on 127.0.0.1 (random free port, temporary PREFECT_HOME, telemetry off)
in its own process group; both work pools are created from infra/prefect/*.json, `prefect deploy`
registers the deployments whose entrypoints exist, the nightly cron schedule is read back through
the client, and a `smoke` run is picked up by `prefect worker start --pool fade-process --run-once`
and must reach COMPLETED with its working directory set by the pull step. Server and worker process
groups are always killed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prefect_local import TELEMETRY_ENV, free_port, kill_group, server_env, start_server  # noqa: E402
from test_pipeline import MICRO  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PREFECT_YAML = REPO / "prefect.yaml"
K8S_TEMPLATE = REPO / "infra" / "prefect" / "k8s-gpu-job-template.json"
PROCESS_TEMPLATE = REPO / "infra" / "prefect" / "process-job-template.json"
POOL_TEMPLATES = {"fade-process": ("process", PROCESS_TEMPLATE), "fade-gpu": ("kubernetes", K8S_TEMPLATE)}
STATIC_BASELINES = {"grpo", "dr_grpo", "rloo", "dapo", "power", "asym_grpo", "passk"}
# Signatures agreed for flows that may be written after this file (the lead's pipeline and sweep).
AGREED_PARAMETERS = {
    "flows/pipeline.py:pipeline": {"config", "results"},
    "flows/sweep.py:sweep": {"config", "methods", "seeds", "grid", "results"},
}
PLACEHOLDER = re.compile(r"{{\s*([\w.\-$]+)\s*}}")


def _deployments() -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load(PREFECT_YAML.read_text())
    return {d["name"]: d for d in spec["deployments"]}


def _template(pool: str) -> dict[str, Any]:
    return json.loads(POOL_TEMPLATES[pool][1].read_text())


def _entrypoint_exists(entrypoint: str) -> bool:
    return (REPO / entrypoint.split(":")[0]).exists()


# ----------------------------------------------------------------------------------- static checks
def test_required_deployments_and_nightly_schedule() -> None:
    deps = _deployments()
    assert {"smoke", "pipeline", "nightly-baselines"} <= set(deps)
    assert deps["pipeline"]["entrypoint"] == "flows/pipeline.py:pipeline"
    assert not deps["pipeline"].get("schedules"), "pipeline is on demand"
    nightly = deps["nightly-baselines"]
    assert nightly["entrypoint"] == "flows/sweep.py:sweep"
    assert set(nightly["parameters"]["methods"]) == STATIC_BASELINES
    (schedule,) = nightly["schedules"]
    # A valid 5-field cron string and an IANA timezone that the schedule model accepts.
    from prefect.client.schemas.schedules import CronSchedule

    CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])
    assert len(schedule["cron"].split()) == 5
    # a workstation's variant: the same flow, parameters and schedule, on the process pool
    local = deps["nightly-baselines-local"]
    for key in ("entrypoint", "parameters", "schedules", "concurrency_limit"):
        assert local[key] == nightly[key], key
    assert local["work_pool"]["name"] == "fade-process" and nightly["work_pool"]["name"] == "fade-gpu"


def test_methods_of_nightly_sweep_are_registered_advantages() -> None:
    from fade_core import advantages

    unknown = set(_deployments()["nightly-baselines"]["parameters"]["methods"]) - set(advantages.names())
    assert not unknown, f"nightly-baselines sweeps methods that fade_core.advantages does not know: {unknown}"


@pytest.mark.parametrize("name", sorted(_deployments()))
def test_deployment_parameters_match_flow_signature(name: str) -> None:
    dep = _deployments()[name]
    entrypoint = dep["entrypoint"]
    given = set(dep.get("parameters") or {})
    for sched in dep.get("schedules") or []:
        given |= set(sched.get("parameters") or {})
    if _entrypoint_exists(entrypoint):
        from prefect.flows import load_flow_from_entrypoint

        flow = load_flow_from_entrypoint(str(REPO / entrypoint))
        accepted = set(inspect.signature(flow.fn).parameters)
    elif entrypoint in AGREED_PARAMETERS:
        accepted = AGREED_PARAMETERS[entrypoint]
    else:
        pytest.skip(f"{entrypoint} is not written yet")
    assert given <= accepted, f"{name}: parameters {sorted(given - accepted)} are not arguments of {entrypoint}"


@pytest.mark.parametrize("name", sorted(_deployments()))
def test_job_variables_are_declared_by_the_pool_template(name: str) -> None:
    dep = _deployments()[name]
    pool = dep["work_pool"]["name"]
    assert pool in POOL_TEMPLATES, f"{name}: unknown work pool {pool!r}"
    declared = set(_template(pool)["variables"]["properties"])
    used = set(dep["work_pool"].get("job_variables") or {})
    assert used <= declared, f"{name}: job variables {sorted(used - declared)} are not declared for {pool}"
    assert dep["work_pool"].get("work_queue_name"), f"{name}: no work queue (stages are routed by queue)"
    (step,) = dep["pull"]
    directory = step["prefect.deployments.steps.set_working_directory"]["directory"]
    expected = "{{ $PWD }}" if pool == "fade-process" else "{{ $FADE_WORKDIR }}"
    assert directory == expected


@pytest.mark.parametrize("pool", sorted(POOL_TEMPLATES))
def test_template_placeholders_refer_to_declared_variables(pool: str) -> None:
    tpl = _template(pool)
    declared = set(tpl["variables"]["properties"])
    used = set(PLACEHOLDER.findall(json.dumps(tpl["job_configuration"])))
    assert used <= declared, f"{pool}: undeclared placeholders {sorted(used - declared)}"
    # Every default must satisfy its own declared type (the server validates runs against them).
    kinds = {"string": str, "integer": int, "boolean": bool, "object": dict, "array": list}
    for key, prop in tpl["variables"]["properties"].items():
        if "default" in prop:
            assert isinstance(prop["default"], kinds[prop["type"]]), f"{pool}.{key}: default of the wrong type"


def _render_k8s(job_variables: dict[str, Any]) -> dict[str, Any]:
    """The job manifest the kubernetes worker would start from: defaults, then the deployment's values."""
    from prefect.utilities.templating import apply_values

    tpl = _template("fade-gpu")
    values = {k: v["default"] for k, v in tpl["variables"]["properties"].items() if "default" in v}
    values.update(job_variables)
    return apply_values(tpl["job_configuration"], values)["job_manifest"]


def test_k8s_template_renders_gpu_trainer_and_cpu_scorer_pods() -> None:
    deps = _deployments()
    trainer = _render_k8s(deps["nightly-baselines"]["work_pool"]["job_variables"])
    pod = trainer["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert pod["nodeSelector"] == {"fade.io/role": "trainer"}
    assert any(t.get("key") == "nvidia.com/gpu" for t in pod["tolerations"])
    claim = {v["name"]: v for v in pod["volumes"]}["fade-shared"]["persistentVolumeClaim"]["claimName"]
    assert claim == "fade-shared"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"fade-shared": "/mnt/fade", "dshm": "/dev/shm"}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert TELEMETRY_ENV.items() <= env.items()
    # The pull step of cluster deployments changes into $FADE_WORKDIR: it must be on the shared volume.
    assert env["FADE_WORKDIR"] == container["workingDir"] == "/mnt/fade/fade"
    assert env["HF_HOME"].startswith("/mnt/fade/")
    assert "{{" not in json.dumps(trainer)

    scorer = _render_k8s(deps["aggregate-cpu"]["work_pool"]["job_variables"])
    spec = scorer["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 0
    assert spec["nodeSelector"] == {"fade.io/role": "scorer"}
    assert spec["tolerations"] == []


def test_process_template_keeps_telemetry_off() -> None:
    env = _template("fade-process")["variables"]["properties"]["env"]["default"]
    assert TELEMETRY_ENV.items() <= env.items()
    assert TELEMETRY_ENV.items() <= _deployments()["smoke"]["work_pool"]["job_variables"]["env"].items()


CLUSTER = REPO / "infra" / "cluster"


def _overrides(path: Path) -> list[str]:
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_runbook_overrides_for_qwen7b_validate() -> None:
    from fade_core import config as fconfig

    items = _overrides(CLUSTER / "qwen7b-livecodebench.overrides")
    cfg = fconfig.load(REPO / "params.yaml", items)
    assert cfg.rollout.engine == "vllm" and cfg.compute.device == "cuda" and cfg.compute.ranks == 8
    assert cfg.model.name_or_path.startswith("/mnt/fade/")  # on the shared volume, never a hub id at run time
    assert "livecodebench" in cfg.eval.benchmarks and cfg.train.benchmark in cfg.data.benchmarks
    assert cfg.eval.n_samples >= max(cfg.eval.ks)
    # Every override key is set to the value the file gives (nothing ignored by a typo'd section).
    for item in items:
        key, value = fconfig.parse_override(item)
        node: Any = cfg.to_dict()
        for part in key.split("."):
            node = node[part]
        assert node == value, f"{key}: {node!r} != {value!r}"


def test_cluster_launch_scripts_parse_and_hostfile_is_deepspeed_format() -> None:
    for script in ("launch_torchrun.sh", "launch_deepspeed.sh"):
        path = CLUSTER / script
        assert os.access(path, os.X_OK), f"{script} is not executable"
        res = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    hosts = [ln for ln in (CLUSTER / "hostfile.example").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert hosts and all(re.fullmatch(r"[\w.\-]+ slots=\d+", h) for h in hosts), hosts


def test_launch_torchrun_refuses_a_directory_without_params(tmp_path: Path) -> None:
    env = {**os.environ, "FADE_WORKDIR": str(tmp_path)}
    res = subprocess.run(["bash", str(CLUSTER / "launch_torchrun.sh")], env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "no params.yaml" in res.stderr


# ---------------------------------------------------------------------------- the server round trip
def _prefect(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"prefect {' '.join(args)} failed ({res.returncode}):\n{out[-4000:]}"
    return out


async def _read_back(api_url: str, names: list[str]) -> dict[str, Any]:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    async with PrefectClient(api_url) as client:
        deps = await client.read_deployments(deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=names)))
        pools = {p: await client.read_work_pool(p) for p in POOL_TEMPLATES}
    return {"deployments": {d.name: d for d in deps}, "pools": pools}


async def _run_smoke(api_url: str, deployment_id: Any, parameters: dict[str, Any] | None = None) -> Any:
    """A flow run of the deployment (its own parameters, updated with ``parameters``), for a worker to pick up."""
    from prefect.client.orchestration import PrefectClient

    async with PrefectClient(api_url) as client:
        return await client.create_flow_run_from_deployment(deployment_id, parameters=parameters)


async def _flow_run_and_logs(api_url: str, flow_run_id: Any) -> tuple[Any, list[str]]:
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async with PrefectClient(api_url) as client:
        run = await client.read_flow_run(flow_run_id)
        logs = await client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return run, [log.message for log in logs]


def _start_process_worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    """`prefect worker start --run-once` on the fade-process pool, in its own process group, output to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "prefect", "worker", "start", "--pool", "fade-process", "--type", "process",
             "--run-once", "--prefetch-seconds", "30"],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _wait_for_worker(worker: subprocess.Popen, log: Path, timeout: int, what: str) -> None:
    try:
        worker.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"process worker did not finish {what} within {timeout} s:\n{log.read_text()[-4000:]}")


@pytest.mark.slow
def test_deploy_schedule_and_process_worker_run(tmp_path: Path) -> None:
    started = time.monotonic()
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    home = tmp_path / "prefect-home"
    home.mkdir()
    env = server_env(home, port, {k: v for k, v in os.environ.items() if k != "FADE_WORKDIR"})
    env.update(
        PREFECT_LOGGING_LEVEL="INFO",
        PWD=str(REPO),  # what a shell sets when the worker is started from the repository root
    )
    worker_log = tmp_path / "worker.log"
    server: subprocess.Popen[bytes] | None = None
    worker: subprocess.Popen[bytes] | None = None
    try:
        server = start_server(tmp_path, env, port)
        t_server = time.monotonic() - started

        for pool, (kind, template) in POOL_TEMPLATES.items():
            _prefect(env, "work-pool", "create", pool, "--type", kind, "--base-job-template", str(template))

        deps = _deployments()
        deployable = [n for n, d in deps.items() if _entrypoint_exists(d["entrypoint"])]
        assert "smoke" in deployable
        args = ["deploy"]
        for n in deployable:
            args += ["--name", n]
        _prefect(env, *args)
        t_deploy = time.monotonic() - started

        got = asyncio.run(_read_back(api_url, list(deps)))
        assert set(got["deployments"]) == set(deployable)
        for pool, (_, template) in POOL_TEMPLATES.items():
            assert got["pools"][pool].base_job_template == json.loads(template.read_text())
        for n in deployable:
            server_dep, yaml_dep = got["deployments"][n], deps[n]
            assert server_dep.work_pool_name == yaml_dep["work_pool"]["name"]
            assert server_dep.work_queue_name == yaml_dep["work_pool"]["work_queue_name"]
            assert server_dep.job_variables == (yaml_dep["work_pool"].get("job_variables") or {})
            # Env placeholders of pull steps resolve at deploy time when the deployer has the variable
            # ($PWD: this checkout) and stay for the worker otherwise ($FADE_WORKDIR, set in the pod).
            (step,) = server_dep.pull_steps
            directory = step["prefect.deployments.steps.set_working_directory"]["directory"]
            local = yaml_dep["work_pool"]["name"] == "fade-process"
            assert directory == (str(REPO) if local else "{{ $FADE_WORKDIR }}"), n
            expected_schedules = yaml_dep.get("schedules") or []
            assert len(server_dep.schedules) == len(expected_schedules)
            for srv, want in zip(server_dep.schedules, expected_schedules, strict=True):
                assert srv.schedule.cron == want["cron"]
                assert srv.schedule.timezone == want["timezone"]
                assert srv.active is want.get("active", True)
        if "nightly-baselines" in deployable:
            nightly = got["deployments"]["nightly-baselines"]
            assert set(nightly.parameters["methods"]) == STATIC_BASELINES
        assert "pipeline" not in deployable or not got["deployments"]["pipeline"].schedules
        assert "nightly-baselines-local" in deployable  # the sweep's process-pool variant registers with its cron

        flow_run = asyncio.run(_run_smoke(api_url, got["deployments"]["smoke"].id))
        worker = _start_process_worker(env, worker_log)
        _wait_for_worker(worker, worker_log, 240, "its run")
        run, logs = asyncio.run(_flow_run_and_logs(api_url, flow_run.id))
        detail = f"state {run.state!r}\nworker log:\n{worker_log.read_text()[-4000:]}"
        assert run.state is not None and run.state.is_completed(), detail
        summary = [m for m in logs if m.startswith("fade smoke:")]
        assert summary, f"no summary log line from the smoke flow:\n{logs}\n{detail}"
        # The pull step changed into the repository: the flow ran there and found its params.yaml.
        assert f"'cwd': '{REPO}'" in summary[0], summary[0]
        assert "'params_found': True" in summary[0] and "'telemetry_off': True" in summary[0], summary[0]
        t_smoke = time.monotonic() - started

        # The process-pool variant of the nightly sweep (its schedule was read back above) runs once under
        # a process worker: one static baseline x one seed of the micro config, results in tmp_path.
        from fade_core import config as fconfig

        micro = fconfig.load(REPO / "params.yaml", MICRO).to_dict()
        micro["pipeline"]["name"] = "nightly-micro"
        sweep_run = asyncio.run(_run_smoke(api_url, got["deployments"]["nightly-baselines-local"].id, {
            "config": micro, "methods": ["grpo"], "seeds": [0], "results": str(tmp_path / "results")}))
        kill_group(worker)
        worker = _start_process_worker(env, worker_log)
        _wait_for_worker(worker, worker_log, 600, "the sweep")
        run, _ = asyncio.run(_flow_run_and_logs(api_url, sweep_run.id))
        assert run.state is not None and run.state.is_completed(), (
            f"state {run.state!r}\nworker log:\n{worker_log.read_text()[-4000:]}")
        swept = tmp_path / "results" / "nightly-micro-sweep"
        assert [p.name.rsplit("-", 1)[0] for p in (swept / "runs").glob("*/*") if p.is_dir()] == ["grpo-s0"]
        assert (swept / "reports" / "default" / "index.html").exists()
        elapsed = time.monotonic() - started
        print(f"server healthy {t_server:.1f} s, deployed {t_deploy:.1f} s, smoke run completed {t_smoke:.1f} s, "
              f"local nightly sweep run completed {elapsed:.1f} s")
    finally:
        kill_group(worker)
        kill_group(server)
