#!/usr/bin/env python3
"""On a GPU machine: what NCCL's settings and the compute stream's priority do to
ddplab's data-parallel step (static graph, bucket views; some variants add a compression
plugin or the no_communication diagnostic), over NVLink and over host memory. Each variant is an experiment file (distributed.nccl_env,
distributed.high_priority_compute), so the one that wins is one a user can write.
Run from the repository root after building vit_ddp.

  python3 bench/nccl_tuning.py --out DIR [--gpus 4] [--measured 30] [--variants a,b,...]

Writes DIR/<variant>/... (ddplab's results) and DIR/tuning.json, and prints a table:
steps/s, backward and exposed communication per step, the mean bus bandwidth of the
bucket all-reduces.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import environment  # noqa: E402

# name -> (transport, bucket cap MB, NCCL variables, high-priority compute[, more plugins])
VARIANTS = {
    "nvlink_cap25": ("NVLINK", 25, {}, False),
    "nvlink_cap25_cta_efficiency": ("NVLINK", 25, {"NCCL_CTA_POLICY": "1"}, False),
    "nvlink_cap25_channels4": ("NVLINK", 25, {"NCCL_MAX_NCHANNELS": "4"}, False),
    "nvlink_cap25_channels2": ("NVLINK", 25, {"NCCL_MAX_NCHANNELS": "2"}, False),
    "nvlink_cap25_p2p_copy_engine": ("NVLINK", 25, {"NCCL_P2P_USE_CUDA_MEMCPY": "1"}, False),
    "nvlink_cap25_high_priority": ("NVLINK", 25, {}, True),
    "nvlink_cap25_high_priority_channels4": ("NVLINK", 25, {"NCCL_MAX_NCHANNELS": "4"}, True),
    "nvlink_cap100": ("NVLINK", 100, {}, False),
    "nvlink_cap100_cta_efficiency": ("NVLINK", 100, {"NCCL_CTA_POLICY": "1"}, False),
    "nvlink_cap100_channels4": ("NVLINK", 100, {"NCCL_MAX_NCHANNELS": "4"}, False),
    "nvlink_cap100_high_priority": ("NVLINK", 100, {}, True),
    "host_cap100": ("HOST_MEMORY", 100, {}, False),
    "host_cap100_shm_copy_engine": ("HOST_MEMORY", 100, {"NCCL_SHM_USE_CUDA_MEMCPY": "1"}, False),
    "host_cap100_shm_copy_engine_both": (
        "HOST_MEMORY", 100, {"NCCL_SHM_USE_CUDA_MEMCPY": "1", "NCCL_SHM_MEMCPY_MODE": "3"}, False),
    "host_cap100_channels8": ("HOST_MEMORY", 100, {"NCCL_MIN_NCHANNELS": "8"}, False),
    "host_cap100_buffer16m": ("HOST_MEMORY", 100, {"NCCL_BUFFSIZE": "16777216"}, False),
    "host_cap100_cta_efficiency": ("HOST_MEMORY", 100, {"NCCL_CTA_POLICY": "1"}, False),
    "host_cap100_high_priority": ("HOST_MEMORY", 100, {}, True),
    "host_cap25": ("HOST_MEMORY", 25, {}, False),
    "host_cap25_shm_copy_engine": ("HOST_MEMORY", 25, {"NCCL_SHM_USE_CUDA_MEMCPY": "1"}, False),
    # Fewer SMs, or fewer threads on each, for NCCL beside backward (compute first).
    "nvlink_cap25_high_priority_channels2": ("NVLINK", 25, {"NCCL_MAX_NCHANNELS": "2"}, True),
    "nvlink_cap25_high_priority_channels1": ("NVLINK", 25, {"NCCL_MAX_NCHANNELS": "1"}, True),
    "nvlink_cap25_high_priority_channels4_threads128": (
        "NVLINK", 25, {"NCCL_MAX_NCHANNELS": "4", "NCCL_NTHREADS": "128"}, True),
    "nvlink_cap25_high_priority_channels4_ll128": (
        "NVLINK", 25, {"NCCL_MAX_NCHANNELS": "4", "NCCL_PROTO": "LL128"}, True),
    "nvlink_cap50_high_priority_channels4": ("NVLINK", 50, {"NCCL_MAX_NCHANNELS": "4"}, True),
    # Nothing exchanged (the no_communication diagnostic): what is left of the step's
    # slowdown against one GPU is the engine's and the processes', not communication's.
    "cap25_no_communication": ("NVLINK", 25, {}, False, "plugin { no_communication {} }"),
    "cap25_high_priority_no_communication": ("NVLINK", 25, {}, True, "plugin { no_communication {} }"),
    # PowerSGD rank 1 on few NCCL channels with compute first (its all-reduces are small).
    "powersgd_rank1_cap25": ("NVLINK", 25, {}, False, "plugin { powersgd { matrix_approximation_rank: 1 } }"),
    "powersgd_rank1_cap25_tuned": (
        "NVLINK", 25, {"NCCL_MAX_NCHANNELS": "2"}, True, "plugin { powersgd { matrix_approximation_rank: 1 } }"),
    "host_powersgd_rank1_cap25_tuned": (
        "HOST_MEMORY", 25, {"NCCL_MAX_NCHANNELS": "2"}, True, "plugin { powersgd { matrix_approximation_rank: 1 } }"),
    "powersgd_rank4_cap25_tuned": (
        "NVLINK", 25, {"NCCL_MAX_NCHANNELS": "2"}, True, "plugin { powersgd { matrix_approximation_rank: 4 } }"),
    "powersgd_rank4_cap2000": ("NVLINK", 2000, {}, False, "plugin { powersgd { matrix_approximation_rank: 4 } }"),
    "powersgd_rank1_cap2000": ("NVLINK", 2000, {}, False, "plugin { powersgd { matrix_approximation_rank: 1 } }"),
    "bf16_host_cap25_tuned": ("HOST_MEMORY", 25, {"NCCL_MAX_NCHANNELS": "2"}, True, "plugin { bf16 {} }"),
    # Gradients averaged where they lie (zero_copy: no bucket, no copy; it replaces
    # bucket_view).
    "nvlink_cap25_tuned_zero_copy": ("NVLINK", 25, {"NCCL_MAX_NCHANNELS": "4"}, True, "plugin { zero_copy {} }"),
    "host_cap100_zero_copy": ("HOST_MEMORY", 100, {}, False, "plugin { zero_copy {} }"),
}

EXPERIMENT = """# proto-message: ddplab.v1.Experiment
name: "{name}"
model {{ preset: VIT_L_32 }}
data {{ batch_size: 32 num_workers: 8 pin_memory: true }}
steps {{ warmup: 10 measured: {measured} }}
optimizer {{ sgd {{ learning_rate: 0.01 }} }}
distributed {{
  gpus_per_node: {gpus} device: CUDA transport: {transport}
  high_priority_compute: {high}
{env}}}
profiling {{ bucket_timing: true }}
plugin {{ bucket_sizing {{ bucket_cap_mb: {cap} }} }}
plugin {{ static_graph {{}} }}
{views}{more}
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=int, default=4)
    p.add_argument("--measured", type=int, default=30)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--timeout", type=int, default=120, help="seconds per run before it is killed")
    a = p.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "environment.json"), "w") as f:
        json.dump(environment.environment(), f, indent=1)
    rows = []
    for name in a.variants.split(","):
        transport, cap, env, high, *more = VARIANTS[name]
        lines = "".join(f'  nccl_env {{ name: "{k}" value: "{v}" }}\n' for k, v in env.items())
        path = os.path.join(out, name + ".textproto")
        with open(path, "w") as f:
            f.write(EXPERIMENT.format(name=name, measured=a.measured, gpus=a.gpus, transport=transport,
                                      high="true" if high else "false", env=lines, cap=cap,
                                      more="".join(more),
                                      # zero_copy decides where gradients live instead of bucket_view
                                      views="" if "zero_copy" in "".join(more) else "plugin { bucket_view {} }\n"))
        log = os.path.join(out, name + ".log")
        with open(log, "w") as f:
            try:
                code = subprocess.call(["bazel-bin/experiments/vit_ddp", f"--experiment={path}",
                                        f"--output_dir={out}/{name}"], stdout=f,
                                       stderr=subprocess.STDOUT, timeout=a.timeout)
            except subprocess.TimeoutExpired:
                code = "timeout"
        found = glob.glob(f"{out}/{name}/*/{name}.json")
        if code != 0 or not found:
            print(f"{name}: FAILED ({code}), see {log}", flush=True)
            rows.append({"variant": name, "failed": str(code)})
            continue
        with open(found[0]) as f:
            r = json.load(f)
        busbw = r.get("bucket_busbw_gbps", [])
        row = {"variant": name, "transport": transport, "bucket_cap_mb": cap, "nccl_env": env,
               "high_priority_compute": high, "plugins": "".join(more), "steps_per_s": r["steps_per_s"],
               "backward_ms": r["phases"]["backward_ms"], "step_ms": r["phases"]["step_ms"],
               "exposed_comm_ms": r.get("exposed_comm_ms", 0.0),
               "mean_busbw_gbps": sum(busbw) / len(busbw) if busbw else 0.0,
               "peak_memory_gib": r["peak_memory_gib"], "nccl_transport": r.get("nccl_transport", "")}
        rows.append(row)
        print(f"{name}: {row['steps_per_s']:.3f} steps/s, backward {row['backward_ms']:.1f} ms, "
              f"exposed {row['exposed_comm_ms']:.2f} ms", flush=True)
    with open(os.path.join(out, "tuning.json"), "w") as f:
        json.dump({"gpus": a.gpus, "measured_steps": a.measured, "rows": rows}, f, indent=1)
    print(f"\n| variant | steps/s | backward ms | step ms | exposed ms | busbw GB/s | NCCL |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "failed" in r:
            print(f"| {r['variant']} | failed ({r['failed']}) | | | | | |")
        else:
            print(f"| {r['variant']} | {r['steps_per_s']:.3f} | {r['backward_ms']:.1f} | {r['step_ms']:.1f} "
                  f"| {r['exposed_comm_ms']:.2f} | {r['mean_busbw_gbps']:.0f} | {r['nccl_transport']} |")


if __name__ == "__main__":
    main()
