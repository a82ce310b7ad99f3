/* Internal, CUDA builds only: turn cudaError_t into sl_status_t with file:line. */
#ifndef SL_CUDA_CHECK_H
#define SL_CUDA_CHECK_H

#include <cuda_runtime.h>

#include "sl_status.h"

sl_status_t sl_cuda_status(cudaError_t err, const char *call, const char *file, int line);

#define SL_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t sl_cuda_err_ = (call);                                             \
    if (sl_cuda_err_ != cudaSuccess)                                               \
      return sl_cuda_status(sl_cuda_err_, #call, __FILE__, __LINE__);              \
  } while (0)

#endif
