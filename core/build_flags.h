// What kind of build this is, as a value code can test: DDPLAB_CUDA_BUILD is 1 in the
// CUDA build (LibTorch with CUDA, NCCL, NVTX; //:cuda_deps defines DDPLAB_CUDA) and 0 in
// the CPU build.
#ifndef DDPLAB_CORE_BUILD_FLAGS_H_
#define DDPLAB_CORE_BUILD_FLAGS_H_

#if defined(DDPLAB_CUDA)
#define DDPLAB_CUDA_BUILD 1
#else
#define DDPLAB_CUDA_BUILD 0
#endif

#endif  // DDPLAB_CORE_BUILD_FLAGS_H_
