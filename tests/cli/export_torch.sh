# tools/export_torch.py: any torchvision model by name (a video model and a detection model here,
# small), a model whose ops are 3-D pooling, leaky ReLU, sin and an int repeat_interleave (classed,
# none left `other`; traced though fake tensors cannot shape aten.repeat_interleave.Tensor), the
# eager trace (the same graph as make_fx's where both trace; a step that reads values, which
# make_fx refuses), tied weights, an unused parameter and keyword arguments (Hugging Face's
# models), activation checkpointing (the forward run again after the gradient op before it, its
# memory saved), gradient clipping and AdamW, frozen parameters and LoRA, gradient accumulation
# (one micro-batch's activations at a time), and refusals (exit 2, naming the model and why).
# Skipped (77) where PyTorch is not installed. Each call imports torch (several seconds).
. "$(dirname "$0")/lib.bash"
PY=/usr/bin/python3
"$PY" -c 'import torch, torchvision' 2>/dev/null || { echo "skipped: no torch/torchvision for $PY"; exit 77; }
# a torchvision model of no --list entry, by name, at a small size; the file loads in gopt
expect_rc 0 "$PY" "$SRC/tools/export_torch.py" mc3_18 --batch 1 --seq 32 -o "$TMP/mc3.graphml.gz"
expect_out "mc3.graphml.gz: [0-9]* nodes, .* other 0.00%"
expect_rc 0 "$GOPT" graph info "$TMP/mc3.graphml.gz"
expect_out "mc3_18"
# a detection model by name (boxes as targets, traced eager): every op classed, the file loads
expect_rc 0 "$PY" "$SRC/tools/export_torch.py" ssdlite320_mobilenet_v3_large -o "$TMP/ssd.graphml.gz"
expect_out "ssd.graphml.gz: [0-9]* nodes, .* other 0.00%"
expect_rc 0 "$GOPT" graph info "$TMP/ssd.graphml.gz"
expect_out "family ssdlite"
# a diffusion U-Net of the catalogue (timestep embedding, GroupNorm, spatial attention), small
expect_rc 0 "$PY" "$SRC/tools/export_torch.py" diffusion_unet --batch 1 --seq 16 -o "$TMP/ddpm.graphml.gz"
expect_out "ddpm.graphml.gz: [0-9]* nodes, .* other 0.00%"
expect_rc 0 "$GOPT" graph info "$TMP/ddpm.graphml.gz"
expect_out "family diffusion"
# refusals: a quantized model (no training step) and an unknown name, both named
expect_rc 2 "$PY" "$SRC/tools/export_torch.py" quantized_resnet18 no_such_model -o "$TMP/x.graphml.gz"
expect_err "quantized_resnet18 (torchvision quantization model: int8 inference kernels"
expect_err "no_such_model (not in --list nor a torchvision"
[ -e "$TMP/x.graphml.gz" ] && fail "a refused export wrote its file" || ok
# --checkpoint: a ResNet's bottlenecks run again in the backward; a model without repeated blocks
# is refused (exit 2, named, nothing written) while the others of the command are exported
expect_rc 2 "$PY" "$SRC/tools/export_torch.py" --checkpoint resnet18 alexnet --batch 2 --seq 32 -o "$TMP"
expect_out "resnet18.graphml.gz: [0-9]* nodes"
expect_err "alexnet: --checkpoint: no repeated block"
[ -e "$TMP/alexnet.graphml.gz" ] && fail "a refused export wrote its file" || ok
expect_rc 2 "$PY" "$SRC/tools/export_torch.py" resnet18 --clip-grad-norm 0 -o "$TMP/x.graphml.gz"
expect_err "clip-grad-norm 0.0 must be positive"
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
# the eager trace records what make_fx traces: the same nodes and edges, both optimizers
m, inp = M(), (torch.randn(2, 3, 4, 8, 8), torch.zeros(2, dtype=torch.long))
for opt in ("adam", "momentum"):
    a = ex.export_module(m, ex.xent, inp, "m", "mine", opt, trace="fake")
    b = ex.export_module(m, ex.xent, inp, "m", "mine", opt, trace="eager")
    assert ex.export_module(m, ex.xent, inp, "m", "mine", opt) == a  # auto: fake where fake traces
    assert a["nodes"] == b["nodes"] and a["edges"] == b["edges"], opt
