#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs the reference tools of one test process, each in a fork of a process that imported PyTorch
once: the import is nearly all of a tool's time here (1.8 s of make_checkpoint.py's 1.8 s), and a
test runs tens of them (tests/agent/reference_fixture.h, runReference).

One request a line on stdin, JSON: {"argv": [script, args...], "cwd": dir, "env": {name: value},
"out": file, "err": file}. The tool runs as `python3 script args...` would run it: its directory
first on sys.path, as __main__, in that directory and environment, its stdout and stderr into the
two files (file descriptors 1 and 2, so that C-level output goes there too), stdin empty. One reply
a line on stdout: {"rc": status}, negative for the signal that ended it. The fork dies with the
server (PR_SET_PDEATHSIG); the server ends at EOF on stdin.
"""
import ctypes
import json
import os
import runpy
import signal
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy  # noqa: E402,F401  the imports every tool makes, paid once
import torch  # noqa: E402,F401

for _name in ("ref_common", "hf_reference", "family_checkpoints", "families_reference", "np_families"):
    try:
        __import__(_name)
    except Exception:  # noqa: BLE001  a tool that needs it says what is wrong itself
        pass

PR_SET_PDEATHSIG = 1


def run_tool(request):
    """In the fork: the tool, then os._exit with its status (never returns)."""
    code = 1
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        try:
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001  as python3 would: the traceback, status 1
            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            run_tool(request)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
