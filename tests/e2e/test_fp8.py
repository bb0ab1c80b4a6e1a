"""`moebench run --precision fp8` under mpirun with the tiny preset (the cpu backend's emulation).

Checks that fp8 runs verify at np 1 and np 4 (EP 4) against their single-process reference with
the fp8 tolerance, that the report says fp8 and emulated, that the FLOP accounting is the same as
an fp32 run's, and that the fp8 tolerance still fails a planted bug (--inject corrupt:rank=1).
"""

import os
import tempfile

import moebench_e2e as e2e

PRESET = "deepseek-v3-tiny"
# One E4M3 GEMM's worst case (harness/verify/compare.hpp): two inputs each rounded by 2^-4.
FP8_TOL = 0.125


def run_tiny(ctx, tmp, np, ep, extra=(), expect_rc=0, name="r.json"):
    out = os.path.join(tmp, name)
    args = ["run", "--preset", PRESET, "--ep", ep, "--out", out, "--warmup", 1, "--steps", 2,
            "--verify"] + list(extra)
    r = e2e.run_moebench(ctx, args, np=np, timeout=300)
    e2e.check(not r.timed_out, "moebench run did not finish", r)
    e2e.check(r.rc == expect_rc, "expected exit %d, got %s" % (expect_rc, r.rc), r)
    return r, e2e.load_report(ctx, out)


def check_fp8_report(rep):
    cfg = rep["config"]
    e2e.check(cfg["precision"] == "fp8", "config.precision is %r" % cfg["precision"])
    fp8 = cfg.get("fp8")
    e2e.check(fp8 is not None, "config.fp8 is missing")
    e2e.check(fp8["emulated"] is True, "the cpu backend's fp8 is not reported as emulated")
    e2e.check(fp8["storage"] == "fp32" and fp8["format"] == "e4m3",
              "config.fp8 is %r" % (fp8,))
    v = rep["verification"]
    e2e.check(v["rtol"] == FP8_TOL and v["atol"] == FP8_TOL,
              "fp8 tolerance %r / %r, expected %r" % (v["rtol"], v["atol"], FP8_TOL))
    e2e.check("E4M3" in v["tolerance_reason"], "tolerance_reason does not explain fp8")
    kernels = rep["meta"]["kernels"]
    e2e.check("fp8" in kernels["gemm"] and "emulation" in kernels["gemm"],
              "meta.kernels.gemm does not name the fp8 emulation: %r" % kernels["gemm"])


def make_verify_test(np, ep):
    def test(ctx):
        with tempfile.TemporaryDirectory() as tmp:
            r, rep = run_tiny(ctx, tmp, np, ep, ["--precision", "fp8"])
            check_fp8_report(rep)
            v = rep["verification"]
            e2e.check(v["passed"] is True and v["mismatches"] == 0 and v["compared"] > 0,
                      "fp8 verification: passed %r, %r of %r mismatched" %
                      (v["passed"], v["mismatches"], v["compared"]), r)
            # The FLOP accounting does not depend on the precision.
            _, ref = run_tiny(ctx, tmp, np, ep, name="fp32.json")
            e2e.check(ref["config"]["precision"] == "fp32" and "fp8" not in ref["config"],
                      "the default run is not plain fp32")
            kernels = ref["meta"]["kernels"]
            e2e.check("fp8" not in kernels["gemm"] and kernels["attention"],
                      "meta.kernels of the fp32 run: %r" % kernels)
            for key in ("flops_per_step", "flops_per_token"):
                got = rep["accounting"]["instantiated"][key]
                want = ref["accounting"]["instantiated"][key]
                e2e.check(got == want, "fp8 %s %r differs from fp32's %r" % (key, got, want))
    test.__name__ = "test_fp8_verify_np%d_ep%d" % (np, ep)
    return test


def test_fp8_tolerance_fails_a_corrupted_dispatch(ctx):
    with tempfile.TemporaryDirectory() as tmp:
        r, rep = run_tiny(ctx, tmp, 4, 4, ["--precision", "fp8", "--inject", "corrupt:rank=1"],
                          expect_rc=e2e.EXIT_VERIFICATION)
        check_fp8_report(rep)
        v = rep["verification"]
        e2e.check(v["passed"] is False and v["mismatches"] > 0,
                  "corrupted fp8 run: passed %r, mismatches %r" % (v["passed"], v["mismatches"]))
        e2e.check("verification failed" in r.stderr, "stderr does not say verification failed", r)


def test_fp8_bad_precision_messages(ctx):
    r = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--precision", "bf16"], np=1)
    e2e.check(r.rc == e2e.EXIT_USAGE, "--precision bf16 on cpu: exit %s" % r.rc, r)
    e2e.check("valid: fp32 or fp8" in r.stderr, "the message does not list fp8", r)
    r = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--precision", "fp4"], np=1)
    e2e.check(r.rc == e2e.EXIT_USAGE, "--precision fp4: exit %s" % r.rc, r)
    e2e.check("or fp8" in r.stderr, "the message does not list fp8", r)


def make_recipe_test(recipe, np, ep):
    def test(ctx):
        with tempfile.TemporaryDirectory() as tmp:
            r, rep = run_tiny(ctx, tmp, np, ep, ["--precision", "fp8", "--fp8-recipe", recipe])
            fp8 = rep["config"]["fp8"]
            e2e.check(fp8["recipe"] == recipe and fp8["emulated"] is True,
                      "config.fp8: %r" % (fp8,))
            e2e.check(recipe in rep["meta"]["kernels"]["gemm"].lower() or
                      ("1x128" in rep["meta"]["kernels"]["gemm"] and recipe == "blockwise"),
                      "meta.kernels.gemm does not name the recipe: %r" %
                      rep["meta"]["kernels"]["gemm"])
            v = rep["verification"]
            e2e.check(v["passed"] is True and v["mismatches"] == 0 and v["compared"] > 0,
                      "%s verification: passed %r, %r of %r mismatched" %
                      (recipe, v["passed"], v["mismatches"], v["compared"]), r)
    test.__name__ = "test_fp8_recipe_%s_np%d_ep%d" % (recipe, np, ep)
    return test


def test_fp8_recipe_bad_input(ctx):
    r = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--fp8-recipe", "blockwise"], np=1)
    e2e.check(r.rc == e2e.EXIT_USAGE, "--fp8-recipe without fp8: exit %s" % r.rc, r)
    e2e.check("--fp8-recipe blockwise needs --precision fp8" in r.stderr,
              "the message does not say fp8 is needed", r)
    r = e2e.run_moebench(ctx, ["run", "--preset", PRESET, "--precision", "fp8",
                               "--fp8-recipe", "nvfp4"], np=1)
    e2e.check(r.rc == e2e.EXIT_USAGE, "--fp8-recipe nvfp4: exit %s" % r.rc, r)
    e2e.check("valid: tensor" in r.stderr and "mxfp8" in r.stderr,
              "the message does not list the recipes", r)


TESTS = [
    make_verify_test(1, 1),
    make_recipe_test("blockwise", 2, 2),
    make_recipe_test("mxfp8", 2, 2),
    test_fp8_recipe_bad_input,
    make_verify_test(4, 4),
    test_fp8_tolerance_fails_a_corrupted_dispatch,
    test_fp8_bad_precision_messages,
]

if __name__ == "__main__":
    e2e.run_main(TESTS)