# a step that reads a value (.item(), nonzero): make_fx refuses it, the eager trace records it,
# the branch taken and the in-place op's reader wired to it
class D(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 5)
    def forward(self, x):
        keep = x[x[:, 0].nonzero().flatten()] if x.sum().item() > -1e9 else x
        y = self.fc(keep)
        y.mul_(2.0)
        return y
inp = (torch.randn(6, 4), torch.zeros(6, dtype=torch.long))
try:
    ex.export_module(D(), ex.xent, inp, "d", "mine", trace="fake")
    raise SystemExit("make_fx traced a step that reads values")
except SystemExit:
    raise
except Exception as e:
    assert ex._reads_values(e), e
d = ex.export_module(D(), ex.xent, inp, "d", "mine", "sgd", trace="eager")
assert ex.export_module(D(), ex.xent, inp, "d", "mine", "sgd") == d  # auto: eager after make_fx's refusal
ops = [n["op"] for n in d["nodes"]]
assert "nonzero" in ops and "mul_" in ops and "_local_scalar_dense" not in ops, ops
mul = ops.index("mul_")
readers = [t for s, t, _ in d["edges"] if s == mul]
assert readers and all(ops[t] != "addmm" for t in readers), readers
# torch.tensor(...) made in the step: a fresh tensor each time, a constant; never a dead tensor
# whose address it reuses (each multiply reads its own constant and the multiply before)
class T(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 5)
    def forward(self, x):
        for i in range(40):
            x = x * torch.tensor(1.0 + i / 100)
        return self.fc(x)
t = ex.export_module(T(), ex.xent, inp, "t", "mine", "sgd", trace="eager")
ops = [n["op"] for n in t["nodes"]]
fwd_mul = [i for i, n in enumerate(t["nodes"]) if n["op"] == "mul" and n["phase"] == "fwd"]
assert len(fwd_mul) == 40, len(fwd_mul)
for k, m in enumerate(fwd_mul):
    srcs = sorted(ops[s] for s, d_, _ in t["edges"] if d_ == m)
    assert srcs == (["Const", "Placeholder"] if k == 0 else ["Const", "mul"]), (k, srcs)
# Hugging Face's shapes: tied weights (the head reads the embedding's), a parameter the loss
# never reaches (no gradient, no update), the forward called with keyword arguments
class H(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.head, self.pooler = nn.Embedding(11, 6), nn.Linear(6, 11, bias=False), nn.Linear(6, 6)
        self.head.weight = self.emb.weight
    def forward(self, input_ids=None, labels=None):
        return F.cross_entropy(self.head(self.emb(input_ids)).flatten(0, 1), labels.flatten())
for trace in ("fake", "eager"):
    h = ex.export_module(H(), lambda fwd, ids: fwd(input_ids=ids, labels=ids), (torch.zeros(2, 5, dtype=torch.long),),
                         "h", "mine", "momentum", trace=trace)
    params = [n["name"] for n in h["nodes"] if n["cls"] == "param"]
    assert params == ["emb.weight", "pooler.weight", "pooler.bias"], params
    cols = {n["colocate"] for n in h["nodes"] if n["phase"] == "opt"}
    assert cols == {"emb.weight"}, cols  # one update, of the tied weight; none of the pooler
# activation checkpointing (torch.utils.checkpoint): the forward runs again inside the backward;
# make_fx and the eager trace agree, both forms (the reentrant one refuses torch.autograd.grad:
# its gradients through loss.backward()), also where autograd saved a Python number (0.5 * x);
# each recomputed op that reads no other recomputed op waits on the gradient op before it (an
# edge of 0 bytes); the files for gopt sim below
from torch.utils.checkpoint import checkpoint
class C(nn.Module):
    def __init__(self, ck, reentrant=False, act=nn.GELU):
        super().__init__()
        self.emb, self.fc, self.ck, self.re = nn.Linear(16, 64), nn.Linear(64, 5), ck, reentrant
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(64), nn.Linear(64, 256), act(), nn.Linear(256, 64))
                                    for _ in range(3))
    def forward(self, x):
        x = self.emb(x)
        for b in self.blocks:
            x = x + (checkpoint(b, x, use_reentrant=self.re) if self.ck else b(x))
        return self.fc(x.mean(1))
