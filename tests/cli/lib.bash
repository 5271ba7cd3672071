# Shared helpers for tests/cli/*.sh (sourced): run as `bash SCRIPT GOPT_BINARY SOURCE_DIR`.
set -u
GOPT="$1"
SRC="$2"
TMP=$(mktemp -d /tmp/gopt_cli_XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILS=0
PASSES=0
ok() { PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
# expect_rc RC CMD... : run CMD, keep stdout in $TMP/out and stderr in $TMP/err
expect_rc() {
  local want=$1; shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local got=$?
  if [ "$got" -ne "$want" ]; then fail "exit $got (want $want): $*"; sed 's/^/  | /' "$TMP/err" | head -5; else ok; fi
}
expect_err() { grep -q -- "$1" "$TMP/err" && ok || { fail "stderr lacks '$1'"; sed 's/^/  | /' "$TMP/err" | head -5; }; }
expect_out() { grep -q -- "$1" "$TMP/out" && ok || { fail "stdout lacks '$1'"; head -5 "$TMP/out" | sed 's/^/  | /'; }; }
finish() { echo "$PASSES passed, $FAILS failed"; [ "$FAILS" -eq 0 ]; }
