#include "core/engine/engine.h"

#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/engine/allreduce_hook.h"
#include "core/engine/comm_timer.h"
#include "core/engine/copy_layout.h"
#include "core/hook_updates/hook_updates.h"
#include "core/gradient_targets/gradient_targets.h"

// Note [One process issues no collective]: NCCL's first collective makes a communicator,
// and once one has been made in a process every later step of it is 1.2-1.5% slower
// (backward's launches stall; bench/NOTES.md). So one process broadcasts nothing,
// rebuilds without sharing its order, and, with no hook but core's all-reduce (whose
// mean over one rank is the gradient itself), does no work at all: the engine is then
// a pass-through, decided once when it is made. A mean over one rank issues nothing
// (collectives.h); a hook over one rank still runs (a codec still rounds, as PyTorch's
// bf16_compress_hook does, and pays for it).

namespace ddplab {
namespace {

struct Bucket {
  LayoutBucket def;
  int64_t bytes = 0;
  int pending = 0;  // expected gradients not yet in
  c10::intrusive_ptr<c10::ivalue::Future> future;  // the hook chain's
  c10::intrusive_ptr<c10d::Work> work;             // core's all-reduce of it, if it ran
};

}  // namespace

struct DataParallelEngine::State {
  std::vector<at::Tensor> params;
  ProcessGroupPtr group;
  bool cuda = false;
  int world = 1;
  std::shared_ptr<const BucketPlanner> planner;
  std::shared_ptr<const MissingGradients> missing_gradients;
  std::unique_ptr<GradientLayout> layout;
  std::unique_ptr<CommHook> hook;      // the chain's outermost hook
  size_t hooks = 0;                    // the plugins' hooks in the chain
  std::shared_ptr<const BucketCodec> codec;  // the chain's
  std::shared_ptr<GradientTap> tap;
  bool tapped = false;                 // the tap sees this step
  // Note [One process issues no collective]: nothing to do.
  bool pass_through = false;
  std::shared_ptr<HookUpdates> updates;  // what hooks step themselves, and have stepped
  std::unique_ptr<CommTimer> timer;
  c10::intrusive_ptr<c10d::Store> store;  // for the hooks (CommContext::store)

  std::weak_ptr<State> self;
  std::mutex mu;  // MarkReady runs on autograd's threads
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of, slot_of;
  std::vector<bool> expected;       // should receive a gradient each synced step
  std::vector<bool> marked;         // received one this step
  std::vector<size_t> ready_order;  // the first synced step's order
  size_t next_to_launch = 0;
  bool sync = false, first_step_done = false, rebuilt = false;
  bool record_ready = false, recording_ready = false;  // RecordReadyTimes: asked, this step
  bool shut_down = false, updated = false;
  bool targets_named = false;  // some parameter has a target this engine named (NameTargets)
  int64_t synced_steps = 0;
  std::string error;  // found in MarkReady, reported by EndBackward
  int64_t sent_bytes = 0;  // what core's all-reduce sent this step
  at::ScalarType sent_dtype = at::ScalarType::Undefined;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<std::string> names;  // the parameters', where given (SetParameterNames)

