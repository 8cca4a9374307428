// MemoryParams: the per-device constants of the memory model (bytes per
// weight, gradient and optimizer state element; capacity; reserved bytes;
// fragmentation). Plain data with two presets; docs/memory.md names the
// source of every default. No failure modes.
#pragma once

#include <cstdint>

#include "planner/cost/attention_kernels.h"

namespace dt {

struct MemoryParams {
  int weight_bytes = 2;       // bytes per weight element: 2 (bf16/fp16) or 4 (fp32)
  int grad_bytes = 2;         // bytes per gradient element (Megatron bf16 with
                              // fp32 grad accumulation: 4)
  int optimizer_bytes = 12;   // Adam, mixed precision: fp32 master + m + v (ZeRO's K = 12)
  int activation_bytes = 2;   // bytes per activation element: 2 or 4
  // Bytes per element of the backward working set (gradients in flight,
  // recomputed tensors); 0: activation_bytes. The CPU runtime's bf16 path
  // stores activations in bf16 but computes in fp32 (4), widening a layer's
  // stored tensors to fp32 for its backward.
  int working_bytes = 0;
  // Bytes per parameter of the unit in use (a layer, or the final norm + LM
  // head) held as temporaries next to the model states: the CPU runtime's
  // bf16 path widens its values to an fp32 working copy and, in backward,
  // gives it an fp32 gradient buffer (4 + 4). 0 elsewhere.
  int unit_working_bytes = 0;
  // Bytes per element of the operand copies a GEMM holds during its call:
  // the CPU runtime's bf16 GEMMs round A and B into bf16 copies first
  // (runtime/backend/bf16_gemm.h), 2 x (|A| + |B|) of the largest GEMM of
  // the layer / the head, a temporary. 0 elsewhere.
  int gemm_operand_copy_bytes = 0;
  double capacity_bytes = 80e9;          // device memory (A100/H100 80 GB)
  double reserved_bytes = 2.0 * (1 << 30);  // CUDA context, cuBLAS workspace, NCCL buffers
  double fragmentation = 0.05;  // allocator slack as a fraction of allocated bytes
  // Whose kernels run an unfused attention core (GPU: Megatron's, whose
  // PyTorch softmax fallback keeps an fp32 softmax output).
  AttentionKernels attention_kernels = AttentionKernels::kRuntime;
  // dtrun's pipeline sends are non-blocking and a sent activation stays
  // allocated until the next pipeline rank posts its receive (MPI completes
  // a message above the eager size only then): on a rank whose forwards run
  // ahead of the next rank's (GPipe's forward phase), they pile up. GPU
  // frameworks wait for their sends (false).
  bool sends_held_until_received = false;

  // bf16 weights and activations, bf16 gradients, fp32 Adam master + m + v.
  static MemoryParams MixedPrecision(double capacity_bytes) {
    MemoryParams p;
    p.capacity_bytes = capacity_bytes;
    return p;
  }
  // fp32 everything: the fp32 weights are the master copy; Adam m + v = 8.
  static MemoryParams Fp32(double capacity_bytes) {
    MemoryParams p;
    p.weight_bytes = 4;
    p.grad_bytes = 4;
    p.optimizer_bytes = 8;
    p.activation_bytes = 4;
    p.capacity_bytes = capacity_bytes;
    return p;
  }
};

}  // namespace dt
