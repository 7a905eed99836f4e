// Where a run's batches come from, whichever model it trains: the trainer asks for the
// next one each micro-batch (SyntheticData for a ViT's images, CycledBatches for a module
// the user brings, core/model/trained_model.h).
//
//   std::unique_ptr<ddplab::BatchSource> data = model->MakeData(experiment, rank, device);
//   ddplab::Batch batch = data->Next();  // on the run's device, ready on the current stream
#ifndef DDPLAB_CORE_DATA_BATCH_SOURCE_H_
#define DDPLAB_CORE_DATA_BATCH_SOURCE_H_

#include <cstddef>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace ddplab {

// One micro-batch. `images` is the model's input: a ViT's [N, 3, H, W] images, or the one
// input of a module the user brings (its token ids, say: Note [One input for now],
// core/model/trained_model.h). `labels` is the target: [N] class indices, or a
// regression's [N, shape...].
struct Batch {
  at::Tensor images;
  at::Tensor labels;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch on the run's device, ready on the current stream.
  virtual Batch Next() = 0;
  // Seconds Next() spent blocked waiting for a batch to be made.
  virtual double host_wait_seconds() const { return 0; }
};

// A few batches made once, handed out in turn: synthetic data that would cost more to
// draw each step than the step itself (a module's inputs, drawn on the host).
class CycledBatches : public BatchSource {
 public:
  explicit CycledBatches(std::vector<Batch> batches) : batches_(std::move(batches)) {}
  Batch Next() override { return batches_[next_++ % batches_.size()]; }

 private:
  std::vector<Batch> batches_;
  size_t next_ = 0;
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_DATA_BATCH_SOURCE_H_
