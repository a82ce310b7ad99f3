/* All-reduce protocol layout: segment offsets, flag slots, work partition and the kernel
 * argument block. Plain C, included by comm/allreduce.c (CPU backend, launches) and
 * comm/allreduce.cu (GPU kernels), so both sides use the same index math.
 *
 * Protocol (one call = one epoch e = previous epoch + 1, agreed implicitly because every
 * rank of the communicator makes the same sequence of calls):
 *  - Each rank's symmetric segment holds: a control block (its own epoch counter, read and
 *    written only by itself), the flag array, and two data regions selected by e's parity.
 *  - Flag slot (parity(e), phase, block, src) in rank R's segment is written only by rank
 *    src (block `block` of its kernel) and read only by rank R. Writers: data stores, then
 *    release-store e into the slot. Readers: acquire-load until the slot == e, then data loads.
 *  - One-shot: copy input into own data[parity(e)]; signal phase 0 to every peer; wait for
 *    every peer's phase-0 signal; out[i] = sum over ranks 0..n-1 IN THAT ORDER of
 *    data_q[i], accumulated in fp32 starting from rank 0's value, rounded once.
 *  - Two-shot: copy input; signal/wait phase 0; rank R reduces chunk R (fixed order, as
 *    above) into its own data region in place (only R reads chunk R during phase 0, so the
 *    overwrite races with nobody); signal/wait phase 1; gather chunk q from rank q.
 *    Both algorithms therefore produce the same bits, on every rank and on both backends.
 *  - Why two parities: with equality waits, a fast peer at call e+1 must not overwrite the
 *    flag (or the data) a slow rank still reads for call e. A peer can only reach call e+2
 *    after this rank signalled call e+1, which it does after finishing call e; so slots and
 *    data of parity(e) are never rewritten while still in use.
 *  - GPU: block b of rank R only exchanges with block b of its peers (every rank chooses
 *    the same grid for the same call); the partition of elements over blocks is
 *    sl_ar_part(). The epoch counter advances when the last block of the kernel finishes
 *    (so the next launch on the stream reads e), which keeps the call graph-capturable.
 */
#ifndef SL_COMM_ALLREDUCE_LAYOUT_H
#define SL_COMM_ALLREDUCE_LAYOUT_H

#include "comm/flags.h"

/* Index math runs on both sides: host and device under NVRTC. */
#ifdef __CUDACC_RTC__
#define SL_AR_HD __host__ __device__
#else
#define SL_AR_HD
#endif

#define SL_AR_MAX_RANKS 8    /* = SL_SYMM_MAX_RANKS */
#define SL_AR_MAX_BLOCKS 128 /* flag slots per (parity, phase, src): the largest grid */
#define SL_AR_PHASES 2
#define SL_AR_CTL_BYTES 256

/* Algorithms (sl_comm_set_algo forces one; AUTO chooses by size, ranks and NCCL). */
/* ONESHOT_LL: the GPU's one-shot "push" with LL lines for messages up to sl_ar_ll_bytes(); on
 * the CPU backend, and above that size, it runs as ONESHOT (same result bits). */
enum { SL_AR_AUTO = 0, SL_AR_ONESHOT = 1, SL_AR_TWOSHOT = 2, SL_AR_NCCL = 3, SL_AR_NVLS = 4, SL_AR_ONESHOT_LL = 5 };

/* Control block at offset 0 of each rank's segment; private to that rank. */
typedef struct {
  unsigned long long epoch;   /* last completed call */
  unsigned int blocks_done;   /* GPU: blocks of the running kernel that finished */
  unsigned int timeout_claim; /* GPU: first timed-out waiter sets it (then fills the record) */
} sl_ar_ctl_t;

#define SL_AR_NUM_FLAGS (2 * SL_AR_PHASES * SL_AR_MAX_BLOCKS * SL_AR_MAX_RANKS)
#define SL_AR_FLAGS_OFFSET SL_AR_CTL_BYTES
#define SL_AR_DATA_OFFSET (SL_AR_FLAGS_OFFSET + SL_AR_NUM_FLAGS * 8)

static inline SL_AR_HD unsigned sl_ar_flag_index(unsigned long long epoch, int phase, int block, int src) {
  return (unsigned)((((int)(epoch & 1ull) * SL_AR_PHASES + phase) * SL_AR_MAX_BLOCKS + block) * SL_AR_MAX_RANKS + src);
}
/* Decode a flag index (for timeout messages). */
static inline SL_AR_HD void sl_ar_flag_decode(unsigned index, int *phase, int *block, int *src) {
  *src = (int)(index % SL_AR_MAX_RANKS);
  index /= SL_AR_MAX_RANKS;
  *block = (int)(index % SL_AR_MAX_BLOCKS);
  index /= SL_AR_MAX_BLOCKS;
  *phase = (int)(index % SL_AR_PHASES);
}

