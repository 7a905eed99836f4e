#!/usr/bin/env python3
"""On a GPU machine: how vit_ddp's workers meet, and what of the job listens on TCP.

Three ways to start the same small CUDA job (a tiny ViT, NCCL), each watched every 0.2 s
for the TCP sockets its processes listen on (/proc/<pid>/fd against /proc/net/tcp{,6}):
  launcher  - vit_ddp --nproc_per_node=N: one node, the store is a file; nothing of ours
              should listen on MASTER_PORT;
  workers   - N workers started by hand with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
              MASTER_PORT (as Slurm or mpirun would): rank 0's TCPStore should listen on
              127.0.0.1 only;
  torchrun  - torchrun --no-python: torchrun's agent serves the store; our workers join
              it as clients (they must not try to serve MASTER_PORT themselves).
NCCL's own bootstrap sockets are listed too, for what they are.

  python3 bench/rendezvous_check.py --binary bazel-bin/experiments/vit_ddp --out DIR [--gpus 4]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

EXPERIMENT = """# proto-message: ddplab.v1.Experiment
name: "rendezvous_check"
model {{ preset: VIT_TINY_TEST }}
data {{ batch_size: 8 image_size: 32 num_workers: 1 }}
steps {{ warmup: 2 measured: {steps} }}
optimizer {{ sgd {{ learning_rate: 0.01 }} }}
distributed {{ gpus_per_node: {gpus} device: CUDA }}
plugin {{ bucket_sizing {{ bucket_cap_mb: 1 }} }}
"""


def children(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        pass
    return inodes


def listening():
    """inode -> 'address:port' for every TCP socket in LISTEN state."""
    found = {}
    for path, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] != "0A":
                continue
            addr, port = f[1].split(":")
            raw = bytes.fromhex(addr)
            if v6:
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                host = socket.inet_ntop(socket.AF_INET6, raw)
            else:
                host = socket.inet_ntop(socket.AF_INET, raw[::-1])
            found[f[9]] = f"{host}:{int(port, 16)}"
    return found


def master_port(pids):
    for p in pids:
        try:
            env = open(f"/proc/{p}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        for kv in env:
            if kv.startswith(b"MASTER_PORT="):
                return int(kv[12:])
    return None


def watch(procs, timeout):
    """Waits for the processes, collecting what their trees listen on."""
    seen, port, start = {}, None, time.time()
    while any(p.poll() is None for p in procs) and time.time() - start < timeout:
        pids = [c for p in procs for c in children(p.pid)]
        port = port or master_port(pids[1:] or pids)
        table = listening()
        for pid in pids:
            for inode in socket_inodes(pid):
                if inode in table:
                    seen.setdefault(table[inode], set()).add(pid)
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            p.kill()
    return {a: sorted(p) for a, p in seen.items()}, port, time.time() - start


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--gpus", type=int, default=4)
    p.add_argument("--steps", type=int, default=400)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    textproto = os.path.join(a.out, "rendezvous_check.textproto")
    with open(textproto, "w") as f:
        f.write(EXPERIMENT.format(gpus=a.gpus, steps=a.steps))
    binary = os.path.abspath(a.binary)
    results = []

    def record(case, procs, logs, check):
        seen, port, seconds = watch(procs, 120)
        codes = [pr.wait() for pr in procs]
        for log in logs:
            log.close()
        ok, why = check(seen, port)
        ok = ok and all(c == 0 for c in codes)
        results.append({"case": case, "exit_codes": codes, "seconds": round(seconds, 1),
                        "master_port": port, "listening": seen, "ok": ok, "why": why})
        print(f"{case:9} {'ok ' if ok else 'BAD'} exit {codes} {seconds:.1f} s  {why}", flush=True)

    # 1. ddplab's launcher: nothing of ours listens on the rendezvous port.
    log = open(os.path.join(a.out, "launcher.log"), "w")
    procs = [subprocess.Popen([binary, f"--experiment={textproto}", f"--output_dir={a.out}/launcher"],
                              stdout=log, stderr=subprocess.STDOUT)]
    record("launcher", procs, [log], lambda seen, port: (
        not any(addr.endswith(f":{port}") for addr in seen),
        f"MASTER_PORT {port}: " + ("nothing listens on it" if not any(
            addr.endswith(f":{port}") for addr in seen) else "listened on")))

    # 2. Workers started by hand: rank 0's store listens on 127.0.0.1 only.
    port = free_port()
    procs, logs = [], []
    for rank in range(a.gpus):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(a.gpus),
                   LOCAL_WORLD_SIZE=str(a.gpus), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        logs.append(open(os.path.join(a.out, f"workers.{rank}.log"), "w"))
        procs.append(subprocess.Popen([binary, f"--experiment={textproto}",
                                       f"--output_dir={a.out}/workers"],
                                      stdout=logs[-1], stderr=subprocess.STDOUT, env=env))

    def store_on_loopback(seen, _):
        on_port = [addr for addr in seen if addr.endswith(f":{port}")]
        return (on_port == [f"127.0.0.1:{port}"], f"MASTER_PORT {port} listened on: {on_port}")

    record("workers", procs, logs, store_on_loopback)

    # 3. torchrun: its agent serves the store; the workers join as clients.
    log = open(os.path.join(a.out, "torchrun.log"), "w")
    procs = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                               f"--nproc_per_node={a.gpus}", "--no-python", binary,
                               f"--experiment={textproto}", f"--output_dir={a.out}/torchrun"],
                              stdout=log, stderr=subprocess.STDOUT)]
    record("torchrun", procs, [log], lambda seen, port: (True, f"MASTER_PORT {port}"))

    with open(os.path.join(a.out, "rendezvous.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
