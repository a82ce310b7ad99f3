/* Descriptor ring of the inter-node proxy: plain-C layout in host-mapped memory, shared by
 * the proxy (comm/proxy.c), CPU producers (the inline functions below) and GPU producers
 * (comm/ring.cuh). Included by .c and by NVRTC-compiled .cu code; keep it plain C.
 *
 * Protocol (the invariants every producer and the proxy rely on):
 *  - A ring has `capacity` slots (a power of two). Descriptor number i (0, 1, 2, ...) lives
 *    in slot i & (capacity-1).
 *  - Producers reserve numbers with a compare-and-swap on a `head` counter that only
 *    producers touch: number i is taken only while i - tail < capacity, so a reservation
 *    never overwrites a slot the proxy has not consumed, and a producer that gives up
 *    (timeout) leaves no hole. Where `head` lives is the producer side's business (host
 *    memory for CPU producers; device memory for GPU producers, where atomics are native):
 *    the proxy never reads it.
 *  - A producer fills the slot, then publishes it by storing seq = i + 1 with RELEASE
 *    semantics (C11 release / st.release.sys), so the proxy, which loads seq with ACQUIRE,
 *    sees the whole descriptor and the data the producer wrote before posting.
 *  - The proxy consumes descriptors in order. It stores `tail` (descriptors consumed: their
 *    slots may be reused) and `done` (descriptors completed: the data and then the flag
 *    have been delivered into the destination's memory, so the source bytes may be
 *    overwritten) with RELEASE; producers load them with ACQUIRE.
 *  - `error` != 0 means the proxy failed (a peer was lost, a put failed): producers stop
 *    waiting and report it; the text is kept by the proxy (sl_proxy_error).
 *  - Per descriptor, the proxy puts `bytes` from the source rank's window at `local_offset`
 *    to the destination's window at `remote_offset`, makes it complete at the destination,
 *    and only then writes `epoch` into the destination's flag slot `flag_index`: a reader
 *    that sees the epoch in the flag (acquire) sees the data.
 */
#ifndef SL_COMM_RING_H
#define SL_COMM_RING_H

#ifndef __CUDACC_RTC__
#include <stddef.h>
#include <stdint.h>
#else
/* NVRTC has no <stdint.h> on our include path: the fixed-width types as glibc defines them
 * on LP64 (repeating an identical typedef is legal C++, so other headers may do the same). */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
  SL_RING_DESC_BYTES = 64,
  SL_RING_CACHELINE = 64,
};

/* Descriptor operations. */
enum {
  SL_RING_OP_PUT = 1,      /* put bytes, then the flag */
  SL_RING_OP_FLAG_ONLY = 2 /* bytes must be 0: only the flag (a pure signal) */
};

/* One descriptor: 64 bytes, one cache line. `seq` is written last (release). */
typedef struct {
  uint64_t seq;           /* i + 1 once descriptor i is published; 0 / older before */
  uint64_t remote_offset; /* byte offset into the destination's window */
  uint64_t local_offset;  /* byte offset into the source (this rank's) window */
  uint64_t bytes;         /* bytes to put (0 allowed with SL_RING_OP_FLAG_ONLY) */
  uint64_t epoch;         /* value written into the destination's flag slot */
  int32_t dst_rank;       /* world rank of the destination */
  uint32_t flag_index;    /* flag slot at the destination */
  uint32_t op;            /* SL_RING_OP_* */
  uint32_t reserved[3];
} sl_ring_desc_t;

/* Ring header, followed in memory by `capacity` descriptors. Each counter has its own
 * cache line so producers polling `tail` do not bounce the proxy's `done` line. */
typedef struct {
  uint64_t tail; /* written by the proxy: descriptors consumed (slots free again) */
  uint64_t pad0[7];
  uint64_t done; /* written by the proxy: descriptors completed at the destination */
  uint64_t pad1[7];
  uint64_t error; /* written by the proxy: 0 = fine, else a negated sl_status_t */
  uint64_t pad2[7];
  uint32_t capacity; /* slots, a power of two; set at creation, read-only afterwards */
  uint32_t id;       /* which ring of the proxy (for messages) */
  uint32_t pad3[14];
} sl_ring_header_t;

