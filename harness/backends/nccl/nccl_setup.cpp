// The nccl communicator's creation (one communicator per group of the parallel grid, split from
// the world's), lane ordering, warm-up, and end (nccl_communicator.cpp has the design).
#include "harness/backends/nccl/nccl_communicator_impl.hpp"

namespace moebench::nccl_detail {

void NcclCommunicator::setup(MPI_Comm world, const Topology& topo, CudaComputeApi& compute) {
  MB_CHECK(timeout_s_ > 0, "nccl communicator timeout " << timeout_s_ << " s");
  // The MPI groups, and the topology's checks.
  host_ = make_mpi_communicator(world, topo, timeout_s_);
  host_name_ = host_name();
  rank_ = topo.rank;
  device_ = compute.device();
  compute_stream_ = static_cast<cudaStream_t>(compute.stream_handle());
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  check_one_gpu_per_rank(world, compute.device_info()->pci_bus_id);

  int priority_low = 0;
  int priority_high = 0;
  check_cuda(cudaDeviceGetStreamPriorityRange(&priority_low, &priority_high),
             "cudaDeviceGetStreamPriorityRange");
  // The critical lane first when streams have work ready: a late all-to-all delays the peers
  // and the next layer. The background lane has the compute stream's (default, lowest)
  // priority: gradient buckets fill the gaps without pushing the critical path aside.
  check_cuda(cudaStreamCreateWithPriority(&streams_[0], cudaStreamNonBlocking, priority_high),
             "cudaStreamCreateWithPriority");
  check_cuda(cudaStreamCreateWithPriority(&streams_[1], cudaStreamNonBlocking, priority_low),
             "cudaStreamCreateWithPriority");
  // Pipeline transfers: the next stage waits for them, as the next layer does for an all-to-all.
  check_cuda(cudaStreamCreateWithPriority(&streams_[2], cudaStreamNonBlocking, priority_high),
             "cudaStreamCreateWithPriority");
  check_cuda(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming), "cudaEventCreate");
  choose_lane_ordering();

  // Rank 0 sends its status with the id, so a failure there cannot leave the others waiting.
  struct {
    int ok;
    ncclUniqueId id;
  } hello{};
  ncclResult_t id_status = ncclSuccess;
  if (rank_ == 0) {
    id_status = ncclGetUniqueId(&hello.id);
    hello.ok = id_status == ncclSuccess ? 1 : 0;
  }
  check_mpi(MPI_Bcast(&hello, sizeof hello, MPI_BYTE, 0, world), "MPI_Bcast");
  if (!hello.ok) {
    throw RuntimeError(
        "nccl: ncclGetUniqueId failed on rank 0" +
        (rank_ == 0 ? std::string(": ") + ncclGetErrorString(id_status) : std::string()));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "moebench.world";
  last_op_ = "communicator setup (ncclCommInitRankConfig)";
  ncclComm_t& w = comms_[index(Group::world)];
  check(ncclCommInitRankConfig(&w, topo.world(), hello.id, rank_, &config),
        "ncclCommInitRankConfig", w);
  wait_ready(w);
  // Every other group of the grid, split from the world one with the grid's colours and keys,
  // so NCCL's ranks are the grid's (and the MPI groups'). A rank in no group of a kind (a
  // middle pipeline stage and the embedding group) gets none.
  for (Group g : kGroups) {
    if (g == Group::world) continue;
    const int color = topo.grid.group_index(g, rank_);
    split(g, color < 0 ? NCCL_SPLIT_NOCOLOR : color, topo.group(g).rank);
  }
  for (Group g : kGroups) {
    if (!info(g).member()) continue;
    int n = 0;
    int r = 0;
    check(ncclCommCount(comm(g), &n), "ncclCommCount", comm(g));
    check(ncclCommUserRank(comm(g), &r), "ncclCommUserRank", comm(g));
    MB_CHECK(n == info(g).size && r == info(g).rank,
             "nccl " << group_name(g) << " group is rank " << r << " of " << n
                     << ", the grid's rank " << info(g).rank << " of " << info(g).size);
  }
  warm_up();
  last_op_ = "no collective yet";
}

void NcclCommunicator::choose_lane_ordering() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) version = 0;
  constexpr int kImplicitOrderVersion = 22600;  // NCCL 2.26.0
  const char* set = std::getenv("NCCL_LAUNCH_ORDER_IMPLICIT");
  if (set == nullptr && version >= kImplicitOrderVersion) {
    (void)setenv("NCCL_LAUNCH_ORDER_IMPLICIT", "1", 0);
    set = "1";
  }
  const bool implicit =
      version >= kImplicitOrderVersion && set != nullptr && std::string(set) != "0";
  serialise_lanes_ = !implicit;
  const std::string lanes = "nccl " + nccl_version() + ": lanes critical, background, pipeline ";
  ordering_ = implicit ? lanes + "in host order by NCCL_LAUNCH_ORDER_IMPLICIT=" + set
                       : lanes + "serialised by cross-lane events (" +
                             (version >= kImplicitOrderVersion
                                  ? std::string("NCCL_LAUNCH_ORDER_IMPLICIT=") + set
                                  : std::string("NCCL before 2.26")) +
                             ")";
}