/* One data region: the largest message, rounded up to 256 bytes. */
static inline SL_AR_HD unsigned long long sl_ar_region_bytes(unsigned long long max_bytes) {
  return (max_bytes + 255ull) & ~255ull;
}
static inline SL_AR_HD unsigned long long sl_ar_data_offset(unsigned long long epoch, unsigned long long max_bytes) {
  return SL_AR_DATA_OFFSET + (epoch & 1ull) * sl_ar_region_bytes(max_bytes);
}

/* LL area (GPU one-shot for small messages, "push"): sender `src` writes its input straight
 * into the receiver's LL lines for (parity(e), src). A line is 16 bytes = two 8-byte words,
 * each {4 data bytes, low 32 bits of the epoch}, written and read as single 64-bit
 * .relaxed.sys accesses (single-copy atomic): a word whose flag half equals the expected
 * epoch carries that call's data, so no separate flag, fence or acquire is needed. 8 data
 * bytes per line: the LL area per (parity, src) is twice the data it carries. The same
 * two-parity argument as above protects the lines: a sender reaches call e+2 only after
 * the receiver finished call e. Epoch e's flag half differs from e-2's (2^32 calls apart). */
#define SL_AR_LL_MAX_BYTES (256u << 10) /* largest message the LL one-shot can carry */
static inline SL_AR_HD unsigned long long sl_ar_ll_bytes(unsigned long long max_bytes) {
  unsigned long long r = sl_ar_region_bytes(max_bytes);
  return r < SL_AR_LL_MAX_BYTES ? r : SL_AR_LL_MAX_BYTES;
}
static inline SL_AR_HD unsigned long long sl_ar_ll_offset(unsigned long long epoch, int src,
                                                          unsigned long long max_bytes) {
  return SL_AR_DATA_OFFSET + 2ull * sl_ar_region_bytes(max_bytes) +
         ((epoch & 1ull) * SL_AR_MAX_RANKS + (unsigned long long)src) * 2ull * sl_ar_ll_bytes(max_bytes);
}
static inline SL_AR_HD unsigned long long sl_ar_segment_bytes(unsigned long long max_bytes) {
  return SL_AR_DATA_OFFSET + 2ull * sl_ar_region_bytes(max_bytes) +
         2ull * SL_AR_MAX_RANKS * 2ull * sl_ar_ll_bytes(max_bytes);
}

/* Split [0, n) into `parts` contiguous ranges whose starts are multiples of `vec`
 * (elements); range `part` is [*begin, *end) (empty ranges at the end are possible). */
static inline SL_AR_HD void sl_ar_part(unsigned long long n, unsigned long long vec, int parts, int part,
                                       unsigned long long *begin, unsigned long long *end) {
  unsigned long long per = (n + (unsigned long long)parts - 1) / (unsigned long long)parts;
  per = (per + vec - 1) / vec * vec;
  unsigned long long b = per * (unsigned long long)part;
  if (b > n) b = n;
  unsigned long long e = b + per;
  if (e > n) e = n;
  *begin = b;
  *end = e;
}

/* Kernel argument block (passed by value; same layout on host and device). */
typedef struct {
  char *seg[SL_AR_MAX_RANKS];   /* every rank's segment, as addressable from this rank */
  const void *in;               /* this rank's input (count elements) */
  void *out;                    /* result (count elements); may equal in */
  void *residual;               /* fused: residual stream (rows x hidden), updated in place */
  const void *weight;           /* fused: RMSNorm weight (hidden) */
  sl_flag_timeout_t *timeout;   /* host-mapped timeout record */
  char *mc;                     /* NVLS only: multicast address of the two data regions */
  char *uc;                     /* NVLS only: this rank's unicast mapping of the same memory */
  unsigned long long count;     /* elements */
  unsigned long long max_bytes; /* the comm's max message (sizes the data regions) */
  unsigned long long timeout_ns;
  int rank, nranks;
  int rows; /* fused: rows (count = rows * hidden) */
  int ll;   /* fused: 1 = exchange x through the LL lines (message <= sl_ar_ll_bytes()) */
} sl_ar_args_t;

#endif
