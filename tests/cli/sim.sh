# gopt sim: text and JSON results, decisions files, traces, OOM, and every bad input (exit 2).
. "$(dirname "$0")/lib.bash"
EX="$SRC/graphs/examples/mlp_train.graphml"
P="$SRC/profiles/v100-dgx1-x8.json"
expect_rc 0 "$GOPT" sim --help
expect_out "Usage: gopt sim GRAPH --profile P"
# default decisions: everything on device 0, no transfers
expect_rc 0 "$GOPT" sim "$EX" --profile "$P" --devices 2
expect_out "step time"
expect_out "peak at (ms)"
expect_out "transfers   0"
expect_out "fits on every device"
expect_rc 0 "$GOPT" sim "$EX" --profile "$P" --devices 2 --json
for k in '"step_time_s": ' '"oom": false' '"peak_memory_bytes": \[' '"busy_s"' '"transfers": 0' '"devices": 2'; do expect_out "$k"; done
# one entry per device in peak_memory_bytes
n=$(awk '/"peak_memory_bytes"/{f=1;next} f&&/\]/{exit} f{c++} END{print c+0}' "$TMP/out")
[ "$n" = 2 ] && ok || fail "peak_memory_bytes has $n entries, want 2"
n=$(awk '/"peak_time_s"/{f=1;next} f&&/\]/{exit} f{c++} END{print c+0}' "$TMP/out")
[ "$n" = 2 ] && ok || fail "peak_time_s has $n entries, want 2"
# a decisions file: layer 1 on device 1, mm1+relu1 fused
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
expect_rc 0 "$GOPT" sim "$EX" --profile "$P" --devices 2 --decisions "$TMP/d.txt" --json --trace "$TMP/t.json"
expect_out '"kernels": 13'
grep -q '"transfers": 0' "$TMP/out" && fail "a two-device placement made no transfer" || ok
# the trace: trace-event JSON with a track per device and per used link
[ -s "$TMP/t.json" ] && ok || fail "no trace written"
head -c 16 "$TMP/t.json" | grep -q '{"traceEvents":' && ok || fail "trace does not start with traceEvents"
grep -q '"name":"device 1"' "$TMP/t.json" && ok || fail "trace lacks device 1's track"
grep -q '"name":"link 0->1"' "$TMP/t.json" && ok || fail "trace lacks link 0->1's track"
grep -q '"name":"mm1 +1","cat":"fused"' "$TMP/t.json" && ok || fail "trace lacks the fused kernel"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); ev=d["traceEvents"]; assert all(e["ph"] in "XMC" for e in ev); assert sum(e["ph"]=="X" for e in ev) > 13; assert all(e["pid"] >= 1 and e["tid"] >= 1 for e in ev); assert {e["name"] for e in ev if e["ph"]=="C"} == {"memory device 0", "memory device 1"}' "$TMP/t.json" && ok || fail "trace is not valid trace-event JSON with a memory counter per device"
fi
# the same inputs give the same output, bit for bit
"$GOPT" sim "$EX" --profile "$P" --devices 2 --decisions "$TMP/d.txt" --json >"$TMP/a"
"$GOPT" sim "$EX" --profile "$P" --devices 2 --decisions "$TMP/d.txt" --json >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" && ok || fail "two runs differ"
# out of memory is a result (exit 0), naming the device and the excess
sed 's/"memory_bytes": 17179869184/"memory_bytes": 1000000/' "$P" >"$TMP/small.json"
expect_rc 0 "$GOPT" sim "$EX" --profile "$TMP/small.json" --devices 2 --json
expect_out '"oom": true'
expect_out '"oom_device": 0'
expect_rc 0 "$GOPT" sim "$EX" --profile "$TMP/small.json" --devices 2
expect_out "OUT OF MEMORY: device 0 exceeds its capacity by"
expect_out "its peak is first reached at"
# bad inputs: exit 2 with a message naming the file, the node and the value; no trace written
sed 's/^update\/w2\t1/update\/w2\t0/' "$TMP/d.txt" >"$TMP/coloc.txt"
expect_rc 2 "$GOPT" sim "$EX" --profile "$P" --devices 2 --decisions "$TMP/coloc.txt" --trace "$TMP/no.json"
expect_err "update/w2"
expect_err "colocation"
[ ! -e "$TMP/no.json" ] && ok || fail "a refused run wrote its trace"
sed 's/^loss\t0/lossy\t0/' "$TMP/d.txt" >"$TMP/unknown.txt"
expect_rc 2 "$GOPT" sim "$EX" --profile "$P" --devices 2 --decisions "$TMP/unknown.txt"
expect_err "lossy"
sed 's/^w1\t0\t12/w1\t5\t12/' "$TMP/d.txt" >"$TMP/dev.txt"
expect_rc 2 "$GOPT" sim "$EX" --profile "$P" --devices 2 --decisions "$TMP/dev.txt"
expect_err "'w1'"
sed 's/^loss\t0\t7\t-1/loss\t0\t7\t4/' "$TMP/d.txt" >"$TMP/fuse.txt"
expect_rc 2 "$GOPT" sim "$EX" --profile "$P" --devices 2 --decisions "$TMP/fuse.txt"
expect_err "fusion group 4"
expect_rc 2 "$GOPT" sim "$EX" --profile "$P" --devices 99
expect_err "devices"
expect_rc 2 "$GOPT" sim "$EX" --profile "$TMP/missing.json"
expect_err "missing.json"
expect_rc 2 "$GOPT" sim "$TMP/missing.graphml" --profile "$P"
expect_err "missing.graphml"
expect_rc 2 "$GOPT" sim "$EX"
expect_err "missing --profile"
expect_rc 2 "$GOPT" sim --profile "$P"
expect_err "missing GRAPH"
expect_rc 2 "$GOPT" sim "$EX" --profile "$P" --bogus
expect_err "unknown option '--bogus'"
expect_rc 2 "$GOPT" sim "$EX" --profile "$P" --devices zero
finish