class Half(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(x))
inp = (torch.randn(32, 64, 16), torch.zeros(32, dtype=torch.long))
def recomputed(g):  # the forward ops in the backward; the second Linear's output is dead there
    return sorted(n["op"] for n in g["nodes"] if n["phase"] == "bwd" and n["op"] in ("native_layer_norm", "addmm", "gelu"))
for reentrant in (False, True):
    for act in (nn.GELU, Half):
        a = ex.export_module(C(True, reentrant, act), ex.xent, inp, "c", "mine", trace="fake")
        b = ex.export_module(C(True, reentrant, act), ex.xent, inp, "c", "mine", trace="eager")
        assert a["nodes"] == b["nodes"] and a["edges"] == b["edges"], (reentrant, act)
a = ex.export_module(C(True), ex.xent, inp, "c", "mine", trace="fake")
assert recomputed(a) == ["addmm"] * 3 + ["gelu"] * 3 + ["native_layer_norm"] * 3, recomputed(a)
assert recomputed(ex.export_module(C(False), ex.xent, inp, "c", "mine")) == []
ctl = [(s, t) for s, t, nb in a["edges"] if nb == 0]
assert ctl and all(a["nodes"][s]["phase"] == a["nodes"][t]["phase"] == "bwd" for s, t in ctl), ctl
# gradient clipping: a norm per gradient and one of those, in the optimizer phase, and every
# parameter's update (Adam's last op, a sub) reads the scale: none starts before the backward
# ends; adamw: one op a parameter more than adam (the decay)
c0 = ex.export_module(C(False), ex.xent, inp, "c", "mine", "adam")
c1 = ex.export_module(C(False), ex.xent, inp, "c", "mine", "adam", clip_grad_norm=1.0)
c2 = ex.export_module(C(False), ex.xent, inp, "c", "mine", "adamw")
nparam = sum(n["cls"] == "param" for n in c0["nodes"])
assert len(c2["nodes"]) == len(c0["nodes"]) + nparam
norms = [i for i, n in enumerate(c1["nodes"]) if n["op"] == "norm"]
assert len(norms) == nparam + 1 and all(c1["nodes"][i]["phase"] == "opt" for i in norms), norms
succ = {}
for s_, t_, _ in c1["edges"]:
    succ.setdefault(s_, []).append(t_)
seen, todo = set(), [norms[-1]]
while todo:
    for t_ in succ.get(todo.pop(), []):
        if t_ not in seen:
            seen.add(t_)
            todo.append(t_)
subs = [i for i, n in enumerate(c1["nodes"]) if n["phase"] == "opt" and n["op"] == "sub"]
assert len(subs) == nparam and all(i in seen for i in subs), (len(subs), nparam)
# frozen parameters (a frozen backbone, LoRA's base weights): traced on fake tensors like the
# rest, resident param nodes (param_bytes their bytes: no optimizer state) without an update;
# a model with nothing to train is refused
m = C(False)
for p_ in m.emb.parameters():
    p_.requires_grad_(False)
