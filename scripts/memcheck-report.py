#!/usr/bin/env python3
"""Verdict over the valgrind memcheck XML files of scripts/memcheck.sh.

Fails (exit 1) on:
  - any memory error that is not a leak (invalid read/write/free, use of
    uninitialised values, bad syscall parameters, overlapping copies, ...),
    wherever it is: a bad access in the daemon may be caused by what the
    provider handed it;
  - any "definitely lost" block allocated with the provider
    (libibacm_urdma.so) on the stack;
  - a daemon whose valgrind did not finish (no leak check was made).
Definite leaks without the provider on the stack are the daemon's or its
libraries' own: listed, not counted. Usage: memcheck-report.py DIR
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET

PROVIDER = "libibacm_urdma.so"


def frames(err):
    for f in err.iter("frame"):
        yield (f.findtext("obj") or "?", f.findtext("fn") or "?",
               f.findtext("file") or "", f.findtext("line") or "")


def where(err):
    """The first frame that is not valgrind's own allocator."""
    for obj, fn, file, line in frames(err):
        if "vgpreload" not in obj:
            loc = f" ({file}:{line})" if file else ""
            return f"{fn} in {os.path.basename(obj)}{loc}"
    return "?"


def text(err):
    return (err.findtext("what") or err.findtext("xwhat/text") or "").strip()


def main(d):
    files = sorted(glob.glob(os.path.join(d, "memcheck.*.xml")))
    if not files:
        print(f"memcheck: no valgrind XML in {d}")
        return 1
    counted, own_leaks, unfinished = [], [], []
    for path in files:
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            unfinished.append(f"{os.path.basename(path)}: unreadable ({e})")
            continue
        states = [s.findtext("state") for s in root.iter("status")]
        if "FINISHED" not in states:
            unfinished.append(os.path.basename(path))
        for err in root.iter("error"):
            kind = err.findtext("kind") or "?"
            ours = any(PROVIDER in obj for obj, _, _, _ in frames(err))
            line = f"{os.path.basename(path)}: {kind}: {text(err)} at {where(err)}"
            if kind.startswith("Leak_"):
                if kind == "Leak_DefinitelyLost":
                    (counted if ours else own_leaks).append(line)
            else:
                counted.append(line + (" [provider on the stack]" if ours else ""))
    print(f"memcheck: {len(files)} daemon runs checked")
    for title, items in (("errors counted against the provider", counted),
                         ("daemon-own definite leaks (not counted)", own_leaks),
                         ("runs without a finished leak check", unfinished)):
        # The same leak repeats in every daemon run: show each once.
        uniq = {}
        for i in items:
            key = i.split(": ", 1)[1]
            uniq[key] = uniq.get(key, 0) + 1
        print(f"{title}: {len(items)}")
        for k, n in sorted(uniq.items()):
            print(f"  {n:4d} x {k}")
    return 1 if counted or unfinished else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "target/memcheck"))
