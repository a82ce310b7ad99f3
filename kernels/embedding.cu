// Embedding lookup: gather rows of a [vocab, HIDDEN] table by int32 token id, bad ids recorded.
#include "kernels/embedding.h"
#include "kernels/vec.cuh"

#ifndef HIDDEN
#error "HIDDEN (elements per row, a multiple of 8) must be defined by the JIT"
#endif
#ifndef DTYPE
#error "DTYPE (sl_dtype_t code of the table and output) must be defined by the JIT"
#endif
#ifndef WARPS
#error "WARPS (warps per block) must be defined by the JIT"
#endif

static_assert(HIDDEN % 8 == 0, "HIDDEN must be a multiple of 8");

// Layout: one warp per token; lane l copies 16-byte packets l, l+32, ... of the row. Packets
// are moved raw (no conversion), BATCH at a time: all BATCH loads are issued before the first
// store, so each lane keeps BATCH*16 bytes in flight (8 KB per warp at BATCH 16).
constexpr int PACKETS = HIDDEN * sl_elem<DTYPE>::bytes / SL_VEC_BYTES;
constexpr int PER_LANE = (PACKETS + SL_WARP_SIZE - 1) / SL_WARP_SIZE;
constexpr int BATCH = PER_LANE < 16 ? PER_LANE : 16;

extern "C" __global__ void __launch_bounds__(WARPS * SL_WARP_SIZE)
    sl_embedding_fwd(const int *__restrict__ ids, const void *__restrict__ table, void *__restrict__ out,
                     unsigned long long *__restrict__ error, int tokens, int vocab) {
  const int lane = threadIdx.x & (SL_WARP_SIZE - 1);
  const long warp_id = (long)blockIdx.x * WARPS + threadIdx.x / SL_WARP_SIZE;
  const long warp_stride = (long)gridDim.x * WARPS;
  for (long t = warp_id; t < tokens; t += warp_stride) {
    const int id = ids[t];
    const bool bad = id < 0 || id >= vocab;
    // Only lane 0 records, so a bad id costs one atomic; the smallest position wins.
    if (bad && lane == 0) atomicMin(error, sl_embedding_error_encode((int)t, id));
    const uint4 *src =
        reinterpret_cast<const uint4 *>((const char *)table + (long)(bad ? 0 : id) * HIDDEN * sl_elem<DTYPE>::bytes);
    uint4 *dst = reinterpret_cast<uint4 *>((char *)out + t * HIDDEN * sl_elem<DTYPE>::bytes);
#pragma unroll
    for (int b0 = 0; b0 < PER_LANE; b0 += BATCH) {
      uint4 v[BATCH];
#pragma unroll
      for (int b = 0; b < BATCH; b++) {
        const int pk = (b0 + b) * SL_WARP_SIZE + lane;
        v[b] = make_uint4(0u, 0u, 0u, 0u);
        if (!bad && b0 + b < PER_LANE && (PACKETS % SL_WARP_SIZE == 0 || pk < PACKETS)) v[b] = sl_load_packet(src + pk);
      }
#pragma unroll
      for (int b = 0; b < BATCH; b++) {
        const int pk = (b0 + b) * SL_WARP_SIZE + lane;
        if (b0 + b < PER_LANE && (PACKETS % SL_WARP_SIZE == 0 || pk < PACKETS)) sl_store_packet(dst + pk, v[b]);
      }
    }
  }
}
