"""PyTorch's side of the hook parity test (parity/hooks_parity_test.py).

Two commands, both run by an interpreter that has torch (Debian's python3-torch):

  pytorch_reference.py gradients --dir D --seed G --steps S --world W
      Writes the case: D/manifest (the tensors' names and shapes), and every rank's
      gradient for every step, D/grad_r<rank>_s<step>.f32 (raw little-endian float32, the
      tensors one after another in the manifest's order).

  pytorch_reference.py reduce --dir D --run HOOK:RANK:SEED:NAME [--run ...]
      Runs W processes over Gloo (forked from this one, one process group), which for each
      --run in turn build a real DistributedDataParallel over a module whose backward
      yields exactly the rank's gradients, with PyTorch's own hook registered (HOOK bf16:
      default_hooks.bf16_compress_hook; powersgd: powerSGD_hook with PowerSGDState at
      matrix_approximation_rank RANK and random_seed SEED), for the S steps; each writes
      the reduced gradients as D/<NAME>_r<rank>_s<step>.f32 (same layout) and, from rank
      0, D/<NAME>.order: per step the tensors in the order of DDP's one bucket
      ("<step> i0 i1 ..."), which the ddplab side copies.

PyTorch 1.13's Gloo has no bfloat16 all-reduce, so for bf16_compress_hook the bfloat16
all-reduce it issues is stood in for: each rank's bfloat16 values are all-gathered as
their bytes, summed in rank order in float32 and rounded once to bfloat16 (ddplab's own
way on LibTorch 1.x; for two ranks what any bfloat16 sum gives: one addition). The hook
itself (the cast, its division by the world before the all-reduce, the copy back) is
PyTorch's, unchanged.
"""

import argparse
import faulthandler
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
from torch.nn.parallel import DistributedDataParallel as DDP

# The case's tensors, in the module's parameter order: matrices PowerSGD compresses (two
# of one shape, five of another: ddplab orthogonalizes a batch of more than four with
# Gram-Schmidt), a 4-d one it compresses at rank 1 only, matrices exactly at
# min_compression_rate's boundary (16x16 at rank 4, 4x4 at rank 1: not compressed, the
# inequality is strict), a vector and a small matrix it never compresses.
TENSORS = [
    ("w_a", (64, 48)),
    ("w_b", (32, 96)),
    ("conv", (8, 3, 3, 3)),
    ("w_c0", (48, 40)),
    ("w_c1", (48, 40)),
    ("sq16", (16, 16)),
    ("sq4", (4, 4)),
    ("bias", (48,)),
    ("small", (4, 3)),
] + [("w_d%d" % k, (24, 20)) for k in range(5)]


def gradient(seed, rank, step, index, shape):
    """Rank `rank`'s gradient of tensor `index` at `step`.

    Matrices (a tensor viewed as rows x the rest) are a low-rank part that every rank and
    step share, with singular values 1, 1/2, 1/4, 1/8 each scaled by a factor of the step,
    plus a tenth of noise of the rank and step: the spectrum decays, as gradients' do.
    Vectors are noise alone.
    """
    noise = torch.Generator().manual_seed(seed * 1_000_003 + (rank * 1000 + step) * 100 + index)
    if len(shape) < 2:
        return torch.randn(shape, generator=noise)
    rows = shape[0]
    cols = 1
    for d in shape[1:]:
        cols *= d
    shared = torch.Generator().manual_seed(seed * 1_000_003 + 999_999 - index)
    k = min(4, rows, cols)
    u, _ = torch.linalg.qr(torch.randn(rows, k, generator=shared, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(cols, k, generator=shared, dtype=torch.float64))
    step_factor = torch.Generator().manual_seed(seed * 1_000_003 + 7_777 * (step + 1) + index)
    scale = (0.5 ** torch.arange(k, dtype=torch.float64)) * (1 + 0.3 * torch.randn(k, generator=step_factor, dtype=torch.float64))
    low_rank = (u * scale) @ v.T * (rows * cols) ** 0.5 / 4
    m = low_rank + 0.1 * torch.randn(rows, cols, generator=noise, dtype=torch.float64)
    return m.to(torch.float32).reshape(shape)


def write_floats(path, tensors):
    with open(path, "wb") as f:
        for t in tensors:
            f.write(t.detach().contiguous().to(torch.float32).numpy().tobytes())


def read_floats(path, shapes):
    with open(path, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    out, at = [], 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= d
        out.append(data[at:at + n].reshape(shape).clone())
        at += n
    if at != data.numel():
        raise ValueError("%s: %d floats, expected %d" % (path, data.numel(), at))
    return out


def read_manifest(directory):
    names, shapes, meta = [], [], {}
    with open(os.path.join(directory, "manifest")) as f:
        for line in f:
            words = line.split()
            if words[0] == "tensor":
                names.append(words[1])
                shapes.append(tuple(int(d) for d in words[3:3 + int(words[2])]))
            else:
                meta[words[0]] = int(words[1])
    return names, shapes, meta


def make_gradients(args):
    os.makedirs(args.dir, exist_ok=True)
    with open(os.path.join(args.dir, "manifest"), "w") as f:
        f.write("world %d\nsteps %d\n" % (args.world, args.steps))
        for name, shape in TENSORS:
            f.write("tensor %s %d %s\n" % (name, len(shape), " ".join(str(d) for d in shape)))
    for rank in range(args.world):
        for step in range(args.steps):
            tensors = [gradient(args.seed, rank, step, i, shape) for i, (_, shape) in enumerate(TENSORS)]
            write_floats(os.path.join(args.dir, "grad_r%d_s%d.f32" % (rank, step)), tensors)


class GivenGradients(torch.nn.Module):
    """Parameters of the case's shapes; forward(g) = sum_k <p_k, g_k>, so backward yields
    exactly g_k (ones times g_k) as parameter k's gradient."""

    def __init__(self, shapes):
        super().__init__()
        self.params = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s)) for s in shapes])

    def forward(self, gradients):
        total = None
        for p, g in zip(self.params, gradients):
            term = (p * g).sum()
            total = term if total is None else total + term
        return total


