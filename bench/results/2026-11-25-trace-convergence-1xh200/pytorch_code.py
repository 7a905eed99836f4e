from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as powerSGD
model = DDP(model, device_ids=[local_rank], bucket_cap_mb=25)
model.register_comm_hook(None, default_hooks.bf16_compress_hook)

