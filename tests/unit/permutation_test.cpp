#include "workloads/routing/permutation.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "harness/core/error.hpp"
#include "harness/math/random.hpp"

namespace moebench {
namespace {

constexpr int kDim = 3;  // row width: (source rank, token, a random value)

// top_k distinct random experts per token.
std::vector<std::int32_t> random_indices(std::int64_t tokens, int top_k, int experts,
                                         std::uint64_t seed) {
  std::vector<std::int32_t> idx;
  std::uint64_t draw = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::vector<std::int32_t> mine;
    while (static_cast<int>(mine.size()) < top_k) {
      const auto e = static_cast<std::int32_t>(uniform01(seed, 1, draw++) * experts);
      if (std::find(mine.begin(), mine.end(), e) == mine.end()) mine.push_back(e);
    }
    idx.insert(idx.end(), mine.begin(), mine.end());
  }
  return idx;
}

// A distinct simple function per expert.
double expert_f(int e, double x) {
  return (e + 1) * x + 0.5 * e;
}

struct Rank {
  std::int64_t tokens = 0;
  std::vector<std::int32_t> indices;
  std::vector<double> weights;  // tokens x top_k
  std::vector<double> x;        // tokens x kDim
  DispatchPlan plan;
  std::vector<double> send;  // send order, rows x kDim
  ExpertLayout layout;
  std::vector<double> recv;  // received order
};

}  // namespace

TEST_CASE("dispatch and expert layout round trip through a simulated all-to-all") {
  const int experts = 16, top_k = 4;
  for (int ep : {1, 2, 4}) {
    CAPTURE(ep);
    const int local = experts / ep;
    std::vector<Rank> ranks(ep);
    for (int r = 0; r < ep; ++r) {
      Rank& k = ranks[r];
      k.tokens = r == 1 ? 0 : 23 + 17 * r;  // rank 1 (when present) sends nothing
      k.indices = random_indices(k.tokens, top_k, experts, 100 + ep * 10 + r);
      for (std::int64_t i = 0; i < k.tokens * top_k; ++i) {
        k.weights.push_back(uniform01(7, r, i));
      }
      for (std::int64_t t = 0; t < k.tokens; ++t) {
        k.x.insert(k.x.end(), {double(r), double(t), double(uniform_pm1(9, r, t))});
      }
      k.plan = make_dispatch_plan(k.indices, k.tokens, top_k, experts, ep);
      const DispatchPlan& p = k.plan;

      // Counts, offsets and order.
      REQUIRE(p.row_token.size() == static_cast<std::size_t>(k.tokens * top_k));
      CHECK(std::accumulate(p.expert_rows.begin(), p.expert_rows.end(), std::int64_t{0}) ==
            k.tokens * top_k);
      CHECK(std::accumulate(p.send_rows.begin(), p.send_rows.end(), std::int64_t{0}) ==
            k.tokens * top_k);
      CHECK(p.send_expert_rows == p.expert_rows);
      for (int d = 0; d < ep; ++d) {
        CHECK(p.send_offsets[d] ==
              std::accumulate(p.send_rows.begin(), p.send_rows.begin() + d, std::int64_t{0}));
        CHECK(p.send_rows[d] == std::accumulate(p.expert_rows.begin() + d * local,
                                                p.expert_rows.begin() + (d + 1) * local,
                                                std::int64_t{0}));
      }
      std::vector<int> seen(k.tokens * top_k, 0);
      for (std::size_t i = 0; i < p.row_slot.size(); ++i) {
        ++seen[p.row_slot[i]];
        CHECK(p.row_token[i] == p.row_slot[i] / top_k);
        if (i > 0) {  // by expert, then token, then slot
          const int e0 = k.indices[p.row_slot[i - 1]], e1 = k.indices[p.row_slot[i]];
          CHECK((e0 < e1 || (e0 == e1 && p.row_slot[i - 1] < p.row_slot[i])));
        }
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));

      for (std::int32_t t : p.row_token) {
        k.send.insert(k.send.end(), k.x.begin() + t * kDim, k.x.begin() + (t + 1) * kDim);
      }
    }

    // The counts all-to-all, then the rows all-to-all (source-major on the receiver).
    for (int d = 0; d < ep; ++d) {
      std::vector<std::int64_t> recv_counts;
      for (int s = 0; s < ep; ++s) {
        const auto& c = ranks[s].plan.send_expert_rows;
        recv_counts.insert(recv_counts.end(), c.begin() + d * local, c.begin() + (d + 1) * local);
      }
      ranks[d].layout = make_expert_layout(recv_counts, ep, local);
      for (int s = 0; s < ep; ++s) {
        const DispatchPlan& p = ranks[s].plan;
        ranks[d].recv.insert(ranks[d].recv.end(), ranks[s].send.begin() + p.send_offsets[d] * kDim,
                             ranks[s].send.begin() + (p.send_offsets[d] + p.send_rows[d]) * kDim);
        CHECK(ranks[d].layout.recv_rows[s] == p.send_rows[d]);
      }
    }

    // Each expert sees exactly its rows, by source then token; it applies f; results go back.
    std::vector<std::vector<double>> back(ep);  // per destination, in its received order
    for (int d = 0; d < ep; ++d) {
      const ExpertLayout& l = ranks[d].layout;
      REQUIRE(l.expert_row_source.size() == static_cast<std::size_t>(l.total_rows));
      CHECK(static_cast<std::int64_t>(ranks[d].recv.size()) == l.total_rows * kDim);
      back[d].assign(ranks[d].recv.size(), NAN);
      for (int le = 0; le < local; ++le) {
        const int e = d * local + le;
        std::vector<std::pair<int, int>> expected, got;
        for (int s = 0; s < ep; ++s) {
          for (std::int64_t i = 0; i < ranks[s].tokens * top_k; ++i) {
            if (ranks[s].indices[i] == e) expected.emplace_back(s, i / top_k);
          }
        }
        CHECK(l.expert_rows[le] == static_cast<std::int64_t>(expected.size()));
        for (std::int64_t i = l.expert_offsets[le]; i < l.expert_offsets[le] + l.expert_rows[le];
             ++i) {
          const std::int64_t src = l.expert_row_source[i];
          const double* row = &ranks[d].recv[src * kDim];
          got.emplace_back(static_cast<int>(row[0]), static_cast<int>(row[1]));
          for (int c = 0; c < kDim; ++c) back[d][src * kDim + c] = expert_f(e, row[c]);
        }
        CHECK(got == expected);
      }
    }

    // Reverse all-to-all, then the weighted scatter back onto tokens.
    for (int s = 0; s < ep; ++s) {
      Rank& k = ranks[s];
      std::vector<double> returned(k.send.size(), NAN);
      for (int d = 0; d < ep; ++d) {
        const std::int64_t from = ranks[d].layout.recv_offsets[s];
        std::copy(back[d].begin() + from * kDim,
                  back[d].begin() + (from + k.plan.send_rows[d]) * kDim,
                  returned.begin() + k.plan.send_offsets[d] * kDim);
      }
      std::vector<double> y(k.x.size(), 0.0);
      for (std::size_t i = 0; i < k.plan.row_token.size(); ++i) {
        for (int c = 0; c < kDim; ++c) {
          y[k.plan.row_token[i] * kDim + c] +=
              k.weights[k.plan.row_slot[i]] * returned[i * kDim + c];
        }
      }
      for (std::int64_t t = 0; t < k.tokens; ++t) {
        for (int c = 0; c < kDim; ++c) {
          double want = 0.0;
          for (int j = 0; j < top_k; ++j) {
            want +=
                k.weights[t * top_k + j] * expert_f(k.indices[t * top_k + j], k.x[t * kDim + c]);
          }
          // Same terms summed in another order, doubles of order 100: 1e-9 absolute.
          CHECK(std::abs(y[t * kDim + c] - want) <= 1e-9);
        }
      }
    }
  }
}

