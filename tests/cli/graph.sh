# gopt graph info/convert/dot: outputs, round trip, exit codes and messages.
. "$(dirname "$0")/lib.bash"
EX="$SRC/graphs/examples/mlp_train.graphml"
expect_rc 0 "$GOPT" graph info "$EX"
expect_out "nodes       14"
expect_out "depth       9"
expect_rc 0 "$GOPT" graph info "$EX" --json
for k in '"nodes": 14' '"edges": 19' '"flops":' '"param_bytes": 2439168' '"classes"'; do expect_out "$k"; done
# a path that is not UTF-8 keeps its "file" key in --json (invalid bytes become U+FFFD)
BADP="$TMP/$(printf 'g\xff\xfe.graphml')"
cp "$EX" "$BADP"
expect_rc 0 "$GOPT" graph info "$BADP" --json
expect_out "\"file\": \".*g$(printf '\xef\xbf\xbd\xef\xbf\xbd').graphml\""
# convert to gz and back: identical info
expect_rc 0 "$GOPT" graph convert "$EX" "$TMP/m.graphml.gz"
[ "$(head -c2 "$TMP/m.graphml.gz" | od -An -tx1 | tr -d ' ')" = "1f8b" ] && ok || fail "not gzip"
expect_rc 0 "$GOPT" graph convert "$TMP/m.graphml.gz" "$TMP/m.graphml"
"$GOPT" graph info "$EX" --json | grep -v '"file"' >"$TMP/a"
"$GOPT" graph info "$TMP/m.graphml" --json | grep -v '"file"' >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b" && ok || fail "info differs after convert round trip"
expect_rc 2 "$GOPT" graph convert "$EX" "$TMP/out.txt"
expect_err "must end in .graphml"
# dot
expect_rc 0 "$GOPT" graph dot "$EX"
expect_out "digraph \"mlp_train\""
expect_out "n0 -> "
expect_rc 0 "$GOPT" graph dot "$EX" -o "$TMP/g.dot"
grep -q "fillcolor" "$TMP/g.dot" && ok || fail "dot file lacks colours"
# bad input: exit 2 and a message naming the file
expect_rc 2 "$GOPT" graph info "$TMP/missing.graphml"
expect_err "missing.graphml: cannot open"
printf '<graphml><graph><node id="a"/></graph></graphml>' >"$TMP/bad.graphml"
expect_rc 2 "$GOPT" graph info "$TMP/bad.graphml"
expect_err "bad.graphml: line 1: node id 'a': missing attribute name"
head -c 300 "$TMP/m.graphml.gz" >"$TMP/cut.graphml.gz"
expect_rc 2 "$GOPT" graph info "$TMP/cut.graphml.gz"
expect_err "truncated"
[ ! -e "$TMP/out.txt" ] && ok || fail "a refused convert wrote its output"
# usage errors
expect_rc 2 "$GOPT" graph
expect_rc 2 "$GOPT" graph info
expect_rc 2 "$GOPT" graph info "$EX" --bogus
expect_err "unknown option '--bogus'"
expect_rc 2 "$GOPT" graph frobnicate
finish
