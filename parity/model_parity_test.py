"""ddplab trains a module the user brings as PyTorch's DDP trains the same file.

The module is tools/torchscript/export_models.py's Mlp (images [N, 3, 8, 8] -> 10 logits),
exported by this machine's python3 torch, and for one case its MlpBatchNorm, whose buffers
both sides make rank 0's before each forward (PyTorch's broadcast_buffers). For each lever, two ranks over Gloo train it
from its file for STEPS steps of SGD on the same batches, on each side:
- ddplab: model_worker.cc, the trainer with the engine and the lever's plugins, as one of
  vit_ddp's workers runs an experiment that names the file (model.torchscript);
- PyTorch: torch.jit.load of the same file wrapped in DistributedDataParallel with the
  lever's arguments or PyTorch's own hook (run in this process's forked children).
The batches are ddplab's for a module (core/model/trained_model.h): 4 drawn once per rank
from a CPU generator seeded seed * 1000003 + rank, inputs then target, cycled. Both sides
run one intra-op thread. Then the trained parameters (and buffers) are compared, tensor by
tensor:
- the lossless levers (one bucket, small buckets, static graph with bucket views, zero
  copy, the optimizer overlapped with the reduction; PyTorch's plain DDP for the last two,
  which change where the bytes go and when the step runs, not what it computes): equal
  bit for bit;
- bf16: equal bit for bit to PyTorch's bf16_compress_hook, whose bfloat16 all-reduce is
  stood in for as in the hook parity test (pytorch_reference.py: PyTorch 1.13's Gloo has
  none; with two ranks any bfloat16 sum is one addition);
- PowerSGD at rank 1 (start_powerSGD_iter 2, error feedback, warm start, random_seed 3):
  a relative L2 difference of at most POWERSGD_BOUND per tensor, as the hook parity test
  allows its compressed gradients, while compression itself moves the parameters from
  the lossless ones by far more (asserted, so that the comparison can fail).
Runs under the Python of ddplab's Python tests, one that has torch (tools/python).
"""
import os
import subprocess
import sys
import tempfile
import unittest

# The comparison is on the CPU: CUDA hidden before torch is imported, since PyTorch's
# PowerSGD hook synchronizes CUDA wherever it sees a GPU, and then fails on CPU tensors.
os.environ["CUDA_VISIBLE_DEVICES"] = ""

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_reference as reference  # noqa: E402

WORLD = 2
STEPS = 6          # 1 warm-up and 5 measured on ddplab's side
BATCH = 8
SEED = 5
BATCHES = 4        # trained_model.cc's kScriptedBatches
LEARNING_RATE = 0.1
POWERSGD_BOUND = 1e-5
RUN_TIMEOUT = 100

# name: (ddplab's plugins, PyTorch's DDP arguments, PyTorch's hook: None, "bf16" or "powersgd"),
# each on MODULE; and a module with buffers, on one bucket (CASE_MODULES).
LEVERS = {
    "one_bucket": ("plugin { bucket_sizing { bucket_cap_mb: 2000 } }", {"bucket_cap_mb": 2000}, None),
    "small_buckets": ("plugin { bucket_sizing { bucket_cap_mb: 0.005 } }", {"bucket_cap_mb": 0.005}, None),
    "static_graph_bucket_view": ("plugin { static_graph {} } plugin { bucket_view {} }",
                                 {"static_graph": True, "gradient_as_bucket_view": True}, None),
    "zero_copy": ("plugin { zero_copy {} }", {}, None),
    "optimizer_overlap": ("plugin { optimizer_overlap {} }", {}, None),
    "bf16": ("plugin { bf16 {} }", {}, "bf16"),
    "powersgd": ("plugin { powersgd { matrix_approximation_rank: 1 start_powerSGD_iter: 2 use_error_feedback: true "
                 "warm_start: true min_compression_rate: 2 random_seed: 3 } }", {}, "powersgd"),
}