TEST_CASE("expert layout orders rows expert-major") {
  // 2 sources x 2 local experts: source 0 sends 1 row to expert 0 and 2 to expert 1; source 1
  // sends 3 and 0. Received rows: [s0e0 | s0e1 s0e1 | s1e0 s1e0 s1e0].
  const std::vector<std::int64_t> counts = {1, 2, 3, 0};
  const ExpertLayout l = make_expert_layout(counts, 2, 2);
  CHECK(l.recv_rows == std::vector<std::int64_t>{3, 3});
  CHECK(l.recv_offsets == std::vector<std::int64_t>{0, 3});
  CHECK(l.expert_rows == std::vector<std::int64_t>{4, 2});
  CHECK(l.expert_offsets == std::vector<std::int64_t>{0, 4});
  CHECK(l.total_rows == 6);
  CHECK(l.expert_row_source == std::vector<std::int32_t>{0, 3, 4, 5, 1, 2});
}

TEST_CASE("plans reject inconsistent input") {
  const std::vector<std::int32_t> idx = {0, 3, 1, 16};
  CHECK_THROWS_AS(make_dispatch_plan(idx, 2, 2, 16, 2), RuntimeError);  // expert 16 of 16
  CHECK_THROWS_AS(make_dispatch_plan(std::vector<std::int32_t>{0, -1}, 1, 2, 16, 2), RuntimeError);
  CHECK_THROWS_AS(make_dispatch_plan(idx, 3, 2, 16, 2), RuntimeError);  // size mismatch
  CHECK_THROWS_AS(make_dispatch_plan(std::vector<std::int32_t>{0, 1}, 1, 2, 16, 3),
                  RuntimeError);  // 16 experts over 3 ranks
  CHECK_NOTHROW(make_dispatch_plan(std::vector<std::int32_t>{}, 0, 2, 16, 2));
  CHECK_THROWS_AS(make_expert_layout(std::vector<std::int64_t>{1, 2, 3}, 2, 2), RuntimeError);
  CHECK_THROWS_AS(make_expert_layout(std::vector<std::int64_t>{1, -2, 3, 0}, 2, 2), RuntimeError);
}

}  // namespace moebench
