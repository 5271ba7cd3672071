#!/usr/bin/env bash
# Every regression input of the fuzz corpus (tests/fuzz/corpus/*/reg*) is refused by the
# command a user would run on it: exit 2, a message naming the file, no crash, exit 1 or
# wrong answer. (The fuzz harnesses replay the same files through the library: ctest
# fuzz_replay_*.) One file per class of issue 17; see docs/fuzzing.md.
source "$(dirname "$0")/lib.bash"
C="$SRC/tests/fuzz/corpus"
P="$SRC/profiles/v100-dgx1-x8.json"
G="$SRC/graphs/examples/mlp_train.graphml"
n=0
for f in "$C"/graphml/reg* "$C"/graphml_gz/reg*; do
  expect_rc 2 "$GOPT" graph info "$f" --json; expect_err "$(basename "$f")"
  case "$(basename "$f")" in reg1-*|reg4-*) # once a wrong answer from sim: refused there too
    expect_rc 2 "$GOPT" sim "$f" --profile "$P" --json; expect_err "$(basename "$f")" ;;
  esac
  n=$((n + 1))
done
for f in "$C"/profile/reg*; do
  expect_rc 2 "$GOPT" sim "$G" --profile "$f" --json; expect_err "$(basename "$f")"
  n=$((n + 1))
done
for f in "$C"/decisions/reg*; do
  expect_rc 2 "$GOPT" sim "$SRC/tests/fuzz/decisions-graph.graphml" --profile "$P" --devices 2 --decisions "$f"
  expect_err "$(basename "$f")"
  n=$((n + 1))
done
for f in "$C"/checkpoint/reg*; do
  expect_rc 2 "$GOPT" optimize "$G" --profile "$P" --devices 2 --method go --checkpoint "$f"
  expect_err "$(basename "$f")"
  n=$((n + 1))
done
# a .state travels with its checkpoint: PATH and PATH.state (resume-* files are read only by
# `train --resume`: the harness replays them)
for f in "$C"/state/reg*; do
  cp "$C/checkpoint/tiny.ckpt" "$TMP/t.ckpt"
  cp "$f" "$TMP/t.ckpt.state"
  expect_rc 2 "$GOPT" optimize "$G" --profile "$P" --devices 2 --method go --checkpoint "$TMP/t.ckpt"
  expect_err "t.ckpt.state"
  n=$((n + 1))
done
# the valid seeds are accepted: the refusals above are not blanket ones
expect_rc 0 "$GOPT" graph info "$C/graphml/mlp_train.graphml" --json
expect_rc 0 "$GOPT" sim "$SRC/tests/fuzz/decisions-graph.graphml" --profile "$P" --devices 2 --decisions "$C/decisions/valid.tsv"
cp "$C/checkpoint/tiny.ckpt" "$TMP/t.ckpt"
cp "$C/state/valid.state" "$TMP/t.ckpt.state"
expect_rc 0 "$GOPT" optimize "$G" --profile "$P" --devices 2 --method go --checkpoint "$TMP/t.ckpt"
# one prefix per layer: the method is named once
expect_rc 2 "$GOPT" optimize "$G" --profile "$P" --devices 2 --method go --checkpoint "$C/checkpoint/reg8-truncated.ckpt.gz"
expect_err "mlp_train.graphml: method go: checkpoint: .*reg8-truncated.ckpt.gz: truncated gzip stream"
grep -q "go: go\|method go: .*method go" "$TMP/err" && fail "a prefix is repeated: $(cat "$TMP/err")" || ok
[ "$n" -ge 39 ] && ok || fail "only $n regression inputs found"
finish
