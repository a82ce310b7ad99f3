// Flag wrappers self-test: a kernel that uses every wrapper in comm/flags.cuh, so that
// ptxas checks each PTX string (unused inline asm is never assembled). Compiled by
// tests/jit/test_comm.c; on a GPU, two blocks ping-pong ROUNDS epochs through it.
#include "comm/flags.cuh"

#ifndef FLAGS_ROUNDS
#error "FLAGS_ROUNDS (ping-pong rounds) must be defined by the JIT"
#endif

// flags[0]: block 0 -> block 1, flags[1]: block 1 -> block 0, flags[2]: red/atom counter.
// data[0..1]: the payload published with each epoch. errors[0]: mismatches seen.
extern "C" __global__ void sl_flags_selftest(sl_flag_t *flags, unsigned long long *data, unsigned int *errors,
                                             sl_flag_timeout_t *rec, unsigned int *claim,
                                             unsigned long long timeout_ns) {
  if (threadIdx.x != 0) return;
  const int me = blockIdx.x, peer = 1 - blockIdx.x;
  for (unsigned long long e = 1; e <= FLAGS_ROUNDS; e++) {
    if (me == 0) {
      data[0] = e * 3ull;
      sl_fence_acq_rel_gpu();
      sl_st_release_gpu(&flags[0], e);
      if (!sl_flag_wait_eq_dev(&flags[1], e, timeout_ns, rec, claim, me, peer, 1)) return;
      if (sl_ld_acquire_gpu(&flags[1]) != e || data[1] != e * 5ull) atomicAdd(errors, 1u);
    } else {
      if (!sl_flag_wait_eq_dev(&flags[0], e, timeout_ns, rec, claim, me, peer, 0)) return;
      if (sl_ld_relaxed_sys(&flags[0]) != e || data[0] != e * 3ull) atomicAdd(errors, 1u);
      data[1] = e * 5ull;
      sl_fence_acq_rel_sys();
      sl_st_release_sys(&flags[1], e);
    }
    sl_red_release_gpu_add(&flags[2], 1ull);
    sl_red_release_sys_add(&flags[2], 1ull);
    sl_atom_acq_rel_gpu_add(&flags[2], 1ull);
    sl_atom_acq_rel_sys_add(&flags[2], 1ull);
  }
  (void)sl_globaltimer_ns();
}
