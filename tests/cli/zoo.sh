#!/bin/bash
# zoo.sh GOPT SOURCE_DIR: `gopt graph gen` end to end: every family at a small
# size, the paper's largest settings, synthetic reproducibility byte for byte,
# refused options (exit 2, nothing written), and `gopt graph info` clean on
# every generated and shipped graph.
set -u
GOPT=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() { # expect_rc RC CMD...: run CMD, check its exit code
    local want=$1; shift
    "$@" > "$T/out" 2> "$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || { cat "$T/out" "$T/err" >&2; fail "exit $rc, want $want: $*"; }
}

expect_rc 0 "$GOPT" graph gen --help
grep -q "gen synthetic" "$T/out" || fail "graph --help does not describe gen"
expect_rc 0 "$GOPT" graph gen --list
for f in rnnlm gnmt transformer_xl inception_v3 amoebanet wavenet resnet; do
    grep -q "^$f " "$T/out" || fail "--list lacks $f"
done

# every family, small
expect_rc 0 "$GOPT" graph gen rnnlm --layers 2 --batch 4 --seq 5 -o "$T/rnnlm.graphml.gz"
expect_rc 0 "$GOPT" graph gen gnmt --layers 2 --batch 4 --seq 5 -o "$T/gnmt.graphml.gz"
expect_rc 0 "$GOPT" graph gen transformer_xl --layers 2 --batch 2 --seq 128 -o "$T/txl.graphml"
expect_rc 0 "$GOPT" graph gen inception_v3 --batch 2 -o "$T/inception.graphml.gz"
expect_rc 0 "$GOPT" graph gen amoebanet --layers 1 --batch 1 --seq 64 -o "$T/amoeba.graphml.gz"
expect_rc 0 "$GOPT" graph gen wavenet --layers 10 --batch 1 --seq 500 --optimizer sgd -o "$T/wavenet.graphml.gz"
# AdamW with the gradients clipped to one global norm
expect_rc 0 "$GOPT" graph gen transformer_xl --layers 2 --batch 2 --seq 64 --optimizer adamw --clip-grad-norm 1.0 -o "$T/txl_aw.graphml"
grep -q "ApplyAdamW" "$T/txl_aw.graphml" || fail "no AdamW update ops"
grep -q "clip_by_global_norm/GlobalNorm" "$T/txl_aw.graphml" || fail "no global norm"
expect_rc 0 "$GOPT" graph gen resnet --layers 18 --batch 2 --seq 64 -o "$T/resnet.graphml.gz"
# the largest settings of the paper
expect_rc 0 "$GOPT" graph gen gnmt --layers 8 -o "$T/gnmt8.graphml.gz"
expect_rc 0 "$GOPT" graph gen transformer_xl --layers 8 -o "$T/txl8.graphml.gz"
for g in "$T"/*.graphml*; do
    expect_rc 0 "$GOPT" graph info --json "$g"
done
n=$("$GOPT" graph info --json "$T/gnmt8.graphml.gz" | sed -n 's/.*"nodes": \([0-9]*\).*/\1/p')
[ "$n" -ge 40000 ] && [ "$n" -le 80000 ] || fail "gnmt 8 layers has $n nodes"

