"""The CLI's one error handler (flows/errors.py, wired by flows/cli.py) and its one Prefect API per command
(flows/prefect_api.py): exit codes, one line per error with the log file named, a start-up that is bounded,
retried and cleaned up, and a PREFECT_API_URL that is reused."""

from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from fade_core.config import ConfigError
from fade_core.integrity import DamagedFile
from flows import errors, prefect_api
from flows.cli import app, guarded

BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def _log_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FADE_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setattr(errors, "_log_file", None)
    yield
    prefect_api.stop()


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (ConfigError("invalid configuration: train.steps"), 2, "fade x: invalid configuration: train.steps"),
        (FileNotFoundError(2, "No such file or directory", "data/p.parquet"), 2, "fade x: data/p.parquet: "),
        (DamagedFile("runs/a/model.safetensors", "truncated"), 2, "fade x: runs/a/model.safetensors: damaged"),
        (errors.UserError("--arm 'nope' is not in pipeline.arms"), 2, "fade x: --arm 'nope' is not in pipeline.arms"),
        (errors.ApiUnavailable("the local Prefect API did not start"), 1, "fade x: the local Prefect API did not start"),
        (RuntimeError("worker crashed"), 1, "fade x: failed: RuntimeError: worker crashed"),
    ],
)
def test_one_line_and_exit_code_per_kind_of_error(error, code, line, capsys):
    try:
        raise error
    except Exception as e:  # noqa: BLE001
        got = errors.report("x", e)
    err = capsys.readouterr().err
    assert got == code
    assert err.count("\n") == 1 and err.startswith(line), err
    log = Path(err.rsplit("(traceback: ", 1)[1].rstrip(")\n"))
    assert "Traceback (most recent call last)" in log.read_text()


def test_every_command_goes_through_the_handler(tmp_path, monkeypatch):
    """Errors of commands (here: options that contradict each other, a params file that is not UTF-8) exit 2
    with one `fade <command>:` line, no traceback on the console."""
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"train:\n  label: caf\xe9\n")
    runner = CliRunner()
    cases = [
        (["evaluate", "--run", "a", "--checkpoint", "b"], "fade evaluate: benchmark(s) countdown not prepared"),
        (["params", "--params", str(bad)], f"fade params: {bad}: not UTF-8 text"),
        (["study", "claims", "--params", str(bad)], f"fade study claims: {bad}: not UTF-8 text"),
        (["train", "--set", "train.method=grpo", "--set", "train.group_size=1"], "fade train: invalid configuration:"),
    ]
    for args, line in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and res.output.startswith(line), res.output
        assert "Traceback" not in res.output and "(traceback: " in res.output


def test_interrupts_exit_130_and_143():
    def sigint() -> None:
        raise KeyboardInterrupt

    def sigterm() -> None:
        raise errors.Interrupted(15)

    for fn, code in ((sigint, 130), (sigterm, 143)):
        with pytest.raises(typer.Exit) as e:
            guarded("run", fn)()
        assert e.value.exit_code == code


def test_fade_params_error_in_a_subprocess_is_one_line(tmp_path):
    """The installed `fade` entry point: a key given twice in params.yaml is exit 2, one line, log named."""
    params = tmp_path / "params.yaml"
    params.write_text("train:\n  steps: 3\n  steps: 4\n")
    env = {**os.environ, "FADE_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run([str(BIN / "fade"), "params", "--params", str(params)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(
        f"fade params: {params}: line 3: key 'steps' given twice (first at line 2)"), proc.stderr


# ------------------------------------------------------------------------------------ one Prefect API
FAKE_SERVER = textwrap.dedent("""
    import http.server, sys
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/api/health" else 404); self.end_headers(); self.wfile.write(b"true")
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), H).serve_forever()
""")


