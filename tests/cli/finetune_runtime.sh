# gopt finetune --evaluator runtime: a tiny fine-tuning whose samples are measured by the real CPU
# runtime writes its checkpoint, metrics and decisions (decisions gopt run accepts); the best found is
# a measured step, not the simulator's; CUDA without a GPU exits 3; bad evaluator options exit 2.
. "$(dirname "$0")/lib.bash"
EX="$SRC/graphs/examples/mlp_train.graphml"
P="$SRC/profiles/cpu-epyc-2core-measured.json"
export OPENBLAS_NUM_THREADS=1
expect_rc 0 "$GOPT" finetune --help
expect_out "evaluator sim|runtime"
expect_out "backend cpu|cuda"
FT=(finetune "$EX" --profile "$P" --samples 4 --epochs 1)
X=(-o "$TMP/x.ckpt")
expect_rc 0 "$GOPT" "${FT[@]}" --steps 2 --evaluator runtime --backend cpu --reps 1 -o "$TMP/rt.ckpt" --decisions "$TMP/rt.dec"
expect_out "GO's steps measured (runtime, cpu, median of 1)"
expect_out "go fine-tuned (best found)"
expect_err "evaluator: runtime, backend cpu, 1 timed step(s) per sample, wall clock"
[ -s "$TMP/rt.ckpt" ] && [ -s "$TMP/rt.ckpt.state" ] && ok || fail "no checkpoint written"
[ "$(wc -l <"$TMP/rt.ckpt.metrics.jsonl")" -eq 2 ] && ok || fail "metrics: want 2 lines"
head -1 "$TMP/rt.dec" | grep -q "gopt-decisions" && ok || fail "no decisions written"
expect_rc 0 "$GOPT" run "$EX" --decisions "$TMP/rt.dec" --backend cpu --profile "$P" --reps 1
# the best found is measured: it is not the simulator's step of the same decisions
"$GOPT" "${FT[@]}" --steps 1 --evaluator runtime --clock cpu --reps 2 -o "$TMP/c.ckpt" --quiet >"$TMP/rt2.out" 2>"$TMP/err" && ok || fail "runtime finetune, cpu clock"
best=$(awk '/go fine-tuned \(best found\)/{print $5}' "$TMP/rt2.out")
sim=$(awk '/go fine-tuned \(best found\)/{print $5}' <("$GOPT" "${FT[@]}" --steps 1 -o "$TMP/s.ckpt" --quiet))
[ -n "$best" ] && [ -n "$sim" ] && [ "$best" != "$sim" ] && ok || fail "runtime best '$best' equals the simulator's '$sim'"
# CUDA: exit 3 with a message where there is no GPU (or no CUDA in this build); 0 with one
"$GOPT" "${FT[@]}" --steps 1 --evaluator runtime --backend cuda --reps 1 -o "$TMP/g.ckpt" --quiet >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" = 3 ]; then grep -q -i "cuda\|gpu" "$TMP/err" && ok || fail "exit 3 without a message"
elif [ "$rc" = 0 ]; then ok
else fail "cuda: exit $rc"; fi
# bad values and combinations: exit 2, naming the option
expect_rc 2 "$GOPT" "${FT[@]}" --steps 1 "${X[@]}" --evaluator real
expect_err "evaluator 'real'"
expect_rc 2 "$GOPT" "${FT[@]}" --steps 1 "${X[@]}" --evaluator runtime --backend tpu
expect_err "backend 'tpu'"
expect_rc 2 "$GOPT" "${FT[@]}" --steps 1 "${X[@]}" --evaluator runtime --clock sundial
expect_err "clock 'sundial'"
expect_rc 2 "$GOPT" "${FT[@]}" --steps 1 "${X[@]}" --evaluator runtime --reps 0
expect_rc 2 "$GOPT" "${FT[@]}" --steps 1 "${X[@]}" --backend cpu
expect_err "need --evaluator runtime"
finish
