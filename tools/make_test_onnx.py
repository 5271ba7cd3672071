#!/usr/bin/python3
"""make_test_onnx.py: write the small ONNX models that tests/test_onnx.c,
tests/cli/onnx.sh and the fuzz corpus use, and the figures that
tools/export_torch.py reports for the same PyTorch models.

Models exported by torch.onnx.export (Debian's python3-torch; the `onnx`
package is not needed):
  cnn.onnx           conv/bn/relu/pool/conv/global-pool/linear, batch 2, training mode
  cnn_noweights.onnx the same without weights (export_params=False)
  transformer.onnx   one nn.TransformerEncoderLayer + embedding + linear head
  lstm.onnx          embedding + 2-layer LSTM + linear head
  gru.onnx           embedding + bidirectional GRU + linear head (parameter bytes only)
  deconv.onnx        ConvTranspose, Expand, Einsum (parameter bytes only)
Each torch model's figures from tools/export_torch.py (forward FLOPs, i.e. the
fwd phase up to and including the loss, and param_bytes for the optimizer
named) go to NAME.expected.json.

Models written by hand with the small protobuf writer below:
  ext_mlp.onnx (+ ext_mlp.weights)   weights in an external data file
  bad_ext_missing.onnx               its external data file does not exist
  bad_cycle.onnx, bad_missing_input.onnx, bad_unknown_op.onnx,
  bad_truncated.onnx (half of cnn.onnx), bad_not_protobuf.onnx,
  long_names.onnx                    four nodes sharing one 400-character name
  value_info.onnx, bad_no_shape.onnx a Reshape by a runtime shape: value_info gives its output (or not)
  bad_wide_concat.onnx               a Concat of 300 inputs (at most 255 are supported)

    /usr/bin/python3 tools/make_test_onnx.py tests/data/onnx
    /usr/bin/python3 tools/make_test_onnx.py --torchvision resnet18 -- DIR   # docs/zoo.md's example
"""
import argparse
import json
import os
import struct
import sys
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

warnings.filterwarnings("ignore")
OPSET = 17


# ---- the torch models ------------------------------------------------------------------------
class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class SmallTransformer(nn.Module):
    def __init__(self, vocab=100, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.layer(self.emb(ids)))


