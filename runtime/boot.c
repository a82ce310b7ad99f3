/* MPI bootstrap: world, nodes (real via MPI_COMM_TYPE_SHARED, or simulated), local ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_boot.h"
#include "sl_log.h"

sl_status_t sl_mpi_status(int mpi_rc, const char *what) {
  if (mpi_rc == MPI_SUCCESS) return SL_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(mpi_rc, msg, &len);
  return SL_ERR(SL_ERR_MPI, "%s: %s", what, msg);
}

sl_status_t sl_boot_init(int *argc, char ***argv, int ranks_per_node, sl_boot_t *boot) {
  memset(boot, 0, sizeof *boot);
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    SL_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    boot->owns_mpi = true;
    if (provided < MPI_THREAD_MULTIPLE)
      SL_LOG_DEBUG("MPI provides thread level %d < MULTIPLE: only the main thread calls MPI", provided);
  }
  SL_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &boot->world));
  /* Errors come back as codes, so every MPI failure becomes an SL_ERR_MPI with its text. */
  MPI_Comm_set_errhandler(boot->world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(boot->world, &boot->rank);
  MPI_Comm_size(boot->world, &boot->size);
  gethostname(boot->hostname, sizeof boot->hostname - 1);

  if (ranks_per_node > 0) {
    if (boot->size % ranks_per_node != 0)
      return SL_ERR(SL_ERR_INVALID, "SL_RANKS_PER_NODE=%d does not divide the %d ranks of this job", ranks_per_node,
                    boot->size);
    boot->simulated_nodes = true;
    SL_MPI_CHECK(MPI_Comm_split(boot->world, boot->rank / ranks_per_node, boot->rank, &boot->node_comm));
  } else {
    SL_MPI_CHECK(MPI_Comm_split_type(boot->world, MPI_COMM_TYPE_SHARED, boot->rank, MPI_INFO_NULL, &boot->node_comm));
  }
  MPI_Comm_rank(boot->node_comm, &boot->local_rank);
  MPI_Comm_size(boot->node_comm, &boot->local_size);

  /* Number the nodes by their leaders' world ranks, so node ids are the same on every rank. */
  int is_leader = boot->local_rank == 0;
  SL_MPI_CHECK(MPI_Comm_split(boot->world, is_leader ? 0 : MPI_UNDEFINED, boot->rank, &boot->leaders_comm));
  int node = 0, nodes = 0;
  if (is_leader) {
    MPI_Comm_rank(boot->leaders_comm, &node);
    MPI_Comm_size(boot->leaders_comm, &nodes);
  }
  SL_MPI_CHECK(MPI_Bcast(&node, 1, MPI_INT, 0, boot->node_comm));
  SL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &nodes, 1, MPI_INT, MPI_MAX, boot->world));
  boot->node = node;
  boot->num_nodes = nodes;
  sl_log_set_identity(boot->rank, boot->size, boot->node);
  SL_LOG_DEBUG("rank %d/%d on %s: node %d of %d%s, local rank %d of %d", boot->rank, boot->size, boot->hostname,
               boot->node, boot->num_nodes, boot->simulated_nodes ? " (simulated)" : "", boot->local_rank,
               boot->local_size);
  return SL_OK;
}

void sl_boot_finalize(sl_boot_t *boot) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (boot->leaders_comm != MPI_COMM_NULL && boot->leaders_comm) MPI_Comm_free(&boot->leaders_comm);
  if (boot->node_comm != MPI_COMM_NULL && boot->node_comm) MPI_Comm_free(&boot->node_comm);
  if (boot->world != MPI_COMM_NULL && boot->world) MPI_Comm_free(&boot->world);
  if (boot->owns_mpi) MPI_Finalize();
}
