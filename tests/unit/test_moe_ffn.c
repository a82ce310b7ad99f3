/* MoE expert FFN on the CPU backend against the direct double-precision formula
 * y = Wd (silu(Wg x) * (Wu x)), including empty experts and partially filled capacity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/moe_ffn.h"
#include "unit/moe_test_util.h"

static double silu(double g) { return g / (1.0 + exp(-g)); }

static void test_ffn_matches_formula(void **state) {
  enum { E = 4, CAP = 5, H = 24, IN = 16 };
  const int32_t counts[E] = {3, 0, 5, 1};
  uint64_t rng = sl_test_seed() + 3;
  uint16_t *x = calloc((size_t)E * CAP * H, 2), *y = calloc((size_t)E * CAP * H, 2);
  uint16_t *wgu = calloc((size_t)E * 2 * IN * H, 2), *wd = calloc((size_t)E * H * IN, 2);
  assert_true(x && y && wgu && wd);
  moe_rand_bf16(&rng, (size_t)E * CAP * H, x);
  for (size_t i = 0; i < (size_t)E * 2 * IN * H; i++) wgu[i] = sl_f32_to_bf16(0.3f * sl_test_rand_normal(&rng));
  for (size_t i = 0; i < (size_t)E * H * IN; i++) wd[i] = sl_f32_to_bf16(0.3f * sl_test_rand_normal(&rng));
  for (size_t i = 0; i < (size_t)E * CAP * H; i++) y[i] = 0xFFFF;
  size_t ws_bytes = sl_moe_ffn_workspace_bytes(E, CAP, CAP, 2, H, IN);
  void *ws = malloc(ws_bytes);
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  sl_moe_ffn_args_t a = {.num_local_experts = E, .capacity = CAP, .hidden = H, .inter = IN, .num_tokens = CAP,
                         .top_k = 2, .x = x, .expert_counts = counts, .w_gate_up = wgu, .w_down = wd, .y = y,
                         .workspace = ws, .workspace_bytes = ws_bytes};
  SL_ASSERT_OK(sl_moe_ffn(dev, &a, NULL));
  for (int e = 0; e < E; e++)
    for (int r = 0; r < CAP; r++) {
      const uint16_t *xr = x + ((size_t)e * CAP + r) * H;
      const uint16_t *yr = y + ((size_t)e * CAP + r) * H;
      if (r >= counts[e]) {
        for (int h = 0; h < H; h++) assert_int_equal(yr[h], 0xFFFF); /* padding rows untouched */
        continue;
      }
      double act[IN], want[H], scale = 0;
      for (int i = 0; i < IN; i++) {
        double g = 0, u = 0;
        for (int h = 0; h < H; h++) {
          g += sl_bf16_to_f32(wgu[((size_t)e * 2 * IN + i) * H + h]) * (double)sl_bf16_to_f32(xr[h]);
          u += sl_bf16_to_f32(wgu[((size_t)e * 2 * IN + IN + i) * H + h]) * (double)sl_bf16_to_f32(xr[h]);
        }
        act[i] = silu(g) * u;
      }
      for (int h = 0; h < H; h++) {
        want[h] = 0;
        for (int i = 0; i < IN; i++) want[h] += sl_bf16_to_f32(wd[((size_t)e * H + h) * IN + i]) * act[i];
        if (fabs(want[h]) > scale) scale = fabs(want[h]);
      }
      /* bf16 intermediates (gate_up, activation, output) give a few 2^-9 relative errors. */
      for (int h = 0; h < H; h++) {
        double got = sl_bf16_to_f32(yr[h]);
        if (!(fabs(got - want[h]) <= 0.02 * scale + 0.01 * fabs(want[h])))
          fail_msg("expert %d row %d col %d: got %.6g want %.6g (row scale %.3g)", e, r, h, got, want[h], scale);
      }
    }
  sl_device_close(dev);
  free(ws);
  free(x);
  free(y);
  free(wgu);
  free(wd);
}

