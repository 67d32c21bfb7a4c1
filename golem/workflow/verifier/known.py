"""Failures that are not the change's: tests that failed before the change the same way and
whose test code it does not touch (named beside the verdict, judged as ever), and tests the
user names known-failing (`-known-failing`, or `known-failing` in their own config), which
are run and reported but not judged.

Only the user can name a test known-failing: never the repository's `[tool.golem]` (the
change could write it), never the model. golem's own pseudo-tests (`golem: ...`, what the
guard and the audit found) are never set apart, nor a test whose code now comes from a file
the run changed. A known-failing test's file is still a test file: editing or deleting it is
REJECTED as before.
"""

from __future__ import annotations

from golem.workflow.verifier.suite import FAILING, SuiteResult

# where a test id continues below a name that covers it: a pytest file or class
# (`tests/test_x.py::TestA`), a unittest module or class (`test_x.TestA`), a parameter set
# (`test_y[`)
BELOW = ("::", ".", "[")


def is_known(test_id: str, names: tuple[str, ...] | list[str]) -> bool:
    """Whether the user's `names` cover `test_id`: the id itself, or a file, module or class
    it belongs to (`tests/test_x.py`, `test_x.TestA`). golem's pseudo-tests never are."""
    if test_id.startswith("golem:"):
        return False
    for name in names:
        if test_id == name or test_id.startswith(name) and \
                test_id[len(name):].startswith(BELOW):
            return True
    return False


def set_apart(verdict, names: tuple[str, ...] | list[str], swapped: dict[str, str]) -> None:
    """Move the tests `names` covers out of the verdict's still failing, newly failing and
    missing lists into `known_failing`: they are not judged. A test that ran code from a
    changed file in place of its own (`swapped`) stays judged."""
    verdict.known_names = tuple(names)
    if not names:
        return
    apart: set[str] = set()
    for key in ("still_failing", "newly_failing", "missing"):
        kept = []
        for test_id in getattr(verdict, key):
            if test_id not in swapped and is_known(test_id, names):
                apart.add(test_id)
            else:
                kept.append(test_id)
        setattr(verdict, key, kept)
    verdict.known_failing = sorted(apart)


def unmatched(names: tuple[str, ...] | list[str], *results: SuiteResult | None) -> list[str]:
    """The names that cover no test of any of `results` (a typo, or a test that is gone)."""
    ids = [t for r in results if r is not None for t in (r.tests or {})]
    return [n for n in names if not any(is_known(t, (n,)) for t in ids)]


def as_before(before: SuiteResult, after: SuiteResult, still: list[str],
              changed: set[str]) -> list[str]:
    """Of the tests still failing (`still`), those that failed before the change with the
    same outcome (`failed` or `error`), and whose test code (its file, the files its code
    came from, before and now) is in none of the files the run changed. What the code under
    test does for them golem cannot tell apart per test: a test the change was meant to fix
    and did not is here too."""
    found = []
    old, new = before.tests or {}, after.tests or {}
    for test_id in still:
        if test_id.startswith("golem:") or old.get(test_id) not in FAILING or \
                new.get(test_id) != old.get(test_id):
            continue
        files = {before.files.get(test_id), after.files.get(test_id),
                 *before.origins.get(test_id, ()), *after.origins.get(test_id, ())}
        if not (files & set(changed)):
            found.append(test_id)
    return found


def passes_but_known(after: SuiteResult, known: list[str]) -> bool:
    """Whether the run's evidence is whole and every test failing in it is one the user
    named known-failing (`known`, as `set_apart` found them)."""
    return (after.tests is not None and after.problem is None and not after.timed_out
            and after.exit_code is not None and bool(after.failing)
            and set(after.failing) <= set(known))


def count(ids: list[str], what: str) -> str:
    return f"{len(ids)} {what}{'' if len(ids) == 1 else 's'}"


def names(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def still_phrase(verdict) -> str:
    """The verdict line's words for the tests still failing, those that failed before the
    same way and whose test code the change does not touch named as such (a fact, not a
    judgement: a test the change was meant to fix and did not reads the same)."""
    still, same = verdict.still_failing, verdict.failing_before_untouched
    text = f"{len(still)} still failing: {names(still)}"
    if not same:
        return text
    which = "" if len(same) == len(still) else f"{names(same)}: "
    return (f"{text} ({which}failing before the change the same way, none of their test "
            "code changed; -known-failing sets apart tests that fail for reasons outside "
            "the change)")


def known_phrase(verdict) -> str:
    """What the verdict line says of the known-failing tests set apart, if any."""
    if not verdict.known_failing:
        return ""
    return f"; not judged, known failing (-known-failing): {names(verdict.known_failing)}"


def green_before(before: SuiteResult, known: tuple[str, ...] | list[str]) -> str | None:
    """"" when the suite passed before any change; ", apart from N known-failing test(s)
    (ids)" when every test failing there is one the user named known-failing (there is
    nothing to fix); None otherwise."""
    if before.passed:
        return ""
    failing = before.failing
    if known and passes_but_known(before, [t for t in failing if is_known(t, known)]):
        return f", apart from {count(failing, 'known-failing test')} ({names(failing)})"
    return None


def to_fix(failing: list[str], known: tuple[str, ...] | list[str]) -> list[str]:
    """The failing tests the model is asked to fix: those the user did not name
    known-failing."""
    return [t for t in failing if not is_known(t, known)]