  ~State() { NameTargets(/*none=*/true); }
  void MakeChain(const std::vector<HookWrapper>& wrappers);
  void Plan(const std::vector<size_t>& order);
  void NameTargets(bool none);
  void ResetStep();
  void MarkReady(size_t i);
  void LaunchReady();
  void Launch(size_t index);
  std::string AcceptMissing();
  std::string NamesOf(const std::vector<size_t>& missing) const;
  std::string WaitAndDeliver(size_t index);
};

// Core's all-reduce, wrapped by the plugins' hooks in order; asked once for its codec.
void DataParallelEngine::State::MakeChain(const std::vector<HookWrapper>& wrappers) {
  // Called from Run, with the engine's lock held.
  auto sent = [this](size_t index, const c10::intrusive_ptr<c10d::Work>& work, int64_t bytes, at::ScalarType dtype) {
    buckets[index].work = work;
    sent_bytes += bytes;
    sent_dtype = dtype;
    if (timer->timing() && work) timer->Launched(static_cast<int>(index), work);
  };
  CommContext context{group.get(), group->getRank(), world, cuda, {}, nullptr, {}, store};
  std::weak_ptr<HookUpdates> weak = updates;
  context.step = [weak](const std::vector<size_t>& indices, const std::vector<at::Tensor>& grads) {
    if (std::shared_ptr<HookUpdates> u = weak.lock()) u->Step(indices, grads);
  };
  context.optimizer_over_parts = [weak](const std::vector<ParameterPart>& parts) {
    std::shared_ptr<HookUpdates> u = weak.lock();
    if (!u) throw std::runtime_error("the engine is gone");
    return u->MakeParts(parts);
  };
  hook = MakeHookChain(wrappers, context, sent);
  hooks = wrappers.size();
  codec = hook->Codec();
  pass_through = world == 1 && wrappers.empty();
}

void DataParallelEngine::State::Plan(const std::vector<size_t>& order) {
  std::vector<int64_t> bytes;
  for (const at::Tensor& p : params) bytes.push_back(p.numel() * p.element_size());
  std::vector<std::vector<size_t>> groups = planner->Plan(bytes, order);
  buckets.assign(groups.size(), Bucket());
  bucket_of.assign(params.size(), 0);
  slot_of.assign(params.size(), 0);
  std::vector<LayoutBucket> defs;
  for (size_t b = 0; b < groups.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.def.params = std::move(groups[b]);
    for (size_t k = 0; k < bucket.def.params.size(); ++k) {
      const size_t i = bucket.def.params[k];
      bucket.def.offsets.push_back(bucket.def.numel);
      bucket.def.numel += params[i].numel();
      bucket.bytes += bytes[i];
      bucket_of[i] = b;
      slot_of[i] = k;
    }
    defs.push_back(bucket.def);
  }
  if (pass_through) return;  // nothing is ever reduced: no memory for buckets
  layout->Build(defs, codec);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!expected[i]) layout->MarkUnused(bucket_of[i], slot_of[i]);
  }
}

void DataParallelEngine::State::ResetStep() {
  marked.assign(params.size(), false);
  tapped = tap && sync && tap->Wants(synced_steps, timer->timing());
  sent_bytes = 0;
  next_to_launch = 0;
  for (Bucket& b : buckets) {
    b.pending = 0;
    for (size_t i : b.def.params) b.pending += expected[i] ? 1 : 0;
    b.future.reset();
    b.work.reset();
  }
}

void DataParallelEngine::State::MarkReady(size_t i) {
  std::lock_guard<std::mutex> lock(mu);
  if (!sync || !error.empty()) return;
  if (!expected[i]) {
    error = absl::StrCat("parameter ", i,
                         " received a gradient, but not in the first step: a parameter left "
                         "unused in the first step must stay unused");
    return;
  }
  if (marked[i]) {
    error = absl::StrCat("parameter ", i, " received two gradients in one step");
    return;
  }
  marked[i] = true;
  if (!first_step_done) ready_order.push_back(i);
  if (recording_ready) timer->Ready(i);
  if (pass_through) return;
  if (tapped) tap->Take(i, params[i].grad());
  layout->Collect(bucket_of[i], slot_of[i]);
  if (--buckets[bucket_of[i]].pending == 0) LaunchReady();
}

// Launches complete buckets in order: every rank must issue the same collectives in the
// same order.
void DataParallelEngine::State::LaunchReady() {
  while (next_to_launch < buckets.size() && buckets[next_to_launch].pending == 0) Launch(next_to_launch++);
}

