"""Pure computations over one definition or resolved tree, done once per object however many renderers and
checks ask (the Slurm health check script: slurm.conf's target, each Slurm image and the Ansible variables;
the capacity ledger: three checks and the accounts). Keyed by the object's identity and holding the object,
so an id is never reused while its entry lives; a few entries, the newest kept. The objects are frozen
models and dataclasses: a value computed once stays true of its object."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, TypeVar

T = TypeVar("T")
_SLOTS = 32
_cache: OrderedDict[tuple[int, str], tuple[object, object]] = OrderedDict()
_lock = threading.Lock()


def once(obj: object, key: str, compute: Callable[[], T]) -> T:
    """compute() for (obj, key) the first time, its value after."""
    k = (id(obj), key)
    with _lock:
        hit = _cache.get(k)
        if hit is not None and hit[0] is obj:
            _cache.move_to_end(k)
            return hit[1]  # type: ignore[return-value]
    value = compute()
    with _lock:
        _cache[k] = (obj, value)
        while len(_cache) > _SLOTS:
            _cache.popitem(last=False)
    return value