static void test_ffn_bad_args(void **state) {
  sl_device_t *dev;
  SL_ASSERT_OK(sl_device_open(SL_DEVICE_CPU, 0, &dev));
  int32_t counts[1] = {1};
  char buf[64];
  sl_moe_ffn_args_t a = {.num_local_experts = 1, .capacity = 1, .hidden = 12, .inter = 8, .num_tokens = 1,
                         .top_k = 1, .x = buf, .expert_counts = counts, .w_gate_up = buf, .w_down = buf, .y = buf,
                         .workspace = buf, .workspace_bytes = sizeof buf};
  assert_int_equal(sl_moe_ffn(dev, &a, NULL), SL_ERR_INVALID); /* H not a multiple of 8 */
  a.hidden = 8;
  assert_int_equal(sl_moe_ffn(dev, &a, NULL), SL_ERR_INVALID); /* workspace too small */
  assert_non_null(strstr(sl_last_error(), "workspace"));
  a.gemv_variant = 4; /* not 0 automatic, 1 wide, 2 split, 3 bulk */
  assert_int_equal(sl_moe_ffn(dev, &a, NULL), SL_ERR_INVALID);
  assert_non_null(strstr(sl_last_error(), "gemv_variant"));
  sl_device_close(dev);
}

/* Which padded-mode runs take the weight-streaming kernels: rows per expert min(capacity,
 * T) <= 16, or on average T*K / E_local <= 16, unless forced either way; exact mode never. */
static void test_ffn_gemv_rule(void **state) {
  (void)state;
  sl_moe_ffn_args_t a = {.num_local_experts = 128, .capacity = 1, .hidden = 2048, .inter = 768, .num_tokens = 1,
                         .top_k = 8};
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_MAX_ROWS;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 128; /* Qwen3 decode at T=128: 8 rows per expert on average */
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 16 * 128 / 8; /* average exactly 16 */
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 16 * 128 / 8 + 1; /* average above 16 */
  assert_false(sl_moe_ffn_uses_gemv(&a));
  a.num_local_experts = 16; /* few local experts (EP): 8 tokens x 8 / 16 = 4 rows each, but up to 8 */
  a.capacity = a.num_tokens = 8;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = a.num_tokens = 33; /* 33 x 8 / 16 = 16.5 on average, up to 33 */
  assert_false(sl_moe_ffn_uses_gemv(&a));
  a.capacity = 200; /* a large capacity but few tokens: at most T rows per expert */
  a.num_tokens = 8;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.capacity = 4; /* few rows by capacity */
  a.num_tokens = 100;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.small_rows = -1;
  assert_false(sl_moe_ffn_uses_gemv(&a));
  a.small_rows = 1;
  a.capacity = a.num_tokens = 1000;
  assert_true(sl_moe_ffn_uses_gemv(&a));
  a.exact_rows = true;
  assert_false(sl_moe_ffn_uses_gemv(&a));
}

/* The FFN kernels' work split (sl_moe_ffn_work, shared with kernels/moe_ffn_gemv.cu),
 * walked as the kernels walk it (units u = warp, warp + warps, ... < (end - begin) S):
 * every chunk of every tile is covered exactly once, parts of a tile are contiguous and in
 * part order, S > 1 only in the split variant, dividing the warps (a tile's parts in one
 * round: the kernels add them at a barrier) and each part has >= 2 chunks. Shapes: Qwen3 T=1 (768 gate_up / 1024 down
 * tiles on 132 blocks), T=2/5/8-like counts, tiny and odd ones, more blocks than tiles. */
