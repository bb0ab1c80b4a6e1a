"""The CUDA libraries only when used: the device backends are a plugin beside the binary.

A run of the cpu backend must not load cuBLASLt, cuBLAS, cuDNN, NVRTC, NCCL or the CUDA runtime
(cuBLASLt alone is about 145 MB resident in every process); `--backend cuda` loads the plugin,
with every symbol resolved at once (RTLD_NOW), and on this machine, which has no GPU, then says
that no CUDA device is visible: the plugin loaded.
"""

import os
import subprocess

import moebench_e2e as e2e

USAGE = 2
CUDA_LIBRARIES = ["libcublasLt", "libcublas.", "libcudnn", "libnvrtc", "libnccl", "libcudart"]
PLUGIN = "libmoebench_cuda.so"


def loaded_libraries(ctx, args, np=None):
    """The shared libraries the dynamic loader opened for `moebench args` (glibc's LD_DEBUG)."""
    env = dict(e2e.mpi_env(), LD_DEBUG="files")
    cmd = [ctx.binary] + [str(a) for a in args]
    if np is not None:
        cmd = ["mpirun", "-np", str(np), "--oversubscribe", "-x", "LD_DEBUG"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    opened = [line.split("file=", 1)[1].split()[0] for line in p.stderr.splitlines()
              if "file=" in line and ("needed by" in line or "dynamically loaded by" in line)]
    return p, sorted(set(opened))


def has_plugin(ctx):
    return os.path.isfile(os.path.join(os.path.dirname(ctx.binary), PLUGIN))


def test_cpu_runs_load_no_cuda_library(ctx):
    if not has_plugin(ctx):
        r = e2e.run_moebench(ctx, ["run", "--backend", "cuda"], np=1)
        e2e.check(r.rc == USAGE and "not built into this binary" in r.stderr,
                  "a binary without CUDA says so", r)
        print("  built without CUDA: nothing to load")
        return
    ldd = subprocess.run(["ldd", ctx.binary], capture_output=True, text=True, timeout=60)
    linked = [lib for lib in CUDA_LIBRARIES if lib in ldd.stdout]
    e2e.check(ldd.returncode == 0 and linked == [], "moebench links %r itself" % linked)
    for args, np in ((["presets"], None),
                     (["run", "--preset", "deepseek-v3-tiny", "--layers", 1, "--steps", 1,
                       "--warmup", 0, "--quiet"], 2)):
        p, opened = loaded_libraries(ctx, args, np)
        e2e.check(p.returncode == 0, "moebench %s: exit %d\n%s" % (args[0], p.returncode,
                                                                   p.stderr[-2000:]))
        e2e.check(opened, "LD_DEBUG named no library: the check would prove nothing")
        cuda = [o for o in opened if any(lib in o for lib in CUDA_LIBRARIES + [PLUGIN])]
        e2e.check(cuda == [], "moebench %s loaded %r" % (args[0], cuda))
        print("  moebench %s: %d libraries, none of CUDA's" % (args[0], len(opened)))


def test_cuda_backend_loads_the_plugin(ctx):
    if not has_plugin(ctx):
        print("  built without CUDA: no plugin")
        return
    for extra in ([], ["--comm", "nccl"]):
        args = ["run", "--preset", "deepseek-v3-tiny", "--backend", "cuda"] + extra
        p, opened = loaded_libraries(ctx, args)
        e2e.check(p.returncode == USAGE and "no CUDA device is visible" in p.stderr,
                  "--backend cuda %s on a machine without a GPU: %s" % (" ".join(extra),
                                                                       p.stderr[-1500:]))
        plugin = [o for o in opened if o.endswith(PLUGIN)]
        e2e.check(len(plugin) == 1, "the plugin was not loaded: %r" % opened)
        e2e.check(any("libcublasLt" in o for o in opened), "cuBLASLt came without the plugin")
    print("  --backend cuda: the plugin and the CUDA libraries loaded, every symbol resolved")


TESTS = [test_cpu_runs_load_no_cuda_library, test_cuda_backend_loads_the_plugin]

if __name__ == "__main__":
    e2e.run_main(TESTS)
