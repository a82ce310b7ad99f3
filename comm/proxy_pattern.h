/* Test pattern of the proxy tests and of comm/proxy_post.cu: the byte a source rank writes
 * at position i of a block's chunk in a round, so receivers can verify every byte. Plain C,
 * shared by the host tests and the device kernel so the two cannot drift. */
#ifndef SL_COMM_PROXY_PATTERN_H
#define SL_COMM_PROXY_PATTERN_H

#ifndef __CUDACC_RTC__
#include <stdint.h>
#endif

static inline unsigned char sl_proxy_pattern_byte(uint32_t src_rank, uint32_t block, uint64_t epoch, uint64_t i) {
  uint64_t x = (i + 1u) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)src_rank << 48) ^ ((uint64_t)block << 24) ^
               (epoch * 0xD1B54A32D192ED03ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (unsigned char)x;
}

#endif