static void check_work_split(long tiles, int grid, int warps, int nch, int split) {
  int *cover = calloc((size_t)(tiles > 0 ? tiles : 1) * nch, sizeof(int));
  assert_non_null(cover);
  for (int b = 0; b < grid; b++) {
    sl_moe_ffn_work_t w0 = sl_moe_ffn_work(tiles, grid, b, 0, nch, warps, split);
    const int units = (w0.end - w0.begin) * w0.S;
    if (!split) assert_int_equal(w0.S, 1);
    if (w0.S > 1) {
      assert_int_equal(warps % w0.S, 0); /* a tile's parts: neighbouring warps of one round */
      assert_true(nch / w0.S >= 2);
      assert_true(w0.end - w0.begin < warps);
    }
    for (int warp = 0; warp < warps; warp++) {
      sl_moe_ffn_work_t w = sl_moe_ffn_work(tiles, grid, b, warp, nch, warps, split);
      assert_int_equal(w.S, w0.S);
      for (int u = warp; u - warp < units; u += warps) {
        sl_moe_ffn_work_unit(&w, u, nch);
        if (u >= units) {
          assert_int_equal(w.tile, w.end); /* a warp without a unit this round */
          continue;
        }
        assert_true(w.tile >= w.begin && w.tile < w.end);
        assert_true(w.ch0 < w.ch1 && w.ch1 <= nch);
        if (w.part > 0) {
          assert_int_equal(u / warps, (u - w.part) / warps); /* its part-0 warp is in this round */
          sl_moe_ffn_work_t prev = w;
          sl_moe_ffn_work_unit(&prev, u - 1, nch);
          assert_int_equal(prev.tile, w.tile);
          assert_int_equal(prev.ch1, w.ch0);
        }
        for (int ch = w.ch0; ch < w.ch1; ch++) cover[(size_t)w.tile * nch + ch]++;
      }
    }
  }
  for (long i = 0; i < tiles * nch; i++) assert_int_equal(cover[i], 1);
  free(cover);
}

static void test_ffn_work_split(void **state) {
  (void)state;
  const int warps_split = SL_MOE_FFN_GEMV_SPLIT_THREADS / 32, warps_wide = SL_MOE_FFN_GEMV_THREADS / 32;
  const long tiles[] = {0, 1, 7, 96, 192, 480, 768, 1024, 4096, 6144};
  const int grids[] = {1, 3, 132, 148};
  const int nchs[] = {1, 2, 3, 6, 16};
  for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++)
    for (size_t j = 0; j < sizeof grids / sizeof *grids; j++)
      for (size_t k = 0; k < sizeof nchs / sizeof *nchs; k++) {
        const int grid = tiles[i] < grids[j] ? (tiles[i] > 0 ? (int)tiles[i] : 1) : grids[j]; /* host: min */
        check_work_split(tiles[i], grid, warps_split, nchs[k], 1);
        check_work_split(tiles[i], grid, warps_wide, nchs[k], 0);
      }
  /* Qwen3 T=1 at 12 warps: gate_up 768 tiles on 132 blocks (5-6 each), 16 chunks -> K over
   * 2 warps; down 1024 tiles (7-8 each), 6 chunks -> 3 warps (8 tiles: 2 full rounds). */
  if (warps_split == 12)
    for (int b = 0; b < 132; b++) {
      assert_int_equal(sl_moe_ffn_work(768, 132, b, 0, 16, warps_split, 1).S, 2);
      assert_int_equal(sl_moe_ffn_work(1024, 132, b, 0, 6, warps_split, 1).S, 3);
    }
  sl_moe_ffn_work_t w = sl_moe_ffn_work(1, 1, 0, 0, 16, warps_split, 1); /* one tile: largest S <= 8 */
  assert_int_equal(w.S, warps_split % 8 == 0 ? 8 : 6);
}

/* The streaming kernels' variant (kernels/moe_ffn.c, sl_moe_ffn_gemv_variant): split while
 * an expert holds at most 8 rows (min(capacity, T)) and the call has >= 16 pairs, wide
 * otherwise; forced either way. */
