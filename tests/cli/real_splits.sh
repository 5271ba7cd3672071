#!/bin/bash
# real_splits.sh GOPT SOURCE_DIR: graphs/real/splits.tsv is consistent with the
# shipped exports (every row names a file, every file has one row, splits are
# train, validation, test, holdout or holdout2, at least 10 validation models; tests/cli/zoo.sh loads
# every file), and
# tools/pretrain-data.sh and bench_transfer refuse bad arguments with exit 2 before writing anything;
# bench_transfer --files judges a graph of the user's own.
set -u
GOPT=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

S="$SRC/graphs/real/splits.tsv"
[ -r "$S" ] || fail "no $S"
grep -v '^#' "$S" | grep -v '^$' > "$T/rows"
awk -F'\t' 'NF < 3 || ($2 != "train" && $2 != "validation" && $2 != "test" && $2 != "holdout" && $2 != "holdout2") { print "line: " $0; bad = 1 } END { exit bad }' \
    "$T/rows" || fail "rows with a bad split or missing columns in $S"
cut -f1 "$T/rows" | sort | uniq -d > "$T/dup"
[ -s "$T/dup" ] && fail "models listed twice: $(tr '\n' ' ' < "$T/dup")"
nval=$(awk -F'\t' '$2 == "validation"' "$T/rows" | wc -l)
[ "$nval" -ge 10 ] || fail "only $nval validation models"
while IFS=$'\t' read -r model split family; do
    f="$SRC/graphs/real/$model.graphml.gz"
    [ -r "$f" ] || fail "$S: $model ($split) has no file"
done < "$T/rows"
for f in "$SRC"/graphs/real/*.graphml.gz; do
    m=$(basename "$f" .graphml.gz)
    cut -f1 "$T/rows" | grep -qx "$m" || fail "$f is in no split"
done

P="$SRC/tools/pretrain-data.sh"
bash "$P" > /dev/null 2>&1; [ $? = 2 ] || fail "pretrain-data.sh without OUT_DIR: not exit 2"
bash "$P" "$T/c" --synthetic x > /dev/null 2>&1; [ $? = 2 ] || fail "--synthetic x: not exit 2"
bash "$P" "$T/c" --tables 3x 2> "$T/err" > /dev/null; [ $? = 2 ] || fail "--tables 3x: not exit 2"
grep -q "tables '3x' is not a count" "$T/err" || fail "--tables 3x: no message naming it"
bash "$P" --help | grep -q "tables_NNNNN" || fail "pretrain-data.sh --help does not describe --tables"
bash "$P" "$T/c" --frobnicate > /dev/null 2>&1; [ $? = 2 ] || fail "unknown option: not exit 2"
bash "$P" "$T/c" --synthetic-kind blob 2> "$T/err" > /dev/null; [ $? = 2 ] || fail "--synthetic-kind blob: not exit 2"
grep -q "synthetic-kind 'blob' is not one of any, all," "$T/err" || fail "--synthetic-kind blob: no message naming it"
[ -e "$T/c" ] && fail "a refused run created its OUT_DIR"
bash "$P" --help | grep -q "OUT_DIR" || fail "pretrain-data.sh --help"
# bench_transfer refuses an unknown split, named, before it loads a graph
B="$(dirname "$GOPT")/bench/bench_transfer"
if [ -x "$B" ]; then
    "$B" --set holdout9 > /dev/null 2> "$T/err"; [ $? = 2 ] || fail "bench_transfer --set holdout9: not exit 2"
    grep -q "set 'holdout9' is not validation, train, test, holdout or holdout2" "$T/err" || fail "--set holdout9: no message naming it"
    printf 'resnet50\tholdout9\tresnet\n' > "$T/split.tsv"
    "$B" --split "$T/split.tsv" > /dev/null 2> "$T/err"; [ $? = 2 ] || fail "a split file with split holdout9: not exit 2"
    grep -q "$T/split.tsv:1: split 'holdout9'" "$T/err" || fail "a bad split row: no message naming file, line and value"
    # --files: the user's own graphs, named by their files; a missing one is named, exit 2
    "$B" --files "$T/none.graphml.gz" > /dev/null 2> "$T/err"; [ $? = 2 ] || fail "bench_transfer --files missing: not exit 2"
    grep -q "$T/none.graphml.gz" "$T/err" || fail "--files missing: no message naming the file"
    "$B" --files "$T/none.graphml.gz" --set test > /dev/null 2>&1; [ $? = 2 ] || fail "--files with --set: not exit 2"
    cp "$SRC/graphs/real/alexnet.graphml.gz" "$T/mine.graphml.gz"
    "$B" --files "$T/mine.graphml.gz" --profiles "$SRC/profiles/v100-dgx1-x8.json" --devices 2 --sa-budget 0 \
        --samples 0 > "$T/out" 2> "$T/err" || fail "bench_transfer --files: $(cat "$T/err")"
    grep -q "^mine  *164 " "$T/out" || fail "bench_transfer --files: no row for the given graph: $(cat "$T/out")"
    grep -q "1 graphs given (--files)" "$T/out" || fail "bench_transfer --files: header"
    grep -q "best of 0 [0-9.]*x (<= 0.97: the target is for 16 samples: not judged)" "$T/out" ||
        fail "bench_transfer --samples 0: the best-of-16 target judged: $(grep geometric "$T/out" | head -1)"
fi
echo "ok: $(wc -l < "$T/rows") models, $nval validation"
