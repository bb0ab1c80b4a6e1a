// `moebench accept`'s judgements, pure functions of what the ranks measured (tested without
// MPI): per-rank figures against the SKU's expected figure and the fleet's median, checksums
// against a rank's own repeats and the majority of its peers, the ranks' inventory against their
// SKU's majority; and the outputs a site acts on (accept.json, accept.md, junit.xml, drain.txt).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/nccl_log.hpp"
#include "harness/device/nvml_inventory.hpp"
#include "harness/measure/health.hpp"
#include "harness/measure/links.hpp"
#include "harness/measure/telemetry.hpp"
#include "harness/output/run_record.hpp"

namespace moebench {

// Where a rank ran and what it is.
struct AcceptRank {
  int rank = 0;
  int node = 0;  // the node index (emulated with --ranks-per-node)
  std::string host;
  std::string sku;       // the GPU's model, or "cpu (BLAS core)" on the cpu backend
  std::string software;  // the versions a rank runs: MPI, BLAS, driver, CUDA, NCCL, moebench
  // The GEMM probe's result's checksum (the same inputs everywhere); none before stage 2 ran.
  std::optional<std::uint64_t> gemm_sum = std::nullopt;
  int report = -1;  // accept-merge: the index of the report it came from
  // Its GPU as NVML sees it, where NVML is there.
  std::optional<NvmlInventory> nvml = std::nullopt;
  // The transports NCCL used for the collectives, where its log was read.
  std::optional<NcclTransports> nccl = std::nullopt;
};

// One check's outcome: a rank's (rank >= 0), or the cluster's (rank and node -1).
struct AcceptCheck {
  std::string name;    // gemm_rate, memory_bandwidth, inventory, verification, health, ...
  std::string stage;   // inventory, gpu, step, sdc
  std::string status;  // pass, fail, info
  int rank = -1;
  int node = -1;
  std::optional<double> measured;
  std::optional<double> expected;
  std::string unit;    // SI: FLOP/s, bytes/s; "" where no figure applies
  std::string source;  // where the expected figure comes from
  std::string reason;  // one line for people
  int report = -1;     // accept-merge: the index of the report it came from (-1: the merge's own)
};

// "rank R on HOST", and a check of that rank (its node's).
std::string rank_text(const AcceptRank& r);
AcceptCheck rank_check(const std::string& name, const std::string& stage, const AcceptRank& r);

// A check of the cluster as a whole, or (node >= 0) of one node but no rank of it.
AcceptCheck cluster_check(const std::string& name, const std::string& stage,
                          const std::string& status, const std::string& reason, int node = -1);

struct AcceptStage {
  std::string name;
  double wall_time_s = 0;
  bool stopped = false;  // a rank stopped answering in it
};

// --duration's rounds, per rank: each round's GEMM rate and step time, and its GPU's telemetry
// where it has NVML (`telemetry_note` names the first rank without and why).
struct BurnIn {
  double duration_s = 0;
  int rounds = 0;
  std::vector<std::vector<double>> gemm_rate;                         // [rank][round], FLOP/s
  std::vector<std::vector<double>> step_time_s;                       // [rank][round]
  std::vector<std::optional<std::vector<RoundTelemetry>>> telemetry;  // [rank][round]
  std::string telemetry_note;  // "rank R: why" where a rank has no telemetry
};

// One collective at one size (accept_collectives.hpp measures them).
struct CollectiveRow {
  std::string op;          // all_reduce, reduce_scatter, all_gather, all_to_all
  std::int64_t bytes = 0;  // the whole buffer: all-reduce's, the reduce-scatter's input, the
                           // all-gather's output, the all-to-all's send buffer
  double time_s = 0;       // the slowest rank's mean over the iterations
  double algbw = 0;        // bytes / time_s, bytes/s
  double busbw = 0;        // algbw x the op's factor (nccl-tests'), bytes/s
};

struct AcceptResult {
  std::optional<BurnIn> burnin;
  std::vector<CollectiveRow> collectives;
  std::vector<AcceptRank> ranks;
  std::vector<std::string> node_names;  // by node index
  std::vector<AcceptStage> stages;
  std::vector<AcceptCheck> checks;
  bool passed() const;
};

// Node names for drain.txt: each node's host where the nodes' hosts differ, else (nodes emulated
// on one host) "HOST-nK".
std::vector<std::string> node_names(const std::vector<AcceptRank>& ranks);

// A rate each rank measured (larger is better), judged per rank: against the median of the ranks
// of its SKU (with 3 or more of them), failing past `min_slowdown` slower; and against
// `expected` (floor x it), unless `nominal` (a figure that is no bound, the cpu system's), where
// it is stated only.
struct RateSpec {
  std::string name, stage, unit, source;
  std::optional<double> expected;
  bool nominal = false;
  double floor = 0.8;
  double min_slowdown = 0.1;
  // A SKU's own expected figure (the site's: --baseline, --floors), in place of `expected`.
  std::map<std::string, double> expected_by_sku = {};
  std::optional<double> expected_for(const std::string& sku) const {
    const auto it = expected_by_sku.find(sku);
    return it != expected_by_sku.end() ? std::optional<double>(it->second) : expected;
  }
};
std::vector<AcceptCheck> judge_rates(const RateSpec& spec, const std::vector<AcceptRank>& ranks,
                                     const std::vector<double>& values);

// Checksums of the same computation, per rank: each rank's repeats must agree with each other,
// and with the majority of the ranks that share its `group` (its SKU, or the replicas of one set
// of parameters). A group without a strict majority fails as the cluster's, naming its ranks.
std::vector<AcceptCheck> judge_checksums(const std::string& name, const std::string& stage,
                                         const std::string& what,
                                         const std::vector<AcceptRank>& ranks,
                                         const std::vector<std::vector<std::uint64_t>>& sums,
                                         const std::vector<std::string>& group);

// The link test's outliers (linkcheck's analysis): a rank with two or more slow links is its
// node's failure; a single slow link, whose end cannot be told, its node's when both ends share
// one, else the cluster's, or stated only (`info`) where single links are not `judged` (the cpu
// backend: ranks share cores, and one exchange can meet a descheduled rank); one passing check
// when there is none.
std::vector<AcceptCheck> judge_links(const std::vector<AcceptRank>& ranks,
                                     const std::vector<LinkSample>& samples,
                                     const LinkAnalysis& analysis, bool single_links_judged = true);

// A rate each rank measured round after round in the burn-in (larger is better): a rank whose
// last third of the rounds (their median; a round at least) fell more than `min_slowdown` below
// its first third fails (throttling, a part failing warm). Stated only where not `judged` (the
// cpu backend, whose ranks share cores: a round's rate there is what the neighbours left).
std::vector<AcceptCheck> judge_drift(const std::string& name, const std::string& unit,
                                     const std::vector<AcceptRank>& ranks,
                                     const std::vector<std::vector<double>>& series,
                                     double min_slowdown, bool judged = true);

// The ranks of one SKU whose software differs from the majority's, each a failing check; one
// passing check when none does.
std::vector<AcceptCheck> judge_inventory(const std::vector<AcceptRank>& ranks);

// The step's comparison with the single-process reference, as the cluster's check.
std::vector<AcceptCheck> verification_check(const VerificationResult& v);

// The health check's suspects (their compute against their stage's), a check a rank.
std::vector<AcceptCheck> health_checks(const std::vector<AcceptRank>& ranks,
                                       const HealthResult& health);

// The same step twice (sums[r] = {dense first, dense second, experts first, experts second}) and
// the replicas' parameters, each group a pipeline stage ("PP EP" in places[r]: its pipeline
// stage and expert slot).
std::vector<AcceptCheck> step_sdc_checks(const std::vector<AcceptRank>& ranks,
                                         const std::vector<std::vector<std::uint64_t>>& sums,
                                         const std::vector<std::string>& places);

// A stage stopped by a wait past --timeout: each rank that did not answer afterwards fails
// (`responsive`, its node drained); none silent, the cluster's failure with the wait's error.
std::vector<AcceptCheck> hang_checks(const std::vector<AcceptRank>& ranks,
                                     const std::vector<int>& silent, const std::string& stage,
                                     const std::string& error);

// One `scontrol update NodeName=... State=DRAIN Reason="..."` line per node with a failing check,
// in node order; moebench never runs them.
std::vector<std::string> drain_lines(const AcceptResult& r);

nlohmann::ordered_json accept_json(const AcceptResult& r, const nlohmann::ordered_json& meta);
std::string accept_markdown(const AcceptResult& r, const nlohmann::ordered_json& meta);
std::string junit_xml(const AcceptResult& r);

// A checksum as accept.json writes it: 16 hexadecimal digits.
std::string checksum_text(std::uint64_t sum);

// FNV-1a over bytes: a checksum of values that must be bit-identical.
std::uint64_t fnv1a(const void* data, std::size_t bytes, std::uint64_t h = 14695981039346656037ULL);

}  // namespace moebench
