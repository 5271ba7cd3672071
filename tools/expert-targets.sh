#!/usr/bin/env bash
# expert-targets.sh: improved imitation targets for pre-training (expert iteration,
# docs/trainer.md "Improved targets").
#
#   tools/expert-targets.sh OUT_DIR --state CKPT.state --corpus DIR [--checkpoint C] [--every K]
#                           [--node-steps N] [--min-steps M] [--max-steps M] [--jobs J] [--seed S]
#                           [--gopt PATH]
#
# For the graphs a pre-training run saw (the trainer state CKPT.state lists each one with the
# cluster it was drawn: profile and device count), fine-tunes the checkpoint C (default: the
# shipped one) on each graph on its own cluster with `gopt finetune`, against the same reference
# methods, and keeps what each run found: OUT_DIR/NAME.ckpt.state (the best actions and their
# step) and OUT_DIR/NAME.log (the run's table). `gopt train --targets OUT_DIR` then imitates
# each graph's improved solution wherever it is faster than the graph's best classical one.
#   --corpus DIR        the corpus the state was trained on (DIR/manifest.tsv, as written by
#                       tools/pretrain-data.sh); the state's graphs are matched to its files in order
#   --every K (4)       every graph of the zoo and of the real exports, every K-th synthetic one
#   --node-steps N (250000) --min-steps M (20) --max-steps M (100): a graph of n nodes is
#                       fine-tuned for clamp(N / n, M, M) PPO steps, so each costs about the same
#   --jobs J (2)        fine-tuning runs at once, one thread each
#   --seed S (1)        gopt finetune's seed
# Re-running skips the graphs already done, so a killed run continues where it stopped. Prints a
# line per graph (its best found against its reference) and the wall time.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/.." && pwd)"
OUT="" STATE="" CORPUS="" CKPT="" EVERY=4 NSTEPS=250000 MINS=20 MAXS=100 JOBS=2 SEED=1 GOPT=""
usage() { sed -n '5,7p' "$0" | sed 's/^# *//' >&2; exit 2; }
num() { case "$2" in ''|*[!0-9]*) echo "expert-targets.sh: $1 '$2' is not a count" >&2; exit 2 ;; esac; }
while [ $# -gt 0 ]; do
  case "$1" in
    --state) STATE="${2:?--state needs a file}"; shift 2 ;;
    --corpus) CORPUS="${2:?--corpus needs a directory}"; shift 2 ;;
    --checkpoint) CKPT="${2:?--checkpoint needs a file}"; shift 2 ;;
    --every) EVERY="${2:?--every needs a count}"; num --every "$EVERY"; shift 2 ;;
    --node-steps) NSTEPS="${2:?--node-steps needs a count}"; num --node-steps "$NSTEPS"; shift 2 ;;
    --min-steps) MINS="${2:?--min-steps needs a count}"; num --min-steps "$MINS"; shift 2 ;;
    --max-steps) MAXS="${2:?--max-steps needs a count}"; num --max-steps "$MAXS"; shift 2 ;;
    --jobs) JOBS="${2:?--jobs needs a count}"; num --jobs "$JOBS"; shift 2 ;;
    --seed) SEED="${2:?--seed needs a value}"; num --seed "$SEED"; shift 2 ;;
    --gopt) GOPT="${2:?--gopt needs a path}"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "expert-targets.sh: unknown option '$1'" >&2; usage ;;
    *) [ -z "$OUT" ] || { echo "expert-targets.sh: one OUT_DIR only ('$OUT', '$1')" >&2; usage; }; OUT="$1"; shift ;;
  esac
done
[ -n "$OUT" ] || { echo "expert-targets.sh: missing OUT_DIR" >&2; usage; }
[ -n "$STATE" ] || { echo "expert-targets.sh: missing --state CKPT.state" >&2; usage; }
[ -n "$CORPUS" ] || { echo "expert-targets.sh: missing --corpus DIR" >&2; usage; }
[ -r "$STATE" ] || { echo "expert-targets.sh: --state '$STATE': cannot read it" >&2; exit 2; }
[ -r "$CORPUS/manifest.tsv" ] || { echo "expert-targets.sh: --corpus '$CORPUS': no manifest.tsv there" >&2; exit 2; }
[ "$EVERY" -ge 1 ] && [ "$JOBS" -ge 1 ] && [ "$MINS" -ge 1 ] && [ "$MAXS" -ge "$MINS" ] ||
  { echo "expert-targets.sh: --every, --jobs and --min-steps must be >= 1, --max-steps >= --min-steps" >&2; exit 2; }
