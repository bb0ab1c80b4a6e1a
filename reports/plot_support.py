"""What the plot scripts of reports/ share: the command line, matplotlib without a display, and
reading the report they draw. Exit status 3 when matplotlib cannot be imported (Debian/Ubuntu:
apt-get install python3-matplotlib), 2 for bad arguments or a report of another kind.
"""

import json
import os
import sys
import tempfile


def run(argv, script, kind, draw):
    """`script IN.json OUT.png`: reads IN.json, checks it is a `kind` report, calls
    draw(plt, report, out), `out` a binary file to save the PNG into. Returns the exit status."""
    if len(argv) != 3:
        print("usage: %s REPORT.json OUT.png" % script, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("%s: cannot import matplotlib (%s)" % (script, e), file=sys.stderr)
        return 3
    with open(argv[1]) as f:
        report = json.load(f)
    if report.get("kind") != kind:
        print("%s: %s is not a %s report" % (script, argv[1], kind), file=sys.stderr)
        return 2
    # Drawn into a file of its own, created exclusively beside OUT.png (never through a link
    # planted at a predictable name), then renamed over OUT.png.
    out = argv[2]
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out) + ".", suffix=".tmp",
                               dir=os.path.dirname(out) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            draw(plt, report, f)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o644 & ~mask)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return 0