# synthetic: same seed, same bytes; another seed, other bytes
expect_rc 0 "$GOPT" graph gen synthetic --count 4 --seed 9 -o "$T/s1"
expect_rc 0 "$GOPT" graph gen synthetic --count 4 --seed 9 -o "$T/s2"
expect_rc 0 "$GOPT" graph gen synthetic --count 4 --seed 10 -o "$T/s3"
[ "$(ls "$T/s1" | wc -l)" = 4 ] || fail "synthetic wrote $(ls "$T/s1" | wc -l) files"
cmp -s "$T/s1/synth_00000.graphml.gz" "$T/s2/synth_00000.graphml.gz" || fail "synthetic not reproducible"
diff -r "$T/s1" "$T/s2" > /dev/null || fail "synthetic directories differ"
cmp -s "$T/s1/synth_00000.graphml.gz" "$T/s3/synth_00000.graphml.gz" && fail "seeds 9 and 10 gave the same graph"
for g in "$T"/s1/*.graphml.gz; do expect_rc 0 "$GOPT" graph info "$g"; done
expect_rc 0 "$GOPT" graph gen synthetic --count 2 --seed 1 --kind grid --nodes 500 -o "$T/s4"
for k in transformer recsys unet; do
  expect_rc 0 "$GOPT" graph gen synthetic --count 1 --seed 2 --kind $k --nodes 500 -o "$T/s4$k"
  "$GOPT" graph info --json "$T/s4$k/synth_00000.graphml.gz" | grep -q "\"family\": \"$k\"" || fail "--kind $k drew another kind"
done
# tables: asked for by name (all never draws it), files and graphs named by --prefix
expect_rc 0 "$GOPT" graph gen synthetic --count 2 --seed 2 --kind tables --prefix tables -o "$T/s4tables"
[ "$(ls "$T/s4tables")" = "$(printf 'tables_00000.graphml.gz\ntables_00001.graphml.gz')" ] || fail "--prefix tables: files $(ls "$T/s4tables")"
"$GOPT" graph info --json "$T/s4tables/tables_00001.graphml.gz" > "$T/out"
grep -q '"family": "tables"' "$T/out" || fail "--kind tables drew another kind"
grep -q '"name": "tables_00001"' "$T/out" || fail "--prefix tables: the graph is not named tables_00001"
expect_rc 2 "$GOPT" graph gen synthetic --count 1 --seed 2 --prefix 'a/b' -o "$T/s5"
grep -q "option --prefix: 'a/b'" "$T/err" || fail "no message for a bad prefix"
expect_rc 2 "$GOPT" graph gen gnmt --prefix x -o "$T/x.graphml.gz"
# --kind all draws the new kinds too; any (the default) only the first four
expect_rc 0 "$GOPT" graph gen synthetic --count 12 --seed 3 --kind all --nodes 300 -o "$T/s4all"
for g in "$T"/s4all/*.graphml.gz; do "$GOPT" graph info --json "$g"; done | grep -Eq '"family": "(transformer|recsys|unet)"' \
  || fail "--kind all drew no transformer, recsys or unet graph"

# refused: exit 2, a message naming the value, no file
expect_rc 2 "$GOPT" graph gen vgg -o "$T/x.graphml.gz"
grep -q "unknown family 'vgg'" "$T/err" || fail "no message for an unknown family"
expect_rc 2 "$GOPT" graph gen gnmt --layers 0 -o "$T/x.graphml.gz"
expect_rc 2 "$GOPT" graph gen gnmt --batch -4 -o "$T/x.graphml.gz"
expect_rc 2 "$GOPT" graph gen gnmt --seq abc -o "$T/x.graphml.gz"
expect_rc 2 "$GOPT" graph gen gnmt --layers 4000 --seq 100000 -o "$T/x.graphml.gz"
grep -q "over the limit" "$T/err" || fail "no message for a graph too large"
expect_rc 2 "$GOPT" graph gen resnet --layers 42 -o "$T/x.graphml.gz"
expect_rc 2 "$GOPT" graph gen inception_v3 --seq 30 -o "$T/x.graphml.gz"
expect_rc 2 "$GOPT" graph gen gnmt --optimizer lamb -o "$T/x.graphml.gz"
expect_rc 2 "$GOPT" graph gen gnmt --optimizer rmsprop -o "$T/x.graphml.gz"
grep -q "not one of sgd, momentum, adam, adamw" "$T/err" || fail "no message for an optimizer gen does not build"
expect_rc 2 "$GOPT" graph gen gnmt --clip-grad-norm 0 -o "$T/x.graphml.gz"
expect_rc 2 "$GOPT" graph gen synthetic --count 2 --layers 3 --clip-grad-norm 1 -o "$T/s5"
expect_rc 2 "$GOPT" graph gen gnmt -o "$T/x.txt"
expect_rc 2 "$GOPT" graph gen gnmt
expect_rc 2 "$GOPT" graph gen synthetic -o "$T/s5"
expect_rc 2 "$GOPT" graph gen synthetic --count 0 --seed 1 -o "$T/s5"
expect_rc 2 "$GOPT" graph gen synthetic --count 2 --kind blob -o "$T/s5"
grep -q "'blob' is not one of any, all, layered, cells, chain, grid, transformer, recsys, unet, tables" "$T/err" || fail "no message for an unknown kind"
expect_rc 2 "$GOPT" graph gen synthetic --count 2 --nodes 50 -o "$T/s5"
expect_rc 2 "$GOPT" graph gen synthetic --count 2 --layers 3 -o "$T/s5"
[ -e "$T/x.graphml.gz" ] && fail "a refused command wrote a file"
[ -e "$T/s5" ] && fail "a refused synthetic command created its directory"

# the shipped PyTorch exports
for g in "$SRC"/graphs/real/*.graphml.gz; do expect_rc 0 "$GOPT" graph info "$g"; done
echo "zoo.sh: ok"