static void test_ffn_gemv_variant_rule(void **state) {
  (void)state;
  sl_moe_ffn_args_t a = {.num_local_experts = 128, .capacity = 1, .hidden = 2048, .inter = 768, .num_tokens = 1,
                         .top_k = 8};
  const int small = SL_MOE_FFN_GEMV_SPLIT_AUTO ? SL_MOE_FFN_GEMV_SPLIT : SL_MOE_FFN_GEMV_WIDE;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_WIDE); /* T = 1: 8 pairs */
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_SPLIT_MIN_PAIRS / a.top_k; /* T = 2: 16 pairs */
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.capacity = 1; /* one row per expert, but 16 pairs: split */
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.top_k = 4; /* 8 pairs: wide */
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_WIDE);
  a.top_k = 8;
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS; /* T = 8: the switch point */
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_SPLIT_MAX_ROWS + 1;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_WIDE);
  a.capacity = 200; /* large capacity, few tokens: at most T rows per expert */
  a.num_tokens = 5;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.capacity = 4; /* few rows by capacity */
  a.num_tokens = 100;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), small);
  a.capacity = a.num_tokens = 128;
  a.gemv_variant = SL_MOE_FFN_GEMV_SPLIT;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_SPLIT);
  a.capacity = a.num_tokens = 1;
  a.gemv_variant = SL_MOE_FFN_GEMV_WIDE;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_WIDE);
  a.gemv_variant = SL_MOE_FFN_GEMV_BULK; /* forced at any row count */
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_BULK);
  a.capacity = a.num_tokens = 200;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_BULK);
  /* Automatic: bulk only once SL_MOE_FFN_GEMV_BULK_AUTO is 1, up to its row bound. */
  a.gemv_variant = SL_MOE_FFN_GEMV_AUTO;
  a.capacity = a.num_tokens = 1;
  assert_int_equal(sl_moe_ffn_gemv_variant(&a) == SL_MOE_FFN_GEMV_BULK, SL_MOE_FFN_GEMV_BULK_AUTO != 0);
  a.capacity = a.num_tokens = SL_MOE_FFN_GEMV_BULK_MAX_ROWS + 1;
  assert_int_not_equal(sl_moe_ffn_gemv_variant(&a), SL_MOE_FFN_GEMV_BULK);
}

/* ---- Bulk variant (kernels/moe_ffn_gemv.h "Bulk variant", kernels/moe_ffn_gemv.cu) -------- */

/* Geometry for every K = 8 .. 16384 (step 8) and several local-expert counts: chunks are
 * whole 64-byte k-steps (the last one the rest: > 0, a multiple of 16, summing to the row),
 * <= SL_MOE_FFN_BULK_CHUNK_MAX; rows of a stage do not overlap, every copy destination is
 * 16-byte aligned and inside its stage; the pitch is 64 mod 128; 2..MAX stages within the
 * budget; barriers 8-byte aligned after the ring. And a gate_up block plus a down block fit
 * one SM (228 KB, 1 KB reserved per block, 128 bytes of static shared memory) at Qwen3 and
 * DeepSeek-V3 sizes. */
