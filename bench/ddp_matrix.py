#!/usr/bin/env python3
"""On a GPU machine, in one call: ddplab and PyTorch's DDP on the same configurations,
alternately, over NVLink and over host memory (NCCL_P2P_DISABLE=1, as a PCIe-only
machine), then the table. Run from the repository root after building vit_ddp.

  python3 bench/ddp_matrix.py --out DIR [--gpus 1,2,4] [--transports nvlink,host]
                              [--configs naive,static_graph,...] [--reps 1] [--deadline S]
                              [--before BINARY] [--amp]

Writes DIR/configs/<key>.json, DIR/ddplab/<key>/<rep>/..., DIR/pytorch/<key>/<rep>.json and
DIR/ddp.json (bench/results' format, with ratios to the single-GPU step). With --gpus 1 each
configuration runs in one process with the engine on, against PyTorch's DDP in one process
(transport "local": what the plugins' own work costs, nothing sent). --before names
another build of vit_ddp (say, of the commit before a change), run after ddplab's in each
repetition into DIR/before/<key>/<rep>/...: before and after in the same call. Each
repetition runs every row in turn, so that --deadline leaves out last repetitions, not rows;
--more_reps N adds up to N repetitions of the rows whose repetitions so far put ddplab
ahead of PyTorch in some and behind in others.
<config>_bf16state is a PowerSGD <config> with powersgd.bf16_state, <config>_aten one with
powersgd.disable_fused_kernels. Transports: nvlink, host (NCCL_P2P_DISABLE=1, as a
PCIe-only machine) and sockets (also NCCL_SHM_DISABLE=1, as between nodes).

--device cpu runs the same rows on the CPU over Gloo (transport "gloo"; --gpus counts
processes), both sides: the command checked on a machine without a GPU, with --batch,
--warmup and --measured small enough for it. Its figures are Gloo's, not a GPU's.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import environment  # noqa: E402
import summarize  # noqa: E402
from rendezvous_check import free_port  # noqa: E402

# config -> (ddplab plugin entries, PyTorch DDP arguments)
CONFIGS = {
    "naive": ("plugin { bucket_sizing { bucket_cap_mb: 2000 } }", ["--bucket_cap_mb", "2000"]),
    "static_graph": ("plugin { bucket_sizing { bucket_cap_mb: 2000 } } plugin { static_graph {} }",
                     ["--bucket_cap_mb", "2000", "--static_graph"]),
    "bucket_view": ("plugin { bucket_sizing { bucket_cap_mb: 2000 } } plugin { bucket_view {} }",
                    ["--bucket_cap_mb", "2000", "--gradient_as_bucket_view"]),
    "static_graph_bucket_view": (
        "plugin { bucket_sizing { bucket_cap_mb: 2000 } } plugin { static_graph {} } plugin { bucket_view {} }",
        ["--bucket_cap_mb", "2000", "--static_graph", "--gradient_as_bucket_view"]),
}
# 25 MB buckets and nothing else, as a new user would try first: PyTorch's DDP(model)
# with its defaults.
CONFIGS["cap25_plain"] = ("plugin { bucket_sizing { bucket_cap_mb: 25 } }", ["--bucket_cap_mb", "25"])
for cap in (25, 50, 100, 200):
    CONFIGS[f"cap{cap}"] = (
        f"plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }} plugin {{ static_graph {{}} }} plugin {{ bucket_view {{}} }}",
        ["--bucket_cap_mb", str(cap), "--static_graph", "--gradient_as_bucket_view"])

LEVERS = "plugin { static_graph {} } plugin { bucket_view {} }"
for cap in (25, 50, 100, 2000):
    CONFIGS[f"bf16_cap{cap}"] = (
        f"plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }} {LEVERS} plugin {{ bf16 {{ sample_error_every: 5 }} }}",
        ["--bucket_cap_mb", str(cap), "--static_graph", "--gradient_as_bucket_view", "--comm_hook", "bf16"])
# bfloat16 summed in float32, and 8-bit floats in blocks summed in float64 (fp8, with and
# without error feedback), with bf16's levers. PyTorch has neither: its rows run its bf16
# hook, the nearest it has (once, where bf16_cap<cap> runs too: PYTORCH_BASE).
PYTORCH_BASE = {}
for cap in (25, 100):
    CONFIGS[f"bf16_fp32_sum_cap{cap}"] = (
        f"plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }} {LEVERS} plugin {{ bf16_fp32_sum {{ sample_error_every: 5 }} }}",
        CONFIGS[f"bf16_cap{cap}"][1])
    for name, fields in (("fp8", ""), ("fp8_ef", "error_feedback: true ")):
        CONFIGS[f"{name}_cap{cap}"] = (
            f"plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }} {LEVERS} plugin {{ fp8 {{ {fields}sample_error_every: 5 }} }}",
            CONFIGS[f"bf16_cap{cap}"][1])
    # fp8's passes as ATen's operations instead of its kernels: what the kernels buy.
    CONFIGS[f"fp8_aten_cap{cap}"] = (CONFIGS[f"fp8_cap{cap}"][0].replace("fp8 {", "fp8 { disable_fused_kernels: true"),
                                     CONFIGS[f"bf16_cap{cap}"][1])
    for name in ("bf16_fp32_sum", "fp8", "fp8_ef", "fp8_aten"):
        PYTORCH_BASE[f"{name}_cap{cap}"] = f"bf16_cap{cap}"
# Gradients that are bfloat16 values sent as bfloat16, summed in float32 (bf16_exact:
# lossless, fewer bytes under autocast). PyTorch has no such hook: its rows run the exact
# all-reduce with the same levers (cap<cap>).
for cap in (25, 100, 2000):
    CONFIGS[f"bf16_exact_cap{cap}"] = (
        f"plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }} {LEVERS} plugin {{ bf16_exact {{}} }}",
        ["--bucket_cap_mb", str(cap), "--static_graph", "--gradient_as_bucket_view"])
    PYTORCH_BASE[f"bf16_exact_cap{cap}"] = "static_graph_bucket_view" if cap == 2000 else f"cap{cap}"
for rank in (1, 4):
    for cap in (25, 100, 200, 2000):
        CONFIGS[f"powersgd_rank{rank}" + ("" if cap == 2000 else f"_cap{cap}")] = (
            f"plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }} {LEVERS} "
            f"plugin {{ powersgd {{ matrix_approximation_rank: {rank} sample_error_every: 5 }} }}",
            ["--bucket_cap_mb", str(cap), "--static_graph", "--gradient_as_bucket_view", "--comm_hook",
             "powersgd", "--powersgd_rank", str(rank), "--start_powersgd_iter", "2"])

# The optimizer sharded over the ranks (plugins/sharded_optimizer, ZeRO-1), with the
# levers. PyTorch's row is its ZeroRedundancyOptimizer (pytorch_vit.py --zero: on GPUs
# overlapped with DDP's buckets, which all-reduce each bucket whole and broadcast what each
# rank stepped).
# `sharded_cap<cap>` steps and gathers after backward (during_backward: false);
# `sharded_during_cap<cap>` as each bucket's reduce-scatter lands (the plugin's default);
# `sharded_copies_cap<cap>` the same by copy engines between the GPUs' buckets in
# symmetric memory (by_copy_engines; GPUs of one node, LibTorch 2.x).
for cap in (25, 100):
    CONFIGS[f"sharded_cap{cap}"] = (
        f"plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }} {LEVERS} "
        "plugin { sharded_optimizer { during_backward: false } }",
        CONFIGS[f"cap{cap}"][1] + ["--zero"])
    CONFIGS[f"sharded_during_cap{cap}"] = (CONFIGS[f"sharded_cap{cap}"][0].replace(
        "during_backward: false", "during_backward: true"), CONFIGS[f"sharded_cap{cap}"][1])
    PYTORCH_BASE[f"sharded_during_cap{cap}"] = f"sharded_cap{cap}"
    CONFIGS[f"sharded_copies_cap{cap}"] = (CONFIGS[f"sharded_during_cap{cap}"][0].replace(
        "during_backward: true", "during_backward: true by_copy_engines: true"), CONFIGS[f"sharded_cap{cap}"][1])
    PYTORCH_BASE[f"sharded_copies_cap{cap}"] = f"sharded_cap{cap}"

# Tuned overlap: 25 MB buckets, NCCL on 4 channels, compute on a high-priority stream
# (bench/nccl_tuning.py). PyTorch gets the same NCCL variables and stream priority.
TUNED_ENV = {"NCCL_MAX_NCHANNELS": "4"}
CONFIGS["overlap_tuned"] = (
    "plugin { bucket_sizing { bucket_cap_mb: 25 } } " + LEVERS,
    ["--bucket_cap_mb", "25", "--static_graph", "--gradient_as_bucket_view", "--high_priority_compute"])
# The same for bf16 with 25 MB buckets: over host memory NCCL's copies through shared
# memory slow backward down; fewer channels and compute first may leave it more.
CONFIGS["bf16_tuned"] = (
    CONFIGS["bf16_cap25"][0], CONFIGS["bf16_cap25"][1] + ["--high_priority_compute"])
TUNED_FIELDS = "high_priority_compute: true " + " ".join(
    f'nccl_env {{ name: "{k}" value: "{v}" }}' for k, v in TUNED_ENV.items())
# config -> (NCCL variables for both, ddplab's distributed fields)
# Tuned overlap with gradients averaged where they lie (zero_copy: no bucket memory, no
# copy; ddplab's own lever, so PyTorch runs its best equivalent, overlap_tuned's).
CONFIGS["zero_copy_tuned"] = (
    "plugin { bucket_sizing { bucket_cap_mb: 25 } } plugin { static_graph {} } plugin { zero_copy {} }",
    CONFIGS["overlap_tuned"][1])
# Over host memory the best lossless bucket was 100 MB with NCCL's defaults; the same with
# gradients averaged where they lie.
# The diagnostic that sends nothing (plugins/no_communication), with 25 MB buckets and the
# levers: against cap25, what communicating costs; against one GPU, what the engine and a
# second process cost without it. PyTorch has no such row.
CONFIGS["cap25_no_comm"] = ("plugin { bucket_sizing { bucket_cap_mb: 25 } } " + LEVERS + " plugin { no_communication {} }",
                            CONFIGS["cap25"][1])
PYTORCH_BASE["cap25_no_comm"] = "cap25"
# The same with one bucket: against cap25_no_comm, what the engine's work per bucket costs.
CONFIGS["naive_no_comm"] = (CONFIGS["cap25_no_comm"][0].replace("bucket_cap_mb: 25", "bucket_cap_mb: 2000"),
                            CONFIGS["static_graph_bucket_view"][1])
PYTORCH_BASE["naive_no_comm"] = "static_graph_bucket_view"
CONFIGS["zero_copy_cap100"] = (
    "plugin { bucket_sizing { bucket_cap_mb: 100 } } plugin { static_graph {} } plugin { zero_copy {} }",
    CONFIGS["cap100"][1])
EXTRA = {name: (TUNED_ENV, TUNED_FIELDS)
         for name in ("overlap_tuned", "bf16_tuned", "zero_copy_tuned")}
# PowerSGD with 25 MB buckets, compute first, NCCL on 2 channels (its all-reduces are
# small; bench/nccl_tuning.py's powersgd_rank1_cap25_tuned).
POWERSGD_ENV = {"NCCL_MAX_NCHANNELS": "2"}
for rank in (1, 4):
    CONFIGS[f"powersgd_rank{rank}_tuned"] = (
        CONFIGS[f"powersgd_rank{rank}_cap25"][0], CONFIGS[f"powersgd_rank{rank}_cap25"][1] + ["--high_priority_compute"])
    EXTRA[f"powersgd_rank{rank}_tuned"] = (POWERSGD_ENV, "high_priority_compute: true " + " ".join(
        f'nccl_env {{ name: "{k}" value: "{v}" }}' for k, v in POWERSGD_ENV.items()))

# The optimizer overlapped with communication (optimizer_overlap): each bucket's update
# queued as soon as its average is in, after backward's compute, beside the last buckets'
# reductions. PyTorch has no such mode; its rows run its optimizer after backward, as the
# base configuration's.
OVERLAP = " plugin { optimizer_overlap {} }"
for base in ("zero_copy_tuned", "overlap_tuned", "zero_copy_cap100", "bf16_tuned", "powersgd_rank1_tuned",
             "powersgd_rank4", "powersgd_rank4_tuned"):
    CONFIGS[base + "_optim"] = (CONFIGS[base][0] + OVERLAP, CONFIGS[base][1])
    if base in EXTRA:
        EXTRA[base + "_optim"] = EXTRA[base]
# bf16 with 25 MB buckets and compute first over fewer NCCL channels: over host memory
# each channel's kernel copies through shared host memory beside backward (8 channels
# made backward 17 ms longer in bench/nccl_tuning.py). PyTorch gets the same cap.
for channels in (1, 2, 3):
    CONFIGS[f"bf16_ch{channels}"] = CONFIGS["bf16_tuned"]
    EXTRA[f"bf16_ch{channels}"] = ({"NCCL_MAX_NCHANNELS": str(channels)},
                                   f"high_priority_compute: true nccl_channels: {channels}")
# And with 10 MB buckets: the shared-memory copies of each bucket start sooner after its
# gradients, and less is left to copy after backward.
CONFIGS["bf16_ch2_cap10"] = (
    CONFIGS["bf16_cap25"][0].replace("bucket_cap_mb: 25", "bucket_cap_mb: 10"),
    ["--bucket_cap_mb", "10"] + CONFIGS["bf16_tuned"][1][2:])
EXTRA["bf16_ch2_cap10"] = EXTRA["bf16_ch2"]

# PowerSGD variants, `<config><suffix>`: `_bf16state` keeps M and the error in bfloat16
# (powersgd.bf16_state), `_aten` runs its passes as ATen's products instead of ddplab's
# fused kernels (powersgd.disable_fused_kernels). PyTorch's hook has neither setting: its
# row is the base's.
POWERSGD_SUFFIXES = {"_bf16state": "bf16_state: true", "_aten": "disable_fused_kernels: true"}
# `<config>_graph`: the configuration with the step as one CUDA graph (plugins/cuda_graph),
# its lossy plugins' error never sampled (a replay cannot). PyTorch's row is the
# configuration's without it: its DDP has no graph argument.
GRAPH_SUFFIX = "_graph"
# NCCL's levers that take fewer SMs from compute, as suffixes that compose with the above:
# `<config>_ch<N>` caps the communicator's channels (CTAs) at N (distributed.nccl_channels).
# PyTorch's row is the configuration's without it.
CHANNELS_SUFFIX = re.compile(r"^(.+)_ch([0-9]+)$")
# NCCL's variables as suffixes, each set on ddplab's run (distributed.nccl_env) and on
# PyTorch's where the configuration without it is not in the list (else PyTorch's row is
# that one's):
# - `<config>_cta1`: NCCL's CTA policy to efficiency (NCCL_CTA_POLICY=1, NCCL 2.27+);
# - `<config>_p2p<N>`: NCCL's point-to-point operations (the all-to-all of fp8 and
#   bf16_fp32_sum) on N channels per peer where NCCL allows it (#62: NCCL's log said 2 per
#   peer at 4 ranks, where a ring all-reduce drives 4 towards its neighbour);
# - `<config>_shmce`: NCCL's host-memory transport moving its data by copy engines at
#   both ends, the proxy thread with a CUDA context of its own (on 2026-11-21, without
#   that context, no run finished within 60 s; on 2 H200 on 2026-11-30 it ran, at 0.38 of
#   one GPU);
# - `<config>_socks<T>x<S>`: NCCL's socket transport (sockets) with T helper threads per
#   connection, each opening S sockets (NCCL_SOCKET_NTHREADS, NCCL_NSOCKS_PERTHREAD; NCCL
#   asks T*S <= 64; its default is 1 and 1 outside some clouds): over sockets every row
#   waits on TCP's rate, which more connections may raise.
ENV_SUFFIXES = [
    (re.compile(r"^(.+)_cta1$"), lambda m: {"NCCL_CTA_POLICY": "1"}),
    (re.compile(r"^(.+)_p2p([0-9]+)$"),
     lambda m: {"NCCL_MIN_P2P_NCHANNELS": m.group(2), "NCCL_NCHANNELS_PER_NET_PEER": m.group(2)}),
    (re.compile(r"^(.+)_shmce$"), lambda m: {"NCCL_SHM_USE_CUDA_MEMCPY": "1", "NCCL_SHM_MEMCPY_MODE": "3",
                                             "NCCL_CREATE_THREAD_CONTEXT": "1"}),
    (re.compile(r"^(.+)_socks([0-9]+)x([0-9]+)$"),
     lambda m: {"NCCL_SOCKET_NTHREADS": m.group(2), "NCCL_NSOCKS_PERTHREAD": m.group(3)}),
]
# `<config>_win`: the flat buckets as NCCL windows, summed by NCCL's symmetric kernels
# (plugins/registered_buckets). PyTorch's row is the configuration's: DDP's buckets are not
# NCCL's memory.
WINDOWS_SUFFIX = "_win"
# `<config>_last<N>`: the last bucket of backward N MiB, the buckets before it doubling to
# the cap (bucket_sizing's last_bucket_cap_mb, Note [A short tail]). PyTorch's row is the
# configuration's: DDP's buckets are all of one cap.
LAST_SUFFIX = re.compile(r"^(.+)_last([0-9]+(?:p[0-9]+)?)$")


def config_entry(config):
    """(ddplab plugins, PyTorch arguments, NCCL variables, ddplab distributed fields, base)."""
    if config.endswith(GRAPH_SUFFIX) and config not in CONFIGS:
        stem = config[:-len(GRAPH_SUFFIX)]
        plugins, args, nccl_env, fields, base = config_entry(stem)
        plugins = plugins.replace("sample_error_every: 5", "sample_error_every: 0") + " plugin { cuda_graph {} }"
        return plugins, args, nccl_env, fields, base or stem
    channels = CHANNELS_SUFFIX.match(config)
    if channels and config not in CONFIGS:
        plugins, args, nccl_env, fields, base = config_entry(channels.group(1))
        return (plugins, args, nccl_env, f"{fields} nccl_channels: {channels.group(2)}",
                base or channels.group(1))
    for suffix, variables in ENV_SUFFIXES:
        match = suffix.match(config)
        if match and config not in CONFIGS:
            plugins, args, nccl_env, fields, base = config_entry(match.group(1))
            extra = variables(match)
            fields += "".join(f' nccl_env {{ name: "{k}" value: "{v}" }}' for k, v in extra.items())
            return plugins, args, dict(nccl_env, **extra), fields, base or match.group(1)
    last = LAST_SUFFIX.match(config)
    if last and config not in CONFIGS:
        plugins, args, nccl_env, fields, base = config_entry(last.group(1))
        if "bucket_sizing {" not in plugins:
            sys.exit(f"ddp_matrix.py: {config!r}: {last.group(1)!r} has no bucket_sizing plugin for last_bucket_cap_mb")
        mib = last.group(2).replace("p", ".")
        return (plugins.replace("bucket_sizing {", f"bucket_sizing {{ last_bucket_cap_mb: {mib}", 1), args, nccl_env,
                fields, base or last.group(1))
    if config.endswith(WINDOWS_SUFFIX) and config not in CONFIGS:
        stem = config[:-len(WINDOWS_SUFFIX)]
        plugins, args, nccl_env, fields, base = config_entry(stem)
        return f"{plugins} plugin {{ registered_buckets {{}} }}", args, nccl_env, fields, base or stem
    # The variants compose; the PyTorch row is the configuration's without any of them.
    for suffix, setting in POWERSGD_SUFFIXES.items():
        if config.endswith(suffix) and config not in CONFIGS:
            stem = config[:-len(suffix)]
            plugins, args, nccl_env, fields, base = config_entry(stem)
            if "powersgd {" not in plugins:
                sys.exit(f"ddp_matrix.py: {config!r}: {stem!r} has no powersgd plugin for {setting.split(':')[0]}")
            return plugins.replace("powersgd {", "powersgd { " + setting), args, nccl_env, fields, base or stem
    if config not in CONFIGS:
        sys.exit(f"ddp_matrix.py: unknown configuration {config!r}")
    nccl_env, fields = EXTRA.get(config, ({}, ""))
    return CONFIGS[config][0], CONFIGS[config][1], nccl_env, fields, PYTORCH_BASE.get(config)


# The transport of --device cpu rows of several processes: Gloo, no NCCL variable.
CPU_TRANSPORT = "gloo"
# What a row may not ask for on the CPU (besides NCCL's variables and PyTorch's extra
# arguments): a stream's priority, NCCL's channels and windows, a CUDA graph, copy engines.
GPU_ONLY = ("high_priority_compute", "nccl_channels", "registered_buckets", "cuda_graph", "by_copy_engines")
TRANSPORTS = {"nvlink": ("NVLINK", {}), "host": ("HOST_MEMORY", {"NCCL_P2P_DISABLE": "1"}),
              "sockets": ("NETWORK", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})}
# The transport of --gpus 1 rows (one process with force_engine; see the docstring).
ONE_GPU_TRANSPORT = "local"

EXPERIMENT = """# proto-message: ddplab.v1.Experiment
name: "{name}"
model {{ {model} }}
data {{ batch_size: {batch} {loader} }}
steps {{ warmup: {warmup} measured: {measured} }}
{training}
distributed {{ gpus_per_node: {gpus} device: {device} {transport} {force} }}
{plugins}
"""

# How both sides train: the seed study's float32 SGD, or --amp, experiments/amp_study's
# bf16 autocast with AdamW. (ddplab's experiment fields, pytorch_vit.py's arguments)
TRAINING = {
    "seed": ("optimizer { sgd { learning_rate: 0.01 } }", []),
    "amp": ("optimizer { adamw { learning_rate: 0.001 } } precision: BF16_AUTOCAST",
            ["--precision", "bf16", "--optimizer", "adamw", "--lr", "0.001"]),
}
# ddplab's optimizers take LibTorch's fused kernels on GPUs; PyTorch's rows get them too
# (fused=True), unless --foreach (both sides foreach, as before ddplab fused).
FUSED_PY = ["--fused"]


RUN_TIMEOUT = 600  # seconds a run may take (--run_timeout)


def run(cmd, log, env=None, ranks=1):
    """Runs `cmd` into `log`; with `ranks` > 1, as that many ranks of one process group
    (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, as torchrun sets them), all stopped
    when one fails. Its exit status (124: stopped after --run_timeout)."""
    with open(log, "w") as f:
        try:
            if ranks > 1:
                code = run_ranks(cmd, f, dict(env or os.environ), ranks)
            else:
                code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            f.write(f"\nddp_matrix.py: stopped after {RUN_TIMEOUT} s\n")
            code = 124
    if code != 0:
        print(f"FAILED ({code}): {' '.join(cmd)}; see {log}", flush=True)
        with open(log) as f:
            print("".join(f.readlines()[-15:]), flush=True)
    return code


def run_ranks(cmd, f, env, ranks):
    """`ranks` processes of `cmd` writing to `f` (see run); raises TimeoutExpired after
    --run_timeout. Whatever ends it, no rank outlives it."""
    env = dict(env, WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    procs = []
    try:
        for r in range(ranks):
            procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                          env=dict(env, RANK=str(r), LOCAL_RANK=str(r))))
        end = time.time() + RUN_TIMEOUT
        while [p.poll() for p in procs].count(None):  # each polled: its return code set
            failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
            if failed:
                return failed[0]
            if time.time() > end:
                raise subprocess.TimeoutExpired(cmd, RUN_TIMEOUT)
            time.sleep(0.1)
        return next((p.returncode for p in procs if p.returncode), 0)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def prepare_output(path, device="cuda"):
    """The run directory's layout (summarize.py reads it) and the environment record."""
    out = os.path.abspath(path)
    for d in ("configs", "ddplab", "pytorch", "logs"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    with open(os.path.join(out, "environment.json"), "w") as f:
        json.dump(environment.environment(device), f, indent=1)
    return out


def pytorch_command(gpus, warmup, measured, output, ddp_args, extra=(), torchrun=True):
    """PyTorch's reference run: one process, or torchrun for several GPUs; `ddp_args`
    None for no DDP wrapper (the single-GPU baseline); `extra` arguments either way (the
    device and batch among them). Without `torchrun`, one process's command for run() to
    start as each rank (on the CPU: Debian's torchrun 1.13 fails under Python 3.11 before
    it starts a rank)."""
    py = [sys.executable, os.path.join(HERE, "pytorch_vit.py"), "--warmup", str(warmup),
          "--measured", str(measured), "--output", output] + list(extra)
    if ddp_args is not None:
        py += ["--ddp"] + ddp_args
    if gpus > 1 and torchrun:
        py = [sys.executable, "-m", "torch.distributed.run", "--standalone",
              f"--nproc_per_node={gpus}"] + py[1:]
    return py


def module_model(a):
    """--module's model stanza for ddplab, and pytorch_vit.py's arguments for the same file."""
    shape, _, rest = a.module_input.partition(":")
    dtype, _, high = rest.partition(":")
    if dtype not in ("", "float32", "int64") or (dtype == "int64") != bool(high):
        sys.exit(f"--module_input {a.module_input}: SHAPE, SHAPE:float32 or SHAPE:int64:HIGH")
    path = os.path.abspath(a.module)
    spec = f"shape: [{shape}]" + (f" dtype: INT64 high: {high}" if dtype == "int64" else "")
    model = f'torchscript {{ file: "{path}" input {{ {spec} }} classes: {a.module_classes} }}'
    args = ["--torchscript", path, "--input_shape", shape, "--classes", str(a.module_classes)]
    if dtype == "int64":
        args += ["--input_dtype", "int64", "--input_high", high]
    return model, args


def main():
    global RUN_TIMEOUT
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", default="2,4", help="GPUs per row (with --device cpu, processes)")
    p.add_argument("--transports", default="nvlink,host", help="nvlink, host, sockets (--device cpu: gloo)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: both sides on the CPU over Gloo (see the top of this file)")
    p.add_argument("--batch", type=int, default=32, help="samples per GPU (or process) and step")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--baselines", default="single_gpu,ddp_1gpu")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--more_reps", type=int, default=0,
                   help="after --reps, up to this many more repetitions of the rows whose ratios to PyTorch's "
                        "run of the same repetition fall on both sides of 1 (within the deadline)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--measured", type=int, default=20)
    p.add_argument("--deadline", type=float, default=0,
                   help="seconds after start: no run starts that would end after it, by the row's last "
                        "repetition, nor any after it (0: none); the table still comes")
    p.add_argument("--binary", default="bazel-bin/experiments/vit_ddp", help="ddplab's vit_ddp")
    p.add_argument("--before", default="",
                   help="another vit_ddp binary (with its .runfiles beside it), run after ours in each repetition")
    p.add_argument("--before_graph", action="store_true",
                   help="--before runs the graph rows too (a build that has plugins/cuda_graph)")
    p.add_argument("--before_configs", default="",
                   help="the configurations --before runs, comma-separated (default: every one): those a change touches")
    p.add_argument("--ddplab_args", default="",
                   help="more arguments for every vit_ddp run, space-separated (e.g. --profile=torch)")
    p.add_argument("--amp", action="store_true",
                   help="train as experiments/amp_study does, both sides: bf16 autocast and AdamW (lr 1e-3)")
    p.add_argument("--skip_pytorch", action="store_true",
                   help="ddplab only: no PyTorch runs (no ratios against PyTorch in the table)")
    p.add_argument("--foreach", action="store_true",
                   help="both sides' optimizers foreach: ddplab's optimizer.foreach, PyTorch without fused=True")
    p.add_argument("--compile_modes", default="",
                   help="torch.compile modes (default, reduce-overhead, ...) PyTorch's one-GPU row also runs "
                        "in, each repetition, into DIR/pytorch_compile_<mode>/single_gpu/")
    p.add_argument("--run_timeout", type=float, default=RUN_TIMEOUT, help="seconds a run may take before it is stopped")
    p.add_argument("--module", help="a TorchScript module's file: both sides train it instead of ViT-L/32 "
                                    "(tools/torchscript/export_models.py writes ResNet-50's and an encoder's)")
    p.add_argument("--module_input", default="3,224,224",
                   help="--module: one sample's input shape, e.g. 3,224,224, or 128:int64:30522 for token ids "
                        "in [0, 30522)")
    p.add_argument("--module_classes", type=int, default=1000, help="--module: the number of classes")
    a = p.parse_args()
    start = time.time()
    RUN_TIMEOUT = a.run_timeout
    out = prepare_output(a.out, a.device)
    training, py_training = TRAINING["amp" if a.amp else "seed"]
    model, model_name = "preset: VIT_L_32", "vit_l_32"
    if a.module:
        model, module_args = module_model(a)
        model_name = os.path.basename(a.module)
        py_training = py_training + module_args
    cpu = a.device == "cpu"
    if a.foreach:
        training = training.replace("optimizer {", "optimizer { foreach: true", 1)
    elif not cpu:  # fused kernels are for GPUs, on either side
        py_training = py_training + FUSED_PY
    py_training = py_training + ["--device", a.device, "--batch_size", str(a.batch)] + (
        ["--num_workers", "1"] if cpu else [])
    if cpu and a.amp:
        sys.exit("ddp_matrix.py --device cpu: the seed study's training only (--amp is for GPUs)")

    # (key, meta, ddplab plugins, pytorch DDP args, ddplab distributed fields, environment,
    #  force engine, more pytorch args)
    runs = []
    for base in filter(None, a.baselines.split(",")):
        if base == "single_gpu":
            runs.append(("single_gpu", {"config": "single_gpu", "gpus": 1, "transport": "none"},
                         "", None, "", {}, False, ()))
        elif base == "single_gpu_graph":
            # The single-GPU step as one CUDA graph: the ceiling the graph rows are measured
            # against. PyTorch's row is its plain single GPU (it has no graph argument).
            runs.append(("single_gpu_graph", {"config": "single_gpu_graph", "gpus": 1, "transport": "none",
                                              "pytorch_key": "single_gpu"},
                         "plugin { cuda_graph {} }", None, "", {}, False, ()))
        elif base == "single_gpu_high_priority":
            # The single-GPU step with its compute on a high-priority stream, as the tuned
            # configurations run theirs: the ceiling they are measured against, too.
            runs.append(("single_gpu_high_priority",
                         {"config": "single_gpu_high_priority", "gpus": 1, "transport": "none"},
                         "", None, "high_priority_compute: true", {}, False, ("--high_priority_compute",)))
        elif base == "ddp_1gpu":
            plugins, args = CONFIGS["naive"]
            runs.append(("ddp_1gpu", {"config": "ddp_1gpu", "gpus": 1, "transport": "none"},
                         plugins, args, "", {}, True, ()))
    for gpus in [int(g) for g in a.gpus.split(",") if g]:
        transports = ([ONE_GPU_TRANSPORT] if gpus == 1 else [CPU_TRANSPORT] if cpu
                      else list(filter(None, a.transports.split(","))))
        for transport in transports:
            name, env = TRANSPORTS.get(transport, ("", {}))
            configs = list(filter(None, a.configs.split(",")))
            for config in configs:
                plugins, args, nccl_env, fields, base = config_entry(config)
                key = f"{config}_{gpus}gpu_{transport}"
                meta = {"config": config, "gpus": gpus, "transport": transport, "nccl_env": nccl_env}
                if base in configs:
                    meta["pytorch_key"] = f"{base}_{gpus}gpu_{transport}"  # PyTorch runs there
                runs.append((key, meta, plugins, args, f"transport: {name} {fields}" if name else fields,
                             dict(env, **nccl_env), gpus == 1, ()))

    for key, meta, plugins, args, fields, env, _, py_extra in runs if cpu else []:
        if env or py_extra or any(gpu_only in plugins + fields for gpu_only in GPU_ONLY):
            sys.exit(f"ddp_matrix.py --device cpu: {meta['config']!r} sets NCCL, a stream's priority, NCCL's "
                     "windows or a CUDA graph, which are GPUs' (its configuration without them runs on the CPU)")
    for key, meta, plugins, args, transport, env, force, py_extra in runs:
        meta.update(batch_size=a.batch, model=model_name, measured_steps=a.measured, device=a.device)
        with open(os.path.join(out, "configs", key + ".json"), "w") as f:
            json.dump(meta, f)
        with open(os.path.join(out, "configs", key + ".textproto"), "w") as f:
            f.write(EXPERIMENT.format(name=key, model=model, warmup=a.warmup, measured=a.measured, gpus=meta["gpus"],
                                      transport=transport, force="force_engine: true" if force else "",
                                      plugins=plugins, training=training, batch=a.batch,
                                      device="CPU" if cpu else "CUDA",
                                      loader="num_workers: 1" if cpu else "num_workers: 8 pin_memory: true"))
    # Repetition after repetition, each running every row in turn: rows measured minutes
    # apart (a row and its one GPU) see the machine's drift alike, and a deadline leaves out
    # the last repetitions of every row rather than whole rows at the end of the list.
    # Then, with --more_reps, more of the rows whose repetitions do not yet say which side is
    # faster: each of their ratios to PyTorch's run of the same repetition, some above 1 and
    # some below (as over sockets, where runs spread by 7%).
    # A repetition of a row is not started where the last one of that row, had it started
    # now, would have ended after the deadline: the call's own time limit then never cuts
    # a run, and its results all come back.
    took = {}  # seconds a repetition of each row took, the last one
    for rep in range(1, a.reps + a.more_reps + 1):
        rows = runs if rep <= a.reps else [r for r in runs if undecided(out, r[0], r[1])]
        if not rows:
            break
        for key, meta, plugins, args, transport, env, force, py_extra in rows:
            now = time.time()
            if a.deadline and now + took.get(key, 0) - start > a.deadline:
                print(f"deadline: {key} rep {rep} not run" +
                      (f" (its last repetition took {took[key]:.0f} s)" if key in took else ""), flush=True)
                continue
            run_row(a, out, key, meta, plugins, args, env, py_extra, py_training, rep)
            took[key] = time.time() - now

    subprocess.check_call([sys.executable, os.path.join(HERE, "summarize.py"), "--name", "ddp",
                           "--dir", out, "--output", os.path.join(out, "ddp.json")])


