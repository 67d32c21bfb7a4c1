"""cargo test: per-test outcomes read from the test harness's own human output.

libtest's machine-readable output (`--format json`) needs a nightly toolchain, so golem reads
the stable lines every harness prints: `Running SRC (target/.../deps/NAME-HASH)` from cargo
before each test binary, `running N tests`, one `test NAME ... ok|FAILED|ignored` per test
and `test result: ... N passed; N failed; N ignored; ...` at the end of each binary. The
command gets `--no-fail-fast`, so a failing binary does not hide the binaries after it.

How far this is trusted: the test binary is the code under test, and a test can write to its
stdout past the harness's capture, so anything in this output could have been printed by the
code under test. Each binary's lines must add up to its own summary line, a binary that ends
without one is a failing pseudo test (`SRC [CRATE] [binary]`), a failure is never overwritten
by a later pass, and the run passes only with exit code 0: the evidence can name which tests
fail, are fixed or went missing, but a pass is believed no further than the exit code, and a
verdict built on it says so (`trust`).

Test ids are `SRC [CRATE]::NAME` (`src/lib.rs [adder]::tests::adds`, `tests/api.rs
[api]::it_works`), never with the hash cargo gives a binary (it changes with the directory
the crate is built in). Doc tests are `doctests [CRATE]::FILE - ITEM (example K)`: rustdoc
names them by line number, which any edit above them changes, so golem numbers each item's
examples in order instead. A target with its own harness (`harness = false`) that prints no
`running` line is one test, `SRC [CRATE]::(target)`, passed unless cargo says it failed. A
crate that does not compile is a failing pseudo test, `[CRATE] [build]`.
"""

from __future__ import annotations

import os
import re

from golem.workflow.verifier.runners.base import Call, Candidate, Outcomes, Tree, merge