void DataParallelEngine::State::Launch(size_t index) {
  Bucket& b = buckets[index];
  GradBucket out;
  out.index = index;
  out.offsets = b.def.offsets;
  out.parameters = b.def.params;
  for (size_t i : b.def.params) out.sizes.push_back(params[i].sizes().vec());
  out.is_last = index + 1 == buckets.size();
  out.step = synced_steps;
  out.may_measure = !timer->timing();
  layout->HandOver(index, out);
  b.future = hook->Run(out);
}

// " (no gradient: unused.weight (4), ...)" for `missing`, where the names are known.
std::string DataParallelEngine::State::NamesOf(const std::vector<size_t>& missing) const {
  if (names.size() != params.size()) return "";
  std::vector<std::string> named;
  for (size_t i : missing) named.push_back(absl::StrCat(names[i], " (", i, ")"));
  return absl::StrCat(" (no gradient: ", absl::StrJoin(named, ", "), ")");
}

// Parameters that received no gradient: unused for good if the policy accepts them.
std::string DataParallelEngine::State::AcceptMissing() {
  std::vector<size_t> missing;
  for (size_t i = 0; i < params.size(); ++i) {
    if (expected[i] && !marked[i]) missing.push_back(i);
  }
  if (missing.empty()) return "";
  std::string refused = absl::StrCat(
      "parameter(s) ", absl::StrJoin(missing, ", "),
      " received no gradient in this step. Every parameter must take part in every step");
  if (missing_gradients) refused = missing_gradients->Accept(missing, !first_step_done);
  if (!refused.empty()) return absl::StrCat(refused, NamesOf(missing));
  for (size_t i : missing) {
    expected[i] = false;
    if (pass_through) continue;
    layout->MarkUnused(bucket_of[i], slot_of[i]);
    if (--buckets[bucket_of[i]].pending == 0) LaunchReady();
  }
  return "";
}

// Note [Gradients written where they go]: each parameter's next gradient may be written
// where the layout, as built now, names a place for it (none once `none`, or where one
// process issues no collective, or once shut down). The parameters' names are cleared
// whichever engine named them: a second engine over the same parameters, made before
// the first is gone, loses its targets (speed only) until its next step.
// A layout that names none (core's own, zero_copy) costs the registry nothing each step.
void DataParallelEngine::State::NameTargets(bool none) {
  if (pass_through || (shut_down && !none)) return;
  bool named = false;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor target = none ? at::Tensor() : layout->Target(bucket_of[i], slot_of[i]);
    named = named || target.defined();
    if (target.defined() || targets_named) gradient_targets::Set(params[i], target);
  }
  targets_named = named;
}

// Waits for bucket `index` (on a GPU: the current stream waits) and puts its average in
// place; a hook's failure as the error.
std::string DataParallelEngine::State::WaitAndDeliver(size_t index) {
  Bucket& b = buckets[index];
  // Core's all-reduce, where it ran: Gloo completes its future before its work, whose
  // wait also waits for the future's callbacks (the comm timer's end of the span).
  if (b.work) b.work->wait();
  b.future->wait();
  if (b.future->hasError()) {
    return absl::StrCat("reducing bucket ", index, " of step ", synced_steps, " failed: ",
                        compat::WithoutBacktrace(b.future->tryRetrieveErrorMessage()));
  }
  const c10::IValue value = b.future->value();
  at::Tensor result;
  if (value.isTensor()) {
    result = value.toTensor();
  } else if (value.isTensorList() && value.toTensorList().size() == 1) {
    result = value.toTensorList().get(0);
  }
  layout->Deliver(index, result);
  return "";
}

