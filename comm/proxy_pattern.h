/* Test pattern of the proxy tests and of comm/proxy_post.cu: the byte a source rank writes
 * at position i of a block's chunk in a round, so receivers can verify every byte. Plain C
 * with built-in types only (no <stdint.h> under NVRTC), shared by the host tests and the
 * device kernels so the two cannot drift. */
#ifndef SL_COMM_PROXY_PATTERN_H
#define SL_COMM_PROXY_PATTERN_H

static inline unsigned char sl_proxy_pattern_byte(unsigned src_rank, unsigned block, unsigned long long epoch,
                                                  unsigned long long i) {
  unsigned long long x = (i + 1u) * 0x9E3779B97F4A7C15ull ^ ((unsigned long long)src_rank << 48) ^
                         ((unsigned long long)block << 24) ^ (epoch * 0xD1B54A32D192ED03ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (unsigned char)x;
}

#endif
