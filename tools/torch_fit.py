#!/usr/bin/python3
"""Fit a CPU profile's per-op-kind efficiency factors to PyTorch's measured training steps.

The microbenchmarks behind a profile (gopt profile calibrate) time bare kernels; a framework's
step also pays what they miss: its own kernels' speed on real shapes (PyTorch's depthwise
convolutions, its views and copies), its dispatch and autograd per op. For each training model
given (graphs/real/splits.tsv: models of the validation split are refused, so that figures
reported on them stay out-of-sample), this tool

  1. exports the model's step at the given size (tools/export_torch.py, to a temporary file) and
     prices it with the profile, without any efficiency it already has (`gopt cost --json`:
     the time and count of ops per kind, on one device);
  2. runs PyTorch's eager step of the same model (tools/torch_step.py's build_step) on one
     thread: W warm-up steps, R steps timed by the thread's CPU time (the fastest is kept, as
     the calibrator and the runtime's cpu-min clock do), then P steps under torch.profiler, where
     the time of each aten op of a known kind (export_torch's ATEN_CLASS: the same table that
     classes the exported nodes; a convolution whose weight has one input channel is
     depthwise_conv) is added to its kind, its sub-ops included; what no such op covers (Python,
     the autograd engine, the profiler) is the framework's overhead;
  3. scales the profiled kinds by fastest CPU step / profiled step, so that kinds + overhead add
     up to the measured step.

First, unless --no-fresh, it measures what PyTorch pays for writing an op's output into freshly
allocated memory (fresh_output_curve: the allocator hands large blocks back to the system and
every new output's pages fault on first touch; about 5x an elementwise op's time above 32 MiB on
this machine): rows [output bytes, extra seconds] for outputs of 64 KiB to 256 MiB, which the
cost model adds to every kernel but data movement (docs/profiles.md, "Efficiency"). The fit below
then takes each kind's fresh-output seconds (the profile priced with the rows and without) out of
PyTorch's time of the kind before the ratio.

Then, over the models: factor[kind] = the median over models of (PyTorch's time of the kind, less
the profile's launch overhead per op) / (the profile's time of the kind, less the same), counting
a model where the kind is at least 2% of its profiled step (a kind counted in fewer than 2 models, or
than all of them when fewer are given, keeps factor 1); op_overhead = the median over models
of the overhead per forward or optimizer op of its graph (what eager PyTorch dispatches from
Python; the autograd engine runs the backward ops from C++: over the training models the
overhead per forward or optimizer op spread less than per kernel: docs/profiles.md). (Medians: a ratio of sums let one model decide, e.g. a
wide & deep model whose optimizer runs 4x slower in PyTorch than the elementwise table says.) The profile is written to -o (atomically) with an "efficiency" object: the factors, the
overhead, the models, the date, the command and the framework (docs/profiles.md, "Efficiency").

With --evaluate FITTED the tool fits nothing: for each model given (any split; report on the
ones the fit did not see) it exports the step, simulates it on one device with --profile and with
FITTED (`gopt sim --devices 1`), runs PyTorch's step (W warm-up, R timed by thread CPU time) and
prints both simulators' errors against PyTorch's fastest and median step, and their median |error|.

With --device cuda the same is done on the first GPU, for a profile of that GPU (gopt profile
calibrate --backend cuda): steps are timed by the wall clock around synchronized steps, each kind's
time is its kernels' GPU time under torch.profiler (not scaled: the profiler does not inflate it; a
kind given no kernel time is no evidence for its factor), there is no fresh-output probe, and the
graph of a model at the exporter's default size is graphs/real's (no export on the GPU machine).
The profile written says "dispatch": "overlapped" (the host dispatches while the GPU runs), and
op_overhead is fitted with the simulator itself (fit_dispatch: per model, by bisection, the value
at which `gopt sim` gives PyTorch's fastest step; the median over the models); each row's
overhead_s (the step less the kernels and the profile's launch per kernel) is printed, not fitted.

With --rows FILE (what an earlier run printed with --json: {framework, rows}) the fit, or with
--evaluate the judgement, is redone from those per-model figures without running PyTorch, so a
fit made on a lent GPU can be redone and checked on any machine with torch.

Usage: /usr/bin/python3 tools/torch_fit.py --profile P -o OUT.json [--name NAME] [--gopt build/gopt]
           [--reps R] [--warmup W] [--profiled P] [--no-fresh] [--device cpu|cuda] [--json] MODEL[:BATCH[:SEQ]]...
       /usr/bin/python3 tools/torch_fit.py --profile P --evaluate FITTED [--reps R] [--device cpu|cuda] [--json]
           MODEL[:BATCH[:SEQ]]...
       /usr/bin/python3 tools/torch_fit.py --device cuda --profile P (-o OUT.json | --evaluate FITTED) --rows FILE
Exit codes: 0 ok, 2 bad usage (unknown model, a validation model to fit, bad size), 3 no torch.
"""
import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
MIN_SHARE = 0.02  # a kind counts in a model's fit when it is at least this share of the profile's step
MIN_MODELS = 2  # a kind is fitted over at least this many models (all of them when fewer are given),
# else it keeps factor 1: one model's ratio can be anything (2026-11-28: reduction 0.00, its PyTorch
# time all fresh-output seconds)
KINDS = ("gemm", "conv", "depthwise_conv", "elementwise", "reduction", "data_movement", "other", "normalization",
         "optimizer")
