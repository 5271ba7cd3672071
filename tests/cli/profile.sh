# gopt profile: show, and calibrate's argument errors (a calibration itself is tested in
# tests/test_profiles.c; here nothing is measured).
source "$(dirname "$0")/lib.bash"
P="$SRC/profiles/cpu-epyc-2core-measured.json"
expect_rc 0 "$GOPT" profile show "$P"
expect_out "cpu-epyc-2core-measured"
# --shapes-from: the graph must load (named in the error), and it is for the CPU calibrator
expect_rc 2 "$GOPT" profile calibrate --backend cpu -o "$TMP/p.json" --shapes-from "$TMP/none.graphml"
expect_err "none.graphml"
[ ! -e "$TMP/p.json" ] && ok || fail "a failed calibration wrote its output"
expect_rc 2 "$GOPT" profile calibrate --backend cuda -o "$TMP/p.json" --shapes-from "$SRC/graphs/real/seq2seq.graphml.gz"
expect_err "backend cpu"
expect_rc 2 "$GOPT" profile calibrate --backend cpu -o "$TMP/p.json" --shapes-from
expect_err "needs a graph file"
expect_rc 0 "$GOPT" profile calibrate --help
expect_out "shapes-from"
finish
