#!/bin/sh
# The `fade` of a DVC stage (dvc.yaml, study/dvc.yaml: cmd: sh "$DVC_ROOT/infra/dvc/run-stage.sh" <stage> ...),
# found without an activated environment, in this order:
#   1. $FADE_PYTHON, an interpreter that has fade installed (runs `$FADE_PYTHON -m flows.cli`);
#   2. the venv setup.sh made in this checkout (<checkout>/.venv/bin/fade);
#   3. `fade` on PATH (an activated venv, conda env or pipx install).
# A queued `dvc exp run` runs in a temporary copy without .venv: activate the environment or set FADE_PYTHON.
set -e
root=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)
if [ -n "${FADE_PYTHON:-}" ]; then
    exec "$FADE_PYTHON" -m flows.cli "$@"
fi
if [ -x "$root/.venv/bin/fade" ]; then
    exec "$root/.venv/bin/fade" "$@"
fi
if command -v fade >/dev/null 2>&1; then
    exec fade "$@"
fi
echo "fade: not found for this DVC stage: run setup.sh (it makes $root/.venv), activate the environment that has fade, or set FADE_PYTHON to its python" >&2
exit 127