def test_start_launches_one_server_points_children_at_it_and_stops_it(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(prefect_api, "_server_command", lambda port: [sys.executable, "-c", FAKE_SERVER, "--port", str(port)])
    url = prefect_api.start()
    pid = prefect_api.server_pid()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/api") and prefect_api.healthy(url)
    assert os.environ["PREFECT_API_URL"] == url  # what Dask workers and subprocesses inherit
    assert prefect_api.start() == url and prefect_api.server_pid() == pid  # one per command
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['PREFECT_API_URL'])"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == url
    prefect_api.stop()
    assert "PREFECT_API_URL" not in os.environ and not prefect_api.healthy(url, timeout=1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_server_that_cannot_start_is_retried_then_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("FADE_API_STARTUP_TIMEOUT", "20")
    starts = []

    def exits(port: int) -> list[str]:
        starts.append(port)
        return [sys.executable, "-c", "import sys; print('no database'); sys.exit(3)"]

    monkeypatch.setattr(prefect_api, "_server_command", exits)
    with pytest.raises(errors.ApiUnavailable) as e:
        prefect_api.start()
    assert len(starts) == prefect_api.ATTEMPTS
    msg = str(e.value)
    assert "exited with code 3" in msg and "FADE_API_STARTUP_TIMEOUT=60" in msg and "PREFECT_API_URL" in msg
    assert "no database" in Path(msg.split("its log: ")[1].split(")")[0]).read_text()
    assert "\n" not in msg and prefect_api.current_url() is None


def test_prefect_api_url_is_reused_and_a_dead_one_named(monkeypatch):
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api"
        monkeypatch.setenv("PREFECT_API_URL", url)
        monkeypatch.setattr(prefect_api, "_launch", lambda *a: pytest.fail("started a server beside PREFECT_API_URL"))
        assert prefect_api.start() == url and prefect_api.server_pid() is None
        prefect_api.stop()
        assert os.environ["PREFECT_API_URL"] == url  # the user's setting is left as it was
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.setenv("FADE_API_STARTUP_TIMEOUT", "1")
    with pytest.raises(errors.ApiUnavailable, match="does not answer; start that server"):
        prefect_api.start()


# ------------------------------------------------------------------------------------ a light CLI
HEAVY = ("torch", "transformers", "prefect", "dask", "flows.pipeline", "tasks")


@pytest.mark.parametrize("args", [["--help"], ["params", "--set", "train.steps=3"], ["params", "--set", "x=1"],
                                  ["run", "--quick", "--set", "train.eps_low=2"], ["aggregate", "--set=x=1"],
                                  ["verify", "missing.jsonl", "missing.parquet"], ["trian"]])
def test_help_params_and_config_errors_do_not_import_prefect_or_transformers(args, tmp_path):
    """Issue 16 point 3: `fade --help`, `fade params` and a command whose config does not validate answer
    before any stage module, Prefect or transformers is imported. (torch is still imported when a config
    reaches the advantage registry, which imports it at module level: a valid `fade params`.)"""
    probe = ("import sys, runpy; sys.argv = ['fade', *sys.argv[1:]]\n"
             "from flows import cli\n"
             "try:\n    cli.main()\nexcept SystemExit as e:\n    code = e.code\n"
             "heavy = sorted({m.split('.')[0] if not m.startswith('flows.') else m for m in sys.modules}"
             f" & set({HEAVY!r}))\n"
             "print('HEAVY', heavy, 'EXIT', code, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300, env={**os.environ, "FADE_LOG_DIR": str(tmp_path)})
    last = proc.stderr.strip().splitlines()[-1]
    allowed = ("HEAVY ['torch'] EXIT", "HEAVY [] EXIT") if args[0] == "params" else ("HEAVY [] EXIT",)
    assert last.startswith(allowed), proc.stderr
    assert last.endswith("EXIT 0" if args[-1] == "train.steps=3" or args == ["--help"] else "EXIT 2"), proc.stderr


def test_config_errors_are_one_line_and_suggest_the_nearest_key(tmp_path):
    """Several bad keys: still one line on stderr; an unknown key names the valid key nearest to it."""
    env = {**os.environ, "FADE_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run([str(BIN / "fade"), "params", "-p", "/dev/null", "--set", "train.methd=grpo",
                           "--set", "train.lr=abc", "--set", "pipeline.arms.fade.parms={}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    line = proc.stderr
    assert line.startswith("fade params: invalid configuration: ") and "train.lr: " in line, line
    assert "train.methd: unknown key (did you mean train.method?)" in line, line
    assert "pipeline.arms.fade.parms: unknown key (did you mean pipeline.arms.fade.params?)" in line, line
    from fade_core.config import Config
    from fade_core.config_keys import nearest_key

    assert nearest_key("zzzzz.qqq", Config) is None and nearest_key("eval.n_sample", Config) == "eval.n_samples"


def test_unknown_commands_and_missing_verify_files_answer_in_one_line(tmp_path):
    env = {**os.environ, "FADE_LOG_DIR": str(tmp_path / "logs")}
    for args, line in ((["trian"], "fade: no such command 'trian' (did you mean 'train'?)"),
                       (["verify", str(tmp_path / "s.jsonl"), str(tmp_path / "p.parquet")],
                        f"fade verify: {tmp_path / 's.jsonl'}: samples file not found")):
        proc = subprocess.run([str(BIN / "fade"), *args], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith(line), proc.stderr


def test_prefect_info_lines_go_to_the_log_file_not_the_terminal(tmp_path):
    """Under a command that runs flows, Prefect's INFO lines reach the command's log file only; its warnings
    still reach the terminal (the logging config is inherited by every process the command starts)."""
    probe = textwrap.dedent("""
        import logging, os, sys
        from flows import errors
        cfg = errors.route_library_logs("run")
        assert cfg is not None and os.environ["PREFECT_LOGGING_SETTINGS_PATH"] == str(cfg)
        import prefect.main  # configures logging from that file (as `from prefect import flow` does)
        logging.getLogger("prefect.fade_test").info("an info line")
        logging.getLogger("prefect.fade_test").warning("a warning line")
        print("LOG", errors.log_path("run"))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_LOGGING_SETTINGS_PATH"}
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**env, "FADE_LOG_DIR": str(tmp_path), "PREFECT_API_URL": "http://127.0.0.1:9/api",
                               "PREFECT_LOGGING_TO_API_ENABLED": "false"})
    assert proc.returncode == 0, proc.stderr
    log = Path(proc.stdout.split("LOG ", 1)[1].strip()).read_text()
    assert "an info line" in log and "a warning line" in log
    assert "an info line" not in proc.stderr and "a warning line" in proc.stderr


def test_run_help_says_what_quick_shrinks_and_that_a_named_params_file_must_exist(tmp_path):
    import click

    from flows.options import QUICK_OVERRIDES

    command = typer.main.get_command(app)
    run = command.get_command(click.Context(command), "run")
    helps = {p.name: p.help for p in run.params}
    assert all(item in helps["quick"] for item in QUICK_OVERRIDES), helps["quick"]
    assert "must exist" in helps["params"] and "missing: all defaults" not in helps["params"]
    from fade_core.config import ConfigError, load

    with pytest.raises(ConfigError, match="does not exist"):  # what the help says
        load(tmp_path / "absent.yaml")


def test_command_overrides_are_what_each_command_validates_first():
    from flows.options import QUICK_OVERRIDES, SWEEP_DEFAULTS, command_overrides

    assert command_overrides(["run", "--quick", "-s", "a=1", "--params", "p.yaml"]) == \
        (Path("p.yaml"), [*QUICK_OVERRIDES, "a=1"])
    assert command_overrides(["train", "-m", "power", "--set=train.params.alpha=2"]) == \
        (Path("params.yaml"), ["train.method=power", "train.params.alpha=2"])
    assert command_overrides(["sweep", "--set", "b=2"]) == (Path("params.yaml"), [*SWEEP_DEFAULTS, "b=2"])
    assert command_overrides(["atlas", "-m", "grpo"]) == (Path("params.yaml"), [])  # -m is --methods there
    for none in (["verify", "x"], ["study", "run"], ["run", "--help"]):
        assert command_overrides(none) is None


def test_the_fast_help_lists_what_the_modules_register():
    import click

    command = typer.main.get_command(app)
    ctx = click.Context(command)
    registered = {n: command.get_command(ctx, n).get_short_help_str(limit=500) for n in command.list_commands(ctx)}
    from flows.cli import COMMANDS

    assert registered == COMMANDS


def test_sigterm_stops_a_command_with_one_line_and_exit_143(tmp_path):
    """A scheduler's SIGTERM is handled like Ctrl-C (the command's finally blocks run: workers, API server)."""
    import signal
    import time

    code = textwrap.dedent("""
        import signal, sys, time
        from flows import cli
        app = cli.new_app()

        @app.command("wait")
        def wait() -> None:
            try:
                print("ready", flush=True)
                time.sleep(60)
            finally:
                print("cleaned up", flush=True)

        @app.command("other")
        def other() -> None:
            pass

        cli.guard_commands(app)
        signal.signal(signal.SIGTERM, cli._on_sigterm)
        app(["wait"], prog_name="fade")
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FADE_LOG_DIR": str(tmp_path)})
    assert proc.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and time.monotonic() - t0 < 10
    assert out.strip() == "cleaned up" and err.strip() == "fade wait: stopped by SIGTERM"


def test_the_server_ends_with_a_killed_fade_process(tmp_path):
    """SIGKILL runs no finally: the server still ends (PR_SET_PDEATHSIG), no orphaned uvicorn (issue 16 point 11)."""
    import signal
    import time

    code = textwrap.dedent(f"""
        import os, sys, time
        from flows import prefect_api
        prefect_api._server_command = lambda port: [sys.executable, "-c", {FAKE_SERVER!r}, "--port", str(port)]
        prefect_api.start()
        print(prefect_api.server_pid(), flush=True)
        time.sleep(60)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**env, "FADE_LOG_DIR": str(tmp_path)})
    server = int(proc.stdout.readline())
    os.kill(server, 0)  # running
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(server, os.WNOHANG)
    pytest.fail(f"server {server} outlived the killed fade process")
