#include "harness/core/host.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

using namespace moebench;

TEST_CASE("host_name is the kernel's host name") {
  char buf[256] = {};
  REQUIRE(gethostname(buf, sizeof buf - 1) == 0);
  CHECK(host_name() == buf);
  CHECK(!host_name().empty());
}
