"""What the plot scripts of reports/ share: the command line, matplotlib without a display, and
reading the report they draw. Exit status 3 when matplotlib cannot be imported (Debian/Ubuntu:
apt-get install python3-matplotlib), 2 for bad arguments or a report of another kind.
"""

import json
import sys


def run(argv, script, kind, draw):
    """`script IN.json OUT.png`: reads IN.json, checks it is a `kind` report, calls
    draw(plt, report, out_path). Returns the exit status."""
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
    draw(plt, report, argv[2])
    return 0
