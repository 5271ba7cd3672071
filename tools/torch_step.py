#!/usr/bin/python3
"""Measure PyTorch's real training step of a model the exporter knows, on this machine's CPU or GPU.

The step is exactly the one tools/export_torch.py traces into graphs/real/MODEL.graphml.gz
(the same model, inputs, loss, backward and optimizer update as tensor ops: export_torch's
make_step), run eagerly on one CPU thread (or on the GPU with --device cuda): W warm-up steps, then R timed
ones. Printed: the
median and spread of the wall-clock step, and the median and minimum of the thread CPU time
(the runtime's `cpu` and `cpu-min` clocks measure the same way; on a machine shared with other
jobs the CPU time is the steadier figure). Compare with
    gopt sim graphs/real/MODEL.graphml.gz --profile P --devices 1
and with gopt run of the same graph (docs/fidelity.md).

Usage: /usr/bin/python3 tools/torch_step.py MODEL [--batch B] [--seq T] [--reps R] [--warmup W]
                                             [--threads T] [--device cpu|cuda] [--json]
       /usr/bin/python3 tools/torch_step.py --list
--batch and --seq measure another size than the exporter's default (export the graph with the same
flags: tools/export_torch.py MODEL --batch B --seq T -o G). tools/torch_fit.py builds on
build_step() below.
Exit codes: 0 ok, 2 bad usage, 3 no torch on this machine.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def import_torch(tool):
    """(torch, export_torch), or None after telling why (the tools then exit 3)."""
    try:
        import torch
        import export_torch
    except ImportError as e:
        print(f"{tool}: PyTorch is not available here ({e}); Debian 12: apt-get install python3-torch",
              file=sys.stderr)
        return None
    return torch, export_torch


def build_step(ex, spec, batch, seq, device="cpu"):
    """(step, flat arguments) of the exporter's training step at this batch and seq: the same
    model, inputs, loss, backward and optimizer update that export_torch traces, on device."""
    import torch
    if device != "cpu":  # tensors the models make in forward (positions, masks) go there too
        torch.set_default_device(device)
    torch.manual_seed(0)
    model = spec.build(batch, seq).to(device)
    model.train()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    names = [n for n, _ in named]
    params = [p.detach().requires_grad_(True) for _, p in named]
    states = [torch.zeros_like(p) for p in params for _ in range(ex.OPTIMIZERS[spec.optimizer])]
    buffers = [b for _, b in model.named_buffers()]
    step = ex.make_step(model, spec.loss, names, spec.optimizer, mark=True)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in spec.inputs(batch, seq)]
    return step, params + states + buffers + inputs


def time_steps(step, flat, warmup, reps, sync=None):
    """Wall and thread CPU seconds of each of reps steps after warmup untimed ones (sync: waits
    for the device's queued work, before and after each step)."""
    walls, cpus = [], []
    for r in range(warmup + reps):
        if sync:
            sync()
        w0, c0 = time.perf_counter(), time.thread_time()
        step(*flat)
        if sync:
            sync()
        w1, c1 = time.perf_counter(), time.thread_time()
        if r >= warmup:
            walls.append(w1 - w0)
            cpus.append(c1 - c0)
    return walls, cpus


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="one of --list")
    ap.add_argument("--batch", type=int, help="batch size (default: the exporter's)")
    ap.add_argument("--seq", type=int, help="sequence length or image side (default: the exporter's)")
    ap.add_argument("--reps", type=int, default=3, help="timed steps (default 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where the step runs (default cpu; cuda: the first GPU, timed by wall clock)")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    ap.add_argument("--list", action="store_true", help="list the models")
    args = ap.parse_args(argv)
    mods = import_torch("torch_step.py")
    if mods is None:
        return 3
    torch, ex = mods
    table = ex.models()
    if args.list:
        for k, v in table.items():
            print(f"{k:14s} family {v.family}, optimizer {v.optimizer}")
        return 0
    if args.model not in table:
        ap.print_usage(sys.stderr)
        print(f"torch_step.py: need a model ({', '.join(table)})", file=sys.stderr)
        return 2
    if args.reps < 1 or args.warmup < 0 or args.threads < 1 or (args.batch or 1) < 1 or (args.seq or 1) < 1:
        print("torch_step.py: --reps >= 1, --warmup >= 0, --threads >= 1, --batch and --seq >= 1", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_step.py: --device cuda: this torch sees no GPU", file=sys.stderr)
        return 3
    torch.set_num_threads(args.threads)
    spec = table[args.model]  # export_torch.Spec
    optim = spec.optimizer
    batch, seq = args.batch or spec.batch, args.seq or spec.seq
    step, flat = build_step(ex, spec, batch, seq, args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else None
    walls, cpus = time_steps(step, flat, args.warmup, args.reps, sync)
    med = statistics.median(walls)
    out = {"model": args.model, "batch": batch, "seq": seq, "optimizer": optim, "threads": args.threads,
           "device": args.device if args.device == "cpu" else torch.cuda.get_device_name(0),
           "reps": args.reps,
           "torch": torch.__version__, "wall_median_s": med, "wall_spread": (max(walls) - min(walls)) / med,
           "cpu_median_s": statistics.median(cpus), "cpu_min_s": min(cpus), "walls_s": walls, "cpus_s": cpus}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{args.model} (batch {batch}, seq {seq}): PyTorch {torch.__version__} eager training step ({optim}) on {out['device']}, {args.threads} thread(s): "
              f"wall {1e3 * med:.1f} ms median of {args.reps} (spread {100 * out['wall_spread']:.0f}%), "
              f"thread CPU {1e3 * out['cpu_median_s']:.1f} ms median, {1e3 * out['cpu_min_s']:.1f} ms min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