void NcclCommunicator::warm_up() {
  int largest = 1;
  for (Group g : kGroups) {
    if (info(g).member()) largest = std::max(largest, info(g).size);
  }
  if (largest < 2) return;
  const std::size_t n = static_cast<std::size_t>(largest);
  void* raw = nullptr;
  last_op_ = "communicator warm-up (cudaMalloc)";
  check_cuda(cudaMalloc(&raw, 2 * n * sizeof(float)), "cudaMalloc");
  auto* buf = static_cast<float*>(raw);
  try {
    check_cuda(cudaMemsetAsync(buf, 0, 2 * n * sizeof(float), compute_stream_), "cudaMemsetAsync");
    for (Group g : kGroups) {
      const GroupInfo gi = info(g);
      if (!gi.member() || gi.size < 2) continue;
      const auto size = static_cast<std::int64_t>(gi.size);
      const Mat all{buf, size, 1, 1, DType::f32};
      const Mat other{buf + size, size, 1, 1, DType::f32};
      const Mat shard{buf + size, 1, 1, 1, DType::f32};
      enqueue_allreduce_sum(g, all, CommLane::critical, false);
      enqueue_reduce_scatter_sum(g, all, shard, CommLane::critical, false);
      enqueue_allgather(g, shard, all, CommLane::critical, false);
      if (g == Group::expert || g == Group::pipeline) {
        const std::vector<std::int64_t> rows(static_cast<std::size_t>(size), 1);
        std::vector<std::int64_t> offsets(static_cast<std::size_t>(size));
        for (std::int64_t i = 0; i < size; ++i) offsets[static_cast<std::size_t>(i)] = i;
        enqueue_alltoallv(g, all, rows, offsets, other, rows, offsets, CommLane::critical, false);
      }
      // One group at a time, so no rank waits in one group's first operation for a peer
      // that is still connecting another.
      poll_until_idle({streams_[0], compute_stream_},
                      std::string("the warm-up of the ") + group_name(g) + " group");
      prune(0);
    }
  } catch (...) {
    (void)cudaFree(raw);  // after fail() aborted: the streams have drained
    throw;
  }
  check_cuda(cudaFree(raw), "cudaFree");
}

void NcclCommunicator::split(Group g, int color, int key) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  names_[index(g)] = std::string("moebench.") + group_name(g);
  config.commName = names_[index(g)].c_str();
  last_op_ = std::string("communicator setup (ncclCommSplit of the ") + group_name(g) + " group)";
  ncclComm_t parent = comms_[index(Group::world)];
  check(ncclCommSplit(parent, color, key, &comms_[index(g)], &config), "ncclCommSplit", parent);
  wait_ready(parent);
  if (comms_[index(g)] != nullptr) wait_ready(comms_[index(g)]);
}

void NcclCommunicator::check_one_gpu_per_rank(MPI_Comm world, const std::string& bus_id) {
  constexpr int kHost = 256;
  constexpr int kBus = 64;
  std::array<char, kHost + kBus> mine{};
  std::memcpy(mine.data(), host_name_.data(), std::min<std::size_t>(host_name_.size(), kHost - 1));
  std::memcpy(mine.data() + kHost, bus_id.data(), std::min<std::size_t>(bus_id.size(), kBus - 1));
  const int world_size = host_->info(Group::world).size;
  std::vector<char> all(static_cast<std::size_t>(world_size) * mine.size());
  check_mpi(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                          static_cast<int>(mine.size()), MPI_CHAR, world),
            "MPI_Allgather");
  std::vector<RankGpu> gpus;
  for (int r = 0; r < world_size; ++r) {
    const char* p = all.data() + static_cast<std::size_t>(r) * mine.size();
    gpus.push_back(RankGpu{std::string(p), std::string(p + kHost)});
  }
  const std::string problem = shared_gpu_problem(gpus);
  if (problem.empty()) return;
  if (rank_ == 0) throw UsageError(problem);
  throw Error(ExitCode::usage, "");  // quiet: rank 0 says why
}

void NcclCommunicator::abort_all() {
  for (int i = static_cast<int>(kGroupCount) - 1; i >= 0; --i) {
    if (comms_[i] != nullptr) (void)ncclCommAbort(comms_[i]);
    comms_[i] = nullptr;
  }
  aborted_ = true;
}

bool NcclCommunicator::finalize_all() {
  if (aborted_) return true;
  try {
    synchronize();
    for (int i = static_cast<int>(kGroupCount) - 1; i >= 0; --i) {
      if (comms_[i] == nullptr) continue;
      check(ncclCommFinalize(comms_[i]), "ncclCommFinalize", comms_[i]);
      wait_ready(comms_[i]);
    }
    for (int i = static_cast<int>(kGroupCount) - 1; i >= 0; --i) {
      if (comms_[i] != nullptr) (void)ncclCommDestroy(comms_[i]);
      comms_[i] = nullptr;
    }
    return true;
  } catch (const std::exception&) {
    return false;  // a destructor cannot throw; fail() already aborted
  }
}

void NcclCommunicator::release_cuda() {
  for (cudaStream_t& s : streams_) {
    if (s != nullptr) (void)cudaStreamDestroy(s);
    s = nullptr;
  }
  if (compute_done_ != nullptr) (void)cudaEventDestroy(compute_done_);
  compute_done_ = nullptr;
  for (cudaEvent_t e : all_events_) (void)cudaEventDestroy(e);
  all_events_.clear();
  last_end_ = nullptr;
  log_.reset();
}

}  // namespace moebench::nccl_detail
