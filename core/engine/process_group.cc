#include "core/engine/process_group.h"

#include <exception>

#include "absl/strings/str_cat.h"

#if defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace ddplab {

absl::Status ShutDownProcessGroup([[maybe_unused]] compat::CollectiveGroup& group) {
#if defined(USE_C10D_NCCL)
  if (auto* nccl = dynamic_cast<c10d::ProcessGroupNCCL*>(&group)) {
    try {
      compat::ShutDown(*nccl);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("shutting the NCCL process group down failed: ",
                                              compat::WhatWithoutBacktrace(e)));
    }
  }
#endif
  return absl::OkStatus();
}

}  // namespace ddplab
