"""What every text and number passes through on its way out of golem.

Secrets are replaced first and the text is cut afterwards, never the other way round: a cut
that falls inside a key would leave its head behind, and a head is not recognised as the key
any more. Numbers are made finite, since `Infinity` and `NaN` are not JSON.

A key is found in any form it can leave in: whole, in part (every run of MIN_SECRET or more
of its characters), split by whitespace, line breaks or invisible characters, base64-encoded (at any alignment,
standard or URL-safe alphabet) and percent- or JSON-escaped. Finding it costs time linear in
the text: the MIN_SECRET-character runs of every form of the key are indexed once
(`Redactor`), and the text is sampled every STRIDE characters for a GRAM-character piece of
one; only a hit is extended, in both directions, to the whole run it belongs to.
"""

from __future__ import annotations

import base64
import bisect
import functools
import itertools
import json
import math
from typing import Any, Iterable
from urllib.parse import quote, quote_plus

__all__ = ["REDACTED", "MIN_SECRET", "Redactor", "redact", "redact_value", "clip", "finite"]

REDACTED = "[redacted]"
MIN_SECRET = 8      # shorter values, and shorter runs of a key, would blank ordinary words
# every run of MIN_SECRET characters holds a GRAM-character piece starting at a multiple of
# STRIDE (STRIDE + GRAM - 1 <= MIN_SECRET), so sampling every STRIDE-th position finds it
GRAM, STRIDE = 5, 4
_BLOCK = 256        # characters counted at a time when a span is placed back in the text


def _forms(secret: str) -> set[str]:
    """The texts `secret` may leave in: itself and its escaped and encoded forms."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""),
             json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    forms |= {f.lower() for f in forms if "%" in f}     # %2f as well as %2F
    raw = secret.encode("utf-8", "surrogateescape")
    for shift in range(3):      # the key at any offset inside a longer encoded value
        encoded = base64.b64encode(bytes(shift) + raw).decode()
        head = 4 if shift else 0                    # characters that mix in the prefix
        tail = (shift + len(raw)) % 3               # characters that mix in what follows
        core = encoded[head:len(encoded) - (4 if tail else 0)]
        if len(core) >= MIN_SECRET:
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return {f for f in forms if len(f) >= MIN_SECRET}


class Redactor:
    """Blanks every run of MIN_SECRET or more characters of any form of the secrets."""

    def __init__(self, secrets: Iterable[str]):
        self.forms = sorted({f for s in secrets if s and len(str(s)) >= MIN_SECRET
                             for f in _forms(str(s))})
        self._grams: dict[str, list[tuple[int, int]]] = {}
        for number, form in enumerate(self.forms):
            for at in range(len(form) - GRAM + 1):
                self._grams.setdefault(form[at:at + GRAM], []).append((number, at))

    def __bool__(self) -> bool:
        return bool(self.forms)

    def __call__(self, text: str, marker: str = REDACTED) -> str:
        if not self.forms or len(text) < MIN_SECRET:
            return text
        dense = _dense(text)        # a key split by blanks or line breaks, rejoined
        spans = self._spans(dense)
        if not spans:
            return text
        return _replace(text, _to_text(text, spans), marker)

    def _spans(self, dense: str) -> list[tuple[int, int]]:
        """[start, end) runs in `dense` that are MIN_SECRET or more characters of a form."""
        grams, forms, spans = self._grams, self.forms, []
        size = len(dense)
        done = 0        # everything before this is inside a span found already
        sampled = [at for at in range(0, size - GRAM + 1, STRIDE)
                   if dense[at:at + GRAM] in grams]
        for at in sampled:
            if at < done:
                continue
            hits = grams[dense[at:at + GRAM]]
            best = None
            for number, offset in hits:
                form = forms[number]
                left = _agree(dense, at, form, offset, -min(offset, at))
                right = GRAM + _agree(dense, at + GRAM, form, offset + GRAM,
                                      min(len(form) - offset - GRAM, size - at - GRAM))
                if left + right >= MIN_SECRET and (best is None or
                                                   (at + right, -left) > (best[1], -best[0])):
                    best = (at - left, at + right)
            if best is not None:
                if spans and best[0] <= spans[-1][1]:
                    spans[-1] = (spans[-1][0], max(spans[-1][1], best[1]))
                else:
                    spans.append(best)
                done = best[1]
        return spans


# characters that show as nothing, taken out with the blanks: a key interleaved with them
# reads as the key
_INVISIBLE = "\u00ad\u180e\u200b\u200c\u200d\u2060\ufeff"
_DROP = {ord(c): None for c in _INVISIBLE}


def _dense(text: str) -> str:
    """`text` without blanks, line breaks and invisible characters."""
    return "".join(text.split()).translate(_DROP)


def _agree(text: str, at: int, form: str, offset: int, most: int) -> int:
    """How many characters `text` and `form` agree on going forward from `at` and `offset`
    (`most` > 0) or backward from just before them (`most` < 0), at most |most|: found by
    halving with slice comparisons, so each step is one C-level compare."""
    low, high = 0, abs(most)
    while low < high:
        mid = (low + high + 1) // 2
        same = (text[at:at + mid] == form[offset:offset + mid]) if most > 0 else \
            (text[at - mid:at] == form[offset - mid:offset])
        low, high = (mid, high) if same else (low, mid - 1)
    return low


def _to_text(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` of the text with its whitespace taken out, as spans of `text` itself.

    The text is counted in blocks of _BLOCK characters (each count one C-level pass), and
    only the block an end falls in is walked, so the cost is linear in the text and in the
    number of spans, never their product.
    """
    size = len(text)
    starts = list(range(0, size, _BLOCK))
    kept = list(itertools.accumulate(len(_dense(text[at:at + _BLOCK]))
                                     for at in starts))    # characters kept up to each block

    def place(index: int) -> int:
        block = bisect.bisect_right(kept, index)
        left = index - (kept[block - 1] if block else 0)   # kept characters to pass over
        at = starts[block]
        while True:
            if not (text[at].isspace() or text[at] in _INVISIBLE):
                if left == 0:
                    return at
                left -= 1
            at += 1

    return [(place(start), place(end - 1) + 1) for start, end in spans]


