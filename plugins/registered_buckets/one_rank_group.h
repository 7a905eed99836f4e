// For this package's tests on one GPU: a NCCL group of one rank on GPU 0, its
// communicator made by a first all-reduce (windows are a communicator's).
//
//   c10::intrusive_ptr<c10d::ProcessGroupNCCL> group = ddplab::testing::OneRankNcclGroup();
#ifndef DDPLAB_PLUGINS_REGISTERED_BUCKETS_ONE_RANK_GROUP_H_
#define DDPLAB_PLUGINS_REGISTERED_BUCKETS_ONE_RANK_GROUP_H_

#if defined(DDPLAB_CUDA) && defined(USE_C10D_NCCL)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace ddplab::testing {

inline c10::intrusive_ptr<c10d::ProcessGroupNCCL> OneRankNcclGroup() {
  c10::cuda::set_device(0);
  char path[] = "/tmp/one_rank_group_XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  std::remove(path);
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::FileStore>(path, 1), 0, 1);
  std::vector<at::Tensor> first{at::ones({4}, at::TensorOptions().device(at::kCUDA))};
  group->allreduce(first)->wait();
  return group;
}

}  // namespace ddplab::testing

#endif
#endif  // DDPLAB_PLUGINS_REGISTERED_BUCKETS_ONE_RANK_GROUP_H_
