# tools/torch_step.py: the models it knows (the exporter's table: the tool read it as tuples after
# the exporter moved to Spec objects) and bad usage (exit 2). Skipped (77) where PyTorch is not
# installed. Each call imports torch (several seconds), so the cases are few.
. "$(dirname "$0")/lib.bash"
PY=/usr/bin/python3
"$PY" -c 'import torch, torchvision' 2>/dev/null || { echo "skipped: no torch/torchvision for $PY"; exit 77; }
expect_rc 0 "$PY" "$SRC/tools/torch_step.py" --list
expect_out "^seq2seq  *family gnmt, optimizer "
expect_out "^lstm_lm  *family rnnlm, optimizer sgd"
expect_rc 2 "$PY" "$SRC/tools/torch_step.py" no_such_model
expect_err "need a model"
finish
