# gopt graph import: ONNX models from tests/data/onnx (tools/make_test_onnx.py) in, training-step
# GraphML out; every bad file refused with exit 2 naming the file; bad usage exit 2.
. "$(dirname "$0")/lib.bash"
D="$SRC/tests/data/onnx"
expect_rc 0 "$GOPT" graph import --help
expect_out "import MODEL.onnx"
expect_out "unknown-as other"
"$GOPT" graph import "$D/cnn.onnx" -o "$TMP/probe.graphml" >/dev/null 2>"$TMP/err"
if [ $? -eq 3 ]; then # a build without protobuf-c: the verb says so, nothing else to test
  expect_err "no ONNX import"
  finish
  exit $?
fi
expect_rc 0 "$GOPT" graph import "$D/cnn.onnx" --optimizer momentum -o "$TMP/cnn.graphml.gz"
expect_out "cnn.graphml.gz: cnn, "
expect_rc 0 "$GOPT" graph info --json "$TMP/cnn.graphml.gz"
expect_out '"param_bytes": 43856'
expect_out '"family": "onnx"'
# the same model without weights: the same parameter bytes
expect_rc 0 "$GOPT" graph import "$D/cnn_noweights.onnx" --optimizer momentum -o "$TMP/nw.graphml"
expect_rc 0 "$GOPT" graph info --json "$TMP/nw.graphml"
expect_out '"param_bytes": 43856'
# external data, forward only, batch, other optimizers, the LSTM and the transformer
expect_rc 0 "$GOPT" graph import "$D/ext_mlp.onnx" --forward-only -o "$TMP/ext.graphml"
expect_rc 0 "$GOPT" graph info --json "$TMP/ext.graphml"
expect_out '"param_bytes": 896'
expect_rc 0 "$GOPT" graph import "$D/cnn.onnx" --batch 8 --optimizer rmsprop -o "$TMP/b8.graphml"
grep -q "ApplyRMSProp" "$TMP/b8.graphml" && ok || fail "no RMSProp update ops"
grep -q ">8x3x16x16<" "$TMP/b8.graphml" && ok || fail "--batch 8 did not set the input's batch"
expect_rc 0 "$GOPT" graph import "$D/cnn.onnx" --optimizer adamw --clip-grad-norm 1.0 -o "$TMP/aw.graphml"
grep -q "ApplyAdamW" "$TMP/aw.graphml" && ok || fail "no AdamW update ops"
grep -q "clip_by_global_norm/GlobalNorm" "$TMP/aw.graphml" && ok || fail "no global norm"
expect_rc 2 "$GOPT" graph import "$D/cnn.onnx" --forward-only --clip-grad-norm 1 -o "$TMP/x.graphml"
expect_err "exclude each other"
expect_rc 2 "$GOPT" graph import "$D/cnn.onnx" --clip-grad-norm -1 -o "$TMP/x.graphml"
expect_err "clip-grad-norm"
expect_rc 0 "$GOPT" graph import "$D/lstm.onnx" -o "$TMP/lstm.graphml.gz"
expect_rc 0 "$GOPT" graph import "$D/transformer.onnx" -o "$TMP/tr.graphml.gz"
# the imported step simulates
expect_rc 0 "$GOPT" graph info "$TMP/tr.graphml.gz"
expect_out "colocation groups"
# bad files: exit 2, the file named
for f in bad_truncated bad_not_protobuf bad_cycle bad_missing_input bad_ext_missing bad_unknown_op; do
  expect_rc 2 "$GOPT" graph import "$D/$f.onnx" -o "$TMP/bad.graphml"
  expect_err "$f.onnx"
  [ ! -e "$TMP/bad.graphml" ] && ok || fail "$f: an output file was written"
done
expect_err "op type 'CustomAct' is outside"
expect_rc 0 "$GOPT" graph import "$D/bad_unknown_op.onnx" --unknown-as other -o "$TMP/other.graphml"
expect_rc 0 "$GOPT" graph info "$TMP/other.graphml"
expect_out "other 2"
# bad usage
expect_rc 2 "$GOPT" graph import "$D/cnn.onnx"
expect_err "missing -o"
expect_rc 2 "$GOPT" graph import "$D/cnn.onnx" -o "$TMP/x.txt"
expect_err "must end in .graphml"
expect_rc 2 "$GOPT" graph import "$D/cnn.onnx" --optimizer lamb -o "$TMP/x.graphml"
expect_err "not one of sgd, momentum, adam, adamw, rmsprop"
expect_rc 2 "$GOPT" graph import "$D/cnn.onnx" --unknown-as zero -o "$TMP/x.graphml"
expect_rc 2 "$GOPT" graph import "$D/cnn.onnx" --batch 0 -o "$TMP/x.graphml"
expect_rc 2 "$GOPT" graph import "$TMP/none.onnx" -o "$TMP/x.graphml"
expect_err "none.onnx"
finish
