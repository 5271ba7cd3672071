# tools/export_torch.py: any torchvision model by name (a video model here, small), a model whose
# ops are 3-D pooling, leaky ReLU, sin and an int repeat_interleave (classed, none left `other`; traced though fake
# tensors cannot shape aten.repeat_interleave.Tensor), and refusals (exit 2, naming the model and
# why). Skipped (77) where PyTorch is not installed. Each call imports torch (several seconds).
. "$(dirname "$0")/lib.bash"
PY=/usr/bin/python3
"$PY" -c 'import torch, torchvision' 2>/dev/null || { echo "skipped: no torch/torchvision for $PY"; exit 77; }
# a torchvision model of no --list entry, by name, at a small size; the file loads in gopt
expect_rc 0 "$PY" "$SRC/tools/export_torch.py" mc3_18 --batch 1 --seq 32 -o "$TMP/mc3.graphml.gz"
expect_out "mc3.graphml.gz: [0-9]* nodes, .* other 0.00%"
expect_rc 0 "$GOPT" graph info "$TMP/mc3.graphml.gz"
expect_out "mc3_18"
# refusals: a detection model (its step needs targets) and an unknown name, both named
expect_rc 2 "$PY" "$SRC/tools/export_torch.py" fasterrcnn_resnet50_fpn no_such_model -o "$TMP/x.graphml.gz"
expect_err "fasterrcnn_resnet50_fpn (torchvision detection model: its training step needs targets"
expect_err "no_such_model (not in --list nor a torchvision"
[ -e "$TMP/x.graphml.gz" ] && fail "a refused export wrote its file" || ok
# 3-D pooling, trilinear upsampling and an int repeat_interleave: classed, and the repeat traced as
# the same values (export_module through make_fx)
cat > "$TMP/m.py" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import torch, torch.nn as nn, torch.nn.functional as F
import export_torch as ex
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv3d(3, 4, 3, padding=1)
        self.pos = nn.Parameter(torch.zeros(2, 4))
        self.fc = nn.Linear(4, 5)
    def forward(self, x):
        y = F.max_pool3d(F.leaky_relu(self.c(x)), 2) + torch.sin(x[:, :1, :, :, :]).mean()
        y = F.interpolate(F.avg_pool3d(y, 2), scale_factor=2, mode="trilinear")
        y = F.adaptive_avg_pool3d(y, 1).flatten(1) + torch.repeat_interleave(self.pos, 2, dim=0).sum(0)
        return self.fc(y)
g = ex.export_module(M(), ex.xent, (torch.randn(2, 3, 4, 8, 8), torch.zeros(2, dtype=torch.long)), "m", "mine")
other = sorted({n["op"] for n in g["nodes"] if n["cls"] == "other"})
ops = {n["op"] for n in g["nodes"]}
assert not other, other
assert "repeat_interleave" not in " ".join(ops), ops
x = torch.randn(3, 4, 5)
for d in (0, 1, -1, None):
    assert torch.equal(ex._repeat_interleave(x, 3, d), ex._REPEAT_INTERLEAVE(x, 3, d)), d
print("ok", len(g["nodes"]), "nodes")
PYEOF
expect_rc 0 "$PY" "$TMP/m.py" "$SRC/tools"
expect_out "^ok [0-9]* nodes"
finish