/* Both compilers check the layout the other side assumes. */
#ifdef __cplusplus
static_assert(sizeof(sl_ring_desc_t) == SL_RING_DESC_BYTES, "descriptor is one cache line");
static_assert(sizeof(sl_ring_header_t) == 4 * SL_RING_CACHELINE, "ring header is four cache lines");
#else
_Static_assert(sizeof(sl_ring_desc_t) == SL_RING_DESC_BYTES, "descriptor is one cache line");
_Static_assert(sizeof(sl_ring_header_t) == 4 * SL_RING_CACHELINE, "ring header is four cache lines");
#endif

/* Bytes of a ring of `capacity` slots (header + descriptors). */
static inline size_t sl_ring_bytes(uint32_t capacity) {
  return sizeof(sl_ring_header_t) + (size_t)capacity * sizeof(sl_ring_desc_t);
}

/* The descriptors follow the header. */
static inline sl_ring_desc_t *sl_ring_slots(sl_ring_header_t *ring) {
  return (sl_ring_desc_t *)(void *)((char *)ring + sizeof(sl_ring_header_t));
}

/* The slot of descriptor number `index`. */
static inline sl_ring_desc_t *sl_ring_slot(sl_ring_header_t *ring, uint64_t index) {
  return sl_ring_slots(ring) + (index & (uint64_t)(ring->capacity - 1u));
}

/* May number `index` be reserved now that `tail` descriptors were consumed? */
static inline int sl_ring_has_room(uint64_t index, uint64_t tail, uint32_t capacity) {
  return index - tail < (uint64_t)capacity;
}

/* The value `seq` takes when descriptor `index` is published. */
static inline uint64_t sl_ring_seq_of(uint64_t index) {
  return index + 1u;
}

/* ---- CPU side: producers and the proxy in C (GCC atomic builtins on the plain fields,
 * so the layout stays identical to what the GPU sees). ------------------------------- */
#if !defined(__CUDACC_RTC__) && !defined(__CUDACC__)

static inline uint64_t sl_ring_load_acquire(const uint64_t *p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void sl_ring_store_release(uint64_t *p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Try once to reserve the next number: returns 1 and sets *index on success, 0 when the
 * ring is full (the caller waits and retries, bounded). `head` is the producers' counter. */
static inline int sl_ring_try_reserve(sl_ring_header_t *ring, uint64_t *head, uint64_t *index) {
  uint64_t h = __atomic_load_n(head, __ATOMIC_RELAXED);
  for (;;) {
    uint64_t tail = sl_ring_load_acquire(&ring->tail);
    if (!sl_ring_has_room(h, tail, ring->capacity)) return 0;
    if (__atomic_compare_exchange_n(head, &h, h + 1u, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      *index = h;
      return 1;
    }
  }
}

/* Fill reserved slot `index` with *d and publish it (seq last, release). */
static inline void sl_ring_publish(sl_ring_header_t *ring, uint64_t index, const sl_ring_desc_t *d) {
  sl_ring_desc_t *slot = sl_ring_slot(ring, index);
  slot->remote_offset = d->remote_offset;
  slot->local_offset = d->local_offset;
  slot->bytes = d->bytes;
  slot->epoch = d->epoch;
  slot->dst_rank = d->dst_rank;
  slot->flag_index = d->flag_index;
  slot->op = d->op;
  sl_ring_store_release(&slot->seq, sl_ring_seq_of(index));
}

/* Proxy side: is descriptor `index` published? (acquire: its fields are then visible) */
static inline int sl_ring_is_published(sl_ring_header_t *ring, uint64_t index) {
  return sl_ring_load_acquire(&sl_ring_slot(ring, index)->seq) == sl_ring_seq_of(index);
}

#endif /* CPU side */

#ifdef __cplusplus
}
#endif
#endif