NORMS = ("batchnorm", "layernorm", "groupnorm", "instancenorm", "rmsnorm")  # gopt_cost_is_norm_op's rule


def is_norm(op):
    low = op.lower().replace("_", "")
    return any(k in low for k in NORMS)


def splits(root):
    """model -> split from graphs/real/splits.tsv."""
    out = {}
    with open(os.path.join(root, "graphs", "real", "splits.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            cols = line.rstrip("\n").split("\t")
            out[cols[0]] = cols[1]
    return out


def parse_model(arg, table, split_of, fitting=True):
    """MODEL[:BATCH[:SEQ]] -> (name, batch, seq) or an error message."""
    parts = arg.split(":")
    name = parts[0]
    if name not in table:
        return f"unknown model '{name}' (tools/torch_step.py --list)"
    if fitting and split_of.get(name) != "train":
        return (f"'{name}' is in the {split_of.get(name, 'no')} split of graphs/real/splits.tsv: fit on training "
                f"models only, report on the others")
    try:
        batch = int(parts[1]) if len(parts) > 1 and parts[1] else table[name].batch
        seq = int(parts[2]) if len(parts) > 2 and parts[2] else table[name].seq
    except ValueError:
        return f"'{arg}': BATCH and SEQ must be integers"
    if batch < 1 or seq < 0 or len(parts) > 3:
        return f"'{arg}': expected MODEL[:BATCH[:SEQ]] with BATCH >= 1"
    return name, batch, seq


def kind_of(ev, class_of, in_optimizer):
    """The efficiency kind of a profiler event, or None when its aten op is not classed: the op's
    class (export_torch's table), with depthwise convolutions, normalization layers and the
    optimizer update's elementwise ops (under the step's "gopt::optimizer" scope) apart, as
    gopt_cost_op_kind does."""
    if not ev.name.startswith("aten::"):
        return None
    op = ev.name[len("aten::"):]
    cls = class_of.get(op, class_of.get(op.rstrip("_")))
    if cls == "reduction" and is_norm(op):
        return "normalization"
    if cls == "elementwise" and in_optimizer:
        return "optimizer"
    if cls == "conv":
        shapes = getattr(ev, "input_shapes", None) or []
        # the weight (O, 1, kh, kw): one input channel per output channel
        if any(len(s) == 4 and s[1] == 1 and s[0] > 1 for s in shapes[1:] if isinstance(s, (list, tuple))):
            return "depthwise_conv"
    return cls


def device_time_us(ev):
    """An event's GPU time with its sub-events' (torch 2: device_time_total; 1.13: cuda_time_total)."""
    t = getattr(ev, "device_time_total", None)
    return t if t is not None else ev.cuda_time_total


def profiled_kinds(prof, class_of, gpu=False):
    """Seconds per kind of the events of a profiled run: each event of a known kind counts with
    its sub-events (their CPU time; gpu: their kernels' GPU time); the rest is overhead."""
    per = dict.fromkeys(KINDS, 0.0)
    events = list(prof.events())
    children = {}
    roots = []
    for ev in events:
        par = ev.cpu_parent
        if par is None:
            roots.append(ev)
        else:
            children.setdefault(id(par), []).append(ev)
    stack = [(ev, False) for ev in roots]
    while stack:
        ev, opt = stack.pop()
        opt = opt or ev.name == "gopt::optimizer"
        k = kind_of(ev, class_of, opt)
        if k is not None:
            per[k] += (device_time_us(ev) if gpu else ev.cpu_time_total) * 1e-6
        else:
            stack.extend((c, opt) for c in children.get(id(ev), []))
    return per


# output bytes probed: 64 KiB .. 256 MiB, each power of two and 64 KiB below it (the allocator's
# thresholds are powers of two: glibc's mmap threshold rises to at most 32 MiB, and the cost
# steps there from nothing to about 0.55 ns per byte on this machine)
FRESH_SIZES = sorted({2 ** k for k in range(16, 29)} | {2 ** k - 2 ** 16 for k in range(18, 29)})


def fresh_output_curve(torch, reps=5):
    """Rows [bytes, seconds] of efficiency.fresh_output: what an elementwise op writing `bytes` of
    output into memory it allocates (torch.mul(a, b)) costs beyond the same op writing into an
    existing buffer (torch.mul(a, b, out=o)), by thread CPU time, the fastest of `reps` batches of
    about 64 MiB of output each, less the difference at 64 KiB (the new tensor's fixed cost, which
    op_overhead carries)."""
    extra = []
    for nb in FRESH_SIZES:
        n = nb // 4
        a, b, o = torch.rand(n), torch.rand(n), torch.empty(n)
        inner = max(2, (64 << 20) // nb)
        best_new = best_out = float("inf")
        for _ in range(reps):
            t = time.thread_time()
            for _ in range(inner):
                c = torch.mul(a, b)
                del c
            best_new = min(best_new, (time.thread_time() - t) / inner)
            t = time.thread_time()
            for _ in range(inner):
                torch.mul(a, b, out=o)
            best_out = min(best_out, (time.thread_time() - t) / inner)
        extra.append(best_new - best_out)
        del a, b, o
    return [[nb, max(e - extra[0], 0.0)] for nb, e in zip(FRESH_SIZES, extra)]


def with_efficiency(text, eff):
    """A profile's text (rows one per line, as written) with an efficiency object added at its end."""
    body = text.rstrip()
    assert body.endswith("}")
    block = json.dumps(eff, indent=2).replace("\n", "\n  ")
    block = re.sub(r"\[\s+([-+.\deE]+),\s+([-+.\deE]+)\s+\]", r"[\1, \2]", block)  # a row [bytes, seconds] per line
    return body[:-1].rstrip() + ',\n  "efficiency": ' + block + "\n}\n"


def gopt_kinds(gopt, graph, profile):
    out = subprocess.run([gopt, "cost", graph, "--profile", profile, "--devices", "1", "--json", "--top", "1"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"gopt cost {graph}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def gopt_step(gopt, graph, profile):
    out = subprocess.run([gopt, "sim", graph, "--profile", profile, "--devices", "1", "--json"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise RuntimeError(f"gopt sim {graph}: {out.stderr.strip()}")
    return json.loads(out.stdout)["step_time_s"]


def model_graph(args, ex, table, name, batch, seq, tmp):
    """The graph of the model's step: on cuda, graphs/real's export when the size is the
    exporter's default (the same trace; no export on the GPU machine's torch); else a fresh export."""
    spec = table[name]
    shipped = os.path.join(HERE, "..", "graphs", "real", f"{name}.graphml.gz")
    if args.device == "cuda" and batch == spec.batch and seq == spec.seq and os.path.exists(shipped):
        return shipped
    graph = os.path.join(tmp, f"{name}.graphml.gz")
    ex.export(name, spec, batch, seq, None, graph)
    return graph


def measured_steps(args, torch, torch_step, step, flat):
    """The timed steps' seconds: thread CPU time on cpu, wall clock around synchronized steps on cuda."""
    if args.device == "cuda":
        walls, _ = torch_step.time_steps(step, flat, args.warmup, args.reps, torch.cuda.synchronize)
        return walls
    _, cpus = torch_step.time_steps(step, flat, args.warmup, args.reps)
    return cpus


def fit_dispatch(args, ex, table, rows, text, factors):
    """GPU: the dispatch seconds per forward or optimizer op, on the host's own timeline
    ("dispatch": "overlapped"): per model, the value at which `gopt sim` on the profile with the
    fitted factors gives PyTorch's fastest step (bisection over 0-200 us; 0 where the profile is
    slower already, 200 us where it stays faster); the median over the models."""
    per = []
    with tempfile.TemporaryDirectory(prefix="torch_fit_dispatch_") as tmp:
        cand = os.path.join(tmp, "candidate.json")

        def step_with(graph, h):
            eff = {"framework": "candidate", "models": ["candidate"], "date": "candidate", "command": "candidate",
                   "op_overhead": h, "factors": factors or {"gemm": 1.0}, "dispatch": "overlapped"}
            with open(cand, "w") as f:
                f.write(with_efficiency(text, eff))
            return gopt_step(args.gopt, graph, cand)

        for r in rows:
            graph = model_graph(args, ex, table, r["model"], r["batch"], r["seq"], tmp)
            want, lo, hi = r["torch_cpu_min_s"], 0.0, 200e-6
            if step_with(graph, lo) >= want:
                h = lo
            elif step_with(graph, hi) <= want:
                h = hi
            else:
                for _ in range(14):
                    mid = (lo + hi) / 2
                    if step_with(graph, mid) > want:
                        hi = mid
                    else:
                        lo = mid
                h = (lo + hi) / 2
            per.append(h)
            print(f"{r['model']}: dispatch {1e6 * h:.1f} us per forward or optimizer op matches its step",
                  file=sys.stderr, flush=True)
    return statistics.median(per)


def evaluate(args, chosen, ex, torch_step, split_of, table, torch, saved=None):
    """The simulator's error against PyTorch's step, with the base and the fitted profile (saved:
    PyTorch's steps from an earlier run's rows, not measured again)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="torch_eval_") as tmp:
        for i, (name, batch, seq) in enumerate(chosen):
            graph = model_graph(args, ex, table, name, batch, seq, tmp)
            before, after = gopt_step(args.gopt, graph, args.profile), gopt_step(args.gopt, graph, args.evaluate)
            try:
                if saved:
                    cpus = saved["rows"][i]["torch_cpu_s"]
                else:
                    step, flat = torch_step.build_step(ex, table[name], batch, seq, args.device)
                    cpus = measured_steps(args, torch, torch_step, step, flat)
            except RuntimeError as e:  # one model PyTorch cannot run here does not cost the others
                print(f"{name}: skipped: PyTorch failed: {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
                continue
            lo, med = min(cpus), statistics.median(cpus)
            rows.append({"model": name, "split": split_of.get(name, "-"), "batch": batch, "seq": seq,
                         "torch_cpu_s": cpus, "torch_min_s": lo, "torch_median_s": med, "sim_before_s": before,
                         "sim_after_s": after, "err_before_min": before / lo - 1, "err_before_median": before / med - 1,
                         "err_after_min": after / lo - 1, "err_after_median": after / med - 1})
            print(f"{name}: PyTorch {1e3 * lo:.2f} ms, sim {1e3 * before:.2f} ms before, {1e3 * after:.2f} ms after",
                  file=sys.stderr, flush=True)
    print(f"{'model':22s} {'split':10s} {'PyTorch min (median) ms':>24s} {'sim before ms':>14s} {'error':>16s} "
          f"{'sim after ms':>13s} {'error':>16s}")
    for r in rows:
        print(f"{r['model'] + ' b' + str(r['batch']):22s} {r['split']:10s} "
              f"{1e3 * r['torch_min_s']:11.1f} ({1e3 * r['torch_median_s']:9.1f}) {1e3 * r['sim_before_s']:14.1f} "
              f"{100 * r['err_before_min']:+7.1f}% ({100 * r['err_before_median']:+6.1f}%) {1e3 * r['sim_after_s']:13.1f} "
              f"{100 * r['err_after_min']:+7.1f}% ({100 * r['err_after_median']:+6.1f}%)")
    for key in ("before", "after"):
        m = statistics.median(abs(r[f"err_{key}_min"]) for r in rows)
        md = statistics.median(abs(r[f"err_{key}_median"]) for r in rows)
        by_split = {}
        for r in rows:
            by_split.setdefault(r["split"], []).append(abs(r[f"err_{key}_min"]))
        per = ", ".join(f"{s} {100 * statistics.median(v):.1f}% ({len(v)})" for s, v in sorted(by_split.items()))
        print(f"median |error| {key}: {100 * m:.1f}% against the fastest step, {100 * md:.1f}% against the median; "
              f"by split, against the fastest: {per}")
    if args.json:
        framework = saved["framework"] if saved else f"PyTorch {torch.__version__} eager on {args.device}"
        print(json.dumps({"framework": framework, "rows": rows}, indent=2))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", help="MODEL[:BATCH[:SEQ]] of the training split")
    ap.add_argument("--profile", required=True, help="the CPU profile to fit (its efficiency is ignored)")
    ap.add_argument("-o", "--output", help="the profile with efficiency factors, written atomically")
    ap.add_argument("--name", help="the written profile's name (default: the input's)")
    ap.add_argument("--evaluate", metavar="FITTED", help="fit nothing: report --profile's and FITTED's errors")
    ap.add_argument("--gopt", default=os.path.join(HERE, "..", "build", "gopt"), help="the gopt binary")
    ap.add_argument("--reps", type=int, default=3, help="steps timed by CPU time (default 3; the fastest counts)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    ap.add_argument("--profiled", type=int, default=1, help="steps under torch.profiler (default 1)")
    ap.add_argument("--no-fresh", action="store_true",
                    help="measure and fit no fresh-output costs (the fit of commit 34950da)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="where PyTorch runs (default cpu; cuda: the first GPU, steps by wall clock, kinds by "
                         "their kernels' GPU time, no fresh-output probe; fit a profile of that GPU)")
    ap.add_argument("--rows", metavar="FILE",
                    help="fit from the per-model figures an earlier run printed with --json ({framework, rows}), "
                         "without running PyTorch (the models are the file's)")
    ap.add_argument("--json", action="store_true", help="print the per-model figures as JSON ({framework, rows})")
    args = ap.parse_args(argv)
    gpu = args.device == "cuda"
    saved = None
    if args.rows:
        try:
            with open(args.rows) as f:
                saved = json.load(f)
            if not isinstance(saved, dict) or not isinstance(saved.get("rows"), list) or not saved["rows"] or \
                    not isinstance(saved.get("framework"), str):
                raise ValueError("expected an object with 'framework' (text) and 'rows' (a non-empty list)")
            args.models = [f"{r['model']}:{r['batch']}:{r['seq']}" for r in saved["rows"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"torch_fit.py: --rows {args.rows}: {e}", file=sys.stderr)
            return 2
    root = os.path.abspath(os.path.join(HERE, ".."))
    import torch_step
    mods = torch_step.import_torch("torch_fit.py")
    if mods is None:
        return 3
    torch, ex = mods
    table = ex.models()
    split_of = splits(root)
    chosen = []
    for a in args.models:
        r = parse_model(a, table, split_of, fitting=not args.evaluate)
        if isinstance(r, str):
            print(f"torch_fit.py: {r}", file=sys.stderr)
            return 2
        chosen.append(r)
    if not chosen or args.reps < 1 or args.warmup < 0 or args.profiled < 1 or not (args.output or args.evaluate):
        ap.print_usage(sys.stderr)
        print("torch_fit.py: need models, -o or --evaluate, --reps >= 1, --warmup >= 0, --profiled >= 1",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    if gpu and not saved and not torch.cuda.is_available():
        print("torch_fit.py: --device cuda: this torch sees no GPU", file=sys.stderr)
        return 3
    if args.evaluate:
        return evaluate(args, chosen, ex, torch_step, split_of, table, torch, saved)
    with open(args.profile) as f:
        text = f.read()
    prof_json = json.loads(text)
    if "efficiency" in prof_json:
        print(f"torch_fit.py: {args.profile} has efficiency factors already: fit the profile without them",
              file=sys.stderr)
        return 2
    rows = []
    fresh = None
    if not args.no_fresh and not gpu and not saved:
        fresh = fresh_output_curve(torch)
        print("fresh output: " + ", ".join(f"{nb >> 10} KiB {1e6 * t:.1f} us" for nb, t in fresh), file=sys.stderr,
              flush=True)
    with tempfile.TemporaryDirectory(prefix="torch_fit_") as tmp:
        bare = os.path.join(tmp, "profile.json")
        with open(bare, "w") as f:
            f.write(text)
        priced = os.path.join(tmp, "fresh.json")  # the profile with the fresh-output rows alone
        if fresh:
            with open(priced, "w") as f:
                f.write(with_efficiency(text, {"framework": "probe", "models": ["probe"], "date": "probe",
                                               "command": "probe", "factors": {"gemm": 1.0}, "fresh_output": fresh}))
        if saved:
            rows = saved["rows"]
        for name, batch, seq in ([] if saved else chosen):
            spec = table[name]
            graph = model_graph(args, ex, table, name, batch, seq, tmp)
            g = gopt_kinds(args.gopt, graph, bare)
            gf = gopt_kinds(args.gopt, graph, priced) if fresh else g
            try:
                step, flat = torch_step.build_step(ex, spec, batch, seq, args.device)
                cpus = measured_steps(args, torch, torch_step, step, flat)
            except RuntimeError as e:  # left out of the fit (and of its provenance), said so
                print(f"{name}: skipped: PyTorch failed: {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
                continue
            per, total = dict.fromkeys(KINDS, 0.0), 0.0
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if gpu else [])
            for _ in range(args.profiled):
                with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
                    w0 = time.perf_counter()
                    step(*flat)
                    if gpu:
                        torch.cuda.synchronize()
                    t = time.perf_counter() - w0
                p = profiled_kinds(prof, ex.CLASS_OF, gpu)
                for k in KINDS:
                    per[k] += p[k] / args.profiled
                total += t / args.profiled
            cpu = min(cpus)
            # CPU: the profiler inflates CPU time, so the kinds are scaled to the fastest step; GPU: the
            # kernels' own times are not inflated
            scale = 1.0 if gpu else cpu / total if total > 0 else 0.0
            torch_k = {k: per[k] * scale for k in KINDS}
            kernels = sum(g["by_kind"][k]["ops"] for k in KINDS)
            dispatched = g["dispatched_ops"]  # not backward: run from Python, not by the autograd engine
            # GPU: the kernels' times hold no launch; what the step spends beyond them and the profile's
            # launch per kernel is the framework's (the GPU idle while Python dispatches)
            overhead = cpu - sum(torch_k.values()) - (kernels * g["launch_overhead"] if gpu else 0.0)
            row = {"model": name, "batch": batch, "seq": seq, "torch_cpu_min_s": cpu, "torch_cpu_s": cpus,
                   "profiled_s": total, "overhead_s": overhead, "kernels": kernels,
                   "dispatched": dispatched,
                   "launch_s": g["launch_overhead"], "torch_by_kind_s": torch_k,
                   "gopt_by_kind_s": {k: g["by_kind"][k]["time"] for k in KINDS},
                   "fresh_by_kind_s": {k: max(gf["by_kind"][k]["time"] - g["by_kind"][k]["time"], 0.0) for k in KINDS},
                   "ops_by_kind": {k: g["by_kind"][k]["ops"] for k in KINDS}}
            rows.append(row)
            print(f"{name} (batch {batch}, seq {seq}): PyTorch {1e3 * cpu:.1f} ms ({'wall' if gpu else 'CPU'}, "
                  f"fastest of {args.reps}), "
                  f"profile {1e3 * sum(row['gopt_by_kind_s'].values()):.1f} ms, framework overhead "
                  f"{1e3 * row['overhead_s']:.1f} ms over {dispatched} forward and optimizer ops ({kernels} kernels), "
                  f"fresh outputs {1e3 * sum(row['fresh_by_kind_s'].values()):.1f} ms", file=sys.stderr, flush=True)
    factors, ratios = {}, {}
    for k in KINDS:
        ratios[k] = []
        for r in rows:  # the models where the kind takes at least MIN_SHARE of the profile's step
            own = r["gopt_by_kind_s"][k] - r["ops_by_kind"][k] * r["launch_s"]
            if own <= 0 or r["gopt_by_kind_s"][k] < MIN_SHARE * sum(r["gopt_by_kind_s"].values()):
                continue
            if gpu and r["torch_by_kind_s"][k] <= 0:
                continue  # GPU: the profiler gave the kind's ops no kernel time (not attributed), no evidence
            spent = r["torch_by_kind_s"][k] - (0.0 if gpu else r["ops_by_kind"][k] * r["launch_s"]) - r["fresh_by_kind_s"][k]
            ratios[k].append(max(spent, 0.0) / own)
        if len(ratios[k]) >= min(MIN_MODELS, len(rows)):
            factors[k] = min(max(statistics.median(ratios[k]), 1e-3), 1e3)
    if saved:
        framework = saved["framework"]
    elif gpu:
        framework = (f"PyTorch {torch.__version__} eager on {torch.cuda.get_device_name(0)}, wall clock (fastest of "
                     f"{args.reps} steps), kinds from the kernels' GPU time (torch.profiler)")
    else:
        framework = f"PyTorch {torch.__version__} eager, 1 thread, thread CPU time (fastest of {args.reps} steps)"
    if gpu:
        overhead = fit_dispatch(args, ex, table, rows, text, factors)
    else:
        overhead = max(statistics.median(r["overhead_s"] / max(r["dispatched"], 1) for r in rows), 0.0)
    cmd = "tools/torch_fit.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    eff = {
        "framework": framework,
        "models": [f"{r['model']} batch {r['batch']} seq {r['seq']}" for r in rows],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "command": cmd, "op_overhead": overhead, "factors": factors}
    if gpu:
        eff["dispatch"] = "overlapped"
    if fresh:
        eff["fresh_output"] = fresh
        eff["notes"] = ("fresh_output: torch.mul(a, b) into new memory less into out=, thread CPU time, fastest of 5, "
                        "less the difference at 64 KiB; the factors are fitted net of it")
    # the profile's text as it was (rows one per line), renamed, the efficiency object added at its end
    body = text
    if args.name:  # the profile's own name is its first "name" field (devices come after it)
        old = '"name": ' + json.dumps(prof_json["name"])
        if old not in body:
            print(f"torch_fit.py: {args.profile}: cannot find its name to replace", file=sys.stderr)
            return 2
        body = body.replace(old, '"name": ' + json.dumps(args.name), 1)
    tmp_out = args.output + ".tmp"
    with open(tmp_out, "w") as f:
        f.write(with_efficiency(body, eff))
    os.replace(tmp_out, args.output)
    print(f"{'kind':15s} {'factor':>8s}  per-model ratios (PyTorch / profile)")
    for k in KINDS:
        print(f"{k:15s} {factors.get(k, 1.0):8.3f}  {' '.join(f'{x:.2f}' for x in ratios[k]) or '-'}")
    print(f"op_overhead {1e6 * overhead:.2f} us per forward or optimizer op; wrote {args.output}")
    if args.json:
        print(json.dumps({"framework": framework, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
