"""The mutation engine the fuzz harnesses share (``test_format_fuzz.py``, ``test_files_fuzz.py``,
``test_hostile_fuzz.py``).

Each harness keeps its own corpus, its own values and its own oracle; what they share is here:

- :class:`JsonMutator`: random edits of a parsed JSON value (values inserted, removed, swapped
  or replaced in lists; keys added, removed, renamed or given another value in objects; ints
  nudged), with the harness's vocabulary of values and keys;
- :class:`Splicer`: random edits of a text or a byte string (truncation, deletion, insertion,
  duplication, replacement, rotation, appending, byte flips), each edit one function of the
  data, the generator and a position;
- :class:`Tally`: one try of the loader under test per case -- refused with a non-empty
  treeclass error that is a ``ValueError``, accepted (the harness then checks the result), or
  anything else, a failure -- counted (by family where a harness has families) and reported
  (printed with ``-s``, and recorded with ``record_property``);
- :func:`run_hypothesis`: Hypothesis, derandomized (the same cases on every run);
- :func:`write_case`: a case written to the file the loader reads.

Every random choice goes through the ``random.Random`` the harness seeds, so the cases of a run
are the same on every run.
"""

from __future__ import annotations

import collections
import json
import random
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

S = TypeVar("S", str, bytes)

# --- JSON values ----------------------------------------------------------------------------------


def containers(value: Any) -> list[Any]:
    """Every list and dict inside ``value``, itself included (iteratively: no recursion limit)."""
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            out.append(v)
            stack.extend(v)
        elif isinstance(v, dict):
            out.append(v)
            stack.extend(v.values())
    return out


def objects(value: Any) -> list[dict[str, Any]]:
    """Every dict inside ``value``, in :func:`containers` order."""
    return [c for c in containers(value) if isinstance(c, dict)]


def nested(value: Any, depth: int, wrap: Callable[[Any], Any] = lambda v: [v]) -> Any:
    """``value`` wrapped ``depth`` times (by default in one-element lists)."""
    for _ in range(depth):
        value = wrap(value)
    return value


def fresh(value: Any) -> Any:
    """A copy of a JSON value that shares nothing with it."""
    return json.loads(json.dumps(value))


class JsonMutator:
    """Random in-place edits of a JSON value, with a harness's vocabulary.

    Args:
        values: the values an edit puts in (a fresh copy each time).
        new_keys: the keys an edit adds to an object.
        suffixes: what a renamed key gets appended (a key that would be empty is upper-cased).
        list_nudges: what an int in a list gets added.
        dict_nudges: what an int in an object gets added.
        edits: the number of edits per mutation is drawn from these.
        deep: also put in deeply nested lists (2 %) and short lists of values (8 %).
    """

    def __init__(
        self,
        values: Sequence[Any],
        *,
        new_keys: Sequence[str],
        suffixes: Sequence[str],
        list_nudges: Sequence[int],
        dict_nudges: Sequence[int],
        edits: Sequence[int] = (1, 1, 2, 3),
        deep: bool = False,
    ) -> None:
        self.values = list(values)
        self.new_keys = tuple(new_keys)
        self.suffixes = tuple(suffixes)
        self.list_nudges = tuple(list_nudges)
        self.dict_nudges = tuple(dict_nudges)
        self.edits = tuple(edits)
        self.deep = deep

    def value(self, rng: random.Random) -> Any:
        """A value to put in."""
        if self.deep:
            r = rng.random()
            if r < 0.02:
                return nested(1, rng.choice((50, 150, 600)))  # deeper ones come as text tokens
            if r < 0.1:
                return [self.value(rng) for _ in range(rng.randrange(3))]
        return fresh(rng.choice(self.values))

    def mutate(self, doc: Any, rng: random.Random) -> Any:
        """Edit ``doc`` in place and return it (a value with no containers is replaced)."""
        for _ in range(rng.choice(self.edits)):
            conts = containers(doc)
            if not conts:
                return self.value(rng)
            c = rng.choice(conts)
            op = rng.randrange(6)
            if isinstance(c, list):
                self._edit_list(c, op, rng)
            else:
                self._edit_object(c, op, rng)
        return doc

    def _edit_list(self, c: list[Any], op: int, rng: random.Random) -> None:
        if not c or op == 0:
            c.insert(rng.randrange(len(c) + 1), self.value(rng))
        elif op == 1:
            del c[rng.randrange(len(c))]
        elif op == 2 and len(c) > 1:
            i, j = rng.randrange(len(c)), rng.randrange(len(c))
            c[i], c[j] = c[j], c[i]
        elif op == 3:
            i = rng.randrange(len(c))
            if type(c[i]) is int:
                c[i] += rng.choice(self.list_nudges)
            else:
                c[i] = self.value(rng)
        else:
            c[rng.randrange(len(c))] = self.value(rng)

    def _edit_object(self, c: dict[str, Any], op: int, rng: random.Random) -> None:
        keys = list(c)
        if not keys or op == 0:
            c[rng.choice(self.new_keys)] = self.value(rng)  # (the value is drawn first)
        elif op == 1:
            del c[rng.choice(keys)]
        elif op == 2:
            k = rng.choice(keys)
            c[k + rng.choice(self.suffixes) or k.upper()] = c.pop(k)
        elif op == 3:
            k = rng.choice(keys)
            if type(c[k]) is int:
                c[k] += rng.choice(self.dict_nudges)
            else:
                c[k] = self.value(rng)
        else:
            c[rng.choice(keys)] = self.value(rng)


