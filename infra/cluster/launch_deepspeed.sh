#!/usr/bin/env bash
# Start fade's trainer ranks on the hosts of a DeepSpeed hostfile (the `deepspeed` launcher ssh's
# into each host with pdsh and starts NPROC ranks there). Alternative to launch_torchrun.sh where
# nodes are plain ssh-reachable machines rather than pods.
#
#   HOSTFILE=infra/cluster/hostfile MASTER_ADDR=trainer-0 \
#     infra/cluster/launch_deepspeed.sh --params params.yaml --set compute.deepspeed_config=infra/deepspeed/zero2.json
#
# Environment: HOSTFILE [infra/cluster/hostfile], MASTER_ADDR [first host of the hostfile],
# MASTER_PORT [29500], FADE_WORKDIR [current directory], FADE_TRAIN_CMD [fade train].
set -euo pipefail

export DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false DVC_NO_ANALYTICS=1 \
  HF_HUB_DISABLE_TELEMETRY=1 VLLM_NO_USAGE_STATS=1 VLLM_DO_NOT_TRACK=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

cd "${FADE_WORKDIR:-$PWD}"
HOSTFILE=${HOSTFILE:-infra/cluster/hostfile}
[ -f "$HOSTFILE" ] || { echo "launch_deepspeed: hostfile $HOSTFILE not found (copy infra/cluster/hostfile.example)" >&2; exit 2; }
FIRST_HOST=$(grep -v '^\s*#' "$HOSTFILE" | awk 'NF {print $1; exit}')
MASTER_ADDR=${MASTER_ADDR:-$FIRST_HOST}
MASTER_PORT=${MASTER_PORT:-29500}
read -r -a TRAIN_CMD <<< "${FADE_TRAIN_CMD:-fade train}"

# DeepSpeed forwards the NAME=VALUE lines of $DS_ENV_FILE (looked up in ~ and in the current
# directory) to every host; a file of our own, so a user's ~/.deepspeed_env is left alone.
export DS_ENV_FILE=.fade_deepspeed_env
printf '%s\n' DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false DVC_NO_ANALYTICS=1 \
  HF_HUB_DISABLE_TELEMETRY=1 VLLM_NO_USAGE_STATS=1 VLLM_DO_NOT_TRACK=1 "OMP_NUM_THREADS=${OMP_NUM_THREADS}" \
  > "${DS_ENV_FILE}"

# --no_python: the per-rank command is the `fade` console script; --no_local_rank: fade reads
# LOCAL_RANK from the environment instead of a --local_rank argument.
exec deepspeed \
  --hostfile="${HOSTFILE}" \
  --master_addr="${MASTER_ADDR}" \
  --master_port="${MASTER_PORT}" \
  --no_python \
  --no_local_rank \
  "${TRAIN_CMD[@]}" "$@"