static void test_ffn_bulk_geometry(void **state) {
  (void)state;
  static const int locals[] = {1, 16, 128, 256, 1024};
  for (size_t li = 0; li < sizeof locals / sizeof *locals; li++)
    for (int k = 8; k <= 16384; k += 8) {
      const sl_moe_ffn_bulk_geom_t g = sl_moe_ffn_bulk_geom(k, locals[li]);
      assert_int_equal(g.row_bytes, 2 * k);
      assert_int_equal(g.chunk_bytes % 64, 0);
      assert_true(g.chunk_bytes <= SL_MOE_FFN_BULK_CHUNK_MAX);
      int sum = 0;
      for (int ch = 0; ch < g.nch; ch++) {
        const int b = sl_moe_ffn_bulk_chunk(&g, ch);
        assert_true(b > 0 && b % 16 == 0 && b <= g.chunk_bytes);
        sum += b;
      }
      assert_int_equal(sum, g.row_bytes);
      assert_int_equal(g.pitch % 128, 64);
      assert_true(g.pitch >= g.chunk_bytes);
      assert_true(g.stages >= 2 && g.stages <= SL_MOE_FFN_BULK_MAX_STAGES);
      assert_true(g.smem_bytes <= SL_MOE_FFN_BULK_SMEM_BUDGET);
      assert_true(g.bar_offset >= g.stages * g.stage_bytes && g.bar_offset % 8 == 0);
      assert_true(g.part_offset >= g.bar_offset + 16 * g.stages && g.part_offset % 16 == 0);
      assert_true(g.table_offset >= g.part_offset + SL_MOE_FFN_BULK_CONSUMERS * 32 * 8 * 4);
      assert_int_equal(g.smem_bytes, g.table_offset + 8 * locals[li]);
      for (int s = 0; s < g.stages; s++)
        for (int r = 0; r < 16; r++) {
          const int dst = sl_moe_ffn_bulk_offset(&g, s, r, 0, 0);
          assert_int_equal(dst % 16, 0);
          assert_true(dst >= s * g.stage_bytes && dst + g.chunk_bytes <= (s + 1) * g.stage_bytes);
          if (r > 0) assert_true(dst >= sl_moe_ffn_bulk_offset(&g, s, r - 1, 0, 0) + g.chunk_bytes);
        }
    }
  static const int shapes[][3] = {{2048, 768, 128}, {2048, 768, 16}, {7168, 2048, 256}, {7168, 2048, 32}};
  for (int i = 0; i < 4; i++) {
    const sl_moe_ffn_bulk_geom_t gu = sl_moe_ffn_bulk_geom(shapes[i][0], shapes[i][2]);
    const sl_moe_ffn_bulk_geom_t dn = sl_moe_ffn_bulk_geom(shapes[i][1], shapes[i][2]);
    assert_true(gu.smem_bytes + dn.smem_bytes + 2 * (1024 + 128) <= 228 * 1024);
    assert_true(gu.stages >= 3); /* >= 64 KB of copies in flight per SM at these sizes */
  }
  const sl_moe_ffn_bulk_geom_t q = sl_moe_ffn_bulk_geom(2048, 128); /* Qwen3 gate_up: 2 chunks of 2 KB */
  assert_int_equal(q.nch, 2);
  assert_int_equal(q.chunk_bytes, 2048);
  assert_int_equal(q.stages, 3);
  const sl_moe_ffn_bulk_geom_t d = sl_moe_ffn_bulk_geom(768, 128); /* Qwen3 down: one 1.5 KB chunk */
  assert_int_equal(d.nch, 1);
  assert_int_equal(d.stages, 4);
}

/* The consumers' LDS.128 of the A fragments (lane (gq, c): 16 bytes of rows gq and gq + 8 at
 * 64 ks + 16 c) is served in quarter warps of 8 lanes: each quarter must touch all 32 banks
 * once (rows gq and gq + 1 one pitch apart, == 64 mod 128). A fixed shift of the base moves
 * every bank equally, so offsets from the ring's start decide. */
static void test_ffn_bulk_banks(void **state) {
  (void)state;
  static const int ks_[] = {768, 2048, 1032, 7168, 8};
  for (int i = 0; i < 5; i++) {
    const sl_moe_ffn_bulk_geom_t g = sl_moe_ffn_bulk_geom(ks_[i], 128);
    for (int s = 0; s < g.stages; s++)
      for (int ks = 0; ks < g.chunk_bytes / 64; ks++)
        for (int hi = 0; hi < 2; hi++)
          for (int q = 0; q < 4; q++) {
            int used[32] = {0};
            for (int lane = 8 * q; lane < 8 * q + 8; lane++) {
              const int off = sl_moe_ffn_bulk_offset(&g, s, lane / 4 + 8 * hi, ks, lane % 4);
              for (int w = 0; w < 4; w++) used[(off / 4 + w) % 32]++;
            }
            for (int b = 0; b < 32; b++) assert_int_equal(used[b], 1);
          }
  }
}

