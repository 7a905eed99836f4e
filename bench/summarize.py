#!/usr/bin/env python3
"""Collects one bench run's records into bench/results' format and prints a table.

  summarize.py --name single-gpu --dir RUN_DIR --output FILE.json

RUN_DIR holds environment.json and, per configuration and repetition,
ddplab/<config>/<rep>/<suite>/<experiment>.json (ddplab's record) and
pytorch/<config>/<rep>.json (PyTorch's; a configuration's meta may name another's as
pytorch_key), and where another build ran beside ddplab's
(ddp_matrix.py --before), before/<config>/<rep>/... as ddplab's. Medians are taken over
repetitions.
"""
import argparse
import glob
import json
import os
import statistics


def load(path):
    with open(path) as f:
        return json.load(f)


def figure(value, width, digits):
    """`value` right-aligned in `width` with `digits` decimals, or "-" where there is none."""
    return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def side_of_one(ratios):
    """Which side of 1 a row's ratios by repetition fall: each repetition's pair saw the
    machine alike, so only a side every pair takes is a finding."""
    if all(r > 1 for r in ratios):
        return ": ahead in every repetition"
    if all(r < 1 for r in ratios):
        return ": behind in every repetition"
    return ": on no one side of 1 in every repetition (level within the runs' noise)"


