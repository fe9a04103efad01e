"""The secrets section: references by name to one backend (see model/secrets.py)."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error
from ..model.secrets import BACKENDS
from .registry import Context, check


@check("secrets")
def secret_backend(ctx: Context) -> Iterable[Finding]:
    backend = ctx.definition.secrets.backend
    if backend not in BACKENDS:
        yield error("secret-backend-unknown", ("secrets", "backend"),
                    f"secret backend `{backend}` is not supported",
                    "use `ansible-vault` (apply passes --vault-id by reference); another store such as "
                    "HashiCorp Vault can feed the vault variables through a vault-id client script")
