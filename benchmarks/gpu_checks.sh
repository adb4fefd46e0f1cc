#!/usr/bin/env bash
# The checks a session runs when it is lent a GPU, in one go, each under its own time limit, in order of need:
#   full-epoch   full-profile epochs at the real architecture on real-layout synthetic data (benchmarks/full_epoch.py)
#   epoch-parts  PUMA's epoch as shipped, then on cached batches (the loop alone), then also without the losses'
#                input checks (their host reads): what the loader and the checks cost (full_epoch.py --cached ...)
#   loader       the same jobs' training loaders alone, the most they can feed (full_epoch.py --loader-only)
#   train-step   one training step per method at ViT-S/16, 224 px, batch 180, bf16, three interleaved repeats
#   compile      full fine-tuning's and PUMA's step eager and through torch.compile (fewer launches?), one repeat
#   compile-epoch  PUMA's and full fine-tuning's full-profile epochs eager and with train.compile=reduce-overhead
#                (torch.compile + CUDA graphs), seed 0, then PUMA eager at seed 1: img/s and test R@1 against the
#                seed-to-seed change (issue 60 item 7)
#   capture      the whole step (forward, backward, AdamW) captured as one CUDA graph, full fine-tuning and PUMA
#   eval         the evaluation benchmark on this machine's CPU, and an exact fp32 search on its GPU (needs
#                pytorch-metric-learning and faiss-cpu: carry their wheels, see benchmarks/README or the device notes)
#   profile      where PUMA's step goes against full fine-tuning's (torch.profiler, kernel times and counts)
#   vptsp-step   VPTSP's Table 10 step times at the full profile (benchmarks/bench_vptsp_step.py)
#   pretrain-wide  the regime map's wide backbone pretrained on the GPU (its weights go to OUT_DIR/wide/)
#   cross-cpu    four stored quick records retrained on this machine's host CPU, natively and with the numerics
#                pinned to AVX2 (benchmarks/cross_cpu_records.py; compare with the AVX2 host's file, issue 74 item 5)
# Usage: benchmarks/gpu_checks.sh OUT_DIR [CHECK[:SECONDS] ...]   (default: epoch-parts train-step profile full-epoch)
# pytorch-metric-learning must be importable (umlkit's losses need it; the device image lacks it: carry its wheel).
# Everything is logged to OUT_DIR/all.log; PYTHON picks the interpreter, SRC the package's folder (default ./src).
# On an H200 (2026-11-26): full-epoch 71 s, one PUMA epoch run ~35 s (epoch-parts runs three), loader ~35 s,
# train-step ~57 s a repeat, eval ~110 s, profile 17 s; by those, the default checks should take about 7 minutes.
set -u
out=${1:?usage: gpu_checks.sh OUT_DIR [CHECK[:SECONDS] ...]}
shift
checks=${*:-epoch-parts train-step profile full-epoch}
mkdir -p "$out"
export PYTHONPATH="${SRC:-$PWD/src}${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 UMLKIT_PROGRESS=0
py=${PYTHON:-python3}
log="$out/all.log"
work=$(mktemp -d)   # UML-Mini large, written once and shared by the epoch checks
step() {   # step NAME SECONDS COMMAND...: run, log, and note the exit status and the seconds
    local name=$1 limit=$2; shift 2
    echo "=== $name (limit ${limit} s) $(date -u +%H:%M:%S)" >>"$log"
    local t0=$SECONDS
    timeout "$limit" "$@" >>"$log" 2>&1
    echo "=== $name: exit $? after $((SECONDS - t0)) s" >>"$log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$log" 2>&1
nproc >>"$log"
for check in $checks; do
    name=${check%%:*}
    limit=${check#*:}
    [ "$limit" = "$check" ] && limit=
    case $name in
    full-epoch) step "$name" "${limit:-150}" "$py" benchmarks/full_epoch.py --device cuda --work "$work" \
        --out "$out/full_epoch.json" ;;
    epoch-parts) for variant in "" "--cached" "--cached --no-loss-checks"; do
        # shellcheck disable=SC2086
        step "$name ${variant:-as shipped}" "${limit:-60}" "$py" benchmarks/full_epoch.py --device cuda --work "$work" \
            --jobs Ours-seed0 $variant; done ;;
    loader) step "$name" "${limit:-90}" "$py" benchmarks/full_epoch.py --device cuda --work "$work" --loader-only ;;
    train-step) step "$name" "${limit:-200}" "$py" benchmarks/bench_train_step.py --device cuda --batch 180 \
        --steps 20 --repeats 3 --precisions bf16 --methods full,puma,puma+light8+skip,full+light ;;
    compile) step "$name" "${limit:-240}" "$py" benchmarks/bench_train_step.py --device cuda --batch 180 \
        --steps 20 --precisions bf16 --methods full,puma,full+compile,puma+compile ;;
    compile-epoch) step "$name" "${limit:-330}" "$py" benchmarks/full_epoch.py --device cuda --work "$work" \
        --jobs Ours-seed0,CurricularFace-seed0 --compile off,reduce-overhead --out "$out/compile_epoch.json"
        step "$name seed 1" 60 "$py" benchmarks/full_epoch.py --device cuda --work "$work" --jobs Ours-seed0 \
        --seeds 1 --out "$out/compile_epoch_seed1.json" ;;
    capture) step "$name" "${limit:-130}" "$py" benchmarks/bench_train_step.py --device cuda --batch 180 \
        --steps 20 --precisions bf16 --methods full,puma,full+capture,puma+capture ;;
    eval) step "$name" "${limit:-150}" "$py" benchmarks/bench_eval.py --impls pml,umlkit-fp32,umlkit,cuda-fp32 ;;
    profile) step "$name" "${limit:-60}" "$py" benchmarks/profile_train_step.py --device cuda --precision bf16 \
        --batch 180 --methods full,puma ;;
    vptsp-step) step "$name" "${limit:-60}" "$py" benchmarks/bench_vptsp_step.py --profile full --device cuda \
        --precision bf16 --rounds 3 --out "$out/vptsp_step.json" ;;
    pretrain-wide) step "$name" "${limit:-300}" "$py" -c \
        'import sys; from umlkit.cli import main; sys.exit(main(sys.argv[1:]))' \
        data pretrain-mini --recipe wide --device cuda --out "$out/wide" ;;
    cross-cpu) step "$name" "${limit:-240}" "$py" benchmarks/cross_cpu_records.py --out "$out/cross_cpu_device_host.json" ;;
    *) echo "=== unknown check $name (expected full-epoch, epoch-parts, loader, train-step, compile, compile-epoch, capture, eval," \
        "profile, vptsp-step, pretrain-wide or cross-cpu)" >>"$log" ;;
    esac
done
echo "=== done $(date -u +%H:%M:%S)" >>"$log"