def _runfile(path):
    root = os.environ.get("TEST_SRCDIR") or os.environ.get("RUNFILES_DIR")
    if not root:
        raise RuntimeError("run under bazel test: no runfiles")
    return os.path.join(root, "ddplab", path)


MODULE = "core/model/torchscript/testdata/mlp.pt"
# Cases on another module: its buffers (a BatchNorm's running statistics) are rank 0's
# before each forward on both sides (broadcast_buffers), and compared too.
CASE_MODULES = {"batch_norm": "core/model/torchscript/testdata/mlp_bn.pt"}
LEVERS["batch_norm"] = LEVERS["one_bucket"]


def module_of(name):
    return CASE_MODULES.get(name, MODULE)


def module_state(module):
    """The tensors each side writes: parameters, then buffers, in the module's order."""
    return [p.detach() for p in module.parameters()] + [b.detach() for b in module.buffers()]


def batches(rank):
    """ddplab's batches for a module on `rank` (ScriptedModel::MakeBatch, CycledBatches)."""
    g = torch.Generator().manual_seed(SEED * 1000003 + rank)
    out = []
    for _ in range(BATCHES):
        images = torch.empty([BATCH, 3, 8, 8]).normal_(0.0, 1.0, generator=g)
        labels = torch.empty([BATCH], dtype=torch.long).random_(0, 10, generator=g)
        out.append((images, labels))
    return out


