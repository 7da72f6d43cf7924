#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Time lost when a rank of a tolerant run is lost (docs/communication.md, "Losing a rank").

Runs `clusterppl-agent run --standalone` with 4 ranks of the dynamic schedule and
--on-rank-loss continue on the repository's byte-level test model, without a loss and with a rank
killed (or stopped) when the reporting rank's round lines say a fraction of the tokens is scored,
and prints one JSON line per run: the launcher's wall time from the first round line to its exit,
the seconds from the signal to the "recovered:" line (detection, election, regrouping), the batches
redone and the compute they cost (redone batches x the run's mean compute per batch).

usage: bench/rank_loss_time.py [BUILD_DIR [--with-the-hub]]   (default build/default; run from the repository root)
       --with-the-hub: ranks lost together with the hub instead (at once, and in a second election)
       --second-election: only rank 0, then ranks 1 and 2 at once
       --candidates-lost: 5 ranks, 1 mesh candidate (CLUSTERPPL_TEST_MESH_CANDIDATES=1): the only
           candidate lost with ranks the new hub has no link to (ranks 0 and 3; ranks 0, 1 and 4)
"""
import json, os, re, signal, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else os.path.join(ROOT, "build", "default")
AGENT = os.path.join(BUILD, "agent", "clusterppl-agent")
PROGRESS = re.compile(r"\] ppl [0-9.]+  ([0-9]+)/([0-9]+) tokens")


def batches(text):
    n = 0
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        n += (int(b) if b else int(a)) - int(a) + 1
    return n


def run(tag, victim=None, at=None, sig=signal.SIGKILL, timeout=20, then=None, then_at=None, nproc=4, candidates=None):
    """victim: a rank or a list of ranks signalled at once at fraction `at`; then/then_at: a second
    phase (a rank or a list), signalled at then_at once the first phase's recovered lines are out.
    The figure is from the last phase's signal to its last victim's recovered line."""
    phases = [p for p in ((victim, at), (then, then_at)) if p[0] is not None]
    phases = [([v] if isinstance(v, int) else list(v), f) for v, f in phases]
    js = f"/tmp/rank_loss_time_{os.getpid()}_{tag.replace(' ', '_').replace('%', '')}.json"
    cmd = [AGENT, "run", "--standalone", "--nproc-per-node", str(nproc), "--groups", "size:2", "--",
           "--model", os.path.join(ROOT, "resources/models/shakespeare-byte-llama"),
           "--text", os.path.join(ROOT, "resources/data/tinyshakespeare-heldout.txt"), "--tokenizer", "bytes",
           "--protocol", "llama.cpp", "--context", "128", "--batch", "2", "--threads", "1", "--schedule", "dynamic",
           "--on-rank-loss", "continue", "--sync-every-tokens", "300", "--timeout", str(timeout), "--json", js]
    env = dict(os.environ)
    if candidates is not None:
        env["CLUSTERPPL_TEST_MESH_CANDIDATES"] = str(candidates)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), l.rstrip())) for l in p.stderr])
    reader.start()
    first = killed = kids = None
    done = 0  # phases signalled

    def recovered(ranks):
        return all(any(f"recovered: rank {v} (" in l for _, l in lines) for v in ranks)

    while p.poll() is None:
        for t, l in list(lines):
            m = PROGRESS.search(l)
            if m and first is None:
                first = t
            if done < len(phases) and m and int(m.group(1)) / int(m.group(2)) >= phases[done][1] \
                    and (done == 0 or recovered(phases[done - 1][0])):
                if kids is None:  # indexed by rank: listed once, before any rank is gone
                    kids = sorted(int(x) for x in subprocess.check_output(["pgrep", "-P", str(p.pid)], text=True).split())
                for v in phases[done][0]:
                    os.kill(kids[v], sig)
                killed = time.monotonic()
                done += 1
        time.sleep(0.02)
    reader.join()
    end = time.monotonic()
    last = phases[-1][0] if phases else []
    recov = [next((t for t, l in lines if f"recovered: rank {v} (" in l), None) for v in last]
    recovered_at = None if not recov or None in recov else max(recov)
    j = json.load(open(js))
    os.remove(js)
    per_batch = sum(r["compute_seconds"] for r in j["ranks"]) / max(1, j["batch_count"])
    redone = batches(j.get("batches_redone", ""))
    print(json.dumps({"run": tag, "exit": p.returncode, "wall_seconds": round(end - first, 2),
                      "signal_to_recovered_seconds": round(recovered_at - killed, 2) if recovered_at and killed else None,
                      "batches_redone": redone, "redo_compute_seconds": round(redone * per_batch, 3),
                      "lost": [l["rank"] for l in j.get("lost_ranks", [])]}), flush=True)


if __name__ == "__main__":
    if "--second-election" in sys.argv[1:]:
        for i in range(3):
            run(f"kill -9 rank 0 at 30%, then ranks 1 and 2 at 60% ({i})", 0, 0.3, timeout=60, then=[1, 2], then_at=0.6)
        sys.exit(0)
    if "--candidates-lost" in sys.argv[1:]:  # every candidate lost, with ranks only a survivor's links know
        for i in range(3):
            run(f"5 ranks, 1 candidate: kill -9 ranks 0 and 3 at 40% ({i})", [0, 3], 0.4, timeout=60, nproc=5, candidates=1)
            run(f"5 ranks, 1 candidate: kill -9 ranks 0, 1 and 4 at 40% ({i})", [0, 1, 4], 0.4, timeout=60, nproc=5, candidates=1)
        sys.exit(0)
    if "--with-the-hub" in sys.argv[1:]:  # ranks lost together with the hub (the watchdog's mesh)
        for i in range(3):
            run(f"kill -9 ranks 0 and 1 at 40% ({i})", [0, 1], 0.4, timeout=60)
            run(f"kill -9 ranks 0, 1 and 2 at 50% ({i})", [0, 1, 2], 0.5, timeout=60)
            run(f"kill -9 rank 0 at 30%, then ranks 1 and 2 at 60% ({i})", 0, 0.3, timeout=60, then=[1, 2], then_at=0.6)
            run(f"SIGSTOP ranks 0 and 2 at 50%, --timeout 6 ({i})", [0, 2], 0.5, signal.SIGSTOP, 6)
        sys.exit(0)
    for i in range(3):
        run(f"no loss {i}")
    for at in (0.3, 0.6, 0.85):
        run(f"kill -9 rank 0 at {int(at * 100)}%", 0, at)
    run("kill -9 rank 1 at 60%", 1, 0.6)
    run("kill -9 rank 2 at 60%", 2, 0.6)
    run("SIGSTOP rank 0 at 50%, --timeout 6", 0, 0.5, signal.SIGSTOP, 6)
