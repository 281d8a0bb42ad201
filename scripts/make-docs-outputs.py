#!/usr/bin/env python3
"""Regenerates the example outputs of README.md and docs/*.md, or checks that they are current (--check).

A generated block is a fenced code block between two markers:

    <!-- k3perf-output [keep=1:12,20,-2:-1] [stdout-only] [status=N] [slow] [plots] -->
    ```
    $ k3perf predict scenarios/k3-h200x16-decode-128k.yaml \\
          --set workload.batch=2
    ...output...
    ```
    <!-- /k3perf-output -->

Each `$ ` line (with its `\\` continuation lines, or its here-document up to the end word) is a command, run by bash from a scratch folder that sees the
repository's data folders (scenarios/, data/, bench/, profiler/, docs/) as the repository root does, with `k3perf`,
`./build/demo/cli/k3perf` and `./build/release/cli/k3perf` all the binary given by --k3perf; /tmp/ in a command is a
folder of the scratch one (and is written back as /tmp/ in the output); `python3` is --python, with the module k3perf
on its path (--python-path, also ./build/release/python). What the command prints (standard output
and error, line-buffered, as on a terminal) replaces the lines up to the next `$ ` line. `keep=` (a block of one
command) keeps only those lines of its output: line numbers and ranges lo:hi, 1-based, negative ones counted from the
end (-1 the last line); each gap is written as one `...` line indented as the first line it stands for.
`stdout-only` drops what the commands write to standard error (progress lines). A command must exit 0, or N with
`status=N` (an example of an error). Tags say what a block needs, and
`--skip TAG` leaves those blocks as they are: `slow` (minutes in a Debug build: the ctest docs.outputs skips them),
`plots` (a k3perf built with Qt, whose chart painter writes --plot files), `python` (the Python module, found
through --python-path), `pandas` (pandas installed for python3).

  scripts/make-docs-outputs.py [--k3perf BIN] [--check] [--skip TAG]... [FILE.md ...]

Without files: README.md and every docs/*.md. --check writes nothing and exits 1 when a block differs (with a
diff), 2 when a command fails.
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPEN = re.compile(r"^<!-- k3perf-output(?P<args>[^>]*)-->$")
CLOSE = "<!-- /k3perf-output -->"
HEREDOC = re.compile(r"<<-?'?(\w+)'?\s*$")
DATA_FOLDERS = ["scenarios", "data", "bench", "profiler", "docs"]


class BlockError(Exception):
    pass


def trim(lines, keep):
    """The lines `keep` names ("1:12,20,-2:-1"), each run of the others as one `...` line."""
    def number(text):
        n = int(text)
        return n if n > 0 else len(lines) + 1 + n

    kept = set()
    for part in keep.split(","):
        lo, _, hi = part.partition(":")
        kept.update(range(number(lo), number(hi or lo) + 1))
    out, gap = [], None
    for number, line in enumerate(lines, 1):
        if number in kept:
            if gap is not None:
                out.append(gap)
                gap = None
            out.append(line)
        elif gap is None:
            gap = line[: len(line) - len(line.lstrip())] + "..."
    if gap is not None:
        out.append(gap)
    return out


class Scratch:
    """A folder that looks like the repository root to the documented commands."""

    def __init__(self, k3perf, python, python_path):
        self.python_path = python_path
        self.dir = tempfile.mkdtemp(prefix="k3perf-docs-")
        for folder in DATA_FOLDERS:
            os.symlink(os.path.join(ROOT, folder), os.path.join(self.dir, folder))
        for place in ["bin", "build/demo/cli", "build/release/cli"]:
            os.makedirs(os.path.join(self.dir, place))
            os.symlink(k3perf, os.path.join(self.dir, place, "k3perf"))
        os.symlink(python, os.path.join(self.dir, "bin", "python3"))
        if os.path.isdir(python_path):  # what `PYTHONPATH=build/release/python` names
            os.symlink(python_path, os.path.join(self.dir, "build", "release", "python"))
        self.tmp = os.path.join(self.dir, "tmp")
        os.makedirs(self.tmp)

    def run(self, command, stderr=True, status=0):
        env = dict(os.environ, PATH=os.path.join(self.dir, "bin") + os.pathsep + os.environ["PATH"])
        env["K3PERF_DATA_DIR"] = "scenarios"  # relative: messages name scenarios/..., as from the repository root
        if self.python_path:
            env["PYTHONPATH"] = self.python_path
        # fmt::print writes through stdio: line-buffered, stdout and stderr interleave as on a terminal.
        r = subprocess.run(["stdbuf", "-oL", "-eL", "bash", "-o", "pipefail", "-c", command.replace("/tmp/", self.tmp + "/")],
                           cwd=self.dir, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT if stderr else subprocess.PIPE, text=True)
        out = r.stdout.replace(self.tmp + "/", "/tmp/").replace(self.dir + "/", "")
        if ROOT + "/" in out:
            raise BlockError(f"`{command}` prints a path of this checkout ({ROOT}), which the docs must not hold:\n{out}")
        if r.returncode != status:
            raise BlockError(f"`{command}` exited with status {r.returncode}, not {status}:\n{out}{r.stderr or ''}")
        return [line.rstrip() for line in out.splitlines()]  # no trailing blanks in the docs

    def close(self):
        shutil.rmtree(self.dir)


def regenerate(body, args, scratch):
    """The new lines of a block's body (between its fences)."""
    keep = re.search(r"keep=(\S+)", args)
    commands = []  # (the command's lines as written, its text)
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            if not commands:
                raise BlockError(f"a generated block must start with a `$ ` command line, not {body[i]!r}")
            i += 1
            continue
        written = [body[i]]
        while written[-1].endswith("\\") and i + 1 < len(body):
            i += 1
            written.append(body[i])
        here = HEREDOC.search(written[-1])
        if here:  # the here-document's lines, to its end word, belong to the command
            while i + 1 < len(body) and written[-1] != here.group(1):
                i += 1
                written.append(body[i])
            if written[-1] != here.group(1):
                raise BlockError(f"the here-document of {written[0]!r} has no end line {here.group(1)!r}")
        text = "\n".join(written)[2:].replace("\\\n", " ")
        commands.append((written, text))
        i += 1
    if keep and len(commands) != 1:
        raise BlockError("keep= needs a block of one command")
    out = []
    for written, text in commands:
        status = re.search(r"status=(\d+)", args)
        lines = scratch.run(text, stderr="stdout-only" not in args.split(), status=int(status.group(1)) if status else 0)
        out += written + (trim(lines, keep.group(1)) if keep else lines)
    return out


