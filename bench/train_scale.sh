#!/usr/bin/env bash
# train_scale.sh: throughput of data-parallel pre-training. Trains the same
# run (same graphs, seed and global batch: --graphs-per-step B) with 1
# process and with N ranks (mpirun -np N), several times alternately, and
# prints graph-steps per hour of each (graphs trained per hour of training
# steps, from rank 0's metrics: setup and reference computation excluded),
# the medians, and the scaling efficiency median(N) / (N x median(1)).
# It also prints the CPU time (user + system, every rank, setup included) of
# each run: on a machine whose cores are busy with other work the ranks
# cannot all run at once, and the CPU time shows whether sharing a step out
# costs extra work. It checks that the N-rank checkpoint equals the
# 1-process one. For comparison it also runs one process on N threads
# (--threads N: the simulator, the network's chunks and the decoder's parts
# on N threads, the same cores as N ranks) and checks its checkpoint too.
#
#   bench/train_scale.sh [GOPT] [--ranks N] [--repeat R] [--graphs G] [--nodes V] [--steps S]
#                        [--per-step B] [--samples K]
# (configured into BUILD/bench/train_scale.sh by CMake when MPI is found;
# defaults: N 2, R 3, G 4 synthetic graphs of V 1000 nodes, S 6 steps,
# B 4 graphs per step, K 16, the default network; --threads 1 per rank and
# OPENBLAS_NUM_THREADS=1, so N ranks use N cores.)
set -u
SRC="@PROJECT_SOURCE_DIR@"
GOPT="@GOPT_BINARY@"
case "$SRC" in *@*) SRC="$(cd "$(dirname "$0")/.." && pwd)" ;; esac
case "$GOPT" in *@*) GOPT="" ;; esac
N=2 R=3 G=4 V=1000 S=6 B=4 K=16
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) N=$2; shift 2 ;;
    --repeat) R=$2; shift 2 ;;
    --graphs) G=$2; shift 2 ;;
    --nodes) V=$2; shift 2 ;;
    --steps) S=$2; shift 2 ;;
    --per-step) B=$2; shift 2 ;;
    --samples) K=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "train_scale: unknown option '$1'" >&2; exit 2 ;;
    *) GOPT=$1; shift ;;
  esac
done
[ -x "$GOPT" ] || { echo "train_scale: give the gopt binary (got '$GOPT')" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "train_scale: no mpirun on PATH" >&2; exit 2; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OPENBLAS_NUM_THREADS=1
TMP=$(mktemp -d /tmp/gopt_train_scale_XXXXXX)
trap 'rm -rf "$TMP"' EXIT
"$GOPT" graph gen synthetic --count "$G" --seed 1 --nodes "$V" -o "$TMP/g" >/dev/null || exit 1
RUN=(train --graphs "$TMP/g" --profile "$SRC/profiles/v100-dgx1-x8.json" --reference heft --steps "$S"
     --graphs-per-step "$B" --samples "$K" --checkpoint-every 0 --quiet)
# graph-steps per hour of rank 0's training steps (its metrics: graphs per step, elapsed at the last step)
gph() { awk -F'"graphs":' '{split($2, a, ","); n += a[1]} END {print n}' "$1" |
        { read -r n; e=$(tail -1 "$1" | sed -E 's/.*"elapsed_s":([^,}]*).*/\1/'); awk -v n="$n" -v e="$e" 'BEGIN {printf "%.0f", n / e * 3600}'; }; }
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "train_scale: $G synthetic graphs of $V nodes, $B graphs per step, K = $K, $S steps; 1 process vs $N ranks" \
     "(--threads 1 each) vs 1 process on $N threads"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
one="" many="" thr="" same=yes
TIMEFORMAT='%U %S'
cpu() { awk '{printf "%.1f", $1 + $2}' "$1"; } # user + system seconds of the timed command and its children
for r in $(seq 1 "$R"); do
  { time "$GOPT" "${RUN[@]}" --threads 1 -o "$TMP/one.ckpt" >/dev/null 2>"$TMP/err"; } 2>"$TMP/t1" || { cat "$TMP/err"; exit 1; }
  { time mpirun --oversubscribe -np "$N" "$GOPT" "${RUN[@]}" --threads 1 -o "$TMP/many.ckpt" >/dev/null 2>"$TMP/err"; } \
    2>"$TMP/tn" || { cat "$TMP/err"; exit 1; }
  { time "$GOPT" "${RUN[@]}" --threads "$N" -o "$TMP/thr.ckpt" >/dev/null 2>"$TMP/err"; } 2>"$TMP/tt" || { cat "$TMP/err"; exit 1; }
  a=$(gph "$TMP/one.ckpt.metrics.jsonl") b=$(gph "$TMP/many.ckpt.metrics.jsonl") c=$(gph "$TMP/thr.ckpt.metrics.jsonl")
  for x in many thr; do
    cmp -s "$TMP/one.ckpt" "$TMP/$x.ckpt" && cmp -s "$TMP/one.ckpt.state" "$TMP/$x.ckpt.state" || same=no
  done
  echo "run $r: 1 process $a graph-steps/h ($(cpu "$TMP/t1") CPU s), $N ranks $b graph-steps/h ($(cpu "$TMP/tn") CPU s)," \
       "1 process on $N threads $c graph-steps/h ($(cpu "$TMP/tt") CPU s)"
  one="$one $a" many="$many $b" thr="$thr $c"
done
m1=$(echo "$one" | median) mn=$(echo "$many" | median) mt=$(echo "$thr" | median)
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median: 1 process $m1 graph-steps/h, $N ranks $mn graph-steps/h, 1 process on $N threads $mt graph-steps/h"
awk -v a="$m1" -v b="$mn" -v n="$N" 'BEGIN {printf "speed-up %.2fx, scaling efficiency %.2f (%d ranks / (%d x 1 process))\n", b / a, b / (n * a), n, n}'
awk -v a="$m1" -v b="$mt" -v n="$N" 'BEGIN {printf "threads: speed-up %.2fx, efficiency %.2f (1 process on %d threads / (%d x 1 process on 1))\n", b / a, b / (n * a), n, n}'
echo "checkpoints of 1 process, $N ranks and 1 process on $N threads identical: $same"
[ "$same" = yes ]
