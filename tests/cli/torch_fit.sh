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
# saved figures: a GPU fit and its judgement redone from rows (no GPU, no PyTorch run); the fit is
# "overlapped" and the simulator reads it; bad rows exit 2
H="$SRC/profiles/h200-cuda-measured.json"
"$PY" - "$SRC/profiles/framework-steps/h200-pytorch-train.json" "$TMP/rows.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["rows"] = [r for r in d["rows"] if r["model"] in ("dlrm_small", "lstm_lm")]
json.dump(d, open(sys.argv[2], "w"))
PYEOF
expect_rc 0 "$PY" "$SRC/tools/torch_fit.py" --device cuda --profile "$H" --rows "$TMP/rows.json" -o "$TMP/gpu.json" \
  --gopt "$GOPT"
expect_out "^op_overhead [0-9.]* us per forward or optimizer op"
grep -q '"dispatch": "overlapped"' "$TMP/gpu.json" && ok || fail "the GPU fit is not overlapped"
expect_rc 0 "$GOPT" profile show "$TMP/gpu.json"
expect_out "dispatched while the device runs"
expect_rc 0 "$PY" "$SRC/tools/torch_fit.py" --device cuda --profile "$H" --evaluate "$TMP/gpu.json" --rows "$TMP/rows.json" \
  --gopt "$GOPT"
expect_out "median |error| after: .* by split, against the fastest: train "
echo '{"rows": []}' >"$TMP/empty.json"
expect_rc 2 "$PY" "$SRC/tools/torch_fit.py" --device cuda --profile "$H" --rows "$TMP/empty.json" -o "$TMP/y.json" --gopt "$GOPT"
expect_err "empty.json: expected an object"
finish