def by_repetition(paths, rep_part):
    """The records at `paths` by repetition number, in its order; the number is the path's
    part at `rep_part` (counted from the end; a file's name without .json)."""
    runs = {}
    for path in paths:
        rep = os.path.normpath(path).split(os.sep)[rep_part]
        runs[int(rep[:-len(".json")] if rep.endswith(".json") else rep)] = load(path)
    return dict(sorted(runs.items()))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--output", required=True)
    a = p.parse_args()
    env = load(os.path.join(a.dir, "environment.json"))
    rows = []
    ours_of = {}  # each row's key: (its row, ddplab's runs by repetition)
    for config_dir in sorted(glob.glob(os.path.join(a.dir, "ddplab", "*"))):
        config = os.path.basename(config_dir)
        ours_by_rep = by_repetition(glob.glob(os.path.join(config_dir, "*", "*", config + ".json")), -3)
        ours = list(ours_by_rep.values())
        meta = load(os.path.join(a.dir, "configs", config + ".json"))
        # A variant PyTorch has no setting for shares its base configuration's PyTorch runs.
        theirs_key = meta.get("pytorch_key", config)
        theirs_by_rep = by_repetition(glob.glob(os.path.join(a.dir, "pytorch", theirs_key, "*.json")), -1)
        theirs = list(theirs_by_rep.values())
        if not ours:
            continue
        # Without PyTorch's runs (ddp_matrix.py --skip_pytorch) its fields are None.
        theirs_median = (lambda field: statistics.median(r[field] for r in theirs)) if theirs else (lambda field: None)
        row = dict(meta)
        row.update({
            "ddplab_steps_per_s": statistics.median(r["steps_per_s"] for r in ours),
            "pytorch_steps_per_s": theirs_median("steps_per_s"),
            "ddplab_peak_gib": statistics.median(r["peak_memory_gib"] for r in ours),
            "pytorch_peak_gib": theirs_median("peak_memory_gib"),
            "ddplab_runs_steps_per_s": [round(r["steps_per_s"], 4) for r in ours],
            "pytorch_runs_steps_per_s": [round(r["steps_per_s"], 4) for r in theirs],
            "ddplab_tflops_per_gpu": statistics.median(r["tflops_per_gpu"] for r in ours),
            "ddplab_data_wait_fraction": max(r["data_wait_fraction"] for r in ours),
            "ddplab_phases_ms": ours[len(ours) // 2]["phases"],
        })
        row["ratio"] = row["ddplab_steps_per_s"] / row["pytorch_steps_per_s"] if theirs else None
        # Each repetition's ratio, ddplab's run over PyTorch's of the same repetition: where
        # they cross 1, the medians' ratio is within the runs' noise.
        row["ratio_runs"] = [round(ours_by_rep[k]["steps_per_s"] / theirs_by_rep[k]["steps_per_s"], 4)
                             for k in ours_by_rep if k in theirs_by_rep and theirs_by_rep[k]["steps_per_s"] > 0]
        exposed = [r.get("exposed_comm_ms") for r in ours if r.get("engine")]
        if exposed:
            row["ddplab_exposed_comm_ms"] = statistics.median(exposed)
            row["ddplab_buckets"] = len(ours[0].get("bucket_bytes", []))
        errors = [r["gradient_error"] for r in ours if r.get("gradient_error_samples")]
        if errors:
            row["ddplab_gradient_error"] = statistics.median(errors)
        ratio = ours[0].get("hook_stats", {}).get("compression_ratio")
        if ratio:
            row["ddplab_compression_ratio"] = ratio
        elif ours[0].get("sent_dtype", ours[0].get("wire_dtype")) == "BFloat16":
            row["ddplab_compression_ratio"] = 2.0
        before = [load(f) for f in sorted(glob.glob(os.path.join(a.dir, "before", config, "*", "*", config + ".json")))]
        if before:
            row["before_steps_per_s"] = statistics.median(r["steps_per_s"] for r in before)
            row["before_runs_steps_per_s"] = [round(r["steps_per_s"], 4) for r in before]
            row["before_peak_gib"] = statistics.median(r["peak_memory_gib"] for r in before)
            row["before_phases_ms"] = before[len(before) // 2]["phases"]
            row["before_exposed_comm_ms"] = statistics.median(r.get("exposed_comm_ms", 0) for r in before)
        # torch.compile's one-GPU figures (ddp_matrix.py --compile_modes), by mode.
        for compiled in sorted(glob.glob(os.path.join(a.dir, "pytorch_compile_*", config))):
            mode = os.path.basename(os.path.dirname(compiled))[len("pytorch_compile_"):]
            runs = [load(f)["steps_per_s"] for f in sorted(glob.glob(os.path.join(compiled, "*.json")))]
            if runs:
                row.setdefault("pytorch_compile_steps_per_s", {})[mode] = statistics.median(runs)
                row.setdefault("pytorch_compile_runs_steps_per_s", {})[mode] = [round(r, 4) for r in runs]
        rows.append(row)
        ours_of[config] = (row, ours_by_rep)
    # A row that shares another row's PyTorch runs (fp8 and bf16_fp32_sum share bf16's, a
    # graph row its eager row's) is that row's variant: each repetition's run over that
    # row's run of the same repetition. Where the runs drift between repetitions (sockets
    # by 7%), the pairs say what the medians' ratio cannot.
    for config, (row, ours_by_rep) in ours_of.items():
        base = row.get("pytorch_key")
        if base in ours_of and base != config:
            base_row, base_by_rep = ours_of[base]
            pairs = [round(ours_by_rep[k]["steps_per_s"] / base_by_rep[k]["steps_per_s"], 4)
                     for k in ours_by_rep if k in base_by_rep and base_by_rep[k]["steps_per_s"] > 0]
            if pairs:
                row.update(vs_base_config=base_row["config"], vs_base_runs=pairs, vs_base=statistics.median(pairs))
    # Scaling: steps/s over the single-GPU step's (batch per GPU is fixed).
    single = next((r for r in rows if r["config"] == "single_gpu"), None)
    if single:
        for r in rows:
            r["ddplab_vs_single_gpu"] = r["ddplab_steps_per_s"] / single["ddplab_steps_per_s"]
            if r["pytorch_steps_per_s"] and single["pytorch_steps_per_s"]:
                r["pytorch_vs_single_gpu"] = r["pytorch_steps_per_s"] / single["pytorch_steps_per_s"]
    # A row whose step is one CUDA graph (<config>_graph) over one GPU's graph, where it
    # was measured: the table's d/1gpu for those rows.
    graph = next((r for r in rows if r["config"] == "single_gpu_graph"), None)
    if graph:
        for r in rows:
            r["ddplab_vs_single_gpu_graph"] = r["ddplab_steps_per_s"] / graph["ddplab_steps_per_s"]
    # The same over the single-GPU step with compute on a high-priority stream, where it
    # was measured (the tuned configurations run theirs so).
    high = next((r for r in rows if r["config"] == "single_gpu_high_priority"), None)
    if high:
        for r in rows:
            r["ddplab_vs_single_gpu_high_priority"] = r["ddplab_steps_per_s"] / high["ddplab_steps_per_s"]
            if r["pytorch_steps_per_s"] and high["pytorch_steps_per_s"]:
                r["pytorch_vs_single_gpu_high_priority"] = r["pytorch_steps_per_s"] / high["pytorch_steps_per_s"]
    result = dict(env)
    result["bench"] = a.name
    result["rows"] = rows
    with open(a.output, "w") as f:
        json.dump(result, f, indent=1)

    print(f"\n{a.name} on {env['device']} x{env['gpu_count']}, driver {env['driver']}, "
          f"PyTorch {env['pytorch_version']}, LibTorch {env['libtorch_version']}, "
          f"NCCL {env['nccl_version']}, {env['date']}")
    print(f"{'config':<30}{'gpus':>4} {'transport':<9}{'ddplab/s':>9}{'pytorch/s':>10}"
          f"{'ratio':>7}{'d/1gpu':>7}{'p/1gpu':>7}{'d GiB':>7}{'p GiB':>7}{'exposed ms':>11}{'grad err':>9}")
    for r in rows:
        # "-" where a side has no figure (its run failed, or PyTorch has no such row).
        ours_vs_one = r.get("ddplab_vs_single_gpu_graph" if is_graph(r) else "ddplab_vs_single_gpu")
        print(f"{r['config']:<30}{r['gpus']:>4} {r['transport']:<9}{r['ddplab_steps_per_s']:>9.3f}"
              f"{figure(r['pytorch_steps_per_s'], 10, 3)}{figure(r['ratio'], 7, 3)}"
              f"{figure(ours_vs_one, 7, 3)}{figure(r.get('pytorch_vs_single_gpu'), 7, 3)}"
              f"{r['ddplab_peak_gib']:>7.2f}{figure(r['pytorch_peak_gib'], 7, 2)}"
              f"{r.get('ddplab_exposed_comm_ms', 0):>11.2f}{r.get('ddplab_gradient_error', 0):>9.1e}")
    if graph and any(is_graph(r) for r in rows):
        print("d/1gpu of a row whose step is one CUDA graph (*_graph): over single_gpu_graph")
    for r in rows:
        if len(r["ratio_runs"]) > 1:
            print(f"ratio by repetition, {r['config']} ({r['gpus']}, {r['transport']}): {r['ratio_runs']}"
                  f"{side_of_one(r['ratio_runs'])}")
    for r in rows:
        if r.get("vs_base_runs"):
            print(f"by repetition, {r['config']} over {r['vs_base_config']} ({r['gpus']}, {r['transport']}): "
                  f"{r['vs_base_runs']}, median {r['vs_base']:.3f}{side_of_one(r['vs_base_runs'])}")
    for r in rows:
        for mode, steps in r.get("pytorch_compile_steps_per_s", {}).items():
            print(f"PyTorch torch.compile(mode={mode!r}), {r['config']}: {steps:.3f} steps/s "
                  f"(runs {r['pytorch_compile_runs_steps_per_s'][mode]})")
    compared = [r for r in rows if "before_steps_per_s" in r]
    if compared:
        print(f"\n{'config':<30}{'gpus':>4} {'transport':<9}{'before/s':>9}{'after/s':>9}{'after/before':>13}"
              f"{'b GiB':>7}{'a GiB':>7}{'before runs':>22}{'after runs':>22}")
        for r in compared:
            print(f"{r['config']:<30}{r['gpus']:>4} {r['transport']:<9}{r['before_steps_per_s']:>9.3f}"
                  f"{r['ddplab_steps_per_s']:>9.3f}{r['ddplab_steps_per_s'] / r['before_steps_per_s']:>13.4f}"
                  f"{r['before_peak_gib']:>7.2f}{r['ddplab_peak_gib']:>7.2f}"
                  f"{str(r['before_runs_steps_per_s']):>22}{str(r['ddplab_runs_steps_per_s']):>22}")


def is_graph(row):
    """Whether the row's step ran as one CUDA graph (ddp_matrix.py's <config>_graph)."""
    return row["config"].endswith("_graph")


if __name__ == "__main__":
    main()
