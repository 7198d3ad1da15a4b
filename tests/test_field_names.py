"""What a field name may be (issue 28, item 5): checked once, at registration.

Field names are compiled into generated source (``obj.name``) and saved by name, so a name must
be a Python identifier as written: not a keyword, in NFKC normal form (``ﬁ`` is read as ``fi``
in source). Names that are not are refused with a ``RegistrationError`` naming the class, the
field and the fix, before anything is registered -- whatever made the class
(``dataclasses.make_dataclass``, ``type()`` with annotations, attrs, namedtuple).
"""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

import treeclass as tc

CRAFTED = "a=__import__('os').system('echo pwned')#"


def _by_annotations(name: str, fields: dict[str, Any]) -> type:
    """A dataclass with fields of any name (``type()``: no check by ``make_dataclass``)."""
    cls = type(name, (), {"__annotations__": fields})
    return dataclasses.dataclass(init=False, repr=False, eq=False)(cls)


def _refused(cls: type, match: str, name: str | None = None) -> None:
    with pytest.raises(tc.RegistrationError, match=match):
        tc.register_dataclass(cls, name=name)
    assert not tc.is_registered(cls)
    if name is not None:
        assert tc.class_for_name(name) is None


def test_a_field_name_holding_code_is_refused_before_anything_runs() -> None:
    cls = _by_annotations("Crafted", {CRAFTED: int})
    _refused(
        cls,
        r"the field name \"a=__import__\('os'\).*\" of .*Crafted is not a Python identifier; "
        r".*Rename the field",
        name="tests.field_names.Crafted",
    )
    # Not registered: pickle and tree_flatten see an ordinary object, no generated code runs.
    obj = object.__new__(cls)
    assert tc.tree_leaves(obj) == [obj]


def test_a_keyword_field_name_is_refused() -> None:
    cls = _by_annotations("Keyword", {"lambda": int})
    _refused(cls, r"the field name 'lambda' of .*Keyword is a Python keyword; .*Rename the field")


def test_fields_that_python_reads_as_one_name_are_refused() -> None:
    cls = dataclasses.make_dataclass("Ligature", [("fi", int), ("\ufb01", int)], init=False)
    _refused(
        cls,
        r"the field name 'ﬁ' of .*Ligature is read as 'fi' in Python source \(NFKC\), the name "
        r"of another field of the class; .*Rename the field 'ﬁ'",
        name="tests.field_names.Ligature",
    )


def test_a_field_name_not_in_nfkc_form_is_refused_alone_too() -> None:
    cls = dataclasses.make_dataclass("Alone", [("\ufb01x", int)], init=False)
    _refused(cls, r"the field name 'ﬁx' of .*Alone is read as 'fix' in Python source \(NFKC\);")


def test_a_namedtuple_field_name_is_checked_too() -> None:
    import collections

    cls = collections.namedtuple("Pair", ["fi", "\ufb01b"])  # type: ignore[misc]
    with pytest.raises(tc.RegistrationError, match=r"the field name 'ﬁb' of .*Pair is read as"):
        tc.register_namedtuple(cls, name="tests.field_names.Pair")
    assert not tc.is_registered(cls)


def test_aliases_follow_the_same_rule() -> None:
    with pytest.raises(tc.RegistrationError, match=r"the aliases= name 'ﬁ' of .* is read as 'fi'"):
        tc.field(aliases=("\ufb01",))
    with pytest.raises(tc.RegistrationError, match=r"the aliases= name 'for' .* Python keyword"):
        tc.field(aliases=("for",))


def test_valid_unicode_field_names_register_and_round_trip() -> None:
    @tc.pytree_dataclass(name="tests.field_names.Greek")
    class Greek:
        α: float  # noqa: PLC2401 (a non-ASCII field name in NFKC form is valid)
        fi: float = 0.0

    obj = Greek(1.0, 2.0)
    leaves, spec = tc.tree_flatten(obj)
    assert leaves == [1.0, 2.0]
    assert spec.unflatten(leaves) == obj
    assert pickle.loads(pickle.dumps(obj)) == obj


def test_a_class_of_3000_fields_registers_and_round_trips() -> None:
    """Issue 28, item 6 (was RecursionError/MemoryError at registration): it registers, and
    its generated functions (the embedded registry's, pickle's rebuild, torch's) compile and
    round-trip."""
    n = 3000
    cls = dataclasses.make_dataclass("Wide", [(f"w{i}", int) for i in range(n)])
    tc.register_dataclass(cls, name="tests.field_names.Wide")
    obj = cls(*range(n))
    assert pickle.loads(pickle.dumps(obj)) == obj
    leaves, spec = tc.tree_flatten(obj)
    assert leaves == list(range(n))
    assert tc.tree_unflatten(spec, leaves) == obj
    assert tc.treespec_loads(tc.treespec_dumps(spec)) == spec
    try:
        import torch.utils._pytree as pt
    except ImportError:  # the core job has no torch
        return
    tc.activate_backends()
    leaves, spec = pt.tree_flatten(obj)
    assert leaves == list(range(n))
    assert pt.tree_unflatten(leaves, spec) == obj
