// NVTX ranges that name what the GPU works on in a profiler's timeline (Nsight Systems).
// In a CPU build, or when disabled, they cost nothing.
#ifndef DDPLAB_CORE_TRAINING_NVTX_H_
#define DDPLAB_CORE_TRAINING_NVTX_H_

#if defined(DDPLAB_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace ddplab {

class NvtxRange {
 public:
  NvtxRange(bool enabled, const char* name) : enabled_(enabled) {
#if defined(DDPLAB_CUDA)
    if (enabled_) nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() { End(); }
  // Ends the range before the scope does.
  void End() {
#if defined(DDPLAB_CUDA)
    if (enabled_) nvtxRangePop();
#endif
    enabled_ = false;
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool enabled_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_TRAINING_NVTX_H_
