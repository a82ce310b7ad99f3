/* Direct double-precision MoE layer (softmax top-k router, SiLU experts) for the tests. */
#ifndef MOE_LAYER_REF_H
#define MOE_LAYER_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/sl_dtype.h"

/* out[T, H] (double) and the routing; weights bf16 as stored; experts [0, E). */
static inline void moe_layer_direct(int T, int E, int K, int H, int I, bool renormalize, const uint16_t *x,
                                    const uint16_t *w_router, const uint16_t *w_gate_up, const uint16_t *w_down,
                                    const uint16_t *residual, int32_t *ids, double *weights, double *out) {
  double *p = malloc((size_t)E * sizeof *p), *act = malloc((size_t)I * sizeof *act);
  for (int t = 0; t < T; t++) {
    const uint16_t *xt = x + (size_t)t * H;
    double mx = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) {
      double l = 0;
      for (int h = 0; h < H; h++) l += (double)sl_bf16_to_f32(w_router[(size_t)e * H + h]) * sl_bf16_to_f32(xt[h]);
      p[e] = l;
      if (l > mx) mx = l;
    }
    for (int e = 0; e < E; e++) sum += (p[e] = exp(p[e] - mx));
    double wsum = 0;
    for (int k = 0; k < K; k++) {
      int best = -1;
      for (int e = 0; e < E; e++) {
        bool taken = false;
        for (int j = 0; j < k; j++) taken |= ids[(size_t)t * K + j] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      ids[(size_t)t * K + k] = best;
      weights[(size_t)t * K + k] = p[best] / sum;
      wsum += p[best] / sum;
    }
    if (renormalize)
      for (int k = 0; k < K; k++) weights[(size_t)t * K + k] /= wsum;
    for (int h = 0; h < H; h++) out[(size_t)t * H + h] = residual ? sl_bf16_to_f32(residual[(size_t)t * H + h]) : 0.0;
    for (int k = 0; k < K; k++) {
      const int e = ids[(size_t)t * K + k];
      for (int i = 0; i < I; i++) {
        double g = 0, u = 0;
        for (int h = 0; h < H; h++) {
          g += (double)sl_bf16_to_f32(w_gate_up[((size_t)e * 2 * I + i) * H + h]) * sl_bf16_to_f32(xt[h]);
          u += (double)sl_bf16_to_f32(w_gate_up[((size_t)e * 2 * I + I + i) * H + h]) * sl_bf16_to_f32(xt[h]);
        }
        act[i] = g / (1.0 + exp(-g)) * u;
      }
      for (int h = 0; h < H; h++) {
        double y = 0;
        for (int i = 0; i < I; i++) y += (double)sl_bf16_to_f32(w_down[((size_t)e * H + h) * I + i]) * act[i];
        out[(size_t)t * H + h] += weights[(size_t)t * K + k] * y;
      }
    }
  }
  free(p);
  free(act);
}

#endif
