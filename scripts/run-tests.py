#!/usr/bin/env python3
"""Builds every test binary of the workspace, then runs them several at a
time (the tests mostly wait on emulated links and timers, not on the CPU;
each lab test binary has its own namespace prefix), a module per job for the
binaries in SPLIT. The modules whose tests compare rates (ALONE) run after
the others, one at a time. Prints a line per binary as it ends, the output
of every failure at the end, and the time taken.

Usage: scripts/run-tests.py [--jobs N] [-- ARGS FOR EVERY TEST BINARY]
The environment variable WANOPT_TEST_JOBS sets the default of --jobs (5).
The documentation examples (a minute of compiling) and the emulator's
checks against the physics (two minutes of lab runs) are in the scenario
tier, scripts/test-scenarios, which CI runs after this.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The binaries that take longest start first, so that the last to end is
# not a long one started late (seconds on the project's machine).
LONGEST = {
    "intercept": 43, "probe": 29, "cluster": 28,
    "reach": 27, "udp": 23, "reduce": 21, "waas": 20, "parity": 18, "fec": 18,
    "lab_link2": 18, "lab_sites": 17, "fec_calls": 17, "flood": 16,
    "control": 12, "tunnel": 12, "idle_flows": 11,
}
# Binaries whose tests compare rates or gaps that CPU contention moves (a
# bulk flow's share beside a flood, the longest gap across a cut): they
# run after the others, one at a time, and their tests one at a time too
# (a rate measured alone must not share the CPU with a sibling test).
ALONE = {"isolation", "duplicate"}
# Test binaries made of one module per concept (crates/wanopt/tests/outside):
# each module runs as its own job, named and scheduled as above.
SPLIT = {"outside"}


def build():
    """Builds the test binaries; returns (label, name, path, package dir) of
    each."""
    cmd = ["cargo", "test", "--locked", "--release", "--workspace", "--no-run",
           "--message-format=json-render-diagnostics"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    found = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact":
            continue
        exe = msg.get("executable")
        if not exe or not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        kind = "unittests" if target["kind"] != ["test"] else "tests"
        pkg = Path(msg["manifest_path"]).parent
        found.append((f"{pkg.name} {kind} {target['name']}", target["name"], exe, pkg))
    if proc.wait() != 0:
        sys.exit("tests: the build failed")
    return found


def split(binary, args):
    """The jobs of one test binary: the binary itself, or for one of SPLIT
    one job per module, given its tests by exact name. Arguments that are
    not flags filter test names (a substring, as the test harness does)."""
    label, name, exe, pkg = binary
    if name not in SPLIT:
        return [(label, name, [exe, *args], pkg)]
    flags = [a for a in args if a.startswith("-")]
    filters = [a for a in args if not a.startswith("-")]
    listed = subprocess.run([exe, "--list", "--format", "terse"], cwd=pkg,
                            capture_output=True, text=True, check=True).stdout
    modules = {}
    for line in listed.splitlines():
        test, _, kind = line.rpartition(": ")
        if kind != "test" or (filters and not any(f in test for f in filters)):
            continue
        modules.setdefault(test.split("::")[0], []).append(test)
    return [(f"{label}::{module}", module, [exe, *flags, "--exact", *tests], pkg)
            for module, tests in sorted(modules.items())]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int,
                        default=int(os.environ.get("WANOPT_TEST_JOBS", "5")))
    parser.add_argument("args", nargs="*", help="passed to every test binary")
    opts = parser.parse_args()
    if opts.jobs < 1:
        sys.exit("tests: --jobs takes 1 or more")

    start = time.monotonic()
    binaries = build()
    built = time.monotonic() - start
    units = [unit for binary in binaries for unit in split(binary, opts.args)]
    print(f"tests: built {len(binaries)} test binaries in {built:.0f} s; "
          f"running them {opts.jobs} at a time", flush=True)
    # (priority, label, cmd, cwd), the longest first.
    queue = sorted(((LONGEST.get(name, 0), label, cmd, cwd)
                    for label, name, cmd, cwd in units if name not in ALONE),
                   key=lambda j: -j[0])
    alone = [(label, [cmd[0], "--test-threads=1", *cmd[1:]], cwd)
             for label, name, cmd, cwd in units if name in ALONE]
    lock = threading.Lock()
    failed = []
    logs = tempfile.TemporaryDirectory(prefix="wanopt-tests-")

    def run(label, cmd, cwd):
        log = Path(logs.name) / label.replace(" ", "_")
        began = time.monotonic()
        env = dict(os.environ, CARGO_MANIFEST_DIR=str(cwd), RUST_BACKTRACE="1")
        with open(log, "w") as out:
            code = subprocess.call(cmd, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
        took = time.monotonic() - began
        with lock:
            verdict = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"[{time.monotonic() - start:4.0f} s] {verdict:6} {label} "
                  f"({took:.1f} s)", flush=True)
            if code != 0:
                failed.append((label, log.read_text(errors="replace")))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                _, label, cmd, cwd = queue.pop(0)
            run(label, cmd, cwd)

    threads = [threading.Thread(target=worker) for _ in range(opts.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Their tests compare rates: with nothing else running.
    for label, cmd, cwd in alone:
        run(label, cmd, cwd)

    total = time.monotonic() - start
    for label, text in failed:
        print(f"\n==== {label}: output ====\n{text}", flush=True)
    if failed:
        names = ", ".join(label for label, _ in failed)
        print(f"tests: {len(failed)} of {len(units)} failed ({names}); "
              f"{total:.0f} s in all", flush=True)
        sys.exit(1)
    print(f"tests: all {len(units)} passed in {total:.0f} s "
          f"({built:.0f} s of build)", flush=True)


if __name__ == "__main__":
    main()
