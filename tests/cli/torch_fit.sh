# tools/torch_fit.py: a validation model is refused (fit on training models only), bad usage exits
# 2, and a tiny fit writes a profile gopt reads, with its efficiency factors and provenance.
# Skipped (77) where PyTorch is not installed. Each call imports torch (several seconds).
. "$(dirname "$0")/lib.bash"
PY=/usr/bin/python3
"$PY" -c 'import torch, torchvision' 2>/dev/null || { echo "skipped: no torch/torchvision for $PY"; exit 77; }
P="$SRC/profiles/cpu-epyc-2core-measured.json"
expect_rc 2 "$PY" "$SRC/tools/torch_fit.py" --profile "$P" -o "$TMP/x.json" --gopt "$GOPT" seq2seq
expect_err "'seq2seq' is in the validation split"
expect_rc 2 "$PY" "$SRC/tools/torch_fit.py" --profile "$P" --gopt "$GOPT" gpt_mini:1:16
expect_err "need models, -o or --evaluate"
expect_rc 2 "$PY" "$SRC/tools/torch_fit.py" --profile "$P" -o "$TMP/x.json" --gopt "$GOPT" gpt_mini:0
expect_err "BATCH >= 1"
# a fitted profile refuses a second fit (its factors would be fitted on themselves)
expect_rc 2 "$PY" "$SRC/tools/torch_fit.py" --profile "$SRC/profiles/cpu-epyc-2core-pytorch.json" -o "$TMP/x.json" \
  --gopt "$GOPT" gpt_mini:1:16
expect_err "has efficiency factors already"
OPENBLAS_NUM_THREADS=1 expect_rc 0 "$PY" "$SRC/tools/torch_fit.py" --profile "$P" -o "$TMP/fit.json" --gopt "$GOPT" \
  --reps 1 gpt_mini:1:16
expect_out "^gemm  *[0-9.]*  "
expect_rc 0 "$GOPT" profile show "$TMP/fit.json"
expect_out "^efficiency  gemm "
expect_out "^fresh output 1 MiB "
grep -q '"fresh_output": \[' "$TMP/fit.json" && ok || fail "no fresh_output rows in the fitted profile"
grep -q '"gpt_mini batch 1 seq 16"' "$TMP/fit.json" && ok || fail "no provenance in the fitted profile"
finish
