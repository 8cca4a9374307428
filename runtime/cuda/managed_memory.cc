#include "runtime/cuda/managed_memory.h"

#include <cstdlib>
#include <string>

#include <cuda_runtime.h>

#include "runtime/cuda/cuda_check.h"
#include "runtime/tensor/allocator.h"

namespace dt::rt {
namespace {

void* ManagedAlloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMallocManaged(&p, bytes, cudaMemAttachGlobal) != cudaSuccess) return nullptr;
  return p;
}

// Managed blocks go back to CUDA (cudaFree waits for the device); host
// blocks allocated before the switch to the C heap.
void ManagedFree(void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeManaged) {
    DT_CUDA_CHECK(cudaFree(p));
    return;
  }
  cudaGetLastError();  // a host pointer may leave an error behind on old drivers
  std::free(p);
}

void DeviceSync() { DT_CUDA_CHECK(cudaDeviceSynchronize()); }

const TensorMemory kManaged{"CUDA managed", &ManagedAlloc, &ManagedFree};

}  // namespace

Status UseCudaManagedTensors(int device) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return Internal(std::string("no CUDA device: ") + cudaGetErrorString(e));
  if (device < 0 || device >= count)
    return InvalidArgument("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                           " visible)");
  int managed = 0;
  DT_CUDA_CHECK(cudaSetDevice(device));
  DT_CUDA_CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, device));
  if (!managed) return InvalidArgument("CUDA device " + std::to_string(device) + " has no managed memory");
  SetTensorMemory(&kManaged);
  SetDeviceSyncHook(&DeviceSync);
  return Status::Ok();
}

}  // namespace dt::rt
