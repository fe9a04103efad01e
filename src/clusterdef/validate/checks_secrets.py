"""The secrets section: references by name to one backend (see model/secrets.py)."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error, warning
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


def read_purposes(d) -> set[str]:
    """The secret purposes something rendered reads (a ref for any other purpose is inert)."""
    from ..model.secrets import SLURMDBD_STORAGE_PASS

    out = set()
    if d.slurm is not None:
        out.add(SLURMDBD_STORAGE_PASS)
    if d.identity is not None and d.identity.directory is not None and d.identity.directory.bind_password_ref:
        out.add(d.identity.directory.bind_password_ref)
    return out


@check("secret-refs-read")
def secret_refs_read(ctx: Context) -> Iterable[Finding]:
    used = read_purposes(ctx.definition)
    for purpose in ctx.definition.secrets.refs:
        if purpose not in used:
            yield warning("secret-ref-unused", ("secrets", "refs", purpose),
                          f"no rendered file or role reads the secret `{purpose}`",
                          f"read today: {', '.join(sorted(used)) or 'none'}; remove the ref (a secret that is "
                          "named but never placed gives a false sense that it is managed)")
