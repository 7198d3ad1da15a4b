"""The core: classes described, code generated, node types, registry, statics, state, tree.

Imports nothing of the package outside ``_core`` but ``treeclass._errors``.
"""