def _replace(text: str, spans: list[tuple[int, int]], marker: str) -> str:
    out, last = [], 0
    for start, end in spans:
        if start < last:
            start = last
        out.append(text[last:start])
        out.append(marker)
        last = max(last, end)
    out.append(text[last:])
    return "".join(out)


@functools.lru_cache(maxsize=32)
def _redactor(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def redactor(secrets: Iterable[str]) -> Redactor:
    """The (cached) Redactor for `secrets`."""
    return _redactor(tuple(sorted({str(s) for s in secrets if s
                                   and len(str(s)) >= MIN_SECRET})))


def redact(text: str, secrets: Iterable[str], marker: str = REDACTED) -> str:
    """Replace every secret in `text`, in any of its forms (see the module's docstring);
    secrets shorter than MIN_SECRET are ignored."""
    return redactor(secrets)(text, marker)


def redact_value(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every secret replaced in every string inside it, keys of dicts included.

    Works on the data, not on its JSON text, so a key JSON would escape (a quote, a
    backslash) is still found. Returns `value` itself when there is nothing to redact.
    Iterative, so data nested deeper than the recursion limit cannot crash it.
    """
    blank = redactor(secrets)
    if not blank:
        return value
    return _rebuild(value, lambda item: blank(item) if isinstance(item, str) else item, blank)


def _rebuild(value: Any, leaf, key=None) -> Any:
    """`value` with `leaf` applied to everything in it that is not a dict, list or tuple,
    and `key` to every string key of a dict, without recursion; tuples become lists, as JSON
    has them."""
    if not isinstance(value, (dict, list, tuple)):
        return leaf(value)
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, dict):
            copy: dict = {}
            parent[slot] = copy
            for name, child in item.items():
                name = key(name) if key is not None and isinstance(name, str) else name
                copy[name] = None
                stack.append((child, copy, name))
        elif isinstance(item, (list, tuple)):
            copy_list: list = [None] * len(item)
            parent[slot] = copy_list
            stack.extend((child, copy_list, i) for i, child in enumerate(item))
        else:
            parent[slot] = leaf(item)
    return root[0]


def clip(text: str, limit: int, secrets: Iterable[str] = ()) -> str:
    """`text` redacted, then cut to `limit` characters (an ellipsis marks the cut)."""
    text = redact(text, secrets)
    return text if len(text) <= limit else text[:max(0, limit - 3)] + "..."


def _finite_leaf(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def finite(value: Any) -> Any:
    """`value` with every float that is not finite replaced by None, at any depth."""
    return _rebuild(value, _finite_leaf)


def cleaned(value: Any, secrets: Iterable[str]) -> Any:
    """`finite(redact_value(value, secrets))` in one walk: what a JSON line may carry."""
    blank = redactor(secrets)
    if not blank:
        return finite(value)
    return _rebuild(value, lambda item: blank(item) if isinstance(item, str)
                    else _finite_leaf(item), blank)
