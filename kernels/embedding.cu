// Embedding lookup: gather rows of a [vocab, HIDDEN] table by int32 token id, bad ids recorded.
#include "kernels/embedding.h"
#include "kernels/moe_pdl.cuh"
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

#ifndef LANE_PACKETS
#error "LANE_PACKETS (16-byte packets per lane per task, 1..16) must be defined by the JIT"
#endif

static_assert(HIDDEN % 8 == 0, "HIDDEN must be a multiple of 8");
static_assert(LANE_PACKETS >= 1 && LANE_PACKETS <= 16, "LANE_PACKETS must be in [1, 16]");

// Layout: a row is cut into CHUNKS tasks of TASK_PACKETS 16-byte packets; a warp copies one task
// at a time, lane l moving packets l, l+32, ... of it. Packets are moved raw (no conversion),
// all LANE_PACKETS loads issued before the first store (LANE_PACKETS x 16 bytes in flight per
// lane). Large T: LANE_PACKETS = min(row's packets per lane, 16), one or two tasks per row.
// Small T: 2 packets per lane, so a 14 KB row is 14 tasks spread over 14 warps (and SMs)
// instead of one warp doing two dependent rounds of 16 loads then 16 stores.
constexpr int PACKETS = HIDDEN * sl_elem<DTYPE>::bytes / SL_VEC_BYTES;
constexpr int TASK_PACKETS = SL_WARP_SIZE * LANE_PACKETS;
constexpr int CHUNKS = (PACKETS + TASK_PACKETS - 1) / TASK_PACKETS;

extern "C" __global__ void __launch_bounds__(WARPS * SL_WARP_SIZE)
    sl_embedding_fwd(const int *__restrict__ ids, const void *__restrict__ table, void *__restrict__ out,
                     unsigned long long *__restrict__ error, int tokens, int vocab) {
  sl_pdl_entry(); // PDL=1: after the predecessor grid (kernels/moe_pdl.cuh)
  const int lane = threadIdx.x & (SL_WARP_SIZE - 1);
  const long warp_id = (long)blockIdx.x * WARPS + threadIdx.x / SL_WARP_SIZE;
  const long warp_stride = (long)gridDim.x * WARPS;
  const long tasks = (long)tokens * CHUNKS;
  for (long task = warp_id; task < tasks; task += warp_stride) {
    const long t = task / CHUNKS; // a compile-time divisor: a multiply and a shift
    const int chunk = (int)(task - t * CHUNKS);
    const int id = ids[t];
    const bool bad = id < 0 || id >= vocab;
    // Only lane 0 of the row's first task records, so a bad id costs one atomic; the smallest
    // position wins.
    if (bad && chunk == 0 && lane == 0) atomicMin(error, sl_embedding_error_encode((int)t, id));
    const uint4 *src =
        reinterpret_cast<const uint4 *>((const char *)table + (long)(bad ? 0 : id) * HIDDEN * sl_elem<DTYPE>::bytes);
    uint4 *dst = reinterpret_cast<uint4 *>((char *)out + t * HIDDEN * sl_elem<DTYPE>::bytes);
    const int first = chunk * TASK_PACKETS + lane;
    uint4 v[LANE_PACKETS];
#pragma unroll
    for (int b = 0; b < LANE_PACKETS; b++) {
      const int pk = first + b * SL_WARP_SIZE;
      v[b] = make_uint4(0u, 0u, 0u, 0u);
      if (!bad && (PACKETS % TASK_PACKETS == 0 || pk < PACKETS)) v[b] = sl_load_packet(src + pk);
    }
#pragma unroll
    for (int b = 0; b < LANE_PACKETS; b++) {
      const int pk = first + b * SL_WARP_SIZE;
      if (PACKETS % TASK_PACKETS == 0 || pk < PACKETS) sl_store_packet(dst + pk, v[b]);
    }
  }
}
