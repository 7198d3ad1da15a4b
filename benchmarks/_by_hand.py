"""Registering a dataclass "by hand" in JAX (+ jax.export), torch and optree, as a competent
user would: the reference the registration benchmarks compare treeclass against.

One small set of hand-written callbacks per class (closures over the field names: nothing is
generated), ``jax.tree_util.register_dataclass`` plus ``jax.export``'s serialization (static
values as JSON), ``torch.utils._pytree.register_pytree_node`` with a serialized name, keyed
flatten and a JSON context, and ``optree.register_pytree_node`` in a namespace. Frameworks that
are not imported are skipped (so the reference does what treeclass does with them).
"""

from __future__ import annotations

import json
import sys
from typing import Any

OPTREE_NAMESPACE = "bench"


def register_by_hand(cls: type, name: str, data: tuple[str, ...], meta: tuple[str, ...]) -> None:
    """Register the dataclass ``cls`` (data fields ``data``, static ``meta``) everywhere."""

    def flatten(obj: Any) -> tuple[list[Any], tuple[Any, ...]]:
        return [getattr(obj, n) for n in data], tuple(getattr(obj, m) for m in meta)

    def unflatten(aux: Any, children: Any) -> Any:
        return cls(**dict(zip(data, children)), **dict(zip(meta, aux)))

    if "jax" in sys.modules:
        import jax

        jax.tree_util.register_dataclass(cls, data_fields=list(data), meta_fields=list(meta))
        jax.export.register_pytree_node_serialization(
            cls,
            serialized_name=name,
            serialize_auxdata=lambda aux: json.dumps(list(aux)).encode(),
            deserialize_auxdata=lambda b: tuple(json.loads(b)),
        )
    if "torch" in sys.modules:
        import torch.utils._pytree as pytree

        keys = [pytree.GetAttrKey(n) for n in data]
        pytree.register_pytree_node(
            cls,
            flatten,
            lambda children, aux: unflatten(aux, children),
            serialized_type_name=name,
            flatten_with_keys_fn=lambda obj: (
                list(zip(keys, flatten(obj)[0])),
                flatten(obj)[1],
            ),
            to_dumpable_context=lambda aux: json.dumps(list(aux)),
            from_dumpable_context=lambda s: tuple(json.loads(s)),
        )
    if "optree" in sys.modules:
        import optree

        optree.register_pytree_node(
            cls,
            flatten,
            unflatten,
            path_entry_type=optree.GetAttrEntry,
            namespace=OPTREE_NAMESPACE,
        )
