#include "core/engine/group_collectives.h"

#include <memory>
#include <utility>
#include <vector>

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace ddplab {

namespace {

// The mean over one rank is the tensor itself: no collective. With NCCL, none also means
// no communicator, whose making slows the rest of the process's steps (bench/NOTES.md).
// What a collective's wait also does is kept: on a GPU the stream that waits is ordered
// after the stream that started the mean (which wrote the tensor), as NCCL's stream would
// have been; the engine's update stream reads the tensor after that wait.
PendingMean Done(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.device().is_cpu()) return {c10::intrusive_ptr<c10d::Work>(), [] {}, nullptr};
  const c10::Device device = tensor.device();
  const c10::impl::VirtualGuardImpl guard(device.type());
  auto written = std::make_shared<c10::Event>(device.type());
  written->record(guard.getStream(device));
  return {c10::intrusive_ptr<c10d::Work>(), [written, device] {
            const c10::impl::VirtualGuardImpl guard(device.type());
            written->block(guard.getStream(device));
          },
          nullptr};
}

#if TORCH_VERSION_MAJOR < 2
// Gloo in LibTorch 1.x sums float32, float64 and integers; any other floating dtype
// travels as its bytes and is summed in float32 (StartMean).
bool GlooSums(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || !at::isFloatingType(dtype);
}
#endif

}  // namespace

PendingMean StartMean(compat::CollectiveGroup& group, at::Tensor tensor, bool nccl) {
  const int world = group.getSize();
  if (world == 1) return Done(tensor);
  if (nccl) {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::AVG;
    c10::intrusive_ptr<c10d::Work> work = group.allreduce(tensors, options);
    return {work, [work] { work->wait(); }, nullptr};
  }
#if TORCH_VERSION_MAJOR < 2
  if (!nccl && !GlooSums(tensor.scalar_type())) {
    // The bytes of every rank's values, gathered; summed in float32 in rank order.
    at::Tensor bytes = tensor.contiguous().view(at::kByte).reshape(-1);
    std::vector<at::Tensor> input{bytes};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world; ++r) output[0].push_back(at::empty_like(bytes));
    c10::intrusive_ptr<c10d::Work> work = group.allgather(output, input);
    std::function<void()> finish = [output, tensor, world]() mutable {
      at::Tensor sum = at::zeros(tensor.sizes(), tensor.options().dtype(at::kFloat));
      for (const at::Tensor& from : output[0]) {
        sum.add_(from.view(tensor.scalar_type()).view(tensor.sizes()).to(at::kFloat));
      }
      tensor.copy_(sum.div_(world));
    };
    return {work, [work, finish] {
              work->wait();
              finish();
            },
            finish};
  }
#endif
  tensor.div_(world);
  std::vector<at::Tensor> tensors{tensor};
  c10::intrusive_ptr<c10d::Work> work = group.allreduce(tensors);
  return {work, [work] { work->wait(); }, nullptr};
}

PendingMean StartMeanCoalesced(compat::CollectiveGroup& group, std::vector<at::Tensor> tensors,
                               bool nccl) {
  if (group.getSize() == 1) return Done(tensors.empty() ? at::Tensor() : tensors[0]);
  if (tensors.size() == 1) return StartMean(group, tensors[0], nccl);
#if TORCH_VERSION_MAJOR < 2
  if (!nccl && !GlooSums(tensors[0].scalar_type())) {
    // A dtype this Gloo cannot sum: each through StartMean's own way, one after another.
    std::vector<PendingMean> each;
    for (at::Tensor& t : tensors) each.push_back(StartMean(group, t, nccl));
    c10::intrusive_ptr<c10d::Work> last = each.back().work;
    return {last,
            [each]() mutable {
              for (PendingMean& m : each) m.wait();
            },
            [each]() mutable {  // once the last is done: the others were started before it
              for (size_t k = 0; k + 1 < each.size(); ++k) each[k].work->wait();
              for (PendingMean& m : each) {
                if (m.finish) m.finish();
              }
            }};
  }
#endif
  c10d::AllreduceCoalescedOptions options;
  if (nccl) {
    options.reduceOp = c10d::ReduceOp::AVG;
  } else {
    for (at::Tensor& t : tensors) t.div_(group.getSize());
  }
  c10::intrusive_ptr<c10d::Work> work = group.allreduce_coalesced(tensors, options);
  return {work, [work] { work->wait(); }, nullptr};
}