/* Host emulation of the bulk kernels' data path (no GPU): the producer's walk (tiles of a
 * block, passes of SL_MOE_FFN_BULK_ROWS rows, chunks) copies weight rows into a ring whose
 * bytes start as NaN garbage; the 8 consumer warps read their fragments at
 * sl_moe_ffn_bulk_offset exactly as the kernel does (k-steps w, w + 8, ...; vector index
 * v = chunk start + 4 ks + c, zero past the row end), multiply with an emulated mma.sync
 * m16n8k16 built from the PTX fragment layout (A: a0 (g, 2c..2c+1), a1 (g + 8, 2c..),
 * a2 (g, 2c+8..), a3 (g + 8, 2c+8..); B: b0 (k 2c.., n g), b1 (k 2c+8.., n g); C: c0, c1
 * (g, n 2c, 2c+1), c2, c3 (g + 8, ...); low half = lower index), add the warps' partial
 * tiles in warp order, and the result must equal the double-precision product for every
 * (tile row, token row) -- each exactly once. Shapes: K not a multiple of 32, one chunk
 * and three chunks (K = 2056: 4112 bytes), row counts 1 / 9 / 17 / 40 (one to three
 * 16-row passes), a tile row map with the gate_up interleave and the down clamp. */
typedef struct {
  int K, R;             /* row length (elements), weight rows */
  int down;             /* row map: 0 gate_up (8 gate + 8 up rows), 1 down (16 columns, clamped) */
  const uint16_t *w;    /* [R, K] bf16 */
  const uint16_t *x;    /* [n, K] bf16 token rows */
  int n;
} bulk_emu_t;

static int bulk_emu_row(const bulk_emu_t *m, int t0, int r) {
  if (!m->down) return 8 * t0 + (r & 7) + (r < 8 ? 0 : m->R / 2);
  const int h = 16 * t0 + r;
  return h < m->R ? h : m->R - 1;
}

static float bf16_lo(uint32_t v) { return sl_bf16_to_f32((uint16_t)(v & 0xFFFFu)); }
static float bf16_hi(uint32_t v) { return sl_bf16_to_f32((uint16_t)(v >> 16)); }

static void emu_mma(float c[32][4], uint32_t a[32][4], uint32_t b[32][2]) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, q = lane % 4;
    A[g][2 * q] = bf16_lo(a[lane][0]), A[g][2 * q + 1] = bf16_hi(a[lane][0]);
    A[g + 8][2 * q] = bf16_lo(a[lane][1]), A[g + 8][2 * q + 1] = bf16_hi(a[lane][1]);
    A[g][2 * q + 8] = bf16_lo(a[lane][2]), A[g][2 * q + 9] = bf16_hi(a[lane][2]);
    A[g + 8][2 * q + 8] = bf16_lo(a[lane][3]), A[g + 8][2 * q + 9] = bf16_hi(a[lane][3]);
    B[2 * q][g] = bf16_lo(b[lane][0]), B[2 * q + 1][g] = bf16_hi(b[lane][0]);
    B[2 * q + 8][g] = bf16_lo(b[lane][1]), B[2 * q + 9][g] = bf16_hi(b[lane][1]);
  }
  for (int lane = 0; lane < 32; lane++) {
    const int g = lane / 4, q = lane % 4;
    for (int i = 0; i < 4; i++) {
      const int row = g + (i >= 2 ? 8 : 0), col = 2 * q + (i & 1);
      double sum = 0;
      for (int k = 0; k < 16; k++) sum += (double)A[row][k] * B[k][col];
      c[lane][i] += (float)sum;
    }
  }
}

