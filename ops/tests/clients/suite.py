"""The step, check and summary helpers the client suites share (imported from the scripts'
own directory).

A suite names each step (`step`), checks conditions (`check`: the first failure ends the run
with "FAIL: step: detail" and the summary on stderr), collects soft expectations (`expect`,
reported together by `fail_on_soft`), and prints `SUMMARY` as its last stdout line on success.
"""
import json
import sys

SUMMARY = {"steps": []}
SOFT = []
_STEP = ["start"]


def fail(msg):
    print(f"FAIL: {_STEP[0]}: {msg}", file=sys.stderr)
    print(json.dumps(SUMMARY), file=sys.stderr)
    sys.exit(1)


def step(name):
    _STEP[0] = name
    SUMMARY["steps"].append(name)
    print(f"-- {name}", file=sys.stderr, flush=True)


def check(cond, msg):
    if not cond:
        fail(msg)


def expect(cond, msg):
    """A failed expectation that does not stop the suite; reported (and fatal) at the end."""
    if not cond:
        SOFT.append(f"{_STEP[0]}: {msg}")
        print(f"EXPECTATION FAILED: {_STEP[0]}: {msg}", file=sys.stderr, flush=True)


def fail_on_soft():
    """Ends the run if any expectation failed."""
    if SOFT:
        fail(f"{len(SOFT)} failed expectations:\n  " + "\n  ".join(SOFT[:30]))
