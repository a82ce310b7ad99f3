/* Benchmark of the inter-node proxy (comm/proxy.h): put+flag latency and bandwidth between
 * ranks on different (real or simulated) nodes, 8 B .. 16 MiB, with MPI point-to-point
 * between the same pairs as the ceiling measured in the same run. */
#ifndef SL_BENCH_PROXY_H
#define SL_BENCH_PROXY_H

#include "sl_bench.h"

/* Collective over b->rt->boot.world. Pairs rank r of the first half with r + size/2 (on
 * another node when nodes hold equal numbers of consecutive ranks); with one node every
 * other rank is treated as remote and ranks pair as (2i, 2i+1). Rows (rank 0 prints):
 *   proxy_lat   one-way put+flag latency (ping-pong / 2), us; extra: MPI's and the ratio
 *   proxy_bw    streamed puts then one flag; GB/s; extra: MPI's and the ratio
 * --quick (CPU default) runs fewer sizes. */
sl_status_t sl_bench_proxy(sl_bench_t *b);

#endif
