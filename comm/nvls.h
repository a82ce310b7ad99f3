/* NVLS (NVLink SHARP multicast) buffers for the all-reduce: one multicast object over the
 * node's GPUs with this rank's physical memory bound to it, mapped twice (multicast address
 * for multimem.* and a unicast address for plain loads and stores).
 *
 * UNTESTED ON HARDWARE. Opt-in only: nothing here runs (in particular cuMulticastCreate is
 * never called) unless SL_NVLS=1, which defaults to 0 and must stay 0 on the shared H200
 * machines (DESIGN.md, NVLS policy). The kernel (comm/nvls.cu) is compiled in CI. */
#ifndef SL_COMM_NVLS_H
#define SL_COMM_NVLS_H

#include <mpi.h>
#include <stddef.h>

#include "kernels/sl_dtype.h"
#include "runtime/sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_nvls sl_nvls_t;

/* Collective over `comm` (ranks on distinct GPUs of one node). Refuses with
 * SL_ERR_UNSUPPORTED, touching no driver object, unless cfg->nvls (SL_NVLS=1). */
sl_status_t sl_nvls_create(const sl_config_t *cfg, sl_device_t *dev, MPI_Comm comm, size_t bytes, sl_nvls_t **out);
void sl_nvls_destroy(sl_nvls_t *nvls);
void *sl_nvls_multicast(const sl_nvls_t *nvls); /* for multimem.* */
void *sl_nvls_unicast(const sl_nvls_t *nvls);   /* this rank's copy */

/* The NVLS all-reduce kernel (16-byte vectors; f32, bf16, f16). */
sl_status_t sl_nvls_spec(sl_jit_spec_t *spec, sl_dtype_t dtype, int threads);
sl_status_t sl_nvls_jit_points(int arch, sl_status_t (*fn)(const sl_jit_spec_t *spec, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif
