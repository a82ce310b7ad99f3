// Probe (not part of the build): grid-barrier variants at 132 blocks, us per barrier in a
// barrier-only loop of R rounds (best of 5 launches), next to cooperative_groups grid.sync.
// What each variant changes against kernels/grid_barrier.cuh (variant "sl"):
//   cg        cooperative_groups::this_grid().sync()
//   sl        the library's barrier (red.release arrive, ld.acquire polls; thread 0's outcome
//             to the block by bar.red.or)
//   slold     the same with the outcome through a shared-memory flag (store, barrier, load:
//             the library until session 15)
//   norel     the same with a relaxed arrive (no MEMBAR before the red: WRONG ordering in
//             general; measures what the release fence costs)
//   ring<k>   k staggered polls in flight per waiting thread (issued ~RTT/k apart), so a
//             poll reaches L2 every RTT/k instead of every RTT after the flip
//   clu<c>    clusters of c blocks: barrier.cluster, then one global arrive/poll per cluster
//             (132/c arrivals and pollers), then barrier.cluster again
// Each variant first runs a checked launch (every block publishes its round before each
// barrier and checks its neighbour's after it) and reports a violation.
// nvcc -O3 -std=c++17 -arch=sm_90 barrier_probe.cu -o barrier_probe
#include <cooperative_groups.h>
#include "probe_util.cuh"
#include "kernels/grid_barrier.cuh"

namespace cg = cooperative_groups;

