# gopt run: a real step on this machine's CPUs, text and JSON, the trace, OOM, CUDA without a GPU
# (exit 3), the CUDA convolution's choice, and every bad input (exit 2); gopt validate's table and
# its bad inputs.
. "$(dirname "$0")/lib.bash"
EX="$SRC/graphs/examples/mlp_train.graphml"
P="$SRC/profiles/cpu-epyc-2core-measured.json"
expect_rc 0 "$GOPT" run --help
expect_out "Usage: gopt run GRAPH --decisions D --backend cpu|cuda"
expect_out "--cuda-conv K  (cuda backend)"
cat >"$TMP/d.txt" <<'D'
gopt-decisions 1
graph mlp_train
devices 2
node	device	priority	group
x	0	14	-1
labels	0	13	-1
w1	0	12	-1
w2	1	11	-1
mm1	0	10	4
relu1	0	9	4
mm2	1	8	-1
loss	0	7	-1
grad/mm2	0	6	-1
grad/w2	1	5	-1
grad/relu1	0	4	-1
grad/w1	0	3	-1
update/w1	0	2	-1
update/w2	1	1	-1
D
expect_rc 0 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --reps 3
expect_out "step time .* ms measured, wall clock (median of 3"
expect_out "simulated "
expect_out "kernels     13"
expect_out "fits on every device"
expect_rc 0 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --reps 2 --clock cpu --json --trace "$TMP/t.json"
for k in '"step_time_s": ' '"steps_s": \[' '"clock": "cpu"' '"oom": false' '"kernels": 13' '"devices": 2' '"sim_step_time_s"'; do expect_out "$k"; done
grep -q '"transfers": 0' "$TMP/out" && fail "a two-device placement made no transfer" || ok
n=$(awk '/"steps_s"/{f=1;next} f&&/\]/{exit} f{c++} END{print c+0}' "$TMP/out")
[ "$n" = 2 ] && ok || fail "steps_s has $n entries, want 2"
# the trace: the simulator's format (device and link tracks, the fused kernel, memory counters)
head -c 16 "$TMP/t.json" | grep -q '{"traceEvents":' && ok || fail "trace does not start with traceEvents"
grep -q '"name":"device 1"' "$TMP/t.json" && ok || fail "trace lacks device 1's track"
grep -q '"name":"link 0->1"' "$TMP/t.json" && ok || fail "trace lacks link 0->1's track"
grep -q '"name":"mm1 +1","cat":"fused"' "$TMP/t.json" && ok || fail "trace lacks the fused kernel"
grep -q '"name":"memory device 1","ph":"C"' "$TMP/t.json" && ok || fail "trace lacks device 1's memory counter"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d["traceEvents"]; assert all(e["ph"] in "XMC" for e in ev); assert sum(e["ph"]=="X" for e in ev) > 13' "$TMP/t.json" && ok || fail "trace is not valid trace-event JSON"
fi
# one device: the measured peak is the simulator's
sed 's/^\(devices\t*\) 2/\1 1/; s/^devices 2/devices 1/; s/\t1\t\([0-9]*\)\t/\t0\t\1\t/' "$TMP/d.txt" >"$TMP/d1.txt"
expect_rc 0 "$GOPT" run "$EX" --decisions "$TMP/d1.txt" --backend cpu --profile "$P" --devices 1 --reps 1 --json
peak=$(awk '/"peak_memory_bytes"/{getline; gsub(/[ ,]/,""); print; exit}' "$TMP/out")
speak=$(awk '/"sim_peak_memory_bytes"/{getline; gsub(/[ ,]/,""); print; exit}' "$TMP/out")
[ -n "$peak" ] && [ "$peak" = "$speak" ] && ok || fail "one device: measured peak $peak != simulated $speak"
# out of memory is a result (exit 0)
# whatever capacity the calibration wrote
sed -E 's/"memory_bytes": [0-9.e+]+/"memory_bytes": 100000/' "$P" >"$TMP/small.json"
expect_rc 0 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$TMP/small.json" --reps 1
expect_out "OUT OF MEMORY: device"
# CUDA: exit 3 with a message where there is no GPU (or no CUDA in this build); 0 with one
"$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cuda --profile "$P" --reps 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" = 3 ]; then grep -q -i "cuda\|gpu" "$TMP/err" && ok || fail "exit 3 without a message"; echo "cuda: skipped ($(head -1 "$TMP/err"))"
elif [ "$rc" = 0 ]; then ok; else fail "--backend cuda exit $rc (want 0 or 3)"; fi
# the step replayed as a CUDA graph: the same (3 without a GPU); on more than one GPU refused (3)
"$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cuda --profile "$P" --reps 2 --cuda-graph >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" = 3 ]; then grep -q -i "cuda\|gpu" "$TMP/err" && ok || fail "--cuda-graph: exit 3 without a message"
elif [ "$rc" = 0 ]; then ok; else fail "--cuda-graph exit $rc (want 0 or 3)"; fi
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --cuda-graph
expect_err "needs --backend cuda"
# the CUDA convolution: cudnn or im2col (3 without a GPU, or cudnn in a build without cuDNN; 0 with one)
for k in cudnn im2col; do
  "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cuda --profile "$P" --reps 1 --cuda-conv $k >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ "$rc" = 3 ]; then grep -q -i "cuda\|gpu\|cudnn" "$TMP/err" && ok || fail "--cuda-conv $k: exit 3 without a message"
  elif [ "$rc" = 0 ]; then ok; else fail "--cuda-conv $k exit $rc (want 0 or 3)"; fi
