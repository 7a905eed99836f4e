#!/usr/bin/env python3
"""PyTorch's own ViT training, the reference ddplab is measured against: torchvision's
model, torch.optim.SGD, synthetic normal images with uniform labels from a DataLoader
with worker processes and pinned memory (a DistributedSampler under DDP), as in the seed
experiment; or as users train today: --precision bf16 (torch.autocast) or tf32, and
--optimizer adamw (PyTorch's defaults but --lr), --fused for its fused kernels; --compile for
torch.compile's figure; --zero for its optimizer sharded over the ranks.

  python3 pytorch_vit.py --output r.json                        # one GPU, no DDP
  torchrun --nproc_per_node=4 pytorch_vit.py --ddp --bucket_cap_mb 25 --output r.json
  python3 pytorch_vit.py --ddp --output r.json                  # DDP on one GPU
  torchrun --nproc_per_node=2 pytorch_vit.py --ddp --ddp_code code.py --output r.json

--torchscript FILE trains a module the user brings instead (torch.jit.load, as ddplab's
model.torchscript loads it), fed as ddplab feeds one: --input_shape of one sample
(--input_dtype int64 with --input_high for token ids), --classes, and 4 batches made once on
the device and cycled (core/model/trained_model.h), so that both sides leave data out of
the step alike.

--device cpu trains on the CPU over Gloo (DDP without device_ids), as ddplab's
`distributed { device: CPU }` does: the same command on a machine without a GPU. PyTorch
1.13's Gloo has no bfloat16 all-reduce, so there --comm_hook bf16 stops with that said.

--ddp_code takes the PyTorch code of a ddplab report (a run's "pytorch" field, the
recommendation's code) as it is, in place of --bucket_cap_mb and the flags after it.

Rank 0 writes one JSON record: steps/s over the measured steps (device synchronized
around them) and the peak memory allocated for tensors during them.
"""
import argparse
import contextlib
import datetime
import json
import os
import time

import torch
import torch.distributed as dist


