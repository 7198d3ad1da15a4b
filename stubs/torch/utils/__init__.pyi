from . import _pytree as _pytree
