/* Constants shared by the MoE FFN weight-streaming (GEMV) kernels (kernels/moe_ffn_gemv.cu)
 * and their host side (kernels/moe_ffn.c). Plain C, no includes: NVRTC embeds it. */
#ifndef SL_MOE_FFN_GEMV_H
#define SL_MOE_FFN_GEMV_H

#define SL_MOE_FFN_GEMV_THREADS 256     /* 8 warps per block, one work item per warp */
#define SL_MOE_FFN_GEMV_MAX_LOCAL 1024  /* shared table of non-empty experts per block */
/* Automatic choice: the GEMV kernels serve padded mode while an expert can hold at most
 * this many rows (min(capacity, T)); they process 4 rows per weight pass, and the typical
 * decode expert holds 1-2 rows, so the weights are streamed once at full bandwidth. */
#define SL_MOE_FFN_GEMV_MAX_ROWS 16

#endif
