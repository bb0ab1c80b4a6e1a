#include "harness/backends/mpi/mpi_wait.hpp"

#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "harness/backends/mpi/mpi_check.hpp"
#include "harness/core/clock.hpp"
#include "harness/core/error.hpp"
#include "harness/core/stop_request.hpp"

namespace moebench {

void wait_within(std::span<MPI_Request> requests, double timeout_s, const char* call,
                 const std::function<std::string()>& what) {
  const Clock::time_point start = Clock::now();
  const auto limit = std::chrono::duration<double>(timeout_s);
  const auto spin = std::chrono::milliseconds(1);
  for (;;) {
    int done = 0;
    check_mpi(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        call);
    if (done) return;
    notice_stop_while_waiting(what);
    const auto waited = Clock::now() - start;
    if (waited > limit) {
      std::ostringstream os;
      os << what() << " did not complete within " << timeout_s
         << " s (--timeout): a peer stopped, hung or died";
      throw TimeoutError(os.str());
    }
    if (waited > spin) std::this_thread::yield();
  }
}

std::string world_ranks_of(MPI_Comm comm) {
  int size = 0;
  if (comm == MPI_COMM_NULL || MPI_Comm_size(comm, &size) != MPI_SUCCESS) return "?";
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> local(static_cast<std::size_t>(size)), global(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) local[static_cast<std::size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, local.data(), world, global.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  bool consecutive = true;
  for (int i = 1; i < size; ++i) consecutive = consecutive && global[i] == global[i - 1] + 1;
  if (consecutive && size > 1) {
    return std::to_string(global.front()) + "-" + std::to_string(global.back());
  }
  std::string out;
  for (int r : global) {
    if (out.size() > 60) return out + ",...";
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

}  // namespace moebench
