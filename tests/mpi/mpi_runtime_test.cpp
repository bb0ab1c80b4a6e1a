// The MpiRuntime's own exchanges (the harness's host-side collectives), at any world size, and
// the same again with the piece size lowered to a few elements, so that every broadcast, gather,
// scatter and all-reduce runs in many pieces (and rounds) and must reassemble exactly: the values
// are integers and indices, so every check is ==.
// Last, the liveness question asked after a timeout (silent_ranks).
// Usage: mpirun -n W mpi_runtime_test. Exit 0 only when every rank passed.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "harness/core/error.hpp"
#include "harness/runtime/mpi_runtime.hpp"
#include "tests/mpi/comm_test_support.hpp"

namespace mb = moebench;
using mb::test::Checker;

namespace {

void test_runtime(const mb::MpiRuntime& rt, Checker& ck) {
  const int w = rt.size();
  const int r = rt.rank();
  ck.check(rt.allreduce_max(r) == w - 1, "allreduce_max");
  ck.check(rt.allreduce_min(r + 1.0) == 1.0, "allreduce_min");
  ck.check(rt.allreduce_sum(static_cast<double>(r)) == w * (w - 1) / 2.0, "allreduce_sum double");
  ck.check(rt.allreduce_sum(static_cast<long long>(r) << 33) ==
               (static_cast<long long>(w) * (w - 1) / 2) << 33,
           "allreduce_sum long long beyond 32 bits");
  ck.check(rt.all_true(true), "all_true(true)");
  ck.check(!rt.all_true(r != w - 1), "all_true with one false");
  std::vector<double> mine(r % 3, static_cast<double>(r));  // uneven lengths, some empty
  const auto gathered = rt.gather_to_root(mine);
  std::vector<double> want;
  if (r == 0) {
    for (int s = 0; s < w; ++s) want.insert(want.end(), s % 3, static_cast<double>(s));
  }
  ck.check(gathered == want, "gather_to_root");
  std::vector<float> v;
  if (r == w - 1) v = {1.5f, 2.5f, -3.0f};
  rt.broadcast(v, w - 1);
  ck.check(v == std::vector<float>{1.5f, 2.5f, -3.0f}, "broadcast floats");
  std::string s = r == 0 ? "moebench" : "x";
  rt.broadcast(s, 0);
  ck.check(s == "moebench", "broadcast string");
  const auto hosts = rt.all_hosts();
  ck.check(static_cast<int>(hosts.size()) == w && hosts[r] == rt.host(), "all_hosts");
  // Every rank's own text, each of a different length, in rank order; longer ones cut at 255.
  const auto texts = rt.all_gather("rank " + std::to_string(r) + std::string(r * 100, '.'));
  bool texts_ok = static_cast<int>(texts.size()) == w;
  for (int i = 0; texts_ok && i < w; ++i) {
    texts_ok = texts[i] == ("rank " + std::to_string(i) + std::string(i * 100, '.')).substr(0, 255);
  }
  ck.check(texts_ok, "all_gather");
  ck.check(!mb::MpiRuntime::library_version().empty(), "library_version");
  const mb::Topology t = rt.topology(mb::ParallelGrid(w, {}), 0);
  ck.check(t.nodes >= 1 && t.node < t.nodes && t.local_rank < t.ranks_per_node, "topology nodes");
  ck.check(rt.allreduce_sum(static_cast<long long>(t.local_rank == 0)) == t.nodes,
           "one local rank 0 per node");
  rt.barrier();
}

// Lengths that do not divide by the piece or the round, some empty, the longest on the last rank.
std::int64_t length_of(int r, std::int64_t piece) {
  return (r % 3) * piece * 5 / 2 + r;
}

void test_pieces(mb::MpiRuntime& rt, std::int64_t piece, Checker& ck) {
  rt.set_piece_elements(piece);
  const std::string at = " (pieces of " + std::to_string(piece) + ")";
  const int w = rt.size(), r = rt.rank();
  ck.check(rt.piece_elements() == piece, "piece_elements" + at);

  // A broadcast of many pieces, from the last rank.
  std::vector<float> v;
  const std::int64_t n = piece * 7 + 3;
  if (r == w - 1) {
    for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(i * 3 + 1));
  }
  rt.broadcast(v, w - 1);
  bool ok = static_cast<std::int64_t>(v.size()) == n;
  for (std::int64_t i = 0; ok && i < n; ++i) ok = v[i] == static_cast<float>(i * 3 + 1);
  ck.check(ok, "broadcast of " + std::to_string(n) + " floats" + at);
  std::string s = r == 0 ? std::string(static_cast<std::size_t>(piece * 3 + 1), 'm') + "oe" : "";
  rt.broadcast(s, 0);
  ck.check(s == std::string(static_cast<std::size_t>(piece * 3 + 1), 'm') + "oe",
           "broadcast of a string" + at);

