// The sanitizers' defaults, compiled into every executable of a -DMOEBENCH_SANITIZE build (the
// runtimes call these hooks at start; an environment variable set by the user still wins).
//
// LeakSanitizer: Open MPI (and the PMIx, hwloc and libevent under it) keeps what MPI_Init
// allocates until the process ends, and some of it after MPI_Finalize; those are not our leaks.
// The suppressions name the libraries, so a leak in moebench's own code is still reported.
// protect_shadow_gap=0: the CUDA runtime maps memory where ASan's shadow gap would be.
// Only the sanitizer builds compile this file.

extern "C" {

const char* __asan_default_options() {
  return "protect_shadow_gap=0:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1";
}

// The suppressions are expected: their statistics would be a second stderr line on every run.
const char* __lsan_default_options() {
  return "print_suppressions=0";
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
         "leak:libnccl.so\n"
         // Open MPI's PMIx formats strings with vasprintf, and the fast unwinder loses the stack
         // above libc there; moebench itself never calls asprintf.
         "leak:__vasprintf_internal\n";
}

// Open MPI 4 unloads its components (dlclose) in MPI_Finalize, and LeakSanitizer then reports
// what they kept with "<unknown module>" for every frame: nothing to suppress them by. Keeping
// every library loaded until exit leaves their names on the stacks. (Exported from the
// executable by sanitize.cmake's --export-dynamic-symbol=dlclose, so the libraries call this.)
__attribute__((visibility("default"))) int dlclose(void*) {
  return 0;
}

}  // extern "C"
