# Command-level tests of the `sluice` binary (label cli): the main job and its error paths.
function(sl_cli_test name label regex)
  add_test(NAME cli_${name} COMMAND ${ARGN})
  set_tests_properties(cli_${name} PROPERTIES LABELS "${label}" TIMEOUT 300 PASS_REGULAR_EXPRESSION "${regex}"
                       ENVIRONMENT "${SL_TEST_ENV};SL_DEVICE=cpu")
endfunction()

sl_cli_test(info unit "SL_TIMEOUT_MS.*SL_RANKS_PER_NODE" $<TARGET_FILE:sluice> info --env)
sl_cli_test(bad_env unit "SL_DEVICE='gpu' is not valid; accepted: auto\\|cpu\\|cuda"
            ${CMAKE_COMMAND} -E env SL_DEVICE=gpu $<TARGET_FILE:sluice> info)
sl_cli_test(unknown_command unit "unknown command 'frobnicate'" $<TARGET_FILE:sluice> frobnicate)
sl_cli_test(selfcheck_np4 mpi "4 rank\\(s\\) on 1 node\\(s\\).*selfcheck passed"
            ${SL_MPIRUN} -np 4 $<TARGET_FILE:sluice> selfcheck)
sl_cli_test(selfcheck_np4_2nodes mpi "4 rank\\(s\\) on 2 node\\(s\\) \\(simulated\\).*selfcheck passed"
            ${SL_MPIRUN} -np 4 -x SL_RANKS_PER_NODE=2 $<TARGET_FILE:sluice> selfcheck)
sl_cli_test(selfcheck_bad_split mpi "SL_RANKS_PER_NODE=3 does not divide the 4 ranks"
            ${SL_MPIRUN} -np 4 -x SL_RANKS_PER_NODE=3 $<TARGET_FILE:sluice> selfcheck)
if(SLUICE_HAVE_CUDA)
  sl_cli_test(jit_warm_sm90 jit "[0-9]+ compiled, [0-9]+ already cached, 0 failed"
              ${CMAKE_COMMAND} -E env SL_CACHE_DIR=${CMAKE_BINARY_DIR}/jit-cache-cli $<TARGET_FILE:sluice> jit warm --arch 90 --module probe)
endif()
# The kern_us column (CUPTI; "-" on the CPU backend) and both scale layouts of the MX/NV rows.
sl_cli_test(bench_kern_layouts unit "kern_us.*quant_mxfp4_swz +T=1 .*quant_mxfp4_lin +T=1 "
            $<TARGET_FILE:sluice> bench kernels --quick --only quant_mxfp4 --tokens 1)
# --flush (do_bench's L2 flush before each repetition) is a GPU timing mode: said, and ignored, on the CPU.
sl_cli_test(bench_flush_cpu unit "# --flush: ignored on the CPU backend.*rmsnorm +T=1 "
            $<TARGET_FILE:sluice> bench kernels --quick --flush --only rmsnorm --tokens 1)
# The decode kernel's timing-only cuts: masks outside the rules are refused with the rule.
sl_cli_test(bench_decode_cut_rule unit "SL_BENCH_DECODE_CUT=8: 8 only with 4"
            ${CMAKE_COMMAND} -E env SL_BENCH_DECODE_CUT=8 $<TARGET_FILE:sluice> bench moe-local --only moe_layer)
sl_cli_test(bench_decode_cut_range unit "SL_BENCH_DECODE_CUT='16' is not valid; accepted: 0..15"
            ${CMAKE_COMMAND} -E env SL_BENCH_DECODE_CUT=16 $<TARGET_FILE:sluice> bench moe-local --only moe_layer)
# The dispatch rows' selectors: --only quant runs the quantized rows alone, SL_BENCH_PAYLOAD=p one payload.
sl_cli_test(bench_payload_only unit "moe_dispatch_quant +qwen3-30b-a3b T=8 .*payload mxfp4"
            ${CMAKE_COMMAND} -E env SL_BENCH_PAYLOAD=3
            $<TARGET_FILE:sluice> bench moe-local --quick --only quant --tokens 8)
set_tests_properties(cli_bench_payload_only PROPERTIES
                     FAIL_REGULAR_EXPRESSION "payload (fp8|mxfp8|nvfp4)|moe_dispatch  ")
sl_cli_test(bench_payload_range unit "SL_BENCH_PAYLOAD='9' is not valid; accepted: 1..4"
            ${CMAKE_COMMAND} -E env SL_BENCH_PAYLOAD=9 $<TARGET_FILE:sluice> bench moe-local --only quant)
# Benchmarks smoke-run on the CPU backend (quick mode): they must run end to end and print rows.
sl_cli_test(bench_kernels_cpu unit "RMSNorm.*QK-norm.*Embedding" $<TARGET_FILE:sluice> bench kernels --quick)
sl_cli_test(bench_shape_filter unit "rmsnorm +T=16 h=2048.*rmsnorm\\+residual +T=16 h=2048"
            $<TARGET_FILE:sluice> bench kernels --quick --only rmsnorm --tokens 16 --hidden 2048)
sl_cli_test(bench_bad_tokens unit "--tokens wants up to 16 comma-separated integers"
            $<TARGET_FILE:sluice> bench kernels --tokens 1,x)
set_tests_properties(cli_bench_shape_filter PROPERTIES FAIL_REGULAR_EXPRESSION "T=1 h=|h=4096")
# --graph-reps: repetitions per CUDA graph of the graph column; out-of-range counts are refused with the range.
sl_cli_test(bench_graph_reps_range unit "--graph-reps wants 1..1000, got '0'"
            $<TARGET_FILE:sluice> bench kernels --quick --graph-reps 0)
sl_cli_test(bench_graph_reps_ok unit "rmsnorm +T=1 h=2048"
            $<TARGET_FILE:sluice> bench kernels --quick --graph-reps 5 --only rmsnorm --tokens 1 --hidden 2048)
# The GPU script's summary (scripts/bench_summary.py) on a fixture: issue #3's target rows (each op and shape's first
# row; the comparison launch after it is skipped), the kernel rate a missing row would need with its events' part, and
# how many missing rows a same-size copy (copy_same_us) misses too.
sl_cli_test(bench_summary_need unit
            "2 of 3 default rows at T >= 8192 below 92 % .*would need 97.4-127.1 % of copy.*1 of them more than the \
fastest kernel of this run \\(102.0 %\\).*1 of the 2 with a same-size copy in the run are rows where that copy \
\\(cudaMemcpy of the same bytes, timed the same way\\) is itself below 92 %.*T=32768 H=2048: 90.9 %, kernel needs \
97.4 %"
            python3 ${CMAKE_CURRENT_SOURCE_DIR}/../scripts/bench_summary.py
            ${CMAKE_CURRENT_SOURCE_DIR}/unit/data/bench-summary)
