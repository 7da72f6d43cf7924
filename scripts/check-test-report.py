#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads the JUnit report of a ctest run (scripts/test.sh writes it) and says what ran and what not.

  check-test-report.py REPORT.xml

Prints the slowest tests, and every skipped test with the reasons its output gave. Exits 1 when the report is missing,
when no test ran (zero tests matched, or every one skipped), or under CI=true when a test did not
run for any reason but a missing GPU ("no GPU:" skips, tests/common/test_skip.h): CI has
../shared/data, sshd, root and every package. The same rule is in tests/common/run_qtest.sh; this
check also covers tests that do not go through it and tests ctest could not start.
"""
import os
import sys
import xml.etree.ElementTree as ET

GPU_MARKER = "no GPU:"


def skip_reasons(output):
    """Qt Test's "SKIP   : Class::function(row) reason" lines, without the prefix."""
    return [line[len("SKIP   : "):] for line in output.splitlines() if line.startswith("SKIP   : ")]


def main(argv):
    if len(argv) != 2:
        print("usage: check-test-report.py REPORT.xml", file=sys.stderr)
        return 2
    path = argv[1]
    try:
        suite = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"check-test-report: cannot read ctest's JUnit report {path}: {e}; did ctest run at all?")
        return 1
    ci = os.environ.get("CI") == "true"
    counts = {"run": 0, "fail": 0, "notrun": 0, "disabled": 0}
    times = []
    not_gpu = []
    skipped_lines = []
    for case in suite.iter("testcase"):
        name = case.get("name", "?")
        status = case.get("status", "notrun")
        counts[status] = counts.get(status, 0) + 1
        try:
            times.append((float(case.get("time", "0")), name))
        except ValueError:
            pass
        if status not in ("notrun", "disabled"):
            continue
        output = case.findtext("system-out") or ""
        reasons = skip_reasons(output)
        if not reasons:
            skipped = case.find("skipped")
            why = skipped.get("message", "") if skipped is not None else ""
            reasons = [f"({status}{': ' + why if why else ''}; no Qt Test skip line in its output)"]
        gpu_only = all((" " + GPU_MARKER) in r or r.startswith(GPU_MARKER) for r in reasons)
        if not gpu_only:
            not_gpu.append(name)
        skipped_lines.append(f"  {name}{'' if gpu_only else '  [not a GPU skip]'}")
        skipped_lines.extend(f"      {r}" for r in reasons)

    ran = counts["run"] + counts["fail"]
    skipped = counts["notrun"] + counts["disabled"]
    print(f"check-test-report: {ran} ran ({counts['run']} passed, {counts['fail']} failed), {skipped} skipped")
    if times:
        # Where CI's time goes (wall seconds as ctest measured them, beside whatever ran in parallel).
        slowest = sorted(times, reverse=True)[:8]
        print("Slowest tests: " + ", ".join(f"{n} {t:.0f} s" for t, n in slowest))
    if skipped_lines:
        print("Skipped tests and why:")
        print("\n".join(skipped_lines))
    status = 0
    if ran == 0:
        print("check-test-report: FAILED: no test ran (none matched, or every one skipped)")
        status = 1
    if ci and not_gpu:
        print(f"check-test-report: FAILED under CI=true: {', '.join(not_gpu)} did not run for a reason other than a"
              " missing GPU; CI has ../shared/data, sshd, root and every package (docs/testing.md)")
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
