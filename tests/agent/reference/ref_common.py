# SPDX-License-Identifier: MIT
"""Small helpers shared by the Python reference tools (token files, model loading, errors).

Python only: nothing here is shared with, or derived from, the C++ agent. Run with /usr/bin/python3.
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import hf_reference  # noqa: E402


class UsageError(Exception):
    """Bad input: reported as 'error: ...' with exit status 2."""


def fail(message, status=2):
    sys.stderr.write("error: %s\n" % message)
    sys.exit(status)


def run_main(main):
    """Runs main(), turning UsageError / OSError / ValueError into a one-line error and exit 2."""
    try:
        status = main()
    except UsageError as e:
        fail(str(e))
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        fail("%s: %s" % (type(e).__name__, e))
    sys.exit(status or 0)


def read_tokens(path=None, text=None):
    """Token ids as a 1-D numpy int64 array.

    path: .u32 (raw little-endian uint32), .u16 (raw little-endian uint16) or .npy (1-D integer array).
    text: a file whose UTF-8 bytes are the ids (0..255).
    """
    if (path is None) == (text is None):
        raise UsageError("give exactly one of --tokens FILE or --text FILE")
    if text is not None:
        with open(text, "rb") as f:
            raw = f.read()
        return np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
    lower = path.lower()
    if lower.endswith(".u32") or lower.endswith(".u16"):
        width = 4 if lower.endswith(".u32") else 2
        with open(path, "rb") as f:
            raw = f.read()
        if len(raw) % width:
            raise UsageError("%s: size %d is not a multiple of %d bytes" % (path, len(raw), width))
        return np.frombuffer(raw, dtype="<u4" if width == 4 else "<u2").astype(np.int64)
    if lower.endswith(".npy"):
        arr = np.load(path, allow_pickle=False)
        if arr.ndim != 1:
            raise UsageError("%s: expected a 1-D array, got shape %s" % (path, arr.shape))
        if arr.dtype.kind not in "iu":
            raise UsageError("%s: expected an integer array, got dtype %s" % (path, arr.dtype))
        arr = arr.astype(np.int64)
        if arr.size and arr.min() < 0:
            raise UsageError("%s: negative token id %d" % (path, int(arr.min())))
        return arr
    raise UsageError("%s: unknown token file extension (expected .u32, .u16 or .npy)" % path)


def load_model_dir(directory):
    """hf_reference.load_model (float32, eval mode) with readable errors; returns (model, config)."""
    if not os.path.isdir(directory):
        raise UsageError("%s: not a directory" % directory)
    if not os.path.exists(os.path.join(directory, "config.json")):
        raise UsageError("%s: no config.json" % directory)
    model = hf_reference.load_model(directory)
    return model, model.config


def vocab_size(config):
    return int(config["vocab_size"])


def max_positions(config):
    """Hard position limit of the architecture (GPT-2's learned table), or None (RoPE models)."""
    if config.get("model_type") == "gpt2":
        return int(config["n_positions"])
    return None


def blas_summary():
    """The BLAS-related part of torch.__config__.show() plus the BLAS library actually mapped."""
    show = torch.__config__.show()
    parts = []
    for item in show.replace(",", "\n").splitlines():
        for key in ("BLAS_INFO=", "LAPACK_INFO="):
            if key in item:
                parts.append(item[item.index(key):].strip())
    # Which libblas is really loaded (Debian's "generic" BLAS resolves through alternatives).
    torch.mm(torch.ones(64, 64), torch.ones(64, 64))
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                base = os.path.basename(p)
                if "blas" in base or "mkl_" in base or "openblas" in p or "blis" in base:
                    libs.add(os.path.realpath(p))
    except OSError:
        pass
    if libs:
        parts.append("loaded=" + ",".join(sorted(libs)))
    return "; ".join(parts)
