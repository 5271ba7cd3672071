#!/usr/bin/env bash
# gpu_check.sh: every check and figure that needs a CUDA GPU, in one run, each step under its own
# time limit so that one failure or hang does not cost the others. Steps, most valuable first,
# and the files they write (eight, so that they fit what a lent machine sends back):
#   checks.txt          nvidia-smi; the network's CUDA path against the CPU path (test_netdev cuda);
#                       gopt run --backend cuda on an example graph, eager and as a CUDA graph; on a
#                       small CNN, its convolutions by cuDNN (the default) eager and as a CUDA graph,
#                       and as im2col + sgemm; compute-sanitizer memcheck on the CNN's run (where it
#                       is installed)
#   calibrate.txt       gopt profile calibrate --backend cuda -> cuda-calibrated.json
#   fidelity.txt        bench_fidelity --backend cuda on that profile (one GPU: schedule x fusion),
#                       eager, then with --cuda-graph (both with cuDNN convolutions), then the two
#                       CNN rows (--quick) with --cuda-conv im2col, to compare the two convolutions
#   network.txt         bench_policy and bench_train's PPO step with the network on the GPU
#   pytorch.txt         tools/torch_fit.py --device cuda: PyTorch's eager steps of the training
#                       split's models (-> pytorch-train.json, the rows a fit reads) and of the
#                       validation and test splits' (-> pytorch-unseen.json), each judged against
#                       the simulator on the calibrated profile
#
# Usage: tools/gpu_check.sh BUILD_DIR OUT_DIR [--budget SECONDS] [--steps LIST]
#   BUILD_DIR: a build of this repository with CUDA (gopt, tests/test_netdev, bench/bench_*);
#   OUT_DIR: where the files above go. --budget: the calibrator's (default 45).
#   --steps: a comma-separated subset of checks,calibrate,fidelity,network,pytorch (default all);
#   without calibrate, fidelity uses PROFILE (default profiles/h200-cuda-measured.json).
#   PYTHON: the interpreter that has PyTorch with CUDA (default /usr/bin/python3).
# Exit code: 0 when every step passed, 1 otherwise (each step's status is printed last).
# On an H200 (2026-11-27, cuDNN convolutions): checks and fidelity about 80 s together, the
# whole run a few minutes (PyTorch's steps are most of it). docs/fidelity.md, "GPU", has what it
# measured.
set -u
if [ $# -lt 2 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
    awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'
    [ $# -lt 2 ] && [ "${1:-}" != "--help" ] && [ "${1:-}" != "-h" ] && exit 2
    exit 0
fi
B=$(cd "$1" && pwd) || exit 2
O=$2
BUDGET=45
STEPS=checks,calibrate,fidelity,network,pytorch
shift 2
while [ $# -gt 0 ]; do
    case "$1" in
        --budget) BUDGET=${2:?--budget needs seconds}; shift 2 ;;
        --steps) STEPS=${2:?--steps needs a list}; shift 2 ;;
        *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
want() { case ",$STEPS," in *",$1,"*) return 0 ;; esac; return 1; }
for s in ${STEPS//,/ }; do
    case $s in checks|calibrate|fidelity|network|pytorch) ;;
        *) echo "gpu_check: --steps: unknown step '$s' (checks, calibrate, fidelity, network, pytorch)" >&2; exit 2 ;;
    esac
done
mkdir -p "$O" || exit 2
O=$(cd "$O" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-/usr/bin/python3}
G="$B/gopt"
T=$(mktemp -d) || exit 2
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1 CMOCKA_MESSAGE_OUTPUT=stdout PYTHONUNBUFFERED=1
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

EX="$SRC/graphs/examples/mlp_train.graphml"
H100="$SRC/profiles/h100-nvswitch-x8.json"