_COLOR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# cargo's status lines, right-aligned in twelve columns
_RUNNING = re.compile(r"^ {5}Running (?:unittests )?(\S.*?)(?: \(([^()]+)\))?$")
_DOCTESTS = re.compile(r"^ {3}Doc-tests (\S+)$")
_STARTED = re.compile(r"^running (\d+) tests?$")
_TEST = re.compile(r"^test (.+?) \.\.\. (.*)$")
_VERDICT = re.compile(r"^(ok|FAILED|ignored)(, .*)?$")
_SUMMARY = re.compile(r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored")
_TARGET_FAILED = re.compile(r"^error: (?:test|doctest) failed, to rerun pass")
_BUILD_FAILED = re.compile(r"^error: could not compile `([^`]+)`")
_LINE = re.compile(r"^(.*) \(line (\d+)\)(.*)$")
_HASH = re.compile(r"-[0-9a-f]{16}$")
OUTCOME = {"ok": "passed", "FAILED": "failed", "ignored": "skipped"}
# libtest options that change the human output golem reads
_TERSE = {"-q", "--quiet", "--format", "-Z", "--list", "--logfile"}
# cargo options that take a value (the next argument, unless given with `=`)
_VALUED = {"-p", "--package", "--exclude", "--bin", "--example", "--test", "--bench", "-F",
           "--features", "-j", "--jobs", "--target", "--target-dir", "--profile",
           "--manifest-path", "--color", "--message-format", "--config", "-Z", "--lockfile-path"}


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """`cargo test ...` as (cargo's arguments after `test`, the harness's after `--`)."""
    rest = argv[2:]
    if "--" in rest:
        cut = rest.index("--")
        return rest[:cut], rest[cut + 1:]
    return rest, []


def _filtered(mine: list[str], harness: list[str]) -> bool:
    """Whether the command names tests itself (a filter before or after `--`)."""
    takes = False
    for arg in mine:
        if takes:
            takes = False
        elif arg.startswith("-"):
            takes = arg in _VALUED
        else:
            return True
    return any(not a.startswith("-") for a in harness)


class Cargo:
    name = "cargo"
    evidence = "cargo-output"
    reads = "output"
    python = False
    trust = ("per-test results read from the test binaries' own output, which the code under "
             "test can print to: trusted no further than the exit code")
    looks_for = "cargo test (Cargo.toml)"
    homes: dict[str, str] = {"CARGO_HOME": ".cargo", "RUSTUP_HOME": ".rustup"}

    def claims(self, argv: list[str]) -> bool:
        if os.path.basename(argv[0]) != "cargo" or argv[1:2] != ["test"]:
            return False
        mine, harness = _split(argv)
        words = {a.split("=", 1)[0] for a in mine if a.startswith("-")} | \
            {a.split("=", 1)[0] for a in harness}
        return not words & _TERSE

    def detect(self, tree: Tree) -> list[Candidate]:
        return [Candidate(["cargo", "test"], "Cargo.toml", 60)] if tree.exists("Cargo.toml") \
            else []

    def argv(self, call: Call) -> list[str]:
        mine, harness = _split(call.pinned)
        flags = [] if "--no-fail-fast" in mine else ["--no-fail-fast"]
        if call.only is not None and not _filtered(mine, harness):
            return [call.program, "test", *flags, *mine, "--", *harness, "--exact", call.only]
        return [call.program, "test", *flags, *mine, *(["--", *harness] if harness else [])]

    def parse(self, text: str, cwd: str) -> Outcomes:
        return parse_cargo(text)

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        label, _, name = test_id.partition("::")
        if not name or label.startswith(("doctests ", "[")) or name == "(target)":
            return None
        return name.removesuffix(" - should panic")


class _Section:
    """One test binary's part of the output."""

    def __init__(self, label: str, doc: bool = False):
        self.label, self.doc = label, doc
        self.started = self.failed = self.told = False
        self.summary: tuple[int, int, int] | None = None
        self.tests: dict[str, str] = {}
        self.pending: str | None = None     # a test whose outcome comes on a later line

    def read(self, line: str) -> None:
        """A line of the harness's report, before the tests' own output is told."""
        test = _TEST.match(line)
        if test:
            verdict = _VERDICT.match(test.group(2))
            if verdict:
                merge(self.tests, test.group(1), OUTCOME[verdict.group(1)])
                self.pending = None
            else:   # one test thread, output not captured: the outcome follows its output
                self.pending = test.group(1)
            return
        verdict = _VERDICT.match(line)
        if verdict and self.pending is not None:
            merge(self.tests, self.pending, OUTCOME[verdict.group(1)])
            self.pending = None

    def names(self) -> dict[str, str]:
        """The test names as ids carry them (doc tests numbered, not by line)."""
        if not self.doc:
            return self.tests
        lines: dict[tuple[str, str], list[tuple[int, str]]] = {}
        named = {}
        for name in self.tests:
            match = _LINE.match(name)
            if match:
                key = (match.group(1), match.group(3))
                lines.setdefault(key, []).append((int(match.group(2)), name))
            else:
                named[name] = name
        for (head, tail), found in lines.items():
            for number, (_, name) in enumerate(sorted(found), 1):
                named[name] = f"{head} (example {number}){tail}"
        return {named[n]: o for n, o in self.tests.items()}


def _label(source: str, binary: str | None) -> str:
    if binary is None:      # cargo before 1.59: `Running target/debug/deps/NAME-HASH`
        return f"[{_HASH.sub('', os.path.basename(source))}]"
    crate = _HASH.sub("", os.path.basename(binary).removesuffix(".exe"))
    return f"{source} [{crate}]"


def parse_cargo(output: str) -> Outcomes:
    """Outcomes from `cargo test`'s human output (how far they are trusted: module
    docstring)."""
    tests: dict[str, str] = {}
    pseudo: set[str] = set()
    problems: list[str] = []
    sections: list[_Section] = []
    seen: dict[str, int] = {}
    for raw in output.splitlines():
        line = _COLOR.sub("", raw).rstrip()
        current = sections[-1] if sections else None
        running, doc = _RUNNING.match(line), _DOCTESTS.match(line)
        if running or doc:
            label = f"doctests [{doc.group(1)}]" if doc else \
                _label(running.group(1), running.group(2))
            seen[label] = seen.get(label, 0) + 1
            if seen[label] > 1:     # two crates' binaries of one name (a workspace)
                label = f"{label} #{seen[label]}"
            sections.append(_Section(label, bool(doc)))
            continue
        built = _BUILD_FAILED.match(line)
        if built:
            merge(tests, f"[{built.group(1)}] [build]", "error")
            pseudo.add(f"[{built.group(1)}] [build]")
            continue
        if current is None:
            continue
        if _TARGET_FAILED.match(line):
            current.failed = True
        elif current.summary is not None:
            continue
        elif not current.started:
            current.started = _STARTED.match(line) is not None
        elif line in ("failures:", "successes:"):
            current.told = True     # the tests' own output follows, then their names
        elif _SUMMARY.match(line):
            found = _SUMMARY.match(line)
            current.summary = tuple(int(found.group(n)) for n in (2, 3, 4))
        elif not current.told:
            current.read(line)
    for section in sections:
        _conclude(section, tests, pseudo, problems)
    return Outcomes(tests, pseudo, problems[0] if problems else None)


def _conclude(section: _Section, tests: dict[str, str], pseudo: set[str],
              problems: list[str]) -> None:
    """One binary's tests into the run's, with what its own summary says of them."""
    label = section.label
    if not section.started:     # its own harness: cargo's verdict on the target
        merge(tests, f"{label}::(target)", "failed" if section.failed else "passed")
        return
    names = section.names()
    for name, outcome in names.items():
        merge(tests, f"{label}::{name}", outcome)
    if section.summary is None:
        merge(tests, f"{label} [binary]", "error")
        pseudo.add(f"{label} [binary]")
        return
    counts = tuple(sum(1 for o in section.tests.values() if o == want)
                   for want in ("passed", "failed", "skipped"))
    if counts != section.summary:
        problems.append(f"the output of {label} does not add up: {counts[0]} passed, "
                        f"{counts[1]} failed, {counts[2]} ignored against its summary's "
                        f"{section.summary[0]}, {section.summary[1]}, {section.summary[2]}")


RUNNER = Cargo()
