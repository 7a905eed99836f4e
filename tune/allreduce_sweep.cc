#include "tune/allreduce_sweep.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "absl/strings/str_cat.h"

#if defined(DDPLAB_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace ddplab::tune {
namespace {

// `iters` all-reduces of `t` back to back; their mean time in microseconds.
double TimeAllReduces(compat::CollectiveGroup& group, at::Tensor& t, int iters) {
  std::vector<at::Tensor> tensors{t};
#if defined(DDPLAB_CUDA)
  if (t.is_cuda()) {
    at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(t.device().index());
    start.record(stream);
    for (int i = 0; i < iters; ++i) group.allreduce(tensors)->wait();  // the stream waits
    end.record(stream);
    end.synchronize();
    return start.elapsed_time(end) * 1e3 / iters;
  }
#endif
  const auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) group.allreduce(tensors)->wait();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - begin).count() / iters;
}

}  // namespace

std::vector<int64_t> DefaultSweepBytes() {
  std::vector<int64_t> bytes;
  for (int64_t b = int64_t{1} << 10; b <= int64_t{1} << 28; b *= 2) bytes.push_back(b);
  return bytes;
}

absl::StatusOr<std::vector<NcclTestsRow>> SweepAllReduce(compat::CollectiveGroup& group, const at::Device& device,
                                                         const SweepOptions& options) {
  const std::vector<int64_t> sizes = options.bytes.empty() ? DefaultSweepBytes() : options.bytes;
  const int ranks = group.getSize();
  const int element = static_cast<int>(c10::elementSize(options.dtype));
  const char* type = options.dtype == at::kBFloat16 ? "bfloat16" : options.dtype == at::kHalf ? "half" : "float";
  std::vector<NcclTestsRow> rows;
  for (const int64_t bytes : sizes) {
    const int64_t count = bytes / element;
    if (count < 1) continue;
    try {
      at::Tensor t = at::empty({count}, at::TensorOptions().dtype(options.dtype).device(device));
      t.fill_(1.0);
      TimeAllReduces(group, t, options.warmup);
      const double us = TimeAllReduces(group, t, options.iters);
      // The check: one all-reduce of rank + 1 everywhere sums to n(n+1)/2 (exact in
      // bfloat16 too for the few ranks of a node).
      t.fill_(group.getRank() + 1);
      std::vector<at::Tensor> tensors{t};
      group.allreduce(tensors)->wait();
      const int64_t wrong = t.ne(ranks * (ranks + 1) / 2).sum().item<int64_t>();
      rows.push_back(MakeAllReduceRow(count * element, element, type, us, ranks, wrong));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("the all-reduce sweep failed at ", bytes, " bytes: ",
                                              compat::WhatWithoutBacktrace(e)));
    }
  }
  return rows;
}

absl::Status SweepIntoResult(compat::CollectiveGroup& group, const at::Device& device, v1::RunResult& result) {
  SweepOptions options;
  const int64_t gradient_bytes = std::max<int64_t>(result.parameters() * 4, int64_t{64} << 10);
  for (int64_t b = int64_t{1} << 10;; b *= 2) {
    options.bytes.push_back(b);
    if (b >= gradient_bytes) break;
  }
  std::vector<NcclTestsRow> rows;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    if (dtype == at::kBFloat16 && !device.is_cuda()) continue;
    options.dtype = dtype;
    absl::StatusOr<std::vector<NcclTestsRow>> some = SweepAllReduce(group, device, options);
    if (!some.ok()) return some.status();
    rows.insert(rows.end(), some->begin(), some->end());
  }
  for (const NcclTestsRow& row : rows) {
    if (row.wrong.value_or(0) > 0) {
      return absl::DataLossError(absl::StrCat("the all-reduce sweep summed ", *row.wrong, " element(s) wrong at ",
                                              row.bytes, " bytes: the transport is broken"));
    }
    v1::AllReduceRow* out = result.add_allreduce_sweep();
    out->set_bytes(row.bytes);
    out->set_count(row.count);
    out->set_type(row.type);
    out->set_time_us(row.time_us);
    out->set_algbw_gbps(row.algbw_gbps);
    out->set_busbw_gbps(row.busbw_gbps);
    out->set_wrong(row.wrong.value_or(0));
  }
  return absl::OkStatus();
}

}  // namespace ddplab::tune