DataParallelEngine::DataParallelEngine(std::vector<at::Tensor> params, ProcessGroupPtr group,
                                       const EngineParts& parts, c10::intrusive_ptr<c10d::Store> store)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.params = std::move(params);
  s.group = std::move(group);
  s.store = std::move(store);
  s.world = s.group->getSize();
  s.cuda = !s.params.empty() && s.params[0].is_cuda();
  s.timer = CommTimer::For(s.params.empty() ? at::Device(at::kCPU) : s.params[0].device());
  s.planner = parts.planner ? parts.planner : std::make_shared<CapPlanner>();
  s.missing_gradients = parts.missing_gradients;
  s.layout = parts.layout ? parts.layout(s.params, MakeFlatBuckets) : std::make_unique<CopyLayout>(s.params);
  s.self = state_;
  s.tap = parts.tap;
  s.updates = std::make_shared<HookUpdates>(s.params);
  s.MakeChain(parts.hooks);
  s.expected.assign(s.params.size(), true);
  std::vector<size_t> order;  // before the first step: reverse parameter order
  for (size_t i = s.params.size(); i-- > 0;) order.push_back(i);
  s.Plan(order);
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(s.params[i]);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (std::shared_ptr<State> state = weak.lock()) state->MarkReady(i);
          return outputs;
        }));
    // The accumulator must outlive the steps, or autograd makes a new one without hooks.
    s.accumulators.push_back(std::move(accumulator));
  }
  UpdateBucketStats();
}

DataParallelEngine::~DataParallelEngine() = default;

void DataParallelEngine::UpdateBucketStats() {
  stats_.bucket_bytes.clear();
  for (const Bucket& b : state_->buckets) stats_.bucket_bytes.push_back(b.bytes);
  stats_.bucket_memory_bytes = state_->pass_through ? 0 : state_->layout->bucket_bytes();
}

absl::Status DataParallelEngine::ShutDown() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.shut_down) return absl::OkStatus();
  s.shut_down = true;
  s.NameTargets(/*none=*/true);
  return ShutDownProcessGroup(*s.group);
}

void DataParallelEngine::BroadcastParameters() { Broadcast(state_->params); }

void DataParallelEngine::Broadcast(const std::vector<at::Tensor>& tensors) {
  if (state_->world == 1 || tensors.empty()) return;  // Note [One process issues no collective]
  at::NoGradGuard no_grad;
  // One flat tensor a dtype (a module's buffers mix float statistics and int64 counts).
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, group] : by_dtype) {
    std::vector<at::Tensor> parts;
    for (const at::Tensor& t : group) parts.push_back(t.detach().reshape(-1));
    std::vector<at::Tensor> flat{at::cat(parts)};
    state_->group->broadcast(flat)->wait();
    int64_t offset = 0;
    for (const at::Tensor& t : group) {
      t.detach().copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

void DataParallelEngine::SetParameterNames(std::vector<std::string> names) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->names = std::move(names);
}

void DataParallelEngine::SetParameterStep(ParameterStep step) { state_->updates->SetParameterStep(std::move(step)); }

void DataParallelEngine::SetOptimizerMaker(OptimizerMaker maker) {
  state_->updates->SetOptimizerMaker(std::move(maker));
}

bool DataParallelEngine::updated_parameters() const { return state_->updated; }

void DataParallelEngine::ZeroGrad() {
  State& s = *state_;
  if (s.pass_through) {
    for (at::Tensor& p : s.params) p.mutable_grad() = at::Tensor();
    return;
  }
  s.layout->ZeroGrad();
}

void DataParallelEngine::BeginStep(bool sync) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.timer->StepBegins();
  s.sync = sync;
  s.updated = false;
  if (sync && s.first_step_done && !s.rebuilt && !s.pass_through) {
    // Regroup once in the order gradients became ready, rank 0's order for everyone.
    std::vector<size_t> order = s.ready_order;
    for (size_t i = s.params.size(); i-- > 0;) {
      if (!s.expected[i]) order.push_back(i);
    }
    if (s.world > 1) {
      at::Tensor shared = at::tensor(std::vector<int64_t>(order.begin(), order.end()),
                                     at::TensorOptions().dtype(at::kLong));
      if (s.cuda) shared = shared.to(s.params[0].device());
      std::vector<at::Tensor> tensors{shared};
      s.group->broadcast(tensors)->wait();
      shared = shared.cpu();
      for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<size_t>(shared[k].item<int64_t>());
    }
    s.Plan(order);
    s.rebuilt = true;
    stats_.rebuilt = true;
    UpdateBucketStats();
  }
  s.ResetStep();
  s.NameTargets(/*none=*/false);
  if (sync) s.updates->BeginStep();
  s.recording_ready = sync && std::exchange(s.record_ready, false);
  if (s.recording_ready) s.timer->BackwardBegins();
}

