# Partial stub: what treeclass.orbax uses of tensorstore (orbax-checkpoint's array store).

class dtype:
    def __init__(self, name: str) -> None: ...
