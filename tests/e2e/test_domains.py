"""NVLink domains: emulated with --nvlink-domain-size, recorded per rank, the all-to-alls' bytes
split inside and across domains, and a warning naming each expert group that spans two.

With balanced routing every rank sends the same rows to each peer of its expert group, so the
share of the bytes that cross domains is exact. 12 ranks in domains of 6 with EP 4: the groups
0-3 and 8-11 stay inside a domain, the group 4-7 straddles (4 and 5 in domain 0, 6 and 7 in 1),
so each of its ranks sends 2 of its 3 peers' bytes across: 8 of the 36 peer shares, 2/9. With EP
8 in domains of 4 every group is larger than a domain, spans domains by design, and is not
warned about; 4 of each rank's 7 peers are across, 4/7.
"""

import os
import tempfile

import moebench_e2e as e2e

PRESET = "deepseek-v3-tiny"


def run(ctx, tmp, np, ep, domain, name):
    out = os.path.join(tmp, name)
    res = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--ep", ep, "--nvlink-domain-size",
                                 domain, "--warmup", 1, "--steps", 2, "--out", out], np=np,
                           timeout=300)
    e2e.check(res.rc == 0, "the run succeeds", res)
    return res, e2e.load_report(ctx, out)


def test_a_straddling_expert_group_is_named_and_its_traffic_split(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        res, rep = run(ctx, tmp, 12, 4, 6, "straddle.json")
        d = rep["parallel"]["nvlink_domains"]
        # The report says how the backend orders its concurrent lanes (nccl: by NCCL's implicit
        # launch order or by cross-lane events; mpi: per group, in issue order).
        ordering = rep["meta"].get("comm_ordering", "")
        e2e.check(ordering.startswith("mpi:") and "issue order" in ordering,
                  "meta.comm_ordering: %r" % ordering)
        e2e.check(d["source"] == "emulated" and d["count"] == 2 and
                  d["of_rank"] == [0] * 6 + [1] * 6, "the domains: %r" % d)
        e2e.check(len(d["warnings"]) == 1 and
                  d["warnings"][0].startswith("expert group 1 (world ranks 4-7) spans NVLink "
                                              "domains 0, 1"), "the warning: %r" % d["warnings"])
        e2e.check("moebench: warning: expert group 1 (world ranks 4-7)" in res.stderr,
                  "the warning is printed", res)
        t = d["alltoall_bytes_per_step"]
        e2e.check(t["in_domain"] > 0 and t["cross_domain"] > 0, "both kinds of traffic: %r" % t)
        # Balanced routing: equal bytes to every peer; sums of whole rows in doubles: 1e-9.
        e2e.check_close(t["cross_domain_share"], 2.0 / 9.0, 1e-9, "the share across domains")
        e2e.check("# NVLink domains: 2 (emulated)" in res.stdout, "the table says so", res)


def test_groups_larger_than_a_domain_span_domains_without_a_warning(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        res, rep = run(ctx, tmp, 8, 8, 4, "larger.json")
        d = rep["parallel"]["nvlink_domains"]
        e2e.check(d["warnings"] == [] and not res.moebench_lines("moebench: warning:"),
                  "no warning", res)
        e2e.check_close(d["alltoall_bytes_per_step"]["cross_domain_share"], 4.0 / 7.0, 1e-9,
                        "4 of 7 peers across")


def test_groups_inside_domains_need_no_warning(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        res, rep = run(ctx, tmp, 8, 4, 4, "inside.json")
        d = rep["parallel"]["nvlink_domains"]
        e2e.check(d["warnings"] == [] and not res.moebench_lines("moebench: warning:"),
                  "no warning", res)
        t = d["alltoall_bytes_per_step"]
        e2e.check(t["cross_domain"] == 0 and t["in_domain"] > 0 and t["cross_domain_share"] == 0,
                  "every byte stays in its domain: %r" % t)
        # Without the flag, the node is the domain: one node here.
        res, rep = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--ep", 2, "--steps", 1,
                                          "--warmup", 0, "--out", os.path.join(tmp, "n.json")],
                                    np=2), None
        e2e.check(res.rc == 0, "a plain run", res)
        d = e2e.load_report(ctx, os.path.join(tmp, "n.json"))["parallel"]["nvlink_domains"]
        e2e.check(d["source"] == "node" and d["of_rank"] == [0, 0], "the node as domain: %r" % d)
        sysd = e2e.load_report(ctx, os.path.join(tmp, "n.json"))["meta"]["system"]
        e2e.check(sysd["description"].startswith("2 ranks on 1 node, cpu backend, no GPU ("),
                  "the run names its system: %r" % sysd)


def test_bad_domain_size(ctx):
    res = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--ep", 2, "--nvlink-domain-size", 3,
                                 "--steps", 1], np=2, timeout=120)
    e2e.check(res.rc == e2e.EXIT_USAGE and "--nvlink-domain-size 3 must divide" in res.stderr,
              "exit 2 naming the flag", res)


TESTS = [
    test_a_straddling_expert_group_is_named_and_its_traffic_split,
    test_groups_larger_than_a_domain_span_domains_without_a_warning,
    test_groups_inside_domains_need_no_warning,
    test_bad_domain_size,
]

if __name__ == "__main__":
    e2e.run_main(TESTS)
