# gopt train over MPI (mpirun -np N --oversubscribe, every rank on this machine):
# N ranks write the checkpoint one process writes (byte for byte), with the
# graphs shared out (B >= N) and with the samples of one graph shared out
# (B < N), and with a cluster per graph (--profiles, --devices-range); finetune too (--backward rounds and more B/N pairs are in
# test_trainer.c, ranks as threads); a killed rank (1, then 0) ends the job
# and --resume continues to the checkpoint of an uninterrupted run. Skipped
# (exit 77) when gopt was built without MPI or mpirun is missing.
. "$(dirname "$0")/lib.bash"
if "$GOPT" train --help | grep -q "this build has no MPI"; then
  echo "SKIP: gopt was built without MPI (install libopenmpi-dev and rebuild)"; exit 77
fi
command -v mpirun >/dev/null || { echo "SKIP: no mpirun on PATH (install openmpi-bin)"; exit 77; }
# Open MPI refuses to run as root without these (CI containers run as root)
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OPENBLAS_NUM_THREADS=1
# Under the sanitizers (tools/test.sh --sanitize) leak checking is off here: Open MPI keeps
# allocations until exit in components it unloads at MPI_Finalize, so LeakSanitizer reports
# leaks it cannot attribute. gopt's own data-parallel code is leak-checked by test_trainer
# (ranks as threads over the same code paths).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# no network interfaces needed: the ranks talk through shared memory
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN="mpirun --oversubscribe"
PROF="$SRC/profiles/v100-dgx1-x8.json"
"$GOPT" graph gen synthetic --count 3 --seed 1 --nodes 200 -o "$TMP/g" >/dev/null || fail "graph gen"
NET="--hidden 8 --sage-layers 1 --attn-layers 1 --heads 2 --segment 8 --samples 5 --epochs 2 --threads 1 --quiet"
RUN="train --graphs $TMP/g --profile $PROF --devices 4 --imitate 2 $NET"
same() { # same A B: checkpoint and state byte for byte
  cmp -s "$1" "$2" && cmp -s "$1.state" "$2.state" && ok || fail "$2 differs from $1"
}
# metrics without the wall-clock fields
stats() { sed -E 's/"(seconds|elapsed_s|graphs_per_s)":[^,}]*//g' "$1"; }

# B = 2 graphs per step: 1 process, 2 ranks (a graph each), 3 ranks (the samples of a graph shared)
expect_rc 0 "$GOPT" $RUN --steps 5 --graphs-per-step 2 -o "$TMP/one.ckpt"
expect_rc 0 $MPIRUN -np 2 "$GOPT" $RUN --steps 5 --graphs-per-step 2 -o "$TMP/two.ckpt"
expect_out "mean best/ref"
[ "$(grep -c 'mean best/ref' "$TMP/out")" -eq 1 ] && ok || fail "the summary should come from rank 0 alone"
same "$TMP/one.ckpt" "$TMP/two.ckpt"
[ "$(stats "$TMP/one.ckpt.metrics.jsonl")" = "$(stats "$TMP/two.ckpt.metrics.jsonl")" ] && ok || fail "2-rank metrics differ"
expect_rc 0 $MPIRUN -np 3 "$GOPT" $RUN --steps 5 --graphs-per-step 2 -o "$TMP/three.ckpt"
same "$TMP/one.ckpt" "$TMP/three.ckpt"
# a cluster per graph (two profiles, 1-4 devices drawn per graph): 2 ranks give one process's files
MIXP="--profiles $PROF,$SRC/profiles/h100-nvswitch-x8.json --devices-range 1-4"
expect_rc 0 "$GOPT" ${RUN/--profile $PROF --devices 4/$MIXP} --steps 3 --graphs-per-step 2 -o "$TMP/mix1.ckpt"
expect_rc 0 $MPIRUN -np 2 "$GOPT" ${RUN/--profile $PROF --devices 4/$MIXP} --steps 3 --graphs-per-step 2 -o "$TMP/mix2.ckpt"
same "$TMP/mix1.ckpt" "$TMP/mix2.ckpt"
grep -q '"profile": "h100-nvswitch-x8"' "$TMP/mix2.ckpt.state" && ok || fail "mixed state names no h100 graph"
# finetune (one graph, its samples shared by 2 ranks), decisions of the best sample from rank 0
FT="finetune --checkpoint $TMP/one.ckpt $TMP/g/synth_00001.graphml.gz --profile $PROF --devices 4 --steps 3 --samples 5 --epochs 1 --threads 1 --quiet"
expect_rc 0 "$GOPT" $FT -o "$TMP/f1.ckpt" --decisions "$TMP/f1.dec"
expect_rc 0 $MPIRUN -np 2 "$GOPT" $FT -o "$TMP/f2.ckpt" --decisions "$TMP/f2.dec"
same "$TMP/f1.ckpt" "$TMP/f2.ckpt"
cmp -s "$TMP/f1.dec" "$TMP/f2.dec" && ok || fail "finetune decisions differ"

