// The sanitizers' defaults, compiled into every executable of a -DMOEBENCH_SANITIZE build (the
// runtimes call these hooks at start; an environment variable set by the user still wins).
//
// LeakSanitizer: Open MPI (and the PMIx, hwloc and libevent under it) keeps what MPI_Init
// allocates until the process ends, and some of it after MPI_Finalize; those are not our leaks.
// The suppressions name the libraries, so a leak in moebench's own code is still reported.
// protect_shadow_gap=0: the CUDA runtime maps memory where ASan's shadow gap would be.

extern "C" {

const char* __asan_default_options() {
  return "protect_shadow_gap=0:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1";
}

const char* __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1";
}

const char* __lsan_default_suppressions() {
  return "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libpmix.so\n"
         "leak:libhwloc.so\n"
         "leak:libevent\n"
         "leak:mca_\n"
         "leak:libucs.so\n"
         "leak:libucp.so\n"
         "leak:libcuda.so\n"
         "leak:libcudart.so\n"
         "leak:libnccl.so\n";
}

}  // extern "C"
