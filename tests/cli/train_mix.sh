# gopt train over several clusters: --profiles, --devices-range, --manifest.
# Usage errors exit 2 naming the option, file:line and value; a mixed run
# prints how many graphs each profile x device count got, resumes to the
# uninterrupted run's files, and a resume on other devices is refused.
. "$(dirname "$0")/lib.bash"
EX="$SRC/graphs/examples/mlp_train.graphml"
V100="$SRC/profiles/v100-dgx1-x8.json"
H100="$SRC/profiles/h100-nvswitch-x8.json"
export OPENBLAS_NUM_THREADS=1
NET="--hidden 8 --sage-layers 1 --attn-layers 1 --heads 2 --segment 8 --samples 4 --epochs 1 --threads 1 --quiet"
OUT="--steps 1 -o $TMP/x.ckpt"

expect_rc 0 "$GOPT" train --help
expect_out "--devices-range LO-HI"
expect_out "--manifest LIST"
# options
expect_rc 2 "$GOPT" train "$EX" --profiles "$V100,$TMP/nope.json" $OUT
expect_err "nope.json"
expect_rc 2 "$GOPT" train "$EX" --profiles "$V100,,$H100" $OUT
expect_err "an empty profile path"
expect_rc 2 "$GOPT" train "$EX" --profile "$V100" --profiles "$H100" $OUT
expect_err "give one of them"
expect_rc 2 "$GOPT" train "$EX" --profile "$V100" --devices 2 --devices-range 1-4 $OUT
expect_err "give one of them"
for r in 0-4 3-2 1-17 x 4- -3; do
  expect_rc 2 "$GOPT" train "$EX" --profiles "$V100" --devices-range "$r" $OUT
  expect_err "devices-range '$r'"
done
expect_rc 2 "$GOPT" train "$EX" --profiles "$V100,$H100" --devices-range 9-16 $OUT
expect_err "has 8 devices"
# manifests
mkdir -p "$TMP/m"
cp "$EX" "$TMP/m/a.graphml"
cp "$EX" "$TMP/m/b.graphml"
printf 'graph\tprofile\n' >"$TMP/m/nofile.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/nofile.tsv" --profile "$V100" $OUT
expect_err "nofile.tsv:1: the header has no 'file' column"
printf '# a comment\nfile\tprofile\tdevices\na.graphml\t%s\t2\nb.graphml\t\tabc\n' "$V100" >"$TMP/m/baddev.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/baddev.tsv" --profile "$V100" $OUT
expect_err "baddev.tsv:4: devices 'abc' is not a whole number in 1..16"
printf 'file\tprofile\tdevices\na.graphml\t%s\t12\n' "$V100" >"$TMP/m/many.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/many.tsv" $OUT
expect_err "many.tsv:2: devices 12: profile 'v100-dgx1-x8' has 8 devices"
printf 'file\tprofile\na.graphml\t%s/nope.json\n' "$TMP" >"$TMP/m/noprof.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/noprof.tsv" $OUT
expect_err "noprof.tsv:2: profile: .*nope.json"
printf 'file\tdevices\na.graphml\t2\n' >"$TMP/m/unassigned.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/unassigned.tsv" $OUT
expect_err "unassigned.tsv:2: .*a.graphml: no profile"
printf 'file\n\n' >"$TMP/m/empty.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/empty.tsv" --profile "$V100" $OUT
expect_err "no graphs listed"
printf 'file\nmissing.graphml\n' >"$TMP/m/missing.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/missing.tsv" --profile "$V100" $OUT
expect_err "missing.graphml"
[ ! -e "$TMP/x.ckpt" ] && ok || fail "a refused train wrote a checkpoint"

