"""What the benchmarks in this folder share: the tiny preset's model written as a --model-config
file with some of its fields changed (e.g. 8 layers), as `moebench plan --json` resolves it."""

import json
import os
import subprocess


def write_tiny_model(binary, directory, **fields):
    """Writes the tiny preset with `fields` replaced to DIRECTORY/tiny.json; returns its path."""
    plan = json.loads(subprocess.run([binary, "plan", "--preset", "deepseek-v3-tiny", "--json"],
                                     check=True, capture_output=True, text=True).stdout)
    model = dict(plan["config"]["model"])
    model.pop("name", None)
    model.update(fields)
    path = os.path.join(directory, "tiny.json")
    with open(path, "w") as f:
        json.dump(model, f)
    return path