  // Gathers of uneven lengths.
  std::vector<double> mine;
  for (std::int64_t i = 0; i < length_of(r, piece); ++i) mine.push_back(r * 1000.0 + i);
  const std::vector<double> gathered = rt.gather_to_root(mine);
  std::vector<double> want;
  if (r == 0) {
    for (int q = 0; q < w; ++q) {
      for (std::int64_t i = 0; i < length_of(q, piece); ++i) want.push_back(q * 1000.0 + i);
    }
  }
  ck.check(gathered == want, "gather_to_root" + at);
  const std::string text(static_cast<std::size_t>(length_of(r, piece)), static_cast<char>('a' + r));
  const std::vector<std::string> texts = rt.gather_strings_to_root(text);
  ok = r != 0 || static_cast<int>(texts.size()) == w;
  for (int q = 0; r == 0 && ok && q < w; ++q) {
    ok = texts[q] ==
         std::string(static_cast<std::size_t>(length_of(q, piece)), static_cast<char>('a' + q));
  }
  ck.check(ok, "gather_strings_to_root" + at);

  // An all-reduce of several pieces.
  std::vector<double> m(static_cast<std::size_t>(piece * 4 + 1));
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<double>((i + r) % w);
  rt.allreduce_max(m);
  ok = true;
  for (std::size_t i = 0; ok && i < m.size(); ++i) ok = m[i] == w - 1;
  ck.check(ok, "allreduce_max of " + std::to_string(m.size()) + " values" + at);

  // Each rank's own ranges of rank 0's vector, in the order asked: overlapping, reversed, empty
  // and whole, more than a round long.
  std::vector<float> source;
  if (r == 0) {
    for (std::int64_t i = 0; i < piece * 20; ++i) source.push_back(static_cast<float>(i));
  }
  const std::int64_t size = piece * 20;
  std::vector<mb::MpiRuntime::Range> ranges;
  if (r % 2 == 1) ranges = {{size - piece - 1, piece + 1}, {r, 2 * piece}, {0, 0}, {r, 1}};
  if (r == w - 1) ranges.push_back({0, size});
  const std::vector<float> got = rt.scatter_ranges(source, ranges);
  std::vector<float> expect;
  for (const auto& range : ranges) {
    for (std::int64_t i = 0; i < range.count; ++i) {
      expect.push_back(static_cast<float>(range.offset + i));
    }
  }
  ck.check(got == expect, "scatter_ranges of " + std::to_string(expect.size()) + " values" + at);
  rt.set_piece_elements(mb::MpiRuntime::kMaxPieceElements);
}

void test_bad_piece(mb::MpiRuntime& rt, Checker& ck) {
  for (std::int64_t bad : {std::int64_t{0}, mb::MpiRuntime::kMaxPieceElements + 1}) {
    bool threw = false;
    try {
      rt.set_piece_elements(bad);
    } catch (const mb::RuntimeError&) {
      threw = true;
    }
    ck.check(threw, "a piece of " + std::to_string(bad) + " elements is refused");
  }
}

}  // namespace

// silent_ranks: with every rank answering, none is silent; with the last rank keeping quiet (a
// hung one), rank 0 names it alone after the grace period. A barrier between the two rounds
// keeps the first round's messages from answering the second's.
void test_silent_ranks(const mb::MpiRuntime& rt, Checker& ck) {
  const std::vector<int> none = rt.silent_ranks(30.0);
  ck.check(none.empty(), "silent_ranks: everyone answered");
  rt.barrier();
  const int quiet = rt.size() - 1;
  if (quiet == 0) return;
  std::vector<int> silent;
  if (rt.rank() != quiet) silent = rt.silent_ranks(5.0);
  if (rt.rank() == 0) {
    ck.check(silent == std::vector<int>{quiet}, "silent_ranks names the quiet rank alone");
  }
  rt.barrier();
}

int main(int argc, char** argv) {
  mb::MpiRuntime rt(&argc, &argv);
  Checker ck;
  ck.rank = rt.rank();
  try {
    test_runtime(rt, ck);
    for (std::int64_t piece : {7, 3, 1}) {
      test_pieces(rt, piece, ck);
    }
    test_runtime(rt, ck);  // the default again
    test_bad_piece(rt, ck);
    test_silent_ranks(rt, ck);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rt.rank(), e.what());
    ++ck.failed;
  }
  return mb::test::summarize(rt, ck);
}
