#!/usr/bin/python3
"""Run libFuzzer harnesses one after another for a bounded time each.

  /usr/bin/python3 tests/fuzz/campaign.py --seconds N HARNESS...

For each HARNESS runs build/fuzz/fuzz_HARNESS on the growing corpus
build/fuzz/corpus/HARNESS (seeded from build/fuzz/seeds/HARNESS), then prints
one line: executions done, corpus size, and whether it found a crash (the
input libFuzzer saved under build/fuzz/crashes/HARNESS/, the log under
build/fuzz/logs/). Exit status 1 if any harness crashed; the rest still run.
A crash input, minimised (fuzz_HARNESS -minimize_crash=1 -runs=10000 FILE),
goes to tests/fuzz/regressions/HARNESS/ (see tests/fuzz/README).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ = os.path.join(ROOT, "build", "fuzz")


def campaign(harness, seconds):
    """Run one harness; returns (executions, corpus units, crash file or None, log path)."""
    corpus, seeds = os.path.join(FUZZ, "corpus", harness), os.path.join(FUZZ, "seeds", harness)
    crashes, logs = os.path.join(FUZZ, "crashes", harness), os.path.join(FUZZ, "logs")
    for d in (corpus, crashes, logs):
        os.makedirs(d, exist_ok=True)
    log = os.path.join(logs, f"{harness}.log")
    cmd = [os.path.join(FUZZ, f"fuzz_{harness}"), corpus, seeds, f"-max_total_time={seconds}",
           "-timeout=10", "-rss_limit_mb=2048", "-use_value_profile=1", "-print_final_stats=1", f"-artifact_prefix={crashes}/"]
    with open(log, "w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=seconds + 300).returncode
    text = open(log, errors="replace").read()
    runs = re.findall(r"stat::number_of_executed_units: (\d+)", text)
    if not runs:   # a crash skips the final stats: take the last progress line
        runs = re.findall(r"#(\d+)\s", text)
    units = len(os.listdir(corpus))
    crash = re.findall(r"Test unit written to (\S+)", text)
    if rc != 0 and not crash:
        crash = [f"(exit status {rc}, no input saved)"]
    return int(runs[-1]) if runs else 0, units, crash[-1] if crash else None, log


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=int, default=300)
    p.add_argument("harnesses", nargs="+")
    a = p.parse_args()
    crashed = 0
    for h in a.harnesses:
        runs, units, crash, log = campaign(h, a.seconds)
        if crash:
            crashed += 1
            print(f"{h}: {runs} executions in {a.seconds} s, CRASH: {crash} (log {log})", flush=True)
        else:
            print(f"{h}: {runs} executions in {a.seconds} s, corpus {units} inputs, no crash", flush=True)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