def _pytorch_rank(rank, store_path, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, WORLD), rank=rank, world_size=WORLD)
    keep = []
    for name, (_, ddp_args, hook) in LEVERS.items():
        model = DDP(torch.jit.load(_runfile(module_of(name))), **ddp_args)
        keep.append(model)  # never torn down (as pytorch_reference.py's ranks)
        all_reduce = dist.all_reduce
        if hook == "bf16":
            dist.all_reduce = reference._bfloat16_all_reduce(all_reduce)
            state, chosen = None, default_hooks.bf16_compress_hook
        elif hook == "powersgd":
            state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                           min_compression_rate=2, use_error_feedback=True, warm_start=True,
                                           random_seed=3)
            chosen = powerSGD.powerSGD_hook
        if hook:
            # Wrapped: register_comm_hook refuses bf16_compress_hook by name without CUDA.
            def wrapped(hook_state, bucket, chosen=chosen):
                return chosen(hook_state, bucket)
            model.register_comm_hook(state, wrapped)
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
        data = batches(rank)
        try:
            for step in range(STEPS):
                images, labels = data[step % BATCHES]
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(images), labels).backward()
                optimizer.step()
        finally:
            dist.all_reduce = all_reduce
        reference.write_floats(os.path.join(out_dir, "pt_%s_r%d.f32" % (name, rank)), module_state(model.module))
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class ModelParityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.shapes, cls.initial = {}, {}
        for name in LEVERS:
            module = torch.jit.load(_runfile(module_of(name)))
            cls.shapes[name] = [tuple(t.shape) for t in module_state(module)]
            cls.initial[name] = [t.clone() for t in module_state(module)]
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        with tempfile.TemporaryDirectory() as rendezvous:
            print("running PyTorch's runs", flush=True)
            mp.start_processes(_pytorch_rank, args=(os.path.join(rendezvous, "store"), cls.dir), nprocs=WORLD,
                               join=True, start_method="fork")
        print("running ddplab's runs", flush=True)
        cls._ddplab()

    @classmethod
    def _ddplab(cls):
        """Every lever's run, one after another, in one job of WORLD ranks of model_worker."""
        suites = []
        for name, (plugins, _, _) in LEVERS.items():
            suites.append(os.path.join(cls.dir, name + ".textproto"))
            with open(suites[-1], "w") as f:
                f.write('name: "%s"\nmodel { torchscript { file: "%s" input { shape: [3, 8, 8] } classes: 10 } }\n'
                        'data { batch_size: %d seed: %d }\nsteps { warmup: 1 measured: %d }\n'
                        'optimizer { sgd { learning_rate: %g } }\ndistributed { device: CPU gpus_per_node: %d }\n%s\n'
                        % (name, _runfile(module_of(name)), BATCH, SEED, STEPS - 1, LEARNING_RATE, WORLD, plugins))
        with tempfile.TemporaryDirectory() as rendezvous:
            procs = []
            for rank in range(WORLD):
                env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD),
                           LOCAL_WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500",
                           DDPLAB_RENDEZVOUS_FILE=os.path.join(rendezvous, "store"))
                procs.append(subprocess.Popen(
                    [_runfile("parity/model_worker"), "--experiments=" + ",".join(suites), "--out_dir=" + cls.dir],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
            failures = []
            for rank, p in enumerate(procs):
                try:
                    output, _ = p.communicate(timeout=RUN_TIMEOUT)
                except subprocess.TimeoutExpired:
                    for q in procs:
                        q.kill()
                    output, _ = p.communicate()
                if p.returncode != 0:
                    failures.append("rank %d exit %d:\n%s" % (rank, p.returncode, output.decode(errors="replace")))
        if failures and all("this build has no Gloo" in f for f in failures):
            raise unittest.SkipTest("this build's LibTorch has no Gloo")
        if failures:
            raise RuntimeError("ddplab's runs failed: %s" % "\n".join(failures))

    def read(self, side, name, rank):
        return reference.read_floats(os.path.join(self.dir, "%s_%s_r%d.f32" % (side, name, rank)), self.shapes[name])

    def assert_equal_on_every_rank(self, name):
        for rank in range(WORLD):
            mine, theirs = self.read("dl", name, rank), self.read("pt", name, rank)
            for k, (m, t) in enumerate(zip(mine, theirs)):
                self.assertFalse(torch.equal(m, self.initial[name][k]), "%s: tensor %d did not train" % (name, k))
                self.assertTrue(torch.equal(m, t), "%s rank %d tensor %d: largest difference %g" %
                                (name, rank, k, (m - t).abs().max().item()))

    def test_lossless_levers_train_bit_for_bit_as_pytorch(self):
        for name in ("one_bucket", "small_buckets", "static_graph_bucket_view", "zero_copy", "optimizer_overlap"):
            with self.subTest(lever=name):
                self.assert_equal_on_every_rank(name)

    def test_a_modules_buffers_are_rank_zeros_before_each_forward_as_pytorchs(self):
        self.assert_equal_on_every_rank("batch_norm")
        # The ranks' running statistics differ after their last forward (each its own
        # batch), as PyTorch's do: the broadcast came before it.
        self.assertFalse(torch.equal(self.read("dl", "batch_norm", 0)[-2], self.read("dl", "batch_norm", 1)[-2]))

    def test_bf16_trains_bit_for_bit_as_pytorchs_hook(self):
        self.assert_equal_on_every_rank("bf16")
        exact = self.read("dl", "one_bucket", 0)
        self.assertTrue(any(not torch.equal(b, e) for b, e in zip(self.read("dl", "bf16", 0), exact)),
                        "bf16 changed nothing: the comparison could not fail")

    def test_powersgd_trains_within_the_hook_tests_bound(self):
        exact = self.read("dl", "one_bucket", 0)
        for rank in range(WORLD):
            mine, theirs = self.read("dl", "powersgd", rank), self.read("pt", "powersgd", rank)
            for k, (m, t) in enumerate(zip(mine, theirs)):
                scale = t.double().norm().item()
                difference = (m.double() - t.double()).norm().item() / scale
                compression = (t.double() - exact[k].double()).norm().item() / scale
                self.assertLessEqual(difference, POWERSGD_BOUND, "rank %d parameter %d" % (rank, k))
                if len(self.shapes["powersgd"][k]) == 2:  # compressed: compression itself moves it by far more
                    self.assertGreater(compression, 100 * POWERSGD_BOUND, "rank %d parameter %d" % (rank, k))


if __name__ == "__main__":
    unittest.main()