# a mixed run: a pinned to 2 V100s, b drawn from the two profiles on 1-3 devices
printf 'file\tsource\tprofile\tdevices\na.graphml\tx\t%s\t2\nb.graphml\ty\t\t\n' "$V100" >"$TMP/m/mix.tsv"
MIX="--manifest $TMP/m/mix.tsv --profiles $V100,$H100 --devices-range 1-3 --graphs-per-step 2 --imitate 1"
expect_rc 0 "$GOPT" train $MIX --steps 3 -o "$TMP/a.ckpt" ${NET/--quiet/}
expect_err "2 graphs by profile and device count"
expect_err "v100-dgx1-x8  *2 devices  *[12] graph"
expect_err "a.graphml (v100-dgx1-x8, 2 devices): reference"
grep -q '"devices": 2' "$TMP/a.ckpt.state" && grep -q '"profile_fnv64"' "$TMP/a.ckpt.state" && ok || fail "state lacks the graphs' clusters"
expect_rc 0 "$GOPT" train $MIX --steps 1 -o "$TMP/b.ckpt" $NET
expect_rc 0 "$GOPT" train $MIX --steps 3 -o "$TMP/b.ckpt" $NET --resume
cmp -s "$TMP/a.ckpt" "$TMP/b.ckpt" && ok || fail "resumed mixed checkpoint differs from the uninterrupted one"
cmp -s "$TMP/a.ckpt.state" "$TMP/b.ckpt.state" && ok || fail "resumed mixed state differs"
# the same run with every graph kept built: same checkpoint
expect_rc 0 "$GOPT" train $MIX --steps 3 -o "$TMP/c.ckpt" $NET --graph-cache 0
cmp -s "$TMP/a.ckpt" "$TMP/c.ckpt" && ok || fail "--graph-cache 0 changed the checkpoint"
expect_out "mlp_train .* v100-dgx1-x8 x2"
# one profile through --profiles is the --profile run
expect_rc 0 "$GOPT" train "$EX" --profile "$H100" --devices 3 --steps 2 -o "$TMP/p.ckpt" $NET
expect_rc 0 "$GOPT" train "$EX" --profiles "$H100" --devices 3 --steps 2 -o "$TMP/q.ckpt" $NET
cmp -s "$TMP/p.ckpt" "$TMP/q.ckpt" && cmp -s "$TMP/p.ckpt.state" "$TMP/q.ckpt.state" && ok || fail "--profiles P differs from --profile P"
# resuming with a's devices changed is refused, naming the graph and the field
sed 's/\t2$/\t3/' "$TMP/m/mix.tsv" >"$TMP/m/mix3.tsv"
expect_rc 2 "$GOPT" train ${MIX/mix.tsv/mix3.tsv} --steps 4 -o "$TMP/b.ckpt" $NET --resume
expect_err "graph 'mlp_train': devices was 2, now 3"
# --skip-unfit: a graph whose parameters fit no device of its cluster is left out, the others train
cat >"$TMP/tinymem.json" <<JSON
{"format":"gopt-profile","version":1,"name":"tinymem","provenance":{"source":"measured","machine":"test",
"date":"today","command":"train_mix.sh"},"devices":[{"name":"d","count":2,"kind":"gpu","model":"m",
"memory_bytes":1e3,"peak_flops":{"fp32":1e12},"memory_bandwidth":1e11,"launch_overhead":1e-6}],
"topology":{"kind":"uniform","bandwidth":1e9,"latency":1e-5}}
JSON
printf 'file\tprofile\na.graphml\t%s\nb.graphml\t%s\n' "$TMP/tinymem.json" "$V100" >"$TMP/m/unfit.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/unfit.tsv" --steps 1 -o "$TMP/u.ckpt" $NET
expect_err "a.graphml: graph 'mlp_train': no reference method"
expect_rc 0 "$GOPT" train --manifest "$TMP/m/unfit.tsv" --steps 1 -o "$TMP/u.ckpt" $NET --skip-unfit
expect_err "a.graphml: skipped (--skip-unfit)"
expect_err "1 of 2 graphs skipped"
expect_out "mean best/ref over 1 graphs"
expect_rc 0 "$GOPT" train --manifest "$TMP/m/unfit.tsv" --steps 2 -o "$TMP/u.ckpt" $NET --skip-unfit --resume
printf 'file\tprofile\na.graphml\t%s\n' "$TMP/tinymem.json" >"$TMP/m/unfit1.tsv"
expect_rc 2 "$GOPT" train --manifest "$TMP/m/unfit1.tsv" --steps 1 -o "$TMP/v.ckpt" $NET --skip-unfit
expect_err "every graph was skipped"
finish