class SyntheticImages(torch.utils.data.Dataset):
    def __init__(self, length, image_size, num_classes):
        self.length, self.image_size, self.num_classes = length, image_size, num_classes

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return torch.randn(3, self.image_size, self.image_size), torch.randint(self.num_classes, ())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="vit_l_32")
    p.add_argument("--torchscript", help="a TorchScript module's file, trained instead of --model")
    p.add_argument("--input_shape", default="3,224,224", help="--torchscript: one sample's input shape")
    p.add_argument("--input_dtype", choices=["float32", "int64"], default="float32")
    p.add_argument("--input_high", type=int, default=0, help="int64 inputs: drawn in [0, high)")
    p.add_argument("--classes", type=int, default=1000, help="--torchscript: the number of classes")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--num_workers", type=int, default=8)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--measured", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--precision", choices=["float32", "tf32", "bf16"], default="float32",
                   help="bf16: forward and loss under torch.autocast(bfloat16); tf32: TF32 matmuls")
    p.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd",
                   help="adamw: torch.optim.AdamW with PyTorch's defaults but --lr (foreach, its default on GPUs)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (for information)")
    p.add_argument("--compile_mode", default="default",
                   help="torch.compile's mode with --compile: default, reduce-overhead (CUDA graphs), ...")
    p.add_argument("--fused", action="store_true",
                   help="the optimizer's fused kernels (torch.optim's fused=True), as ddplab takes them on GPUs")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: on the CPU over Gloo, as ddplab's distributed { device: CPU }")
    p.add_argument("--ddp", action="store_true", help="wrap in DistributedDataParallel")
    p.add_argument("--bucket_cap_mb", type=float, default=25)
    p.add_argument("--static_graph", action="store_true")
    p.add_argument("--gradient_as_bucket_view", action="store_true")
    p.add_argument("--comm_hook", choices=["bf16", "powersgd"], help="DDP communication hook")
    p.add_argument("--powersgd_rank", type=int, default=1)
    p.add_argument("--start_powersgd_iter", type=int, default=2,
                   help="PyTorch's default is 1000, which a short run never reaches; "
                        "with --ddp_code, it replaces the code's (a training value)")
    p.add_argument("--zero", action="store_true",
                   help="the optimizer sharded over the ranks (ZeroRedundancyOptimizer); on GPUs overlapped "
                        "with DDP's buckets (overlap_with_ddp=True, ddp_zero_hook.hook_with_zero_step around "
                        "allreduce_hook), which PyTorch allows over NCCL alone; on CPUs stepped after backward")
    p.add_argument("--optimizer_in_backward", action="store_true",
                   help="each parameter's SGD step inside backward, after its bucket's all-reduce "
                        "(torch.distributed.optim._apply_optimizer_in_backward, which DDP picks up)")
    p.add_argument("--high_priority_compute", action="store_true",
                   help="run the steps on a high-priority CUDA stream (as ddplab's option)")
    p.add_argument("--ddp_code", help="a file with a ddplab report's PyTorch code, which wraps the model "
                   "(bench/ddp_wrap.py) instead of the DDP flags above")
    p.add_argument("--profile_trace", help="after the measured steps, run --profile_steps more under "
                   "torch.profiler (CPU and CUDA) and write their Chrome trace here")
    p.add_argument("--profile_steps", type=int, default=3)
    p.add_argument("--output", required=True)
    a = p.parse_args()

    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    cuda = a.device == "cuda"
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if a.ddp:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        if cuda:
            dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
        else:
            dist.init_process_group("gloo", rank=rank, world_size=world)
            if a.comm_hook == "bf16" and not gloo_has_bfloat16():
                raise SystemExit(f"pytorch_vit.py: --comm_hook bf16 on the CPU: PyTorch {torch.__version__}'s Gloo "
                                 "has no bfloat16 all-reduce, so this PyTorch has no bf16 row there")

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    autocast = dict(device_type=device.type, dtype=torch.bfloat16) if a.precision == "bf16" else None
    if a.torchscript:
        model = torch.jit.load(a.torchscript, map_location=device)
    else:
        import torchvision  # for its models alone: a TorchScript module needs none
        model = getattr(torchvision.models, a.model)().to(device)
    model.train()
    optimizer = None
    kind = torch.optim.AdamW if a.optimizer == "adamw" else torch.optim.SGD
    if a.optimizer_in_backward:
        # Before the DDP wrapper, which then runs each bucket's optimizers on a stream of
        # its own after the bucket's all-reduce, and leaves no gradients after backward.
        from torch.distributed.optim import _apply_optimizer_in_backward
        _apply_optimizer_in_backward(kind, model.parameters(), {"lr": a.lr})
    elif a.zero and a.ddp:
        optimizer = None  # made once the model is wrapped
    else:
        optimizer = kind(model.parameters(), lr=a.lr, **({"fused": True} if a.fused else {}))
    if a.ddp and a.ddp_code:
        import ddp_wrap
        with open(a.ddp_code) as f:
            model, code_optimizer, code_autocast = ddp_wrap.training(
                model, f.read(), local_rank, start_powerSGD_iter=a.start_powersgd_iter)
        if code_optimizer is not None and not a.optimizer_in_backward:
            optimizer = code_optimizer
        autocast = code_autocast or autocast
    elif a.ddp:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if cuda else None, bucket_cap_mb=a.bucket_cap_mb,
            static_graph=a.static_graph, gradient_as_bucket_view=a.gradient_as_bucket_view)
        if a.comm_hook == "bf16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            hook = default_hooks.bf16_compress_hook
            if not cuda:  # wrapped: register_comm_hook refuses bf16_compress_hook by name without CUDA
                hook = lambda state, bucket: default_hooks.bf16_compress_hook(state, bucket)  # noqa: E731
            model.register_comm_hook(None, hook)
        elif a.comm_hook == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
            state = powerSGD_hook.PowerSGDState(
                process_group=None, matrix_approximation_rank=a.powersgd_rank,
                start_powerSGD_iter=a.start_powersgd_iter)
            model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        if a.zero:
            optimizer = sharded_optimizer(a, model, kind, overlap=cuda)
    if a.compile:
        model = torch.compile(model, mode=a.compile_mode)
    criterion = torch.nn.CrossEntropyLoss()
    steps = a.warmup + a.measured + (a.profile_steps if a.profile_trace else 0)
    dataset = SyntheticImages(steps * a.batch_size * world, a.image_size, 1000)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset) if a.ddp else None
    loader = torch.utils.data.DataLoader(dataset, batch_size=a.batch_size, sampler=sampler,
                                         num_workers=a.num_workers, pin_memory=cuda)
    if a.torchscript:
        loader = module_batches(a, steps, device)

    compute = (torch.cuda.stream(torch.cuda.Stream(device, priority=-1)) if a.high_priority_compute
               else contextlib.nullcontext())
    with compute:
        seconds = train(a, loader, model, criterion, optimizer, device, autocast)
    if rank == 0:
        record = {
            "steps_per_s": a.measured / seconds,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,  # CPUs: unmeasured
            "measured_steps": a.measured,
            "measured_seconds": seconds,
            "world_size": world,
            "ddp": a.ddp,
            "comm_hook": a.comm_hook,
            "ddp_code": open(a.ddp_code).read() if a.ddp_code else None,
            "high_priority_compute": a.high_priority_compute,
            "optimizer_in_backward": a.optimizer_in_backward,
            "precision": a.precision if autocast is None else "bf16",
            "optimizer": (type(optimizer).__name__ if not isinstance(optimizer, StepsInHook)
                          else "ZeroRedundancyOptimizer(overlap_with_ddp=True)") if optimizer is not None else a.optimizer,
            "zero": a.zero,
            "compile": a.compile_mode if a.compile else False,
            "model": a.torchscript or a.model,
            "fused": a.fused,
            "torch_version": torch.__version__,
            "device": torch.cuda.get_device_name(local_rank) if cuda else "cpu",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        with open(a.output, "w") as f:
            json.dump(record, f, indent=1)
        print(json.dumps(record))
    if a.ddp:
        dist.destroy_process_group()


def gloo_has_bfloat16():
    """Whether this PyTorch's Gloo sums bfloat16 tensors (1.13's does not)."""
    try:
        dist.all_reduce(torch.zeros(1, dtype=torch.bfloat16))
        return True
    except RuntimeError:
        return False


class StepsInHook:
    """ZeroRedundancyOptimizer overlapped with DDP: its hook steps, and step() in the loop
    would only warn."""

    def __init__(self, zero):
        self.zero = zero

    def zero_grad(self):
        self.zero.zero_grad()

    def step(self):
        pass


def sharded_optimizer(a, ddp_model, kind, overlap):
    """--zero: PyTorch's optimizer sharded over the ranks, its fused kernels where --fused and
    it is not overlapped: inside DDP's hook its functional AdamW fails with fused=True
    (state_steps on the CPU, PyTorch 2.11), so a.fused is then cleared for the record."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    a.fused = a.fused and not overlap
    zero = ZeroRedundancyOptimizer(ddp_model.parameters(), optimizer_class=kind, overlap_with_ddp=overlap, lr=a.lr,
                                   **({"fused": True} if a.fused else {}))
    if not overlap:
        return zero
    from torch.distributed.algorithms.ddp_comm_hooks import ddp_zero_hook, default_hooks
    ddp_model.register_comm_hook(None, ddp_zero_hook.hook_with_zero_step(default_hooks.allreduce_hook, ddp_model, zero))
    return StepsInHook(zero)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def module_batches(a, steps, device):
    """--torchscript's batches: 4 made once on the device, handed out in turn."""
    shape = [a.batch_size] + [int(d) for d in a.input_shape.split(",")]
    made = []
    for _ in range(4):
        if a.input_dtype == "int64":
            inputs = torch.randint(a.input_high, shape, device=device)
        else:
            inputs = torch.randn(shape, device=device)
        made.append((inputs, torch.randint(a.classes, [a.batch_size], device=device)))
    return [made[step % len(made)] for step in range(steps)]


def train(a, loader, model, criterion, optimizer, device, autocast):
    """Runs the steps on the current stream, forward and loss under torch.autocast(**autocast)
    where given; returns the measured steps' seconds."""
    start = seconds = profile = None
    for step, (images, labels) in enumerate(loader):
        if step == a.warmup + a.measured:  # the measured steps are done: the profiled ones follow
            synchronize(device)
            seconds = time.perf_counter() - start
            profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                         torch.profiler.ProfilerActivity.CUDA])
            profile.__enter__()
        if step == a.warmup:
            synchronize(device)
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        with torch.autocast(**autocast) if autocast else contextlib.nullcontext():
            loss = criterion(model(images), labels)
        if optimizer is None:  # stepped inside backward
            loss.backward()
            continue
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    synchronize(device)
    if profile is not None:
        profile.__exit__(None, None, None)
        profile.export_chrome_trace(a.profile_trace)
    return seconds if seconds is not None else time.perf_counter() - start


if __name__ == "__main__":
    main()
