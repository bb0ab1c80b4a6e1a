// The emulated grid of the host-run kernel tests: a kernel_work.cuh function called for every
// thread of a grid, in host memory, as the kernels call it on the device.
#pragma once

#include <cstdint>
#include <functional>

#include "harness/backends/cuda/device_mat.cuh"

namespace moebench::cuda {

// Runs work(GridPos) for every thread of a grid of `grid` blocks of `threads` threads.
inline void run_grid(dim3 grid, int threads, const std::function<void(const GridPos&)>& work) {
  const std::int64_t nx = static_cast<std::int64_t>(grid.x) * threads;
  for (std::int64_t y = 0; y < grid.y; ++y)
    for (std::int64_t x = 0; x < nx; ++x) work(GridPos{x, nx, y, grid.y});
}

}  // namespace moebench::cuda
