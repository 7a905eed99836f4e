// Where a parameter's next gradient is to be written: for the operation that makes the
// gradient to write it there, in place of a tensor of its own that the engine would then
// copy into its bucket.
//
// The engine names a target for each parameter before a step (a layout's
// GradientLayout::Target: with bucket views, the parameter's view into its bucket); an
// operation whose backward writes a new tensor anyway takes the target and writes there.
//
//   gradient_targets::Set(param, view);                  // the engine, each step
//   at::Tensor out = gradient_targets::Take(param);      // a backward: undefined where
//   if (!out.defined()) out = at::empty_like(param);     //   there is none
//
// Note [Gradients written where they go]
// With bucket views (plugins/bucket_view) every gradient ends in its bucket: autograd
// hands the engine a gradient tensor of its own, and the engine copies it into the
// bucket, one read and one write of every gradient. For ViT-L/32's 1.22 GB of float32
// gradients that is 0.9 ms a step on an H200, some 6% of amp_study's step as one CUDA
// graph (bench/NOTES.md, "Gradients written where they go"). Where a gradient's last
// operation writes a fresh tensor anyway, as under autocast the cast of a bfloat16
// gradient back to float32 does (Note [A block's casts together], core/model/vit.cc), and
// in float32 a linear layer's product and sum (LinearIntoTargets, the same file), it can
// write into the bucket instead: it takes the parameter's target and returns a new alias
// of it. autograd makes a gradient that nothing else holds the parameter's
// gradient as it is (AccumulateGrad: no copy), and the layout finds it already in place.
// Anything else falls back to the copy, never to a wrong gradient:
// - a target is given only while the parameter has no gradient (the step's first
//   backward; later micro-steps accumulate into the gradient as before), and once;
// - only where the target has the parameter's shape, dtype and device, both are
//   contiguous (the gradient autograd takes as it is), and the target starts where a
//   fresh tensor of its device would (256 bytes on a GPU: a product into memory aligned
//   less may take another cuBLAS kernel, and under TF32 give other values; 64 on a CPU),
//   so that the values are those the operation writes into a tensor of its own;
// - not while autograd records the backward (create_graph);
// - where autograd keeps the alias from being taken (another reference to it), it
//   copies it into a new tensor, and the engine copies that into the bucket as before.
#ifndef DDPLAB_CORE_GRADIENT_TARGETS_GRADIENT_TARGETS_H_
#define DDPLAB_CORE_GRADIENT_TARGETS_GRADIENT_TARGETS_H_

#include <ATen/ATen.h>

namespace ddplab::gradient_targets {

// `param`'s next gradient goes into `target` (a tensor shaped like it); an undefined
// `target` clears it. Thread-safe.
void Set(const at::Tensor& param, const at::Tensor& target);

// `param`'s target, forgotten once taken, as a new alias for an operation to write
// `param`'s gradient into and return: undefined where there is none, where `param`
// already has a gradient, where the target and `param` differ in shape, dtype or device,
// either is not contiguous or the target is not aligned as a fresh tensor, or while
// autograd records (GradMode on). Thread-safe.
at::Tensor Take(const at::Tensor& param);

// Whether `param` has a target (for tests).
bool Has(const at::Tensor& param);

}  // namespace ddplab::gradient_targets

#endif  // DDPLAB_CORE_GRADIENT_TARGETS_GRADIENT_TARGETS_H_
