#!/usr/bin/env bash
# Start fade's trainer ranks on this node with torchrun's c10d rendezvous.
#
# Run the same command on every trainer node (a Kubernetes indexed Job, a Slurm step, or ssh);
# the nodes find each other through the rendezvous endpoint, a host:port that all of them can reach
# (any trainer node; the first one by convention). With one trainer node (the paper's 7B layout)
# leave NNODES=1 and the endpoint on localhost.
#
#   NNODES=2 RDZV_ENDPOINT=trainer-0:29400 RDZV_ID=fade-7b-lcb \
#     infra/cluster/launch_torchrun.sh --params params.yaml --set train.method=fade
#
# Environment (defaults in brackets):
#   NNODES            trainer nodes [1]           NPROC_PER_NODE  ranks (GPUs) per node [8]
#   RDZV_ENDPOINT     host:port [localhost:29400] RDZV_ID         job id shared by all nodes [fade-train]
#   FADE_WORKDIR      the repository clone on the shared volume [the current directory]
#   FADE_TRAIN_CMD    the per-rank command [fade train]; it receives this script's arguments
#   NCCL_SOCKET_IFNAME / NCCL_IB_HCA  set them for your fabric when NCCL picks the wrong interface
set -euo pipefail

export DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false DVC_NO_ANALYTICS=1 \
  HF_HUB_DISABLE_TELEMETRY=1 VLLM_NO_USAGE_STATS=1 VLLM_DO_NOT_TRACK=1
# One OpenMP thread per rank: 8 ranks x all cores each would oversubscribe the node.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

NNODES=${NNODES:-1}
NPROC_PER_NODE=${NPROC_PER_NODE:-8}
RDZV_ENDPOINT=${RDZV_ENDPOINT:-localhost:29400}
RDZV_ID=${RDZV_ID:-fade-train}
read -r -a TRAIN_CMD <<< "${FADE_TRAIN_CMD:-fade train}"

cd "${FADE_WORKDIR:-$PWD}"
[ -f params.yaml ] || { echo "launch_torchrun: no params.yaml in $(pwd); set FADE_WORKDIR to the fade clone" >&2; exit 2; }
command -v torchrun >/dev/null || { echo "launch_torchrun: torchrun not found (activate the fade environment)" >&2; exit 2; }

echo "launch_torchrun: $(hostname) joins ${RDZV_ID} at ${RDZV_ENDPOINT}: ${NNODES} node(s) x ${NPROC_PER_NODE} rank(s)"
# --no-python: the per-rank command is an executable (the `fade` console script), not a .py file.
exec torchrun \
  --nnodes="${NNODES}" \
  --nproc-per-node="${NPROC_PER_NODE}" \
  --rdzv-backend=c10d \
  --rdzv-endpoint="${RDZV_ENDPOINT}" \
  --rdzv-id="${RDZV_ID}" \
  --max-restarts=0 \
  --no-python \
  "${TRAIN_CMD[@]}" "$@"