absl::Status DataParallelEngine::EndBackward() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.shut_down) return absl::FailedPreconditionError("the engine was shut down: no more steps");
  if (!s.sync) return absl::OkStatus();
  if (!s.error.empty()) return absl::InternalError(s.error);
  if (std::string refused = s.AcceptMissing(); !refused.empty()) return absl::FailedPreconditionError(refused);
  const bool timed = s.timer->timing();
  if (!s.pass_through) {
    s.LaunchReady();
    s.hook->BackwardDone();
    if (timed) s.timer->WaitBegins();
    std::string hook_error;  // the first bucket's, once every bucket is done with
    for (size_t i = 0; i < s.buckets.size(); ++i) {
      std::string failed = s.WaitAndDeliver(i);
      if (!failed.empty() && hook_error.empty()) hook_error = std::move(failed);
    }
    if (!hook_error.empty()) return absl::InternalError(hook_error);
    if (timed) {
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (const Bucket& b : s.buckets) works.push_back(b.work);
      s.timer->WaitEnds(std::move(works));
    }
    s.updated = s.updates->SteppedAll();
    stats_.sent_bytes = s.sent_bytes;
    stats_.sent_dtype = s.sent_bytes > 0 ? std::string(c10::toString(s.sent_dtype)) : "";
    stats_.gradient_memory_bytes = s.layout->gradient_bytes();
  }
  if (s.recording_ready) {
    stats_.gradient_ready_ms = s.timer->ReadyTimes();
    s.recording_ready = false;
  }
  stats_.synced_steps++;
  s.synced_steps++;
  if (timed) stats_.timed_steps++;
  s.first_step_done = true;
  return absl::OkStatus();
}

void DataParallelEngine::RecordReadyTimes() { state_->record_ready = true; }

void DataParallelEngine::StartTiming(bool bucket_times) {
  state_->timer->Start(bucket_times);
  stats_.exposed_comm_ms = 0;
  stats_.timed_steps = 0;
  stats_.bucket_allreduce_ms.clear();
  stats_.bucket_busbw_gbps.clear();
  stats_.bucket_spans.clear();
}

void DataParallelEngine::FinishTiming() {
  CommTimer::Totals totals = state_->timer->Finish();
  stats_.exposed_comm_ms = totals.exposed_ms;
  stats_.timing_start = totals.start;
  stats_.bucket_spans = std::move(totals.spans);
  const int world = state_->world;
  for (size_t b = 0; b < totals.bucket_ms.size() && b < stats_.bucket_bytes.size(); ++b) {
    const double ms = totals.bucket_ms[b];
    stats_.bucket_allreduce_ms.push_back(ms);
    const double algbw = stats_.bucket_bytes[b] / (ms * 1e-3) / 1e9;
    stats_.bucket_busbw_gbps.push_back(algbw * 2.0 * (world - 1) / world);
  }
}

std::map<std::string, double> DataParallelEngine::hook_stats() const {
  return state_->hook->Stats();
}

std::vector<std::vector<size_t>> DataParallelEngine::buckets() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : state_->buckets) out.push_back(b.def.params);
  return out;
}

std::string DataParallelEngine::Describe() const {
  const State& s = *state_;
  return internal_engine::Describe(*s.planner, *s.layout, s.codec.get(), s.hooks);
}

}  // namespace ddplab