class SmallLSTM(nn.Module):
    def __init__(self, vocab=100, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.lstm = export_torch.LSTM(hidden, hidden, 2)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        out, _ = self.lstm(self.emb(ids))
        return self.head(out)


class SmallGRU(nn.Module):
    """Bidirectional GRU (ONNX GRU, linear_before_reset=1)."""

    def __init__(self, vocab=50, hidden=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, 16)
        self.gru = nn.GRU(16, hidden, bidirectional=True)
        self.head = nn.Linear(2 * hidden, vocab)

    def forward(self, ids):
        return self.head(self.gru(self.emb(ids))[0])


class Deconv(nn.Module):
    """ConvTranspose, Einsum against a weight, Expand/Where shape arithmetic, a zero-rate Dropout."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(3, 4, 4, stride=2, padding=1)
        self.w = nn.Parameter(torch.randn(4, 10) * 0.1)
        self.cls = nn.Parameter(torch.zeros(1, 4))

    def forward(self, x):
        y = nn.functional.dropout(torch.relu(self.up(x)), 0.0, True).mean(dim=(2, 3))  # (B, 4)
        y = y + self.cls.expand(x.shape[0], -1)
        return torch.einsum("bc,cn->bn", y, self.w)


def ids(*shape, vocab=100):
    return torch.randint(0, vocab, shape)


MODELS = {  # name: (model, inputs, labels, optimizer)
    "cnn": (SmallCNN, lambda: (torch.randn(2, 3, 16, 16),), lambda: ids(2, vocab=10), "momentum"),
    "transformer": (SmallTransformer, lambda: (ids(2, 8),), lambda: ids(2, 8), "adam"),
    "lstm": (SmallLSTM, lambda: (ids(6, 2),), lambda: ids(6, 2), "sgd"),
}


# Models whose figures are the parameters alone (export_torch cannot trace nn.GRU's cached weights).
PARAM_ONLY = {
    "gru": (SmallGRU, lambda: (ids(4, 2, vocab=50),), "sgd"),
    "deconv": (Deconv, lambda: (torch.randn(2, 3, 8, 8),), "adam"),
}


def export_onnx(model, inputs, path, **kw):
    model.train()
    torch.onnx.export(model, inputs, path, opset_version=OPSET, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, **kw)


def exporter_figures(model, inputs, labels, name, optimizer):
    g = export_torch.export_module(model, export_torch.xent, (*inputs, labels), name, "test", optimizer)
    fwd = sum(n["flops"] for n in g["nodes"] if n["phase"] == "fwd")
    return {"model": name, "optimizer": optimizer, "fwd_flops": fwd,
            "param_bytes": sum(n["param_bytes"] for n in g["nodes"]),
            "flops": sum(n["flops"] for n in g["nodes"]), "nodes": len(g["nodes"]),
            "source": "tools/export_torch.py export_module, torch " + torch.__version__}


def torch_models(out):
    for name, (cls, inputs, labels, optimizer) in MODELS.items():
        torch.manual_seed(0)
        model, x, y = cls(), inputs(), labels()
        export_onnx(model, x, os.path.join(out, name + ".onnx"))
        if name == "cnn":
            export_onnx(model, x, os.path.join(out, "cnn_noweights.onnx"), export_params=False)
        fig = exporter_figures(model, x, y, name, optimizer)
        with open(os.path.join(out, name + ".expected.json"), "w") as f:
            json.dump(fig, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{name}: exporter fwd {fig['fwd_flops']:.0f} FLOPs, param_bytes {fig['param_bytes']:.0f} ({optimizer})")
    for name, (cls, inputs, optimizer) in PARAM_ONLY.items():
        torch.manual_seed(0)
        model, x = cls(), inputs()
        export_onnx(model, x, os.path.join(out, name + ".onnx"))
        nstate = export_torch.OPTIMIZERS[optimizer]
        fig = {"model": name, "optimizer": optimizer, "source": "torch parameters x (1 + optimizer slots)",
               "param_bytes": float(sum(4 * p.numel() for p in model.parameters()) * (1 + nstate))}
        with open(os.path.join(out, name + ".expected.json"), "w") as f:
            json.dump(fig, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{name}: param_bytes {fig['param_bytes']:.0f} ({optimizer})")


# ---- a minimal protobuf writer for hand-made models ---------------------------------------------
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 2:
        data = payload.encode() if isinstance(payload, str) else payload
        return key + varint(len(data)) + data
    raise ValueError(wire)


def msg(*parts):
    return b"".join(parts)


def value_info(name, dims, elem=1):  # ValueInfoProto{name=1, type=2{tensor_type=1{elem_type=1, shape=2{dim=1{dim_value=1}}}}}
    shape = msg(*[field(1, 2, field(1, 0, d)) for d in dims])
    return msg(field(1, 2, name), field(2, 2, field(1, 2, msg(field(1, 0, elem), field(2, 2, shape)))))


def node(op, ins, outs, name):  # NodeProto{input=1, output=2, name=3, op_type=4}
    return msg(*[field(1, 2, i) for i in ins], *[field(2, 2, o) for o in outs], field(3, 2, name), field(4, 2, op))


def tensor(name, dims, location=None, offset=0):  # TensorProto{dims=1, data_type=2, name=8, raw_data=9, external_data=13, data_location=14}
    parts = [field(1, 0, d) for d in dims] + [field(2, 0, 1), field(8, 2, name)]
    n = 1
    for d in dims:
        n *= d
    if location is None:
        parts.append(field(9, 2, struct.pack(f"<{n}f", *([0.01] * n))))
    else:
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(4 * n))):
            parts.append(field(13, 2, msg(field(1, 2, k), field(2, 2, v))))
        parts.append(field(14, 0, 1))
    return msg(*parts)


def model(nodes, inits, inputs, outputs, extra=()):  # ModelProto{ir_version=1, graph=7, opset_import=8}; GraphProto{node=1, name=2, initializer=5, input=11, output=12}
    g = msg(*[field(1, 2, n) for n in nodes], field(2, 2, "hand"), *[field(5, 2, t) for t in inits],
            *[field(11, 2, v) for v in inputs], *[field(12, 2, v) for v in outputs], *extra)
    return msg(field(1, 0, 8), field(7, 2, g), field(8, 2, field(2, 0, OPSET)))


def mlp(location, missing_input=False, cycle=False, unknown=False, long_names=False):
    """x (4, 8) -> MatMul w1 (8, 16) -> Add b1 -> Relu -> MatMul w2 (16, 5) -> logits (4, 5);
    long_names: every node named the same 400 characters."""
    ext = location is not None
    inits = [tensor("w1", [8, 16], location if ext else None, 0), tensor("b1", [16], location if ext else None, 512),
             tensor("w2", [16, 5], location if ext else None, 576)]
    nodes = [node("MatMul", ["x", "w1"], ["h0"], "fc1/MatMul"), node("Add", ["h0", "b1"], ["h1"], "fc1/Add"),
             node("CustomAct" if unknown else "Relu", ["h1" if not cycle else "h3"], ["h2"], "act"),
             node("MatMul", ["h2" if not missing_input else "ghost", "w2"], ["logits"], "fc2/MatMul")]
    if cycle:
        nodes.append(node("Relu", ["h2"], ["h3"], "loop"))
    if long_names:
        nodes = [node(op, ins, outs, "n" * 400) for op, ins, outs in
                 (("MatMul", ["x", "w1"], ["h0"]), ("Add", ["h0", "b1"], ["h1"]), ("Relu", ["h1"], ["h2"]),
                  ("MatMul", ["h2", "w2"], ["logits"]))]
    return model(nodes, inits, [value_info("x", [4, 8])], [value_info("logits", [4, 5])])


def reshape_model(with_value_info):
    """x (4, 8) -> MatMul w1 (8, 16) -> Reshape by a runtime shape input -> MatMul w2 (8, 5): the
    Reshape's output shape (8, 8) is known only from value_info."""
    inits = [tensor("w1", [8, 16]), tensor("w2", [8, 5])]
    nodes = [node("MatMul", ["x", "w1"], ["h0"], "fc1"), node("Reshape", ["h0", "shape"], ["h1"], "reshape"),
             node("MatMul", ["h1", "w2"], ["logits"], "fc2")]
    m = model(nodes, inits, [value_info("x", [4, 8]), value_info("shape", [2], elem=7)],
              [value_info("logits", [8, 5])])
    if with_value_info:  # GraphProto.value_info = 13, appended to the graph message (field 7 of ModelProto)
        m = model(nodes, inits, [value_info("x", [4, 8]), value_info("shape", [2], elem=7)],
                  [value_info("logits", [8, 5])], extra=[field(13, 2, value_info("h1", [8, 8]))])
    return m


def hand_models(out):
    def write(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

    write("ext_mlp.onnx", mlp("ext_mlp.weights"))
    write("ext_mlp.weights", struct.pack("<144f", *([0.01] * 144)))  # 128 + 16 floats at 0 and 512, then 80 at 576
    with open(os.path.join(out, "ext_mlp.weights"), "ab") as f:
        f.write(struct.pack("<80f", *([0.01] * 80)))
    write("bad_ext_missing.onnx", mlp("no_such_file.weights"))
    write("bad_cycle.onnx", mlp(None, cycle=True))
    write("bad_missing_input.onnx", mlp(None, missing_input=True))
    write("bad_unknown_op.onnx", mlp(None, unknown=True))
    write("long_names.onnx", mlp(None, long_names=True))
    wide = [node("Concat", ["x"] * 300, ["cat"], "wide_concat")]
    wide[0] += field(5, 2, msg(field(1, 2, "axis"), field(3, 0, 1), field(20, 0, 2)))  # AttributeProto{name=1, i=3, type=20 INT}
    wide.append(node("MatMul", ["cat", "w"], ["logits"], "fc"))
    write("bad_wide_concat.onnx", model(wide, [tensor("w", [2400, 5])], [value_info("x", [4, 8])],
                                        [value_info("logits", [4, 5])]))
    write("value_info.onnx", reshape_model(True))
    write("bad_no_shape.onnx", reshape_model(False))
    with open(os.path.join(out, "cnn.onnx"), "rb") as f:
        data = f.read()
    write("bad_truncated.onnx", data[:len(data) // 2])
    write("bad_not_protobuf.onnx", b"this is a text file, not an ONNX model\n" * 4)


def torchvision_model(out, name, batch, optimizer):
    """A torchvision model (random weights, no weights in the file), and export_torch's figures for it."""
    import torchvision
    torch.manual_seed(0)
    kw = {"aux_logits": False, "init_weights": False} if name == "inception_v3" else {}
    m = getattr(torchvision.models, name)(**kw)
    side = 299 if name == "inception_v3" else 224
    x = torch.randn(batch, 3, side, side)
    path = os.path.join(out, name + ".onnx")
    export_onnx(m, (x,), path, export_params=False)
    fig = exporter_figures(m, (x,), torch.zeros(batch, dtype=torch.long), name, optimizer)
    with open(os.path.join(out, name + ".expected.json"), "w") as f:
        json.dump(fig, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{path}: exporter fwd {fig['fwd_flops']:.0f} FLOPs, param_bytes {fig['param_bytes']:.0f} ({optimizer}), "
          f"total {fig['flops']:.0f} FLOPs, {fig['nodes']} nodes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output folder")
    ap.add_argument("--torchvision", metavar="MODEL", nargs="+",
                    help="instead: these torchvision models (224x224, 299 for inception_v3; no weights)")
    ap.add_argument("--batch", type=int, default=32, help="with --torchvision (default 32)")
    ap.add_argument("--optimizer", choices=sorted(export_torch.OPTIMIZERS), default="momentum",
                    help="with --torchvision: for the exporter's param_bytes (default momentum)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.torchvision:
        for name in a.torchvision:
            torchvision_model(a.out, name, a.batch, a.optimizer)
        return 0
    torch_models(a.out)
    hand_models(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