__device__ __forceinline__ void red_relaxed(unsigned *p, unsigned v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ long long clk() {
  long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
  return c;
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

enum { V_CG, V_SL, V_NOREL, V_RING2, V_RING4, V_CLU2, V_CLU4, V_SLOLD, V_N };
static const char *vname[V_N] = {"cg", "sl", "norel", "ring2", "ring4", "clu2", "clu4", "slold"};

// Wait with K polls in flight, issued `gap` cycles apart (relaxed loads; one acquire fence
// after the flip, as the library's variant 0).
template <int K>
__device__ __forceinline__ void ring_wait(const unsigned *w, unsigned epoch, int gap) {
  unsigned v[K];
#pragma unroll
  for (int i = 0; i < K; i++) {
    long long t0 = clk();
    v[i] = sl_grid_ld_relaxed_u32(w);
    if (i + 1 < K)
      while (clk() - t0 < gap) {
      }
  }
  for (;;) {
#pragma unroll
    for (int i = 0; i < K; i++) {
      if (((v[i] ^ epoch) & SL_GRID_BARRIER_EPOCH_BIT) != 0) {
        sl_grid_fence_acq_rel();
        return;
      }
      v[i] = sl_grid_ld_relaxed_u32(w);
    }
  }
}

template <int V>
__global__ void __launch_bounds__(32) bar_kernel(sl_grid_barrier_state_t *st, int *round_of, int rounds, int check,
                                                 int gap) {
  const unsigned n = gridDim.x;
  sl_grid_barrier_t b;
  sl_grid_barrier_init(&b, st);
  const int csize = V == V_CLU2 ? 2 : V == V_CLU4 ? 4 : 1;
  for (int r = 1; r <= rounds; r++) {
    if (check && threadIdx.x == 0) round_of[blockIdx.x] = r;
    if (V == V_CG) {
      cg::this_grid().sync();
    } else if (V == V_SL) {
      if (!sl_grid_barrier_sync(&b, 1000000000ull)) return;
    } else if (V == V_SLOLD) {
      __shared__ int failed;
      __syncthreads();
      if (threadIdx.x == 0) {
        sl_grid_barrier_arrive(&b);
        failed = !sl_grid_barrier_wait(&b, 1000000000ull);
      }
      __syncthreads();
      if (failed) return;
    } else if (V == V_NOREL || V == V_RING2 || V == V_RING4) {
      __syncthreads();
      if (threadIdx.x == 0) {
        const bool first = blockIdx.x == 0;
        const unsigned add = first ? SL_GRID_BARRIER_EPOCH_BIT - (n - 1u) : 1u;
        if (V == V_NOREL) red_relaxed(&st->word, add);
        else sl_grid_red_release_add_u32(&st->word, add);
        if (V == V_NOREL) {
          while (((sl_grid_ld_acquire_u32(&st->word) ^ b.epoch) & SL_GRID_BARRIER_EPOCH_BIT) == 0) {
          }
        } else if (V == V_RING2) {
          ring_wait<2>(&st->word, b.epoch, gap);
        } else {
          ring_wait<4>(&st->word, b.epoch, gap);
        }
        b.epoch ^= SL_GRID_BARRIER_EPOCH_BIT;
      }
      __syncthreads();
    } else { // clusters
      cluster_sync();
      if (threadIdx.x == 0 && cluster_rank() == 0) {
        const unsigned nc = n / csize;
        const unsigned add = blockIdx.x == 0 ? SL_GRID_BARRIER_EPOCH_BIT - (nc - 1u) : 1u;
        sl_grid_red_release_add_u32(&st->word, add);
        while (((sl_grid_ld_acquire_u32(&st->word) ^ b.epoch) & SL_GRID_BARRIER_EPOCH_BIT) == 0) {
        }
      }
      if (threadIdx.x == 0) b.epoch ^= SL_GRID_BARRIER_EPOCH_BIT;
      cluster_sync();
    }
    if (check && threadIdx.x == 0) {
      int seen = *(volatile int *)&round_of[(blockIdx.x + 1) % n];
      if (seen < r) atomicAdd((int *)&st->error.code, 1);
    }
  }
}

template <int V>
static double run(int blocks, int rounds, int gap, sl_grid_barrier_state_t *st, int *round_of, int *bad) {
  const int csize = V == V_CLU2 ? 2 : V == V_CLU4 ? 4 : 1;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute at[2];
  int na = 0;
  at[na].id = cudaLaunchAttributeCooperative;
  at[na++].val.cooperative = 1;
  if (csize > 1) {
    at[na].id = cudaLaunchAttributeClusterDimension;
    at[na].val.clusterDim.x = csize;
    at[na].val.clusterDim.y = 1;
    at[na++].val.clusterDim.z = 1;
    int nclu = 0;
    cudaLaunchConfig_t q = {};
    q.gridDim = dim3(blocks);
    q.blockDim = dim3(32);
    q.attrs = at + 1;
    q.numAttrs = 1;
    CK(cudaOccupancyMaxActiveClusters(&nclu, bar_kernel<V>, &q));
    if (nclu * csize < blocks) {
      printf("  %s: only %d clusters of %d resident (< %d blocks): skipped\n", vname[V], nclu, csize, blocks);
      return -1;
    }
  }
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(32);
  cfg.attrs = at;
  cfg.numAttrs = na;
  CK(cudaMemset(st, 0, sizeof *st));
  CK(cudaMemset(round_of, 0, blocks * sizeof(int)));
  CK(cudaLaunchKernelEx(&cfg, bar_kernel<V>, st, round_of, 2000, 1, gap));
  CK(cudaDeviceSynchronize());
  sl_grid_barrier_state_t h;
  CK(cudaMemcpy(&h, st, sizeof h, cudaMemcpyDeviceToHost));
  *bad = h.error.code;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float best = 1e30f;
  for (int rep = 0; rep < 5; rep++) {
    CK(cudaEventRecord(e0));
    CK(cudaLaunchKernelEx(&cfg, bar_kernel<V>, st, round_of, rounds, 0, gap));
    CK(cudaEventRecord(e1));
    CK(cudaDeviceSynchronize());
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (ms < best) best = ms;
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return best * 1e3 / rounds;
}

int main(int argc, char **argv) {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = argc > 1 ? atoi(argv[1]) : sms, rounds = 10000;
  sl_grid_barrier_state_t *st;
  int *round_of;
  CK(cudaMalloc(&st, sizeof *st));
  CK(cudaMalloc(&round_of, blocks * sizeof(int)));
  printf("grid barrier probe: %d blocks x 32 threads, %d rounds, best of 5 (us per barrier)\n", blocks, rounds);
  for (int pass = 0; pass < 2; pass++) {
    int bad;
    double us;
#define ROW(V, GAP, LABEL)                                                                                             \
  us = run<V>(blocks, rounds, GAP, st, round_of, &bad);                                                                \
  if (us >= 0) printf("  %-8s gap %4d  %6.3f us  %s\n", LABEL, GAP, us, bad ? "ORDER VIOLATION" : "checked ok");
    ROW(V_CG, 0, "cg");
    ROW(V_SL, 0, "sl");
    ROW(V_SLOLD, 0, "slold");
    ROW(V_NOREL, 0, "norel");
    for (int gap = 100; gap <= 400; gap += 100) {
      ROW(V_RING2, gap, "ring2");
      ROW(V_RING4, gap / 2, "ring4");
    }
    ROW(V_CLU2, 0, "clu2");
    ROW(V_CLU4, 0, "clu4");
  }
  printf("probe done\n");
  return 0;
}