[ -n "$CKPT" ] || CKPT="$SRC/trainer/checkpoints/go-onegemm.ckpt"
[ -r "$CKPT" ] || { echo "expert-targets.sh: --checkpoint '$CKPT': cannot read it" >&2; exit 2; }
if [ -z "$GOPT" ]; then
  for g in "$SRC/build/gopt" "$(command -v gopt || true)"; do [ -x "$g" ] && { GOPT="$g"; break; }; done
fi
[ -n "$GOPT" ] && [ -x "$GOPT" ] || { echo "expert-targets.sh: no gopt binary (build it, or --gopt PATH)" >&2; exit 2; }
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
mkdir -p "$OUT"

# The jobs: file, name, profile file, devices, nodes, steps, reference methods (one per line).
JOBLIST="$OUT/.jobs.tsv"
"$PY" - "$STATE" "$CORPUS" "$SRC/profiles" "$EVERY" "$NSTEPS" "$MINS" "$MAXS" >"$JOBLIST.tmp" <<'EOF'
import json, os, sys
state, corpus, profiles, every, nsteps, mins, maxs = sys.argv[1:8]
every, nsteps, mins, maxs = int(every), int(nsteps), int(mins), int(maxs)
try:
    s = json.load(open(state))
except (OSError, ValueError) as e:
    sys.exit(f"expert-targets.sh: {state}: {e}")
if s.get("format") != "gopt-trainer-state" or "graphs" not in s:
    sys.exit(f"expert-targets.sh: {state}: not a gopt trainer state")
ref = s["options"]["reference"]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(corpus, "manifest.tsv"))][1:]
graphs, j, nsyn = s["graphs"], 0, 0
for r in rows:
    if j == len(graphs):
        break
    f, src = r[0], r[1]
    stem = f.split(".")[0]
    g = graphs[j]
    if src == "synthetic" and stem != g["name"]:
        continue  # left out of the run (--skip-unfit)
    j += 1
    if src == "synthetic":
        nsyn += 1
        if (nsyn - 1) % every:
            continue
    prof = os.path.join(profiles, g["profile"] + ".json")
    if not os.path.exists(prof):
        sys.exit(f"expert-targets.sh: {state}: graph '{g['name']}': no profile file {prof}")
    steps = max(mins, min(maxs, nsteps // max(1, g["nodes"])))
    if any(c.isspace() for c in f + corpus + prof):
        sys.exit(f"expert-targets.sh: {os.path.join(corpus, f)}: a path with a space")
    print("\t".join([os.path.join(corpus, f), g["name"], prof, str(g["devices"]), str(g["nodes"]), str(steps), ref]))
if j != len(graphs):
    sys.exit(f"expert-targets.sh: {state}: {len(graphs) - j} of its graphs are not in {corpus}/manifest.tsv "
             "(another corpus?)")
EOF
mv "$JOBLIST.tmp" "$JOBLIST"
TOTAL=$(wc -l <"$JOBLIST")
echo "expert-targets.sh: $TOTAL graphs, checkpoint $CKPT, $JOBS job(s), output $OUT" >&2

one() { # file name profile devices nodes steps reference
  local f="$1" name="$2" prof="$3" dev="$4" nodes="$5" steps="$6" ref="$7"
  [ -e "$OUT/$name.ckpt.state" ] && return 0
  local t0=$SECONDS
  if OPENBLAS_NUM_THREADS=1 "$GOPT" finetune "$f" --checkpoint "$CKPT" --profile "$prof" --devices "$dev" \
      --reference "$ref" --steps "$steps" --threads 1 --seed "$SEED" --quiet --checkpoint-every 0 \
      -o "$OUT/$name.ckpt.tmp" >"$OUT/$name.log.tmp" 2>&1; then
    mv "$OUT/$name.log.tmp" "$OUT/$name.log"
    mv "$OUT/$name.ckpt.tmp.state" "$OUT/$name.ckpt.state"
    rm -f "$OUT/$name.ckpt.tmp" "$OUT/$name.ckpt.tmp.metrics.jsonl"
    local rel
    rel=$(awk '/go fine-tuned \(best found\)/ {print $(NF-2)}' "$OUT/$name.log")
    echo "$name: $nodes nodes, $steps steps, best found ${rel:-?}x the reference, $((SECONDS - t0)) s" >&2
  else
    echo "expert-targets.sh: $name ($f): gopt finetune failed; its output: $OUT/$name.log.tmp" >&2
    return 1
  fi
}
export -f one
export OUT GOPT CKPT SEED
T0=$SECONDS
xargs -P "$JOBS" -L 1 bash -c 'one "$@"' _ <"$JOBLIST" || true
DONE=$(ls "$OUT" | grep -c '\.ckpt\.state$' || true)
echo "expert-targets.sh: $DONE of $TOTAL graphs done in $((SECONDS - T0)) s; gopt train --targets $OUT" >&2