# --- text and bytes -------------------------------------------------------------------------------

#: One edit: ``(data, rng, i, j) -> data``; ``i`` a position in ``data``, ``j`` the end of a span
#: from ``i`` (``None`` when the :class:`Splicer` draws no spans).
Edit = Callable[[Any, random.Random, int, "int | None"], Any]
Piece = Callable[[random.Random], Any]


class Splicer:
    """Random edits of a text or a byte string: one of ``edits``, at a random position.

    Args:
        edits: the edits, one drawn per mutation.
        span: when given, every mutation also draws a span ``[i, j)`` of 1 to ``span - 1``
            items (cut at the end of the data) that the edits may use.
    """

    def __init__(self, edits: Sequence[Edit], *, span: int | None = None) -> None:
        self.edits = tuple(edits)
        self.span = span

    def __call__(self, data: S, rng: random.Random) -> S:
        edit = self.edits[rng.randrange(len(self.edits))]
        n = len(data)
        i = rng.randrange(n + 1)
        j = None if self.span is None else min(n, i + rng.randrange(1, self.span))
        result: S = edit(data, rng, i, j)
        return result


def _end(rng: random.Random, i: int, j: int | None, longest: int) -> int:
    return j if j is not None else i + rng.randrange(1, longest)


def truncate(data: S, rng: random.Random, i: int, j: int | None) -> S:
    """The data cut at ``i``."""
    return data[:i]


def delete(longest: int = 16) -> Edit:
    """Delete the span (or, without one, 1 to ``longest - 1`` items) at ``i``."""

    def edit(data: S, rng: random.Random, i: int, j: int | None) -> S:
        return data[:i] + data[_end(rng, i, j, longest) :]

    return edit


def insert(piece: Piece) -> Edit:
    """Insert ``piece(rng)`` at ``i``."""

    def edit(data: S, rng: random.Random, i: int, j: int | None) -> S:
        return data[:i] + piece(rng) + data[i:]

    return edit


def overwrite(piece: Piece) -> Edit:
    """Replace the item at ``i`` by ``piece(rng)``."""

    def edit(data: S, rng: random.Random, i: int, j: int | None) -> S:
        return data[:i] + piece(rng) + data[i + 1 :]

    return edit


def replace_span(piece: Piece) -> Edit:
    """Replace the span at ``i`` by ``piece(rng)``."""

    def edit(data: S, rng: random.Random, i: int, j: int | None) -> S:
        return data[:i] + piece(rng) + data[_end(rng, i, j, 16) :]

    return edit


def duplicate(data: S, rng: random.Random, i: int, j: int | None) -> S:
    """The span at ``i`` twice."""
    return data[:i] + data[i : _end(rng, i, j, 16)] + data[i:]


def rotate(data: S, rng: random.Random, i: int, j: int | None) -> S:
    """The three parts around ``i`` and another position, in reverse order."""
    a, b = sorted((i, rng.randrange(len(data) + 1)))
    return data[b:] + data[a:b] + data[:a]


def append(piece: Callable[[random.Random, Any], Any]) -> Edit:
    """Append ``piece(rng, data)``."""

    def edit(data: S, rng: random.Random, i: int, j: int | None) -> S:
        return data + piece(rng, data)

    return edit