done
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cuda --profile "$P" --cuda-conv winograd
expect_err "--cuda-conv 'winograd': expected cudnn or im2col"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --cuda-conv im2col
expect_err "--cuda-conv needs --backend cuda"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cuda --profile "$P" --cuda-conv
expect_err "cuda-conv"
# bad inputs: exit 2, naming the node and the value; no trace written
sed 's/^w1\t0\t12/w1\t5\t12/' "$TMP/d.txt" >"$TMP/dev.txt"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/dev.txt" --backend cpu --profile "$P" --trace "$TMP/no.json"
expect_err "'w1'"
[ ! -e "$TMP/no.json" ] && ok || fail "a refused run wrote its trace"
sed 's/^update\/w2\t1/update\/w2\t0/' "$TMP/d.txt" >"$TMP/coloc.txt"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/coloc.txt" --backend cpu --profile "$P"
expect_err "update/w2"
sed 's/^loss\t0\t7\t-1/loss\t0\t7\t4/' "$TMP/d.txt" >"$TMP/fuse.txt"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/fuse.txt" --backend cpu --profile "$P"
expect_err "fusion group 4"
sed 's/^loss\t0/lossy\t0/' "$TMP/d.txt" >"$TMP/unknown.txt"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/unknown.txt" --backend cpu --profile "$P"
expect_err "lossy"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --devices 9
expect_err "devices"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend tpu --profile "$P"
expect_err "expected cpu or cuda"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --clock sundial
expect_err "expected wall, cpu or cpu-min"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --reps 0
expect_rc 2 "$GOPT" run "$EX" --backend cpu --profile "$P"
expect_err "missing --decisions"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --profile "$P"
expect_err "missing --backend"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu
expect_err "missing --profile"
expect_rc 2 "$GOPT" run "$TMP/missing.graphml" --decisions "$TMP/d.txt" --backend cpu --profile "$P"
expect_err "missing.graphml"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/missing.txt" --backend cpu --profile "$P"
expect_err "missing.txt"
expect_rc 2 "$GOPT" run "$EX" --decisions "$TMP/d.txt" --backend cpu --profile "$P" --bogus
expect_err "unknown option '--bogus'"
# gopt validate: the table, the summary, and its bad inputs (exit 2)
expect_rc 0 "$GOPT" validate "$EX" --methods single,heft+cp,msct+cp+xla --profile "$P" --backend cpu --reps 1 --clock cpu-min
expect_out "mlp_train  *single "
expect_out "mlp_train  *msct+cp+xla "
expect_out "rank correlation (Spearman)"
expect_out "|sim - real| / real over 3 rows: median"
expect_rc 0 "$GOPT" validate "$EX" --methods single,heft+cp --profile "$P" --backend cpu --reps 1 --json
for k in '"rows": \[' '"median_abs_error"' '"p90_abs_error"' '"spearman"' '"real_step_s"'; do expect_out "$k"; done
expect_rc 2 "$GOPT" validate "$EX" --methods single,nosuch --profile "$P" --backend cpu
expect_err "nosuch"
expect_rc 2 "$GOPT" validate "$EX" --methods single --profile "$P" --backend cpu
expect_err "at least 2 methods"
expect_rc 2 "$GOPT" validate "$EX" --profile "$P" --backend cpu
expect_err "missing --methods"
expect_rc 2 "$GOPT" validate "$EX" --methods single,heft --profile "$P" --backend cpu --devices 9
expect_rc 2 "$GOPT" validate "$TMP/missing.graphml" --methods single,heft --profile "$P" --backend cpu
expect_err "missing.graphml"
expect_rc 2 "$GOPT" validate "$EX" --methods single,heft --profile "$P" --backend gpu
expect_rc 2 "$GOPT" validate "$EX" --methods single,heft --profile "$P" --backend cpu --cuda-graph
expect_err "needs --backend cuda"
expect_rc 2 "$GOPT" validate "$EX" --methods single,heft --profile "$P" --backend cpu --cuda-conv im2col
expect_err "--cuda-conv needs --backend cuda"
expect_rc 2 "$GOPT" validate "$EX" --methods single,heft --profile "$P" --backend cuda --cuda-conv fft
expect_err "expected cudnn or im2col"
finish