# 1. the GPU, the network's CUDA path, the runtime's CUDA backend
if want checks; then
    step gpu 20 checks.txt nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
    step netdev_cuda 120 checks.txt "$B/tests/test_netdev" cuda
    step optimize_example 30 checks.txt "$G" optimize "$EX" --method heft+cp+xla --profile "$H100" --devices 1 -o "$T/mlp.txt"
    step run_cuda_example 60 checks.txt "$G" run "$EX" --decisions "$T/mlp.txt" --backend cuda --profile "$H100" --devices 1 --reps 5
    step run_cuda_graph 60 checks.txt "$G" run "$EX" --decisions "$T/mlp.txt" --backend cuda --profile "$H100" --devices 1 \
        --reps 5 --cuda-graph
    # a small CNN: convolutions by cuDNN (first run on a GPU here), eager and captured, then im2col
    "$G" graph gen resnet --layers 18 --batch 1 --seq 32 -o "$T/r18.graphml" >/dev/null &&
        "$G" optimize "$T/r18.graphml" --method single+cp+xla --profile "$H100" --devices 1 -o "$T/r18.txt" >/dev/null
    R18=("$G" run "$T/r18.graphml" --decisions "$T/r18.txt" --backend cuda --profile "$H100" --devices 1)
    step run_cnn_cudnn 60 checks.txt "${R18[@]}" --reps 5
    step run_cnn_cudnn_graph 60 checks.txt "${R18[@]}" --reps 5 --cuda-graph
    step run_cnn_im2col 60 checks.txt "${R18[@]}" --reps 5 --cuda-conv im2col
    if command -v compute-sanitizer >/dev/null; then
        step sanitizer 90 checks.txt compute-sanitizer --tool memcheck --error-exitcode 1 "${R18[@]}" --reps 1
        step sanitizer_graph 90 checks.txt compute-sanitizer --tool memcheck --error-exitcode 1 "${R18[@]}" --reps 1 \
            --cuda-graph
    fi
fi

# 2. the calibrated profile of this GPU
P=${PROFILE:-$SRC/profiles/h200-cuda-measured.json}
if want calibrate; then
    P="$O/cuda-calibrated.json"
    step calibrate 240 calibrate.txt "$G" profile calibrate --backend cuda --budget "$BUDGET" -o "$P"
    [ -f "$P" ] && step profile_show 20 calibrate.txt "$G" profile show "$P"
    [ -f "$P" ] || P="$H100" # the runs still measure; the simulator is the datasheet's
fi

# 3. fidelity: the simulator against the runtime on this GPU
if want fidelity; then
    step fidelity 170 fidelity.txt "$B/bench/bench_fidelity" --backend cuda --profile "$P" --devices 1 --reps 3
    step fidelity_graph 150 fidelity.txt "$B/bench/bench_fidelity" --backend cuda --profile "$P" --devices 1 --reps 3 \
        --cuda-graph
    step fidelity_im2col 60 fidelity.txt "$B/bench/bench_fidelity" --backend cuda --profile "$P" --devices 1 --reps 3 \
        --cuda-conv im2col --quick
fi

# 4. the network's speed on the GPU
if want network; then
    step bench_policy 150 network.txt env GOPT_BENCH_DEVICE=cuda "$B/bench/bench_policy"
    step bench_train 150 network.txt env GOPT_BENCH_DEVICE=cuda "$B/bench/bench_train" 10000 16 4 0 0 0 5
fi

# 5. against PyTorch's own step on the GPU: the rows a fit reads, and the unseen models'
if want pytorch; then
    split_models() { awk -v s="$1" '!/^#/ && $2 == s {print $1}' "$SRC/graphs/real/splits.tsv" | tr '\n' ' '; }
    TRAIN="resnet18 resnet50 mobilenet_v2 convnext_tiny efficientnet_b3 densenet169 swin_s vit_b_32 regnet_y_400mf
           shufflenet_v2_x1_0 gpt_small gpt2_medium bert_small moe_small lstm_lm gru_seq2seq bilstm_classifier dlrm_small
           wide_deep unet_small conformer_small wav2vec_small"
    # shellcheck disable=SC2086
    step pytorch_train 300 pytorch.txt sh -c "'$PY' '$SRC/tools/torch_fit.py' --device cuda --profile '$P' --gopt '$G' \
        -o '$T/fit.json' --reps 5 --warmup 2 --json $(echo $TRAIN) > '$T/train.out' && \
        sed -n '/^{\$/,\$p' '$T/train.out' > '$O/pytorch-train.json'"
    # shellcheck disable=SC2086
    step pytorch_unseen 300 pytorch.txt sh -c "'$PY' '$SRC/tools/torch_fit.py' --device cuda --profile '$P' --gopt '$G' \
        --evaluate '$P' --reps 5 --warmup 2 --json $(split_models validation) $(split_models test) > '$T/unseen.out' && \
        sed -n '/^{\$/,\$p' '$T/unseen.out' > '$O/pytorch-unseen.json'"
fi

echo
echo "gpu_check: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), $(date -u +%FT%TZ)"
fail=0
for s in "${summary[@]}"; do
    echo "$s"
    case "$s" in *"rc 0 "*) ;; *) fail=1 ;; esac
done
exit $fail