def process(path, scratch, skip):
    """The file's text with its blocks regenerated, and how many were regenerated and left out."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, done, skipped, i = [], 0, 0, 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        if i >= len(lines) or not lines[i].startswith("```"):
            raise BlockError(f"{path}:{i}: a k3perf-output marker must be followed by a ``` fence")
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end + 1 >= len(lines) or lines[end + 1] != CLOSE:
            raise BlockError(f"{path}:{i}: the block's closing fence must be followed by {CLOSE}")
        body = lines[i + 1 : end]
        if set(skip) & set(m.group("args").split()):
            skipped += 1
            new = body
        else:
            try:
                new = regenerate(body, m.group("args"), scratch)
            except BlockError as e:
                raise BlockError(f"{path}:{i}: {e}") from None
            done += 1
        out += [lines[i]] + new + [lines[end], CLOSE]
        i = end + 2
    return "\n".join(out), done, skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--k3perf", default=os.path.join(ROOT, "build", "demo", "cli", "k3perf"))
    parser.add_argument("--python", default=sys.executable, help="the python3 of the blocks (default: this one)")
    parser.add_argument("--python-path", default=os.path.join(ROOT, "build", "release", "python"),
                        help="where the Python module k3perf is, for the blocks tagged python")
    parser.add_argument("--check", action="store_true", help="compare, write nothing; exit 1 on a difference")
    parser.add_argument("--skip", action="append", default=[], metavar="TAG",
                        help="leave the blocks with this tag as they are (slow, plots, python, pandas)")
    a = parser.parse_args()
    if not os.access(a.k3perf, os.X_OK):
        print(f"make-docs-outputs: no k3perf binary at {a.k3perf} (build it, or give --k3perf)", file=sys.stderr)
        return 2
    files = a.files or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    scratch = Scratch(os.path.abspath(a.k3perf), a.python, os.path.abspath(a.python_path))
    stale, total, left_out = [], 0, 0
    try:
        for path in files:
            old = open(path, encoding="utf-8").read()
            new, done, skipped = process(path, scratch, a.skip)
            total += done
            left_out += skipped
            if new == old:
                continue
            name = os.path.relpath(path, ROOT)
            if a.check:
                stale.append(name)
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                           name + " (committed)", name + " (regenerated)"))
            else:
                with open(path + ".tmp", "w", encoding="utf-8") as f:
                    f.write(new)
                os.replace(path + ".tmp", path)
                print(f"make-docs-outputs: rewrote {name}", file=sys.stderr)
    except BlockError as e:
        print(f"make-docs-outputs: {e}", file=sys.stderr)
        return 2
    finally:
        scratch.close()
    note = f", {left_out} left out (--skip {' '.join(a.skip)})" if left_out else ""
    if stale:
        print(f"make-docs-outputs: {len(stale)} files have stale outputs: {', '.join(stale)} "
              f"(run scripts/make-docs-outputs.py){note}", file=sys.stderr)
        return 1
    print(f"make-docs-outputs: {total} blocks {'current' if a.check else 'regenerated'}{note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
