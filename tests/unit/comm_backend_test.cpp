#include "harness/comm/comm_backend.hpp"

#include <doctest/doctest.h>

#include <string>

#include "harness/core/error.hpp"

namespace moebench {
namespace {

TEST_CASE("communication backends by name: mpi and nccl on the command line, local never") {
  CHECK(parse_comm_backend("mpi") == CommBackend::mpi);
  CHECK(parse_comm_backend("nccl") == CommBackend::nccl);
  CHECK(std::string(to_string(CommBackend::local)) == "local");
  CHECK_THROWS_WITH_AS(parse_comm_backend("gloo"),
                       "--comm gloo: unknown communication backend 'gloo'; valid: mpi, nccl",
                       UsageError);
  CHECK_THROWS_AS(parse_comm_backend("local"), UsageError);
}

}  // namespace
}  // namespace moebench
