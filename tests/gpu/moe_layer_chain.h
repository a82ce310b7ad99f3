/* Shared by the GPU layer tests: two layer calls chained in one CUDA graph against the same
 * two calls run eagerly. */
#ifndef MOE_LAYER_CHAIN_H
#define MOE_LAYER_CHAIN_H

#include "kernels/moe_layer.h"
#include "unit/moe_test_util.h"

/* Two calls in a row on one stream, the second reading the first's output: run eagerly with
 * e1, e2 (a stream sync between them), then captured in one graph with g1, g2 (same inputs and
 * outputs, other switches) and replayed three times, the outputs poisoned before each replay:
 * every replay must give the eager outputs bit for bit. */
static inline void moe_layer_graph_chain(sl_device_t *gpu, sl_moe_layer_t *layer, const sl_moe_layer_args_t *e1,
                                         const sl_moe_layer_args_t *e2, const sl_moe_layer_args_t *g1,
                                         const sl_moe_layer_args_t *g2, size_t bytes) {
  assert_ptr_equal(e1->out, g1->out);
  assert_ptr_equal(e2->out, g2->out);
  sl_stream_t *st;
  SL_ASSERT_OK(sl_stream_create(gpu, &st));
  uint16_t *ref1 = malloc(bytes), *ref2 = malloc(bytes), *got = malloc(bytes);
  assert_true(ref1 && ref2 && got);
  SL_ASSERT_OK(sl_moe_layer_forward(layer, e1, st));
  SL_ASSERT_OK(sl_stream_sync(gpu, st));
  SL_ASSERT_OK(sl_moe_layer_forward(layer, e2, st));
  SL_ASSERT_OK(sl_memcpy(gpu, ref1, e1->out, bytes, st));
  SL_ASSERT_OK(sl_memcpy(gpu, ref2, e2->out, bytes, st));
  SL_ASSERT_OK(sl_stream_sync(gpu, st));
  SL_ASSERT_OK(sl_moe_layer_check(layer, st));
  sl_graph_t *g;
  SL_ASSERT_OK(sl_graph_begin_capture(gpu, st));
  SL_ASSERT_OK(sl_moe_layer_forward(layer, g1, st));
  SL_ASSERT_OK(sl_moe_layer_forward(layer, g2, st));
  SL_ASSERT_OK(sl_graph_end_capture(gpu, st, &g));
  for (int rep = 0; rep < 3; rep++) {
    SL_ASSERT_OK(sl_memset(gpu, g1->out, 0xFF, bytes, st));
    SL_ASSERT_OK(sl_memset(gpu, g2->out, 0xFF, bytes, st));
    SL_ASSERT_OK(sl_graph_launch(gpu, g, st));
    SL_ASSERT_OK(sl_memcpy(gpu, got, g1->out, bytes, st));
    SL_ASSERT_OK(sl_stream_sync(gpu, st));
    SL_ASSERT_OK(sl_moe_layer_check(layer, st));
    assert_memory_equal(got, ref1, bytes);
    SL_ASSERT_OK(sl_memcpy(gpu, got, g2->out, bytes, st));
    SL_ASSERT_OK(sl_stream_sync(gpu, st));
    assert_memory_equal(got, ref2, bytes);
  }
  sl_graph_destroy(gpu, g);
  sl_stream_destroy(gpu, st);
  free(ref1);
  free(ref2);
  free(got);
}

#endif
