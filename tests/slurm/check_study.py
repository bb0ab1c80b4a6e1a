"""Checks what a Slurm scaling study wrote; used by test_slurm_scaling.sh.

  check_study.py run REPORT --job ID --gpus N --partition P --node HOST
      a run report made by moebench.sbatch: kind, name, world size, the Slurm variables in
      meta.environment
  check_study.py scaling SCALING.json --repo DIR --gpus 2,4,8 --jobs 11,12,13 --verdict PASS|FAIL
      the scaling report: valid against reports/scaling.schema.json, one size per GPU count,
      its inputs exactly those jobs' run reports, every verdict passed (PASS) or one failed (FAIL)
  check_study.py failed REPORT
      the report rank 0 wrote of a run whose rank died: status failed, the error, rank 0's own
      results over at least one finished timed step

Prints what it checked; exits 1 with the reason on the first failure.
"""

import argparse
import json
import os
import sys


def fail(msg):
    print(f"check_study: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")


def check_run(a):
    r = load(a.file)
    if r.get("kind") != "moebench.run":
        fail(f"{a.file}: kind {r.get('kind')!r}, expected 'moebench.run'")
    world = r["parallel"]["world"]
    if world != a.gpus:
        fail(f"{a.file}: parallel.world {world}, expected {a.gpus}")
    expected = {
        "SLURM_JOB_ID": str(a.job),
        "SLURM_JOB_NODELIST": a.node,
        "SLURM_JOB_PARTITION": a.partition,
        "SLURM_NTASKS": str(a.gpus),
        "SLURM_NNODES": "1",
    }
    env = r["meta"]["environment"]
    for key, value in expected.items():
        if env.get(key) != value:
            fail(f"{a.file}: meta.environment.{key} is {env.get(key)!r}, expected {value!r}")
    name = os.path.basename(a.file)
    if name != f"run-{a.gpus}gpus-job{a.job}.json":
        fail(f"{a.file}: named {name}, expected run-{a.gpus}gpus-job{a.job}.json")
    print(f"check_study: {name}: world {world}, job {a.job} on {a.node} ({a.partition}) ok")


def check_scaling(a):
    s = load(a.file)
    name = os.path.basename(a.file)
    schema_path = os.path.join(a.repo, "reports", "scaling.schema.json")
    if os.path.exists(schema_path):
        import jsonschema

        try:
            jsonschema.validate(s, load(schema_path))
        except jsonschema.ValidationError as e:
            fail(f"{a.file}: not valid against {schema_path}: {e.message}")
        print(f"check_study: {name} valid against scaling.schema.json")
    else:
        fail(f"{schema_path} does not exist")
    if s.get("kind") != "moebench.scaling":
        fail(f"{a.file}: kind {s.get('kind')!r}, expected 'moebench.scaling'")
    gpus = sorted(int(g) for g in a.gpus.split(","))
    got = sorted(size["gpus"] for size in s["sizes"])
    if got != gpus:
        fail(f"{a.file}: sizes {got}, expected {gpus}")
    # Its inputs are exactly the jobs' run reports: the job ids recorded in them, and the files.
    jobs = sorted(a.jobs.split(","))
    got = sorted(str(i["job_id"]) for i in s["inputs"])
    if got != jobs:
        fail(f"{a.file}: inputs from jobs {got}, expected {jobs}")
    for i in s["inputs"]:
        if os.path.basename(i["path"]) != f"run-{i['gpus']}gpus-job{i['job_id']}.json":
            fail(f"{a.file}: input {i['path']} is not run-{i['gpus']}gpus-job{i['job_id']}.json")
    verdicts = [v["result"] for v in s["verdicts"]]
    if not verdicts:
        fail(f"{a.file}: no verdicts")
    want_passed = a.verdict == "PASS"
    if s["passed"] != want_passed or (("FAIL" in verdicts) == want_passed):
        fail(f"{a.file}: passed {s['passed']}, verdicts {verdicts}; expected {a.verdict}")
    print(f"check_study: {name}: sizes {gpus}, jobs {jobs}, verdicts {verdicts} ok")


def check_failed(a):
    r = load(a.file)
    st = r.get("status", {})
    # A rank that died: rank 0 outlives it and reports a failure (a timeout), or, when the
    # launcher's SIGTERM comes first, an interrupt whose error says what rank 0 was in (the ranks
    # cannot tell that SIGTERM from scancel's).
    if st.get("state") not in ("failed", "interrupted") or not st.get("error"):
        fail(f"{a.file}: status {st!r}, expected state failed or interrupted with an error")
    if st["state"] == "interrupted" and (st.get("signal") != "SIGTERM" or
                                         "SIGTERM arrived" not in st["error"]):
        fail(f"{a.file}: status {st!r}, expected SIGTERM and what rank 0 was doing")
    if st.get("ranks_reporting") != 1 or st.get("steps_completed", 0) < 1:
        fail(f"{a.file}: status {st!r}, expected rank 0's own results over >= 1 timed step")
    if r["results"]["step_time_s"]["count"] != st["steps_completed"]:
        fail(f"{a.file}: results over {r['results']['step_time_s']['count']} steps, status says "
             f"{st['steps_completed']}")
    print(f"check_study: {os.path.basename(a.file)}: {st['state']} after "
          f"{st['steps_completed']} timed steps ({st['error'][:80]}...) ok")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("file")
    r.add_argument("--job", required=True)
    r.add_argument("--gpus", type=int, required=True)
    r.add_argument("--partition", required=True)
    r.add_argument("--node", required=True)
    s = sub.add_parser("scaling")
    s.add_argument("file")
    s.add_argument("--repo", required=True)
    s.add_argument("--gpus", required=True)
    s.add_argument("--jobs", required=True)
    s.add_argument("--verdict", choices=["PASS", "FAIL"], required=True)
    f = sub.add_parser("failed")
    f.add_argument("file")
    a = p.parse_args()
    {"run": check_run, "scaling": check_scaling, "failed": check_failed}[a.what](a)


if __name__ == "__main__":
    main()