a = ex.export_module(m, ex.xent, inp, "f", "mine", trace="fake")
b = ex.export_module(m, ex.xent, inp, "f", "mine", trace="eager")
assert a["nodes"] == b["nodes"] and a["edges"] == b["edges"]
fz = {n["name"]: n for n in a["nodes"] if n["name"].startswith("emb.")}
assert sorted(fz) == ["emb.bias", "emb.weight"], sorted(fz)
assert all(n["cls"] == "param" and n["param_bytes"] == n["out_bytes"] > 0 for n in fz.values()), fz
assert not {n["colocate"] for n in a["nodes"] if n["phase"] == "opt"} & set(fz)
# LoRA: every weight frozen, each nn.Linear (8 here) a trainable rank-2 update: only those 16
# tensors carry Adam's state; no nn.Linear, nothing adapted
m = C(False)
assert ex.lora(m, 2) == 8 and ex.lora(nn.Sequential(nn.Conv2d(3, 4, 3)), 2) == 0
a = ex.export_module(m, ex.xent, inp, "l", "mine", trace="fake")
trained = sorted(n["name"].rsplit(".", 1)[1] for n in a["nodes"] if n["cls"] == "param" and n["param_bytes"] == 3 * n["out_bytes"])
assert trained == ["lora_a"] * 8 + ["lora_b"] * 8, trained
for p_ in m.parameters():
    p_.requires_grad_(False)
try:
    ex.export_module(m, ex.xent, inp, "f", "mine")
    raise SystemExit("a model with nothing to train exported")
except ValueError as e:
    assert "no trainable parameter" in str(e), e
# gradient accumulation over 4 micro-batches: each its forward and backward in turn (the summing
# in the backward), one update; the next forward waits on the backward before (0-byte edges)
mb = ex.export_module(C(False, act=Half), ex.xent, inp, "mb", "mine", micro_batches=4)
seq = [n["phase"] for n in mb["nodes"] if n["cls"] not in ("param", "input")]
runs = [p_ for i, p_ in enumerate(seq) if i == 0 or p_ != seq[i - 1]]
assert runs == ["fwd", "bwd"] * 4 + ["opt"], runs
assert len([n for n in mb["nodes"] if n["op"] == "addmm" and n["phase"] == "fwd"]) == 4 * 8
for bad in (0, 33):
    try:
        ex.export_module(C(False), ex.xent, inp, "mb", "mine", micro_batches=bad)
        raise SystemExit(f"{bad} micro-batches exported")
    except ValueError as e:
        assert "micro-batches" in str(e), e
ex.write_graphml(mb, f"{sys.argv[2]}/mb.graphml.gz")
for name, m in (("plain", C(False, act=Half)), ("ck", C(True, act=Half)), ("ckr", C(True, True, act=Half))):
    ex.write_graphml(ex.export_module(m, ex.xent, inp, name, "mine"), f"{sys.argv[2]}/{name}.graphml.gz")
print("ok", len(g["nodes"]), "nodes")
PYEOF
expect_rc 0 "$PY" "$TMP/m.py" "$SRC/tools" "$TMP"
expect_out "^ok [0-9]* nodes"
expect_err "d: the step reads tensor values (RuntimeError); tracing it eager"
# checkpointing's memory is seen: the checkpointed steps (both forms) peak lower than the plain one
peak() { [ -e "$TMP/$1.graphml.gz" ] &&
         "$GOPT" sim "$TMP/$1.graphml.gz" --profile "$SRC/profiles/v100-dgx1-x8.json" --devices 1 --json |
         "$PY" -c 'import json, sys; print(json.load(sys.stdin)["peak_memory_bytes"][0])'; }
plain=$(peak plain) ck=$(peak ck) ckr=$(peak ckr) mb=$(peak mb)
[ -n "$plain" ] && [ "$ck" -lt $((plain * 3 / 4)) ] && [ "$ckr" -lt $((plain * 3 / 4)) ] &&
    ok || fail "checkpointed peaks $ck / $ckr bytes, not below 3/4 of the plain step's $plain"
# and gradient accumulation's: one micro-batch's activations at a time
[ -n "$mb" ] && [ "$mb" -lt $((plain * 3 / 4)) ] && ok || fail "4 micro-batches peak $mb bytes, plain $plain"
finish
