#!/usr/bin/env bash
# The checks a session runs when it is lent a GPU, in one go, each under its own time limit, in order of need:
#   1. the regime map's wide backbone pretrained on the GPU (umlkit data pretrain-mini --recipe wide --device cuda);
#   2. full-profile epochs at the real architecture on real-layout synthetic data (benchmarks/full_epoch.py);
#   3. one training step per method at ViT-S/16, 224 px, batch 180, bf16 (benchmarks/bench_train_step.py);
#   4. VPTSP's Table 10 step times at the full profile (benchmarks/bench_vptsp_step.py).
# Usage: benchmarks/gpu_checks.sh OUT_DIR [PRETRAIN_S FULL_EPOCH_S TRAIN_STEP_S VPTSP_S]. Everything is logged to
# OUT_DIR/all.log; the wide weights go to OUT_DIR/wide/ (copy them into src/umlkit/models/weights/ to use them).
set -u
out=${1:?usage: gpu_checks.sh OUT_DIR [PRETRAIN_S FULL_EPOCH_S TRAIN_STEP_S VPTSP_S]}
mkdir -p "$out"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 UMLKIT_PROGRESS=0
py=${PYTHON:-python3}
log="$out/all.log"
step() {   # step NAME SECONDS COMMAND...: run, log, and note the exit status and the seconds
    local name=$1 limit=$2; shift 2
    echo "=== $name (limit ${limit} s) $(date -u +%H:%M:%S)" >>"$log"
    local t0=$SECONDS
    timeout "$limit" "$@" >>"$log" 2>&1
    echo "=== $name: exit $? after $((SECONDS - t0)) s" >>"$log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$log" 2>&1
nproc >>"$log"
step pretrain-wide "${2:-300}" "$py" -c 'import sys; from umlkit.cli import main; sys.exit(main(sys.argv[1:]))' \
    data pretrain-mini --recipe wide --device cuda --out "$out/wide"
step full-epoch "${3:-150}" "$py" benchmarks/full_epoch.py --device cuda --out "$out/full_epoch.json"
step train-step "${4:-90}" "$py" benchmarks/bench_train_step.py --device cuda --batch 180 --steps 20 \
    --precisions bf16 --methods full,puma,puma+skip,puma+light,vpt,lora,adaptformer
step vptsp-step "${5:-50}" "$py" benchmarks/bench_vptsp_step.py --profile full --device cuda --precision bf16 \
    --rounds 3 --out "$out/vptsp_step.json"
echo "=== done $(date -u +%H:%M:%S)" >>"$log"