# kill one rank mid-run (checkpoints every step): the job ends; --resume continues
rank_pid() { # rank_pid MPIRUN_PID RANK: the pid of that rank (a child of mpirun)
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}
state_step() { sed -n 's/^ *"step": \([0-9]*\),*$/\1/p' "$1.state" 2>/dev/null; }
kill_rank() { # kill_rank RANK CKPT [--resume]: start a long run, SIGKILL RANK once a checkpoint has 3+ steps
  local rank=$1 ck=$2; shift 2
  $MPIRUN -np 2 "$GOPT" $RUN --steps 100000 --graphs-per-step 2 --checkpoint-every 1e-9 -o "$ck" "$@" \
    >"$TMP/k.out" 2>"$TMP/k.err" &
  local mp=$! pid="" s=0 i
  for i in $(seq 1 600); do
    s=$(state_step "$ck"); [ -n "$pid" ] || pid=$(rank_pid "$mp" "$rank")
    [ -n "$pid" ] && [ "${s:-0}" -ge "${MIN:-3}" ] && break
    sleep 0.05
  done
  if [ -n "$pid" ]; then kill -KILL "$pid"; else fail "rank $rank not found"; kill -TERM "$mp"; fi
  wait "$mp" && fail "the job survived the death of rank $rank" || ok
}
kill_rank 1 "$TMP/k.ckpt"
K1=$(state_step "$TMP/k.ckpt")
[ "${K1:-0}" -ge 3 ] && ok || fail "no checkpoint before rank 1 was killed (step '$K1')"
MIN=$((K1 + 2)) kill_rank 0 "$TMP/k.ckpt" --resume
K2=$(state_step "$TMP/k.ckpt")
[ "${K2:-0}" -gt "${K1:-0}" ] && ok || fail "the resumed run did not advance ($K1 -> $K2)"
END=$((K2 + 2))
expect_rc 0 $MPIRUN -np 2 "$GOPT" $RUN --steps $END --graphs-per-step 2 -o "$TMP/k.ckpt" --resume
expect_rc 0 "$GOPT" $RUN --steps $END --graphs-per-step 2 -o "$TMP/u.ckpt"
same "$TMP/u.ckpt" "$TMP/k.ckpt"
[ "$(wc -l <"$TMP/k.ckpt.metrics.jsonl")" -eq "$END" ] && ok || fail "resumed metrics should have $END lines"

# SIGTERM to mpirun: every rank stops before the same step, rank 0 writes the checkpoint of that step
$MPIRUN -np 2 "$GOPT" $RUN --steps 100000 --graphs-per-step 2 -o "$TMP/t.ckpt" >/dev/null 2>"$TMP/t.err" &
MP=$!
for i in $(seq 1 3000); do
  [ -s "$TMP/t.ckpt.metrics.jsonl" ] && [ "$(wc -l <"$TMP/t.ckpt.metrics.jsonl")" -ge 3 ] && break
  sleep 0.05
done
kill -TERM "$MP"
wait "$MP" && fail "mpirun exited 0 after SIGTERM" || ok
grep -q "continue with --resume" "$TMP/t.err" && ok || fail "no interruption message"
[ "$(state_step "$TMP/t.ckpt")" = "$(wc -l <"$TMP/t.ckpt.metrics.jsonl" | tr -d ' ')" ] && ok ||
  fail "the checkpoint's step differs from the metrics written"

# a rank that fails ends the job with the error
expect_rc 2 $MPIRUN -np 2 "$GOPT" $RUN --steps $END --graphs-per-step 2 -o "$TMP/k.ckpt" --resume --epochs 3
expect_err "option epochs"
finish
