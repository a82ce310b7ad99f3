/* Unit test of launch/sluice-bind against a fake sysfs tree and a fake nvidia-smi: two GPUs
 * on two PCI switches, one NIC beside each; every local rank gets its GPU, the NIC on the
 * same switch (first ACTIVE port) and that NUMA node; UCX_NET_DEVICES set by the user wins;
 * CUDA_VISIBLE_DEVICES narrows the GPU list. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_test.h"

static char root[256], script[512];

static void mkdirs(const char *rel) {
  char path[768], cmd[900];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
  assert_int_equal(system(cmd), 0);
}
static void put(const char *rel, const char *text) {
  char path[768];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}
static void link_to(const char *target_rel, const char *link_rel) {
  char t[768], l[768];
  snprintf(t, sizeof t, "%s/%s", root, target_rel);
  snprintf(l, sizeof l, "%s/%s", root, link_rel);
  assert_int_equal(symlink(t, l), 0);
}

static int setup(void **state) {
  snprintf(root, sizeof root, "/tmp/sl-bind-XXXXXX");
  if (!mkdtemp(root)) return -1;
  /* sluice-bind sits at launch/ of the source tree this test was compiled from. */
  snprintf(script, sizeof script, "%s", __FILE__);
  char *cut = strstr(script, "tests/unit/test_sluice_bind.c");
  if (!cut) return -1;
  strcpy(cut, "launch/sluice-bind");
  const char *a = "devices/pci0000:00/0000:00:01.0/0000:10:00.0", *b = "devices/pci0000:80/0000:80:01.0/0000:90:00.0";
  char p[512];
  const char *devs[4][3] = {
      {a, "0000:19:00.0", "0\n"}, {a, "0000:1a:00.0", "0\n"}, {b, "0000:9a:00.0", "1\n"}, {b, "0000:9b:00.0", "1\n"}};
  mkdirs("bus/pci/devices");
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/%s", devs[i][0], devs[i][1]);
    mkdirs(p);
    char n[600];
    snprintf(n, sizeof n, "%s/numa_node", p);
    put(n, devs[i][2]);
    snprintf(n, sizeof n, "bus/pci/devices/%s", devs[i][1]);
    link_to(p, n);
  }
  mkdirs("class/infiniband/mlx5_0/ports/1");
  mkdirs("class/infiniband/mlx5_1/ports/1");
  mkdirs("class/infiniband/mlx5_1/ports/2");
  snprintf(p, sizeof p, "%s/0000:1a:00.0", a);
  link_to(p, "class/infiniband/mlx5_0/device");
  snprintf(p, sizeof p, "%s/0000:9b:00.0", b);
  link_to(p, "class/infiniband/mlx5_1/device");
  put("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  put("class/infiniband/mlx5_1/ports/1/state", "1: DOWN\n");
  put("class/infiniband/mlx5_1/ports/2/state", "4: ACTIVE\n");
  mkdirs("bin");
  put("bin/nvidia-smi", "#!/bin/sh\necho 00000000:19:00.0\necho 00000000:9A:00.0\n");
  snprintf(p, sizeof p, "%s/bin/nvidia-smi", root);
  chmod(p, 0755);
  return 0;
}

static int teardown(void **state) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Run the script with `env_prefix` and return what `env` printed (static buffer). */
static const char *run_bind(const char *env_prefix) {
  static char out[65536];
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "env -u UCX_NET_DEVICES -u CUDA_VISIBLE_DEVICES -u OMPI_COMM_WORLD_LOCAL_RANK -u SLURM_LOCALID "
           "PATH='%s/bin':\"$PATH\" SL_BIND_SYSFS='%s' SL_BIND_NUMA=0 %s bash '%s' env",
           root, root, env_prefix, script);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  out[0] = '\n'; /* every variable then reads "\nNAME=value\n" */
  size_t n = fread(out + 1, 1, sizeof out - 2, f);
  out[n + 1] = '\0';
  assert_int_equal(pclose(f), 0);
  return out;
}

static void expect(const char *out, const char *line) {
  if (!strstr(out, line)) fail_msg("sluice-bind output lacks '%s':\n%s", line, out);
}

static void test_ranks_get_gpu_nic_numa(void **state) {
  const char *o = run_bind("OMPI_COMM_WORLD_LOCAL_RANK=0");
  expect(o, "\nSL_CUDA_DEVICE=0\n");
  expect(o, "\nUCX_NET_DEVICES=mlx5_0:1\n");
  expect(o, "\nSL_BIND_NUMA_NODE=0\n");
  o = run_bind("SLURM_LOCALID=1");
  expect(o, "\nSL_CUDA_DEVICE=1\n");
  expect(o, "\nUCX_NET_DEVICES=mlx5_1:2\n"); /* port 1 is down */
  expect(o, "\nSL_BIND_NUMA_NODE=1\n");
  o = run_bind("OMPI_COMM_WORLD_LOCAL_RANK=2"); /* wraps around the two GPUs */
  expect(o, "\nSL_CUDA_DEVICE=0\n");
  expect(o, "\nUCX_NET_DEVICES=mlx5_0:1\n");
}

static void test_user_choices_win(void **state) {
  const char *o = run_bind("OMPI_COMM_WORLD_LOCAL_RANK=0 UCX_NET_DEVICES=mlx5_9:1");
  expect(o, "\nUCX_NET_DEVICES=mlx5_9:1\n");
  o = run_bind("OMPI_COMM_WORLD_LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=1");
  expect(o, "\nSL_CUDA_DEVICE=0\n");         /* index within the visible list */
  expect(o, "\nUCX_NET_DEVICES=mlx5_1:2\n"); /* ...which is the second physical GPU */
  expect(o, "\nSL_BIND_NUMA_NODE=1\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranks_get_gpu_nic_numa),
      cmocka_unit_test(test_user_choices_win),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
