"""Reads train.py's settings files. A file may name another in "base" and
give only what differs from it: its objects are merged into the base's, key
by key, and the other values replace the base's. The result has no "base".

    python3 scripts/train_default/trainsettings.py FILE KEY  # prints one top-level value

(run.sh uses that for "threads"; this module imports nothing heavy.)
"""

import json
import os
import sys


def _merge(base, over):
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(path):
    """-> the settings in path, with its "base" chain resolved (relative to path's folder)."""
    with open(path, encoding="utf-8") as f:
        s = json.load(f)
    base = s.pop("base", None)
    if base is None:
        return s
    return _merge(load(os.path.join(os.path.dirname(path), base)), s)


def load_args(args):
    """-> load(args.settings) with the command line's overrides: args.steps
    (train.steps), args.threads and args.procs, each where not None."""
    s = load(args.settings)
    if args.steps is not None:
        s["train"]["steps"] = args.steps
    if args.threads is not None:
        s["threads"] = args.threads
    if args.procs is not None:
        s["procs"] = args.procs
    return s


if __name__ == "__main__":
    print(load(sys.argv[1])[sys.argv[2]])
