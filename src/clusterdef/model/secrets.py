"""Secrets by reference only: the definition names where a secret is kept, never its value.

One backend: Ansible Vault. `clusterdef apply` already hands ansible-playbook the vault passwords
by reference (`--vault-id [LABEL@]FILE`, never onto disk or into the run record), so a secret held
as a variable in a vault-encrypted vars file reaches the node inside Ansible's own memory: the
rendered tree carries the variable's *name* (`StoragePass={{ vault_slurmdbd_pass }}` in
slurm/slurmdbd.conf.j2) and the role's template task resolves it on the target, no_log.

    secrets:
      backend: ansible-vault
      refs:
        slurmdbd_storage_pass: vault_slurmdbd_pass   # purpose -> Ansible variable in a vault file
        munge_key: vault_munge_key

Other backends (HashiCorp Vault, cloud secret managers) are refused by the `secret-backend-unknown`
check with a hint: they can feed the same Ansible variables (a vault-client script, or a lookup in a
vars file) without clusterdef knowing them.
"""

from __future__ import annotations

from typing import Annotated

from .base import Model
from ..types import Token, _pattern

BACKENDS = ("ansible-vault",)

# What a reference is for: slurmdbd_storage_pass (slurmdbd.conf StoragePass) is read today; other
# purposes (munge_key...) are kept for the roles that will read them.
SecretPurpose = Annotated[str, _pattern(r"^[a-z][a-z0-9_]{0,63}$", 64, "a secret's purpose is lower-case letters, digits and '_', starting with a letter, at most 64 (slurmdbd_storage_pass)")]
# The name of an Ansible variable (a Python identifier, lower case) held in a vault-encrypted vars file.
# Nothing but [a-z0-9_] reaches the rendered `{{ name }}`, so no Jinja, quote or filter can ride along.
VaultVar = Annotated[str, _pattern(r"^[a-z_][a-z0-9_]{0,127}$", 128, "the name of an Ansible variable in your vault file: lower-case letters, digits and '_', not starting with a digit (vault_slurmdbd_pass)")]

# The purpose slurmdbd.conf's StoragePass reads, and the variable it names when the definition has no ref.
SLURMDBD_STORAGE_PASS = "slurmdbd_storage_pass"
DEFAULT_VARS = {SLURMDBD_STORAGE_PASS: "vault_slurmdbd_storage_pass"}


class Secrets(Model):
    backend: Token = "ansible-vault"
    """Where the referenced secrets are kept; only `ansible-vault` (see the module docstring)."""
    refs: dict[SecretPurpose, VaultVar] = {}
    """Purpose -> name of the Ansible variable holding the secret in a vault-encrypted vars file."""

    def var(self, purpose: str) -> str:
        """The Ansible variable that holds the secret for `purpose` (the ref, else the default name)."""
        return self.refs.get(purpose) or DEFAULT_VARS[purpose]