class _Done:
    """What dist.all_reduce(async_op=True) returns, for a result already there."""

    def __init__(self, tensor):
        self._future = torch.futures.Future()
        self._future.set_result([tensor])

    def get_future(self):
        return self._future

    def wait(self):
        return True


def _bfloat16_all_reduce(all_reduce):
    """dist.all_reduce of a bfloat16 tensor (a sum) for Gloo, which has none in 1.13: see
    the top of this file. Other tensors go to `all_reduce`."""

    def all_reduce_with_bfloat16(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        if tensor.dtype != torch.bfloat16:
            return all_reduce(tensor, op=op, group=group, async_op=async_op)
        assert op == dist.ReduceOp.SUM
        mine = tensor.contiguous().view(torch.uint8)
        gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, mine, group=group)
        total = torch.zeros(tensor.shape, dtype=torch.float32)
        for g in gathered:
            total += g.view(torch.bfloat16).view(tensor.shape).to(torch.float32)
        tensor.copy_(total)  # one rounding to bfloat16
        return _Done(tensor) if async_op else None

    return all_reduce_with_bfloat16


def _parse_run(text):
    """HOOK:RANK:SEED:NAME (see the top of this file)."""
    hook, rank, seed, out = text.split(":")
    if hook not in ("bf16", "powersgd"):
        raise argparse.ArgumentTypeError("HOOK is bf16 or powersgd, not %r" % hook)
    return argparse.Namespace(hook=hook, rank=int(rank), random_seed=int(seed), out=out)


def _reduce_run(rank, directory, run, shapes, steps, keep):
    """One --run on this rank: a fresh DDP with the run's hook, every step, its files."""
    model = DDP(GivenGradients(shapes), bucket_cap_mb=25)  # everything in one bucket (< 1 MiB)
    keep.append(model)  # never torn down (see _rank_main)
    all_reduce = dist.all_reduce
    if run.hook == "bf16":
        dist.all_reduce = _bfloat16_all_reduce(all_reduce)
        state, hook = None, default_hooks.bf16_compress_hook
    else:
        state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=run.rank,
                                       start_powerSGD_iter=2, min_compression_rate=2,
                                       use_error_feedback=True, warm_start=True, random_seed=run.random_seed)
        hook = powerSGD.powerSGD_hook
    index_of = {p.data_ptr(): i for i, p in enumerate(model.module.params)}
    orders = []

    def recording_hook(hook_state, bucket):
        # One bucket a step (it is the last, index 0): record its tensors' order.
        assert bucket.is_last() and bucket.index() == 0, "more than one bucket"
        orders.append([index_of[p.data_ptr()] for p in bucket.parameters()])
        return hook(hook_state, bucket)

    model.register_comm_hook(state, recording_hook)
    try:
        for step in range(steps):
            gradients = read_floats(os.path.join(directory, "grad_r%d_s%d.f32" % (rank, step)), shapes)
            for p in model.module.params:
                p.grad = None
            model(gradients).backward()
            write_floats(os.path.join(directory, "%s_r%d_s%d.f32" % (run.out, rank, step)),
                         [p.grad for p in model.module.params])
    finally:
        dist.all_reduce = all_reduce
    if len(orders) != steps:
        raise RuntimeError("the hook ran %d times in %d steps" % (len(orders), steps))
    if rank == 0:
        with open(os.path.join(directory, run.out + ".order"), "w") as f:
            for step, order in enumerate(orders):
                f.write("%d %s\n" % (step, " ".join(str(i) for i in order)))


def _rank_main(rank, args, store_path):
    # A rank that has not finished in a minute (it takes seconds) says where it is, and ends.
    faulthandler.dump_traceback_later(60, exit=True)
    torch.set_num_threads(1)
    _, shapes, meta = read_manifest(args.dir)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, meta["world"]), rank=rank,
                            world_size=meta["world"])
    keep = []
    for run in args.run:
        _reduce_run(rank, args.dir, run, shapes, meta["steps"], keep)
    dist.barrier()  # every rank's results are written
    # Ends here, without tearing DDP and the process group down: in about one run in five
    # (under Bazel, on 2 loaded cores) a rank hung in their destructors once it had
    # returned from this function (faulthandler's dump: no frame of it left on the stack).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def reduce(args):
    _, _, meta = read_manifest(args.dir)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # Gloo's connections on loopback only
    with tempfile.TemporaryDirectory() as rendezvous:
        # Forked, not spawned: each rank starts with torch imported, where a spawned one
        # would import it again (seconds). Nothing here has run an operator or a thread yet.
        mp.start_processes(_rank_main, args=(args, os.path.join(rendezvous, "store")), nprocs=meta["world"],
                           join=True, start_method="fork")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    g = commands.add_parser("gradients")
    g.add_argument("--dir", required=True)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--steps", type=int, default=6)
    g.add_argument("--world", type=int, default=2)
    r = commands.add_parser("reduce")
    r.add_argument("--dir", required=True)
    r.add_argument("--run", type=_parse_run, action="append", required=True, help="HOOK:RANK:SEED:NAME")
    args = parser.parse_args(argv)
    if args.command == "gradients":
        make_gradients(args)
    else:
        reduce(args)


if __name__ == "__main__":
    main(sys.argv[1:])