static void bulk_emulate(const bulk_emu_t *m, int tiles, int grid, double *got, int *seen) {
  const sl_moe_ffn_bulk_geom_t g = sl_moe_ffn_bulk_geom(m->K, 1);
  unsigned char *ring = malloc((size_t)g.bar_offset);
  assert_non_null(ring);
  memset(ring, 0xFF, (size_t)g.bar_offset); /* bf16 0xFFFF: NaN, must never be read */
  const int V = m->K / 8;
  for (int blk = 0; blk < grid; blk++) {
    const sl_moe_ffn_work_t wk = sl_moe_ffn_work(tiles, grid, blk, 0, 1, SL_MOE_FFN_BULK_CONSUMERS, 0);
    int s = 0;
    for (int t = wk.begin; t < wk.end; t++)
      for (int r0 = 0; r0 < m->n; r0 += SL_MOE_FFN_BULK_ROWS) {
        const int nrows = m->n - r0, nt = nrows > 8 ? 2 : 1;
        float acc[SL_MOE_FFN_BULK_CONSUMERS][2][32][4];
        memset(acc, 0, sizeof acc);
        for (int ch = 0; ch < g.nch; ch++) {
          const int bytes = sl_moe_ffn_bulk_chunk(&g, ch);
          for (int r = 0; r < 16; r++) /* producer: lane r's copy */
            memcpy(ring + sl_moe_ffn_bulk_offset(&g, s, r, 0, 0),
                   (const char *)(m->w + (size_t)bulk_emu_row(m, t, r) * m->K) + (size_t)ch * g.chunk_bytes,
                   (size_t)bytes);
          const int nks = (bytes + 63) / 64, v0 = ch * (g.chunk_bytes / 16);
          /* The kernel reads in rounds of U k-steps with addresses clamped to k-step ks0 of
           * the round (values then zeroed): every such read must stay inside the stage. */
          for (int w = 0; w < SL_MOE_FFN_BULK_CONSUMERS; w++)
            for (int ks0 = w; ks0 < nks; ks0 += 4 * SL_MOE_FFN_BULK_CONSUMERS)
              for (int u = 0; u < 4; u++) {
                const int ks = ks0 + u * SL_MOE_FFN_BULK_CONSUMERS, kc = ks < nks ? ks : ks0;
                for (int r = 0; r < 16; r++) {
                  const int off = sl_moe_ffn_bulk_offset(&g, s, r, kc, 3);
                  assert_true(off >= s * g.stage_bytes && off + 16 <= s * g.stage_bytes + (r + 1) * g.pitch);
                }
              }
          for (int w = 0; w < SL_MOE_FFN_BULK_CONSUMERS; w++)
            for (int ks = w; ks < nks; ks += SL_MOE_FFN_BULK_CONSUMERS)
              for (int tt = 0; tt < nt; tt++) {
                uint32_t a1[32][4], a2[32][4], b1[32][2], b2[32][2];
                for (int lane = 0; lane < 32; lane++) {
                  const int gq = lane / 4, c = lane % 4, v = v0 + 4 * ks + c, row = tt * 8 + gq;
                  uint32_t lo[4] = {0}, hi[4] = {0}, xv[4] = {0};
                  if (v < V) {
                    memcpy(lo, ring + sl_moe_ffn_bulk_offset(&g, s, gq, ks, c), 16);
                    memcpy(hi, ring + sl_moe_ffn_bulk_offset(&g, s, gq + 8, ks, c), 16);
                    if (row < nrows) memcpy(xv, m->x + (size_t)(r0 + row) * m->K + (size_t)v * 8, 16);
                  }
                  /* ffn_mma(acc, a.x, b.x, a.y, b.y, xv.x, xv.y), then .z / .w */
                  a1[lane][0] = lo[0], a1[lane][1] = hi[0], a1[lane][2] = lo[1], a1[lane][3] = hi[1];
                  a2[lane][0] = lo[2], a2[lane][1] = hi[2], a2[lane][2] = lo[3], a2[lane][3] = hi[3];
                  b1[lane][0] = xv[0], b1[lane][1] = xv[1], b2[lane][0] = xv[2], b2[lane][1] = xv[3];
                }
                emu_mma(acc[w][tt], a1, b1);
                emu_mma(acc[w][tt], a2, b2);
              }
          if (++s == g.stages) s = 0;
        }
        /* Reduction in warp order; C layout -> (tile row, token row). */
        for (int tt = 0; tt < 2; tt++)
          for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++) {
              float sum = acc[0][tt][lane][i];
              for (int w = 1; w < SL_MOE_FFN_BULK_CONSUMERS; w++) sum += acc[w][tt][lane][i];
              const int trow = lane / 4 + (i >= 2 ? 8 : 0), tok = r0 + tt * 8 + 2 * (lane % 4) + (i & 1);
              if (tok >= m->n) continue;
              const size_t o = ((size_t)t * 16 + trow) * m->n + tok;
              got[o] = sum;
              seen[o]++;
            }
      }
  }
  free(ring);
}

