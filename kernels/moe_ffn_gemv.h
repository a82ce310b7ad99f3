/* Constants shared by the MoE FFN weight-streaming (GEMV) kernels (kernels/moe_ffn_gemv.cu)
 * and their host side (kernels/moe_ffn.c). Plain C, no includes: NVRTC embeds it. */
#ifndef SL_MOE_FFN_GEMV_H
#define SL_MOE_FFN_GEMV_H

#define SL_MOE_FFN_GEMV_THREADS 256     /* 8 warps per block, one 16-row weight tile per warp */
#define SL_MOE_FFN_GEMV_MAX_LOCAL 1024  /* shared table of non-empty experts per block */
/* Automatic choice (sl_moe_ffn_uses_gemv): the weight-streaming kernels serve padded mode
 * while an expert can hold at most this many rows (min(capacity, T)), or while the experts
 * hold at most this many on average (T*K <= this x E_local). They multiply each weight
 * tile with up to 32 of the expert's rows per pass on tensor cores (more rows: more
 * passes), so up to ~16 rows per expert the weights are streamed once at full bandwidth
 * with the mma units mostly idle. */
#define SL_MOE_FFN_GEMV_MAX_ROWS 16

#endif