def undecided(out, key, meta):
    """Whether row `key` has PyTorch runs of its own and its repetitions' ratios to them
    (each repetition's ddplab run over PyTorch's) lie on both sides of 1."""
    if "pytorch_key" in meta:
        return False
    ours = summarize.by_repetition(glob.glob(os.path.join(out, "ddplab", key, "*", "*", key + ".json")), -3)
    theirs = summarize.by_repetition(glob.glob(os.path.join(out, "pytorch", key, "*.json")), -1)
    ratios = [ours[k]["steps_per_s"] / theirs[k]["steps_per_s"] for k in ours
              if k in theirs and theirs[k]["steps_per_s"] > 0]
    return bool(ratios) and min(ratios) < 1 < max(ratios)


def run_row(a, out, key, meta, plugins, args, env, py_extra, py_training, rep):
    """One repetition of one row: ddplab's run, the build before's where it has the row,
    then PyTorch's (and its compiled one-GPU modes)."""
    cpu = a.device == "cpu"
    textproto = os.path.join(out, "configs", key + ".textproto")
    # On the CPU both sides' processes share the cores alike (torchrun would give each
    # of PyTorch's one thread, and ddplab's would take every core), unless the caller
    # set OMP_NUM_THREADS; PyTorch's Gloo meets on loopback, as ddplab's does.
    threads = ({"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS") or
                str(max(1, len(os.sched_getaffinity(0)) // meta["gpus"]))} if cpu else {})
    gloo = {"GLOO_SOCKET_IFNAME": "lo"} if cpu else {}
    print(f"{key} rep {rep}", flush=True)
    run([a.binary, f"--experiment={textproto}",
         f"--output_dir={out}/ddplab/{key}/{rep}"] + a.ddplab_args.split(),
        f"{out}/logs/ddplab_{key}_{rep}.log", env=dict(os.environ, **threads))
    # The build before runs every row it has: the graph's (plugins/cuda_graph) with
    # --before_graph alone.
    if a.before and (a.before_graph or "cuda_graph" not in plugins) and (
            not a.before_configs or meta.get("config") in a.before_configs.split(",")):
        run([a.before, f"--experiment={textproto}", f"--output_dir={out}/before/{key}/{rep}"],
            f"{out}/logs/before_{key}_{rep}.log", env=dict(os.environ, **threads))
    if "pytorch_key" in meta or a.skip_pytorch:
        return
    os.makedirs(f"{out}/pytorch/{key}", exist_ok=True)
    py = pytorch_command(meta["gpus"], a.warmup, a.measured, f"{out}/pytorch/{key}/{rep}.json", args,
                         py_training + list(py_extra), torchrun=not cpu)
    run(py, f"{out}/logs/pytorch_{key}_{rep}.log", env=dict(os.environ, **env, **threads, **gloo),
        ranks=meta["gpus"] if cpu else 1)
    for mode in filter(None, a.compile_modes.split(",") if key == "single_gpu" else []):
        os.makedirs(f"{out}/pytorch_compile_{mode}/{key}", exist_ok=True)
        py = pytorch_command(1, a.warmup, a.measured, f"{out}/pytorch_compile_{mode}/{key}/{rep}.json",
                             args, py_training + ["--compile", "--compile_mode", mode])
        run(py, f"{out}/logs/pytorch_compile_{mode}_{key}_{rep}.log")


if __name__ == "__main__":
    main()