static void check_bulk_emulation(int K, int R, int down, int n, int grid) {
  uint64_t rng = sl_test_seed() + (uint64_t)K * 31 + (uint64_t)n;
  uint16_t *w = malloc((size_t)R * K * 2), *x = malloc((size_t)n * K * 2);
  assert_true(w && x);
  moe_rand_bf16(&rng, (size_t)R * K, w);
  moe_rand_bf16(&rng, (size_t)n * K, x);
  const bulk_emu_t m = {.K = K, .R = R, .down = down, .w = w, .x = x, .n = n};
  const int tiles = down ? (R + 15) / 16 : R / 16;
  double *got = calloc((size_t)tiles * 16 * n, sizeof(double));
  int *seen = calloc((size_t)tiles * 16 * n, sizeof(int));
  assert_true(got && seen);
  bulk_emulate(&m, tiles, grid, got, seen);
  for (int t = 0; t < tiles; t++)
    for (int r = 0; r < 16; r++)
      for (int tok = 0; tok < n; tok++) {
        const size_t o = ((size_t)t * 16 + r) * n + tok;
        assert_int_equal(seen[o], 1);
        const uint16_t *wr = w + (size_t)bulk_emu_row(&m, t, r) * K, *xr = x + (size_t)tok * K;
        double want = 0, mag = 0;
        for (int k = 0; k < K; k++) {
          const double p = (double)sl_bf16_to_f32(wr[k]) * sl_bf16_to_f32(xr[k]);
          want += p;
          mag += fabs(p);
        }
        assert_false(isnan(got[o]));
        assert_true(fabs(got[o] - want) <= 1e-5 * mag + 1e-30);
      }
  free(w);
  free(x);
  free(got);
  free(seen);
}

static void test_ffn_bulk_emulation(void **state) {
  (void)state;
  check_bulk_emulation(72, 48, 0, 1, 2);     /* K not a multiple of 32; gate_up map, 3 tiles */
  check_bulk_emulation(520, 32, 0, 9, 1);    /* two n-tiles in one pass */
  check_bulk_emulation(2056, 32, 0, 17, 2);  /* three chunks, last ragged; two passes */
  check_bulk_emulation(24, 40, 1, 40, 3);    /* down map: 40 columns, last tile clamped; three passes */
  check_bulk_emulation(1024, 16, 1, 5, 1);   /* one full 2 KB chunk */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ffn_matches_formula),
      cmocka_unit_test(test_ffn_bad_args),
      cmocka_unit_test(test_ffn_gemv_rule),
      cmocka_unit_test(test_ffn_gemv_variant_rule),
      cmocka_unit_test(test_ffn_work_split),
      cmocka_unit_test(test_ffn_bulk_geometry),
      cmocka_unit_test(test_ffn_bulk_banks),
      cmocka_unit_test(test_ffn_bulk_emulation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
