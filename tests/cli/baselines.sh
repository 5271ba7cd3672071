# gopt optimize and gopt compare: methods, combinations, JSON/CSV, refusals, no valid placement.
. "$(dirname "$0")/lib.bash"
G="$SRC/graphs/examples/mlp_train.graphml"
P="$SRC/profiles/v100-dgx1-x8.json"

expect_rc 0 "$GOPT" optimize --list
for m in single expert metis heft mtopo metf msct fifo cp none xla xlamo tvm sa; do expect_out "^  $m "; done

# every placement, and a full combination, writes a decisions file the simulator accepts
for m in single expert metis heft mtopo metf msct heft+cp+xla metis+fifo+tvm; do
  expect_rc 0 "$GOPT" optimize "$G" --method "$m" --profile "$P" --devices 4 -o "$TMP/d.txt" --json
  expect_out '"step_time_s"'
  expect_out "\"method\": \"$m\""
  expect_out '"optimize_time_s"'
  expect_out '"oom": false'
  expect_rc 0 "$GOPT" sim "$G" --profile "$P" --devices 4 --decisions "$TMP/d.txt"
done
expect_rc 0 "$GOPT" optimize "$G" --method sa --profile "$P" --devices 2 --evals 30 --seed 5 -o "$TMP/a.txt"
expect_out "method sa: simulated step"
expect_rc 0 "$GOPT" optimize "$G" --method sa --profile "$P" --devices 2 --evals 30 --seed 5 -o "$TMP/b.txt"
cmp -s "$TMP/a.txt" "$TMP/b.txt" && ok || fail "sa with --seed and --evals is not reproducible"
# a trailing @sS runs the combination at seed S: the same decisions as --seed S
expect_rc 0 "$GOPT" optimize "$G" --method sa@s5 --profile "$P" --devices 2 --evals 30 -o "$TMP/c.txt"
expect_out "method sa@s5: simulated step"
cmp -s "$TMP/a.txt" "$TMP/c.txt" && ok || fail "sa@s5 is not sa at --seed 5"
expect_rc 0 "$GOPT" optimize "$G" --method sa@s6 --profile "$P" --devices 2 --evals 30 --seed 5 -o "$TMP/c.txt"
cmp -s "$TMP/a.txt" "$TMP/c.txt" && fail "sa@s6 made the decisions of seed 5" || ok
expect_rc 2 "$GOPT" optimize "$G" --method metis@sx --profile "$P"
expect_err "method 'metis@sx': '@sx' is not a seed suffix '@sS'"
expect_rc 2 "$GOPT" compare "$G" --methods metis,metis@s --profile "$P"
expect_err "'@s' is not a seed suffix"

# refusals: unknown method (lists valid ones), two of a kind, missing arguments, bad values
expect_rc 2 "$GOPT" optimize "$G" --method heft+bogus --profile "$P"
expect_err "unknown name 'bogus'"
expect_err "placement: single expert metis heft"
expect_rc 2 "$GOPT" optimize "$G" --method heft+metis --profile "$P"
expect_err "two placement methods"
expect_rc 2 "$GOPT" optimize "$G" --profile "$P"
expect_err "missing --method"
expect_rc 2 "$GOPT" optimize "$G" --method heft
expect_err "missing --profile"
expect_rc 2 "$GOPT" optimize "$G" --method heft --profile "$P" --devices 9
expect_rc 2 "$GOPT" optimize "$G" --method heft --profile "$P" --budget -1
# a number a double cannot hold (it would read as 0, or subnormal) is refused, not rounded
expect_rc 2 "$GOPT" optimize "$G" --method heft --profile "$P" --mem-fraction 1e-400
expect_err "option --mem-fraction: '1e-400' is outside the range of a normal double"
expect_rc 2 "$GOPT" optimize "$G" --method heft --profile "$P" --mem-fraction 1e-310
expect_err "'1e-310' is outside the range of a normal double"
expect_rc 2 "$GOPT" optimize "$TMP/none.graphml" --method heft --profile "$P"
expect_err "none.graphml"
[ -e "$TMP/none.txt" ] && fail "a decisions file was written on error" || ok

# a device too small: every method says so, exit 2, nothing written
sed 's/"memory_bytes": 17179869184/"memory_bytes": 1000/' "$P" >"$TMP/tiny.json"
for m in single heft metf; do
  expect_rc 2 "$GOPT" optimize "$G" --method "$m" --profile "$TMP/tiny.json" --devices 2 -o "$TMP/t.txt"
  expect_err "no valid placement"
done
[ -e "$TMP/t.txt" ] && fail "decisions written for an impossible placement" || ok

# compare: the table, best starred, speed-up over single; JSON and CSV
"$GOPT" graph gen resnet --layers 18 --batch 8 -o "$TMP/resnet.graphml.gz" >/dev/null 2>&1
"$GOPT" graph gen rnnlm --layers 2 --batch 8 -o "$TMP/rnnlm.graphml.gz" >/dev/null 2>&1
expect_rc 0 "$GOPT" compare "$G" "$TMP/resnet.graphml.gz" "$TMP/rnnlm.graphml.gz" --profile "$P" --evals 20
expect_out "speed-up over single"
expect_out "resnet"
grep -q '\*' "$TMP/out" && ok || fail "no best marked"
expect_rc 0 "$GOPT" compare "$G" --profile "$P" --methods single,heft+cp+xla --json
expect_out '"speedup_vs_single"'
expect_out '"heft+cp+xla"'
expect_rc 0 "$GOPT" compare "$G" --profile "$P" --methods single,metis --csv
expect_out "^graph,nodes,method,step_time_s"
[ "$(wc -l <"$TMP/out")" -eq 3 ] && ok || fail "csv should have a header and 2 rows"
expect_rc 0 "$GOPT" compare "$G" --profile "$TMP/tiny.json" --devices 2 --methods single,heft --csv
expect_out "no_valid_solution"
expect_rc 2 "$GOPT" compare "$G" --profile "$P" --methods single,nope
expect_err "unknown name 'nope'"
expect_rc 2 "$GOPT" compare "$G" "$TMP/missing.graphml" --profile "$P"
[ -s "$TMP/out" ] && fail "compare printed a table before failing on a missing graph" || ok
expect_rc 2 "$GOPT" compare --profile "$P"
expect_rc 2 "$GOPT" compare "$G" --profile "$P" --json --csv
finish
