// MoE FFN plan (padded mode): from the device counts, the pointer arrays of the batched
// gate_up and down GEMMs over min(E_local, T*K) batch slots, without a host round trip.
// Slot i < n_active: the i-th non-empty expert (expert order). Slot i >= n_active: weights
// of the first non-empty expert (re-read from L2), rows of the (i - n_active)-th empty
// expert (distinct per slot, never read by combine).

#ifndef FFN_LOCAL
#error "FFN_LOCAL (experts in this rank's range) must be defined by the JIT"
#endif
#define FFN_THREADS 256

extern "C" __global__ void __launch_bounds__(FFN_THREADS)
    sl_moe_ffn_plan(const int *__restrict__ counts, int slots, long capacity, long hidden, long inter,
                    const char *x, const char *w_gate_up, const char *w_down, char *y, char *gate_up, char *act,
                    const void **a_gu, const void **b_gu, void **c_gu, const void **a_dn, const void **b_dn,
                    void **c_dn) {
  __shared__ int active[FFN_LOCAL], empty[FFN_LOCAL];
  __shared__ int n_active;
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x, lower = (1u << lane) - 1u;
    int na = 0, ne = 0;
    for (int e0 = 0; e0 < FFN_LOCAL; e0 += 32) {
      const int e = e0 + (int)lane;
      const bool on = e < FFN_LOCAL && counts[e] > 0;
      const unsigned act_mask = __ballot_sync(0xffffffffu, on);
      const unsigned empty_mask = __ballot_sync(0xffffffffu, e < FFN_LOCAL && !on);
      if (on) active[na + __popc(act_mask & lower)] = e;
      else if (e < FFN_LOCAL) empty[ne + __popc(empty_mask & lower)] = e;
      na += __popc(act_mask);
      ne += __popc(empty_mask);
    }
    if (lane == 0) n_active = na;
  }
  __syncthreads();
  const int na = n_active;
  for (int i = threadIdx.x; i < slots; i += FFN_THREADS) {
    const long we = i < na ? active[i] : (na > 0 ? active[0] : 0); // weights
    const long re = i < na ? active[i] : empty[i - na];           // rows
    a_gu[i] = w_gate_up + we * 2 * inter * hidden * 2;
    b_gu[i] = x + re * capacity * hidden * 2;
    c_gu[i] = gate_up + (long)i * capacity * 2 * inter * 2;
    a_dn[i] = w_down + we * hidden * inter * 2;
    b_dn[i] = act + (long)i * capacity * inter * 2;
    c_dn[i] = y + re * capacity * hidden * 2;
  }
}
