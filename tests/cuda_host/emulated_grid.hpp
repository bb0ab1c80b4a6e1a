// The emulated grid and team of the host-run kernel tests: a kernel_work.cuh function called for
// every thread of a grid, and a row_work.cuh function run by a team, in host memory, as the
// kernels call them on the device.
#pragma once

#include <cmath>
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

// A team of `size` members sharing one row (row_work.cuh's BlockTeam or WarpTeam, emulated): a
// phase runs for every member in turn, and a sum adds the members' parts in member order (the
// device adds them as a tree: the same parts, another FP32 order).
struct HostTeam {
  std::int64_t size;
  GridPos place(std::int64_t t) const { return GridPos{t, size, 0, 1}; }
  template <typename F>
  float sum(F part) {
    float v = 0.0f;
    for (std::int64_t t = 0; t < size; ++t) v += part(place(t));
    return v;
  }
  template <typename F>
  float max(F part) {
    float v = -INFINITY;
    for (std::int64_t t = 0; t < size; ++t) v = std::fmax(v, part(place(t)));
    return v;
  }
  template <typename F>
  void each(F work) {
    for (std::int64_t t = 0; t < size; ++t) work(place(t));
  }
  template <typename F>
  void one(F f) {
    f();
  }
  void sync() {}
};

}  // namespace moebench::cuda
