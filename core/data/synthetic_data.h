// Synthetic training batches, generated ahead of the step that uses them.
//
// As the seed experiment's dataset: images of normal random values and uniform random
// labels (Task RANDOM), or images whose content depends on the label, so that a model
// can learn (Task LEARNABLE). Worker threads generate batches into host buffers (pinned
// when asked, for asynchronous copies); on a GPU each batch is copied on a side stream,
// `prefetch` batches ahead, and the compute stream waits only for its own batch.
//
//   ddplab::SyntheticData data(options);
//   for (...) {
//     ddplab::Batch batch = data.Next();   // on options.device, ready on the current stream
//     ...
//   }

#ifndef DDPLAB_CORE_DATA_SYNTHETIC_DATA_H_
#define DDPLAB_CORE_DATA_SYNTHETIC_DATA_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "core/data/batch_source.h"
#include "ddplab/v1/experiment.pb.h"

namespace ddplab {

// Its batches: images [N, 3, H, W] float, labels [N] int64.
class SyntheticData : public BatchSource {
 public:
  struct Options {
    int64_t batch_size = 32;
    int64_t image_size = 224;
    int64_t num_classes = 1000;
    int num_workers = 0;      // 0: generate on the calling thread
    bool pin_memory = false;  // pinned host buffers and asynchronous copies (GPU only)
    int prefetch = 2;         // batches generated (and copied) ahead
    v1::Data::Task task = v1::Data::RANDOM;
    uint64_t seed = 0;
    int rank = 0;             // each rank draws its own stream of batches
    at::Device device = at::kCPU;
  };

  explicit SyntheticData(const Options& options);
  ~SyntheticData();
  SyntheticData(const SyntheticData&) = delete;
  SyntheticData& operator=(const SyntheticData&) = delete;

  // The next batch on the device. On a GPU the current stream waits for its copy.
  // Throws std::runtime_error when a worker failed generating it (out of memory, say).
  Batch Next() override;

  // Seconds Next() spent blocked waiting for workers to finish a batch.
  double host_wait_seconds() const override { return host_wait_seconds_; }

  // Generates batch number `index` into `images` and `labels` (host tensors of the
  // batch's shape). Deterministic: the same options and index give the same batch.
  void Generate(int64_t index, at::Tensor& images, at::Tensor& labels) const;

 private:
  struct Slot;
  struct DeviceBatch;

  void WorkerLoop();
  // Waits for host batch `index` to be generated; returns its slot.
  Slot& WaitReady(int64_t index);
  void Release(Slot& slot);
  // Starts copying batch `index` to the device (GPU only).
  void IssueCopy(int64_t index);

  Options options_;
  at::Tensor prototypes_;  // LEARNABLE: per-class patterns added to the noise

  std::vector<std::unique_ptr<Slot>> slots_;
  std::mutex mu_;
  std::condition_variable ready_cv_, free_cv_;
  int64_t next_to_generate_ = 0;  // guarded by mu_
  int64_t next_to_consume_ = 0;
  [[maybe_unused]] int64_t next_to_copy_ = 0;  // GPU only (IssueCopy)
  bool stopping_ = false;  // guarded by mu_
  std::string failure_;    // guarded by mu_: a worker's error, thrown by Next()
  std::vector<std::thread> workers_;
  std::deque<std::unique_ptr<DeviceBatch>> in_flight_;
  Slot* held_ = nullptr;  // CPU: the slot whose tensors the last batch returned
  double host_wait_seconds_ = 0;
  struct CudaState;
  std::unique_ptr<CudaState> cuda_;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_DATA_SYNTHETIC_DATA_H_
