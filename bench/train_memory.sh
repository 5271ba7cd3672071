#!/usr/bin/env bash
# train_memory.sh: the trainer's memory per graph node. Runs `gopt train
# --steps 1` (references computed, one PPO step) on half of a corpus and on
# all of it (both sets hold the largest graph, so the fixed costs sized by it
# are the same), takes the peak resident memory of each (/usr/bin/time -v),
# and prints the bytes per node the second set adds: (peak(all) -
# peak(half)) / (nodes(all) - nodes(half)). Once with the default graph cache
# (a graph's simulator, scratch, features and decoder inputs built for the
# graphs in use only) and once with --graph-cache 0 (every graph kept built:
# what the trainer did before the cache), the reference measured in the same
# run; prints the ratio, and checks that both give the same checkpoint.
#
#   bench/train_memory.sh [GOPT] [--graphs DIR] [--count G] [--profile P] [--threads T]
# (configured into BUILD/bench/train_memory.sh by CMake; default corpus: G = 40
# synthetic graphs of the generator's default sizes, 200-20k nodes, seed 7;
# --graphs DIR takes the *.graphml.gz of DIR instead, e.g. a part of
# tools/pretrain-data.sh's corpus. OPENBLAS_NUM_THREADS=1, --threads T (2).)
set -u
SRC="@PROJECT_SOURCE_DIR@"
GOPT="@GOPT_BINARY@"
case "$SRC" in *@*) SRC="$(cd "$(dirname "$0")/.." && pwd)" ;; esac
case "$GOPT" in *@*) GOPT="" ;; esac
DIR="" G=40 PROF="" T=2
while [ $# -gt 0 ]; do
  case "$1" in
    --graphs) DIR=$2; shift 2 ;;
    --count) G=$2; shift 2 ;;
    --profile) PROF=$2; shift 2 ;;
    --threads) T=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "train_memory: unknown option '$1'" >&2; exit 2 ;;
    *) GOPT=$1; shift ;;
  esac
done
[ -x "$GOPT" ] || { echo "train_memory: give the gopt binary (got '$GOPT')" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "train_memory: needs /usr/bin/time (GNU time)" >&2; exit 2; }
PROF=${PROF:-$SRC/profiles/v100-dgx1-x8.json}
export OPENBLAS_NUM_THREADS=1
TMP=$(mktemp -d /tmp/gopt_train_memory_XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if [ -z "$DIR" ]; then
  "$GOPT" graph gen synthetic --count "$G" --seed 7 -o "$TMP/all" >/dev/null || exit 1
  DIR="$TMP/all"
fi
# nodes of each graph, smallest first; half = every second one plus the largest
for f in "$DIR"/*.graphml.gz; do
  echo "$("$GOPT" graph info "$f" | awk '$1 == "nodes" {print $2; exit}') $f"
done | sort -n >"$TMP/sizes"
[ -s "$TMP/sizes" ] || { echo "train_memory: no *.graphml.gz in $DIR" >&2; exit 2; }
mkdir -p "$TMP/half" "$TMP/full"
awk 'NR % 2 == 0 {print $2}' "$TMP/sizes" >"$TMP/half.list"
tail -1 "$TMP/sizes" | awk '{print $2}' >>"$TMP/half.list"
sort -u "$TMP/half.list" | while read -r f; do ln -s "$f" "$TMP/half/"; done
awk '{print $2}' "$TMP/sizes" | while read -r f; do ln -s "$f" "$TMP/full/"; done
nodes() { for f in "$1"/*; do grep -F " $(readlink "$f")" "$TMP/sizes"; done | awk '{s += $1} END {print s}'; }
nh=$(nodes "$TMP/half") nf=$(nodes "$TMP/full")
echo "train_memory: $(ls "$TMP/half" | wc -l) graphs ($nh nodes) and $(ls "$TMP/full" | wc -l) graphs ($nf nodes), largest $(tail -1 "$TMP/sizes" | cut -d' ' -f1) nodes; $(basename "$PROF")"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
peak() { # set cache -> KB of peak resident memory
  /usr/bin/time -v "$GOPT" train --graphs "$TMP/$1" --profile "$PROF" --steps 1 --threads "$T" --quiet \
    --checkpoint-every 0 --graph-cache "$2" -o "$TMP/$1_$2.ckpt" >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
  awk -F': ' '/Maximum resident/ {print $2}' "$TMP/err"
}
per=()
for c in 0 2; do # 2: the default for --graphs-per-step 1
  name=$([ "$c" = 0 ] && echo "--graph-cache 0 (every graph built)" || echo "default cache (2 graphs)")
  h=$(peak half "$c") f=$(peak full "$c")
  b=$(awk -v h="$h" -v f="$f" -v nh="$nh" -v nf="$nf" 'BEGIN {printf "%.0f", (f - h) * 1024 / (nf - nh)}')
  echo "$name: peak $h KB (half), $f KB (all): $b bytes per node"
  per+=("$b")
done
awk -v a="${per[0]}" -v b="${per[1]}" 'BEGIN {printf "bytes per node: default cache %d, every graph built %d: %.2fx less\n", b, a, a / b}'
same=yes
cmp -s "$TMP/full_0.ckpt" "$TMP/full_2.ckpt" && cmp -s "$TMP/full_0.ckpt.state" "$TMP/full_2.ckpt.state" || same=no
echo "checkpoints with and without the cache identical: $same"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$same" = yes ]
