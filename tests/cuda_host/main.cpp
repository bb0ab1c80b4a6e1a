// doctest's main for the host-run kernel work tests (no MPI, no GPU).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
