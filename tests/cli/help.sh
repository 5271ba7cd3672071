# Every verb listed by `gopt --help` answers --help with exit 0; bad usage gives 2.
. "$(dirname "$0")/lib.bash"
expect_rc 0 "$GOPT" --help
expect_out "Usage: gopt VERB"
verbs=$(awk '/^Verbs:/{f=1;next} f&&/^  [a-z]/{print $1} f&&/^$/{exit}' "$TMP/out")
[ -n "$verbs" ] && ok || fail "no verbs listed"
for v in $verbs; do
  expect_rc 0 "$GOPT" "$v" --help
  [ -s "$TMP/out" ] && ok || fail "gopt $v --help printed nothing"
done
expect_rc 2 "$GOPT"
expect_rc 2 "$GOPT" no-such-verb
expect_err "unknown verb 'no-such-verb'"
expect_rc 0 "$GOPT" --version
finish
