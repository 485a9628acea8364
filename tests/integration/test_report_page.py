"""The report page as a reader sees it: rendered by headless Chromium (its DOM after loading, as text).

1. A one-seed synthetic comparison, aggregated and reported through the report task (provenance included):
   intervals over problems, training curves, the arms, example completions, provenance, the data card
   rendered (not raw Markdown).
2. (slow) `fade run --quick` on a micro budget: the same checks on the real pipeline's report, and the runs'
   TensorBoard event files written while they trained.

Chromium (Debian package ``chromium``) is installed here when absent and this process may (root with
apt-get); otherwise the tests skip, saying so.
"""

from __future__ import annotations

import html.parser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_eval_report import write_synthetic_runs  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CI_CELL = re.compile(r"\d+\.\d \[\d+\.\d, \d+\.\d\]")


def _find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.fixture(scope="session")
def chromium() -> str:
    """A headless-capable Chromium: found on PATH, else installed with apt-get when this process is root."""
    found = _find_browser()
    if found is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"], capture_output=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, timeout=900, check=False)
        found = _find_browser()
    if found is None:
        pytest.skip("headless Chromium is not installed and could not be installed (apt-get install chromium)")
    return found


class _Text(html.parser.HTMLParser):
    """The visible text of a DOM dump (style and script left out), one line per block."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self.skip += 1
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")
        if tag in ("p", "div", "tr", "li", "h1", "h2", "h3", "pre", "figcaption", "summary", "br"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self.skip -= 1
        if tag in ("td", "th"):
            self.parts.append(" | ")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def render_in_chromium(browser: str, page: Path, profile: Path) -> tuple[str, list[str]]:
    """(the page's text, its images' src) after headless Chromium loaded ``page`` (its DOM, dumped)."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--dump-dom", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0 and "</html>" in proc.stdout, proc.stderr[-2000:]
    parser = _Text()
    parser.feed(proc.stdout)
    return re.sub(r"[ \t]+", " ", "".join(parser.parts)), parser.images


def section(text: str, heading: str, next_heading: str) -> str:
    """The page's text from the heading that starts a line (not the navigation bar's link) to the next one."""
    start = text.index("\n" + heading)
    return text[start:text.index("\n" + next_heading, start)]


def assert_shareable(text: str, images: list[str], *, seeds: str) -> None:
    """What issue 20 asks of every report: intervals, curves, arms, provenance, examples, a rendered card."""
    head = section(text, "Headline:", "How early FADE peaks")
    assert len(CI_CELL.findall(head)) >= 2, head  # every headline number carries its interval
    assert "95% bootstrap confidence intervals" in text
    if seeds == "one":
        assert "over problems only for methods with one training seed" in text
    assert "Training curves against step" in text and "not available: no training records" not in text
    assert "sign balance" in text and "Atlas: where each arm puts its gradient" in text
    arms = section(text, "Arms: what each compared configuration is", "Config keys that differ")
    assert "power" in arms and "alpha=2" in arms and "A = (1-rbar)^(alpha-1) (r - rbar)" in arms
    assert "Example completions" in text and re.search(r"evaluation rollouts at step", text)
    examples = section(text, "Example completions", "Statistics")
    assert "passed" in examples and "failed" in examples
    prov = section(text, "Provenance", "Params")
    for field in ("git commit", "command", "machine: cpus", "python", "packages", "torch "):
        assert field in prov, field
    card = text[text.index("\nData card"):]
    assert "|---|" not in card and "# " not in card  # rendered, not raw Markdown
    assert "seed spread" not in text
    assert images and all(src.startswith("data:image/png;base64,") for src in images)  # embedded, offline


def test_report_page_of_a_one_seed_comparison_in_chromium(tmp_path: Path, chromium: str) -> None:
    from fade_core import aggregate as agg
    from tasks import report as report_task

    runs, results = write_synthetic_runs(tmp_path, seeds=(0,), problems=8, n=8)
    for run in runs.iterdir():  # the arms' configs as the trainer writes them (method and params)
        label = run.name.split("-s")[0]
        method, params = {"power(alpha=2)": ("power", "{alpha: 2}")}.get(label, (label, "{}"))
        (run / "config.yaml").write_text(f"train:\n  method: {method}\n  params: {params}\n  seed: 0\n  group_size: 8\n")
    agg.aggregate(results, runs_dir=runs, opts=agg.AggregateOptions(ks=(1, 4)))
    card = tmp_path / "card.md"
    card.write_text("# Data card\n\n| benchmark | rows |\n|---|---|\n| countdown | 8 |\n")
    out = report_task.build_report.fn(str(results), str(tmp_path / "report"), title="one seed", params_yaml="a: 1\n",
                                      data_card_path=str(card), formats=["png"], runs_dir=str(runs))
    text, images = render_in_chromium(chromium, Path(out["html"]), tmp_path / "profile")
    assert_shareable(text, images, seeds="one")
    lead = section(text, "How early FADE peaks", "Arms:")
    assert "problems" in lead and re.search(r"-?\d+ \[-?\d+, -?\d+\]", lead)  # steps earlier, with its CI
    prov = section(text, "Provenance", "Params")
    # the command line is this process's own (pytest's, or "-c" in a pytest-xdist worker, whose argv is that)
    from fade_core.report.provenance import command_line

    assert command_line(sys.argv) and f"command | {command_line(sys.argv)}" in prov, prov


@pytest.mark.slow
def test_quick_run_report_in_chromium(tmp_path: Path, chromium: str, prefect_api: str) -> None:
    from test_pipeline import BIN, MICRO, _env, _run

    env = _env(tmp_path, prefect_api)
    arms = "pipeline.arms={fade: {method: fade}, power2: {method: power, params: {alpha: 2}}}"
    sets = [s for item in [*MICRO, arms, "pipeline.name=quick", "train.steps=3"] for s in ("--set", item)]
    _run([str(BIN / "fade"), "run", "--quick", "--params", "/dev/null", "--results", str(tmp_path / "results"), *sets],
         tmp_path, env)
    root = tmp_path / "results" / "quick"
    events = sorted(root.glob("tensorboard/*/events.out.tfevents.*"))
    assert [p.parent.name.split("-s")[0] for p in events] == ["fade", "power2"]  # written by the trainer, live
    text, images = render_in_chromium(chromium, root / "reports" / "default" / "index.html", tmp_path / "profile")
    assert_shareable(text, images, seeds="one")
    prov = section(text, "Provenance", "Params")
    assert "fade run --quick" in prov and "Prefect flow run" in prov and "tensorboard --logdir" in prov
    assert "training wall time" in prov
    # the test session's own Prefect server outlives the command: its links are not marked gone; the log is saved
    assert "temporary server: gone" not in prov and "saved: the command's log" in prov
    card = text[text.index("\nData card"):]
    assert "This run trained on countdown and evaluated on countdown" in card
    schedule = section(text, "FADE's schedule: did alpha and delta adapt?", "How early FADE peaks")
    assert "runs of arm fade" in schedule  # the study's check, on the run's FADE arm
