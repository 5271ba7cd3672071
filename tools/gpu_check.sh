#!/usr/bin/env bash
# gpu_check.sh: every check and figure that needs a CUDA GPU, in one run, each step under its own
# time limit so that one failure or hang does not cost the others. Steps, most valuable first:
#   checks.txt          nvidia-smi; the network's CUDA path against the CPU path (test_netdev cuda);
#                       gopt run --backend cuda on an example graph (trace.json: its Perfetto trace)
#   calibrate.txt       gopt profile calibrate --backend cuda -> cuda-calibrated.json
#   fidelity.txt        bench_fidelity --backend cuda on that profile (one GPU: schedule x fusion)
#   policy.txt          bench_policy with the network on the GPU
#   train.txt           bench_train's PPO step with the network on the GPU
#   torch.txt           PyTorch's eager step on the GPU (tools/torch_step.py --device cuda) against
#                       the simulator on the calibrated profile and gopt run, single device
#
# Usage: tools/gpu_check.sh BUILD_DIR OUT_DIR [--budget SECONDS]
#   BUILD_DIR: a build of this repository with CUDA (gopt, tests/test_netdev, bench/bench_*);
#   OUT_DIR: where the files above go. --budget: the calibrator's (default 45).
#   PYTHON: the interpreter that has PyTorch (default /usr/bin/python3).
# Exit code: 0 when every step passed, 1 otherwise (each step's status is printed last).
set -u
if [ $# -lt 2 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    [ $# -lt 2 ] && [ "${1:-}" != "--help" ] && [ "${1:-}" != "-h" ] && exit 2
    exit 0
fi
B=$(cd "$1" && pwd) || exit 2
O=$2
BUDGET=45
[ "${3:-}" = "--budget" ] && BUDGET=${4:?--budget needs seconds}
mkdir -p "$O" || exit 2
O=$(cd "$O" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
G="$B/gopt"
export OPENBLAS_NUM_THREADS=1 CMOCKA_MESSAGE_OUTPUT=stdout
summary=()

step() { # step NAME SECONDS FILE CMD...: run CMD under a time limit, appending to FILE
    local name=$1 secs=$2 file=$3
    shift 3
    local t0=$SECONDS
    echo "=== $name ($(date -u +%H:%M:%S), limit ${secs}s): $*" | tee -a "$O/$file"
    timeout --kill-after=5 "$secs" "$@" >>"$O/$file" 2>&1
    local rc=$?
    echo "=== $name: rc $rc in $((SECONDS - t0)) s" | tee -a "$O/$file"
    summary+=("$(printf '%-22s rc %-4s %4d s  %s' "$name" "$rc" $((SECONDS - t0)) "$file")")
    return $rc
}

# 1. the GPU, the network's CUDA path, the runtime's CUDA backend
step gpu 20 checks.txt nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
step netdev_cuda 120 checks.txt "$B/tests/test_netdev" cuda
EX="$SRC/graphs/examples/mlp_train.graphml"
step optimize_example 30 checks.txt "$G" optimize "$EX" --method heft+cp+xla --profile "$SRC/profiles/h100-nvswitch-x8.json" \
    --devices 1 -o "$O/mlp.decisions.txt"
step run_cuda_example 60 checks.txt "$G" run "$EX" --decisions "$O/mlp.decisions.txt" --backend cuda \
    --profile "$SRC/profiles/h100-nvswitch-x8.json" --devices 1 --reps 5 --trace "$O/trace.json"
rm -f "$O/mlp.decisions.txt"

# 2. the calibrated profile of this GPU
P="$O/cuda-calibrated.json"
step calibrate 240 calibrate.txt "$G" profile calibrate --backend cuda --budget "$BUDGET" -o "$P"
[ -f "$P" ] && step profile_show 20 calibrate.txt "$G" profile show "$P"
[ -f "$P" ] || P="$SRC/profiles/h100-nvswitch-x8.json" # the run still measures; the sim is the datasheet's

# 3. fidelity: the simulator against the runtime on this GPU
step fidelity 200 fidelity.txt "$B/bench/bench_fidelity" --backend cuda --profile "$P" --devices 1 --reps 3

# 4. the network's speed on the GPU
step bench_policy 150 policy.txt env GOPT_BENCH_DEVICE=cuda "$B/bench/bench_policy"
step bench_train 150 train.txt env GOPT_BENCH_DEVICE=cuda "$B/bench/bench_train" 10000 16 4 0 0 0 5


# 5. against PyTorch's own step on the GPU
for m in seq2seq transformer dlrm resnet50; do
    step "torch_$m" 60 torch.txt "$PY" "$SRC/tools/torch_step.py" "$m" --device cuda --reps 5 --warmup 2 --json
    step "sim_$m" 30 torch.txt "$G" sim "$SRC/graphs/real/$m.graphml.gz" --profile "$P" --devices 1
    step "optimize_$m" 30 torch.txt "$G" optimize "$SRC/graphs/real/$m.graphml.gz" --method single+fifo \
        --profile "$P" --devices 1 -o "$O/$m.decisions.txt"
    step "run_$m" 60 torch.txt "$G" run "$SRC/graphs/real/$m.graphml.gz" --decisions "$O/$m.decisions.txt" \
        --backend cuda --profile "$P" --devices 1 --reps 5
    rm -f "$O/$m.decisions.txt"
done

echo
echo "gpu_check: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%FT%TZ)"
fail=0
for s in "${summary[@]}"; do
    echo "$s"
    case "$s" in *"rc 0 "*) ;; *) fail=1 ;; esac
done
exit $fail
