/* MPI bootstrap: world rank/size, nodes, local rank, node communicator, simulated nodes. */
#ifndef SL_BOOT_H
#define SL_BOOT_H

#include <mpi.h>
#include <stdbool.h>

#include "sl_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int rank, size;             /* world */
  int node, num_nodes;        /* node index (nodes numbered by their lowest world rank) */
  int local_rank, local_size; /* within the node */
  bool simulated_nodes;       /* SL_RANKS_PER_NODE > 0 split one host into nodes */
  MPI_Comm world;             /* dup of MPI_COMM_WORLD */
  MPI_Comm node_comm;         /* ranks of this node, ordered by world rank */
  MPI_Comm leaders_comm;      /* local_rank 0 of every node (MPI_COMM_NULL elsewhere) */
  char hostname[64];
  bool owns_mpi;              /* sl_boot_init called MPI_Init */
} sl_boot_t;

/* Initialise MPI (unless already initialised; MPI_THREAD_MULTIPLE is requested for the
 * transport's proxy thread) and fill *boot. Works under mpirun and srun, and as a single
 * process. With ranks_per_node = k > 0, ranks [0,k) form node 0, [k,2k) node 1, ...;
 * k must divide the world size. Sets the log identity. */
sl_status_t sl_boot_init(int *argc, char ***argv, int ranks_per_node, sl_boot_t *boot);
void sl_boot_finalize(sl_boot_t *boot);

/* Turn an MPI error code into SL_ERR_MPI with MPI's text. */
sl_status_t sl_mpi_status(int mpi_rc, const char *what);
#define SL_MPI_CHECK(call) SL_CHECK(sl_mpi_status((call), #call))

#ifdef __cplusplus
}
#endif
#endif