def flip(data: bytes, rng: random.Random, i: int = 0, j: int | None = None) -> bytes:
    """One to three bytes set to random values (``i`` and ``j`` are not used)."""
    b = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def random_bytes(shortest: int, longest: int) -> Piece:
    """Pieces of ``shortest`` to ``longest - 1`` random bytes."""

    def piece(rng: random.Random) -> bytes:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(shortest, longest)))

    return piece


def random_chars(alphabet: str, shortest: int, longest: int) -> Piece:
    """Pieces of ``shortest`` to ``longest - 1`` characters of ``alphabet``."""

    def piece(rng: random.Random) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(shortest, longest)))

    return piece


def one_of(choices: Sequence[Any]) -> Piece:
    """Pieces drawn from ``choices``."""

    def piece(rng: random.Random) -> Any:
        return rng.choice(choices)

    return piece


# --- the check every case goes through --------------------------------------------------------


class Tally:
    """Counts of a fuzz run: cases (by family), refused, accepted, and the failures.

    Args:
        prefix: the tag of the printed line (``"fuzz"``, ``"hostile fuzz"``).
        label: what was fuzzed (``"mutations"``, ``"files hypothesis"``, ``"torch"``).
        refusal: how a refusal is named in the printed line.
        accepted: what was done with an accepted case, for the printed line.
        record: the ``record_property`` key the number of cases is recorded under.
    """

    def __init__(
        self, prefix: str, label: str, *, refusal: str, accepted: str, record: str
    ) -> None:
        self.prefix = prefix
        self.label = label
        self.refusal = refusal
        self.accepted_note = accepted
        self.record = record
        self.cases: collections.Counter[str] = collections.Counter()
        self.refused = 0
        self.accepted = 0
        self.failures: list[str] = []
        self.failed: collections.Counter[str] = collections.Counter()

    @property
    def total(self) -> int:
        """The number of cases so far."""
        return sum(self.cases.values())

    def fail(self, data: Any, problem: BaseException | str, family: str = "") -> None:
        """Record a broken promise (the first 20 are kept in full)."""
        self.failed[family] += 1
        detail = (
            problem
            if isinstance(problem, str)
            else "".join(traceback.format_exception(problem))[-1500:]
        )
        if len(self.failures) < 20:
            shown = data[:300] if isinstance(data, (bytes, bytearray)) else str(data)[:300]
            self.failures.append(f"[{family}] {shown!r}\n{detail}")

    def attempt(
        self,
        load: Callable[[], Any],
        data: Any,
        refusal: type[BaseException] | tuple[type[BaseException], ...],
        family: str = "",
    ) -> tuple[bool, Any]:
        """One case: ``load()``, counted.

        Returns ``(True, result)`` when it loaded, ``(False, error)`` when it raised
        ``refusal`` (which must be a ``ValueError`` with a message), ``(False, None)`` when
        it raised anything else (a failure, recorded).
        """
        self.cases[family] += 1
        try:
            result = load()
        except refusal as e:
            self.refused += 1
            if not isinstance(e, ValueError) or not str(e):
                self.fail(data, f"bad error {e!r}", family)
            return False, e
        except BaseException as e:  # anything else breaks the promise
            if isinstance(e, KeyboardInterrupt):
                raise
            self.fail(data, e, family)
            return False, None
        self.accepted += 1
        return True, result

    def report(self, record_property: Any, capsys: Any) -> None:
        """Print and record the counts; fail the test if a case broke a promise."""
        total = self.total
        families = {k: v for k, v in sorted(self.cases.items()) if k}
        by_family = f" by family: {families}" if families else ""
        with capsys.disabled():
            print(
                f"\n[{self.prefix}] {self.label}: {total} cases ({self.refused} refused with "
                f"{self.refusal}, {self.accepted} accepted {self.accepted_note}){by_family}"
            )
        record_property(self.record, total)
        assert not self.failures, (
            f"{sum(self.failed.values())} of {total} cases broke a promise, by family: "
            f"{dict(self.failed)}\n\n" + "\n\n".join(self.failures[:5])
        )


def run_hypothesis(
    strategy: st.SearchStrategy[Any], examples: int, check: Callable[[Any], None]
) -> None:
    """Run ``check`` on ``examples`` cases Hypothesis draws, the same ones on every run."""

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def case(data: Any) -> None:
        check(data)

    case()


def write_case(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as a new file.

    The previous case's file is removed first: ext4 (``auto_da_alloc``) flushes a file that is
    truncated and written again in place to the disk at once, milliseconds a case, so a few
    thousand cases spent most of their time waiting for the disk.
    """
    path.unlink(missing_ok=True)
    path.write_bytes(data)