void AllGatherBytes(compat::CollectiveGroup& group, bool nccl, at::Tensor& gathered, const at::Tensor& mine) {
  at::Tensor out = gathered.view(at::kByte).view(-1), in = mine.view(at::kByte).view(-1);
  if (nccl) {
    group._allgather_base(out, in)->wait();
    return;
  }
  const int64_t bytes = in.numel();
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int r = 0; r < group.getSize(); ++r) outs[0].push_back(out.narrow(0, r * bytes, bytes));
  std::vector<at::Tensor> ins{in};
  group.allgather(outs, ins)->wait();
}

PendingMean StartMeanScatter(compat::CollectiveGroup& group, std::vector<at::Tensor> inputs,
                             std::vector<at::Tensor> shards, bool nccl) {
  const int world = group.getSize();
  if (world == 1 || shards.empty()) {
    if (!shards.empty()) compat::CopyEach(shards, inputs);
    return Done(shards.empty() ? at::Tensor() : shards[0]);
  }
  if (nccl) {
    if (c10::intrusive_ptr<c10d::Work> work = compat::ReduceScatterMeanCoalesced(group, shards, inputs)) {
      return {work, [work] { work->wait(); }, nullptr};
    }
  }
  // No reduce-scatter here: each input averaged whole, then this rank's chunk.
  PendingMean mean = StartMeanCoalesced(group, inputs, nccl);
  const int64_t rank = group.getRank();
  std::function<void()> copy = [inputs, shards, rank] {
    for (size_t k = 0; k < shards.size(); ++k) {
      shards[k].copy_(inputs[k].view(-1).narrow(0, rank * shards[k].numel(), shards[k].numel()));
    }
  };
  std::function<void()> finish = [mean, copy] {
    if (mean.finish) mean.finish();
    copy();
  };
  return {mean.work, [mean, copy] {
            mean.wait();
            copy();
          },
          finish};
}

PendingMean StartGatherInPlace(compat::CollectiveGroup& group, std::vector<at::Tensor> wholes, bool nccl) {
  const int world = group.getSize();
  if (world == 1 || wholes.empty()) return Done(wholes.empty() ? at::Tensor() : wholes[0]);
  const int64_t rank = group.getRank();
  std::vector<at::Tensor> mine;
  for (const at::Tensor& whole : wholes) mine.push_back(whole.narrow(0, rank * (whole.numel() / world), whole.numel() / world));
  if (nccl) {
    if (c10::intrusive_ptr<c10d::Work> work = compat::AllGatherIntoCoalesced(group, wholes, mine)) {
      return {work, [work] { work->wait(); }, nullptr};
    }
  }
  // Without the grouped form (Gloo): this rank's chunks end to end, every rank's gathered
  // at once (AllGatherBytes, which waits), each rank's chunks copied into their places.
  const at::Tensor ins = at::cat(mine);
  at::Tensor gathered = at::empty({world * ins.numel()}, ins.options());
  AllGatherBytes(group, nccl, gathered, ins);
  for (int r = 0; r < world; ++r) {
    int64_t offset = r * ins.numel();
    for (const at::Tensor& whole : wholes) {
      const int64_t n = whole.numel() / world;
      whole.narrow(0, r * n, n).copy_(gathered.narrow(0, offset, n));
      offset += n;
    }
  }
  return Done(wholes[0]);
}

namespace {

class GroupCollectives : public Collectives {
 public:
  GroupCollectives(compat::CollectiveGroup& group, bool nccl) : group_(group), nccl_(nccl) {}
  PendingMean StartMean(at::Tensor tensor) const override { return ddplab::StartMean(group_, std::move(tensor), nccl_); }
  PendingMean StartMeanCoalesced(std::vector<at::Tensor> tensors) const override {
    return ddplab::StartMeanCoalesced(group_, std::move(tensors), nccl_);
  }
  void AllGatherBytes(at::Tensor& gathered, const at::Tensor& mine) const override {
    ddplab::AllGatherBytes(group_, nccl_, gathered, mine);
  }
  PendingMean StartMeanScatter(std::vector<at::Tensor> inputs, std::vector<at::Tensor> shards) const override {
    return ddplab::StartMeanScatter(group_, std::move(inputs), std::move(shards), nccl_);
  }
  PendingMean StartGatherInPlace(std::vector<at::Tensor> wholes) const override {
    return ddplab::StartGatherInPlace(group_, std::move(wholes), nccl_);
  }

 private:
  compat::CollectiveGroup& group_;
  bool nccl_;
};

}  // namespace

std::shared_ptr<const Collectives> CollectivesOver(compat::CollectiveGroup& group, bool nccl) {
  return std::make_shared<const GroupCollectives>(group, nccl);
}

}  // namespace ddplab
