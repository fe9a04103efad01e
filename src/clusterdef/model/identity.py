"""Identity: one directory (LDAP, FreeIPA or Active Directory, read through SSSD), the admin groups,
each tenant's user groups and the Kubernetes OIDC issuer, declared once and rendered into every layer.

    identity:
      directory:
        kind: ldap                       # ldap | ipa | ad
        uris: [ldaps://ldap1.lab.example]
        base_dn: dc=lab,dc=example
        tls_ca: /etc/ssl/certs/lab-ca.pem  # CA file on the nodes (by reference: the file is the site's)
        bind_dn: cn=sssd,ou=services,dc=lab,dc=example
        bind_password_ref: ldap_bind_password  # a purpose in `secrets.refs` (Ansible Vault variable)
      admin_groups: [hpc-admins]
      tenant_groups: {vision: [vision-users], nlp: [nlp-users]}
      oidc: {issuer: https://idp.lab.example, client_id: kubernetes, groups_claim: groups}
      slurm_users_from_groups: true      # the tenant groups' members become Slurm users of its account

docs/identity.md says what each field renders.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from .base import Model, Name
from .secrets import SecretPurpose
from ..types import AbsPath, Fqdn, _pattern

# An LDAP URI: ldaps:// or ldap:// (then start_tls), a DNS name or IPv4 address, an optional port.
LdapUri = Annotated[str, _pattern(r"^ldaps?://([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*|[0-9]{1,3}(\.[0-9]{1,3}){3})(:[0-9]{1,5})?/?$", 300, "an LDAP URI: ldaps://host[:port] (or ldap://host with start_tls: true)")]
# A distinguished name of plain attribute=value pairs (dc=lab,dc=example); values are letters, digits,
# spaces, '.', '_' and '-', so nothing needs LDAP escaping and nothing reaches sssd.conf unescaped.
Dn = Annotated[str, _pattern(r"^[A-Za-z][A-Za-z0-9-]{0,31}=[A-Za-z0-9_.-]([A-Za-z0-9 _.-]{0,62}[A-Za-z0-9_.-])?(,[A-Za-z][A-Za-z0-9-]{0,31}=[A-Za-z0-9_.-]([A-Za-z0-9 _.-]{0,62}[A-Za-z0-9_.-])?){0,15}$", 1100, "a DN of attribute=value pairs joined by ',' (ou=people,dc=lab,dc=example); values of letters, digits, spaces, '.', '_' and '-'")]
# A directory group as SSSD, sudoers, sacctmgr scripts and RBAC all carry it: letters, digits, '_',
# '.', '-', '@' and inner spaces (Active Directory's "Domain Users"); no ',' (SSSD lists) or quotes.
DirectoryGroup = Annotated[str, _pattern(r"^[A-Za-z0-9_]([A-Za-z0-9 _.@-]{0,254}[A-Za-z0-9_.-])?$", 256, "a group name of letters, digits, '_', '.', '-', '@' and inner spaces (hpc-admins, Domain Users)")]
# An OIDC issuer: a URL; http:// validates here and is refused by the `oidc-issuer-not-tls` check.
IssuerUrl = Annotated[str, _pattern(r"^https?://[a-z0-9]([a-z0-9.-]{0,252}[a-z0-9])?(:[0-9]{1,5})?(/[A-Za-z0-9._~-]{1,128}){0,8}$", 1200, "the issuer URL exactly as the provider's discovery document says (https://idp.example/realms/hpc)")]
# A JWT claim name or OIDC client id.
Claim = Annotated[str, _pattern(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$", 128, "a claim or client id of letters, digits, '_', '.', ':' and '-' (groups, email)")]


class Directory(Model):
    kind: Literal["ldap", "ipa", "ad"] = "ldap"
    """SSSD's id provider: plain LDAP (rfc2307 or rfc2307bis), FreeIPA or Active Directory."""
    domain: Fqdn | None = None
    """The SSSD domain (and, for ipa/ad, the realm's DNS domain). Default: the cluster's domain."""
    uris: tuple[LdapUri, ...] = Field(min_length=1, max_length=16)
    base_dn: Dn
    user_base_dn: Dn | None = None
    group_base_dn: Dn | None = None
    ldap_schema: Literal["rfc2307", "rfc2307bis"] = "rfc2307bis"
    """ldap only: rfc2307 groups list members by uid (memberUid), rfc2307bis by DN (member)."""
    tls_ca: AbsPath
    """The CA bundle on the nodes that signs the directory's certificates (the file is the site's)."""
    start_tls: bool = False
    """With ldap:// URIs: StartTLS before anything is sent (required then: `ldap-without-tls`)."""
    bind_dn: Dn | None = None
    bind_password_ref: SecretPurpose | None = None
    """The purpose in `secrets.refs` whose vault variable holds the bind password."""


class Oidc(Model):
    issuer: IssuerUrl
    client_id: Claim
    username_claim: Claim = "email"
    groups_claim: Claim = "groups"
    groups_prefix: Annotated[str, _pattern(r"^[A-Za-z0-9_.:-]{0,32}$", 32, "a short prefix of letters, digits, '_', '.', ':' and '-' (oidc:)")] = ""
    """Prefixed to every group the API server sees; RoleBindings use the same prefix."""


class Identity(Model):
    directory: Directory | None = None
    admin_groups: tuple[DirectoryGroup, ...] = Field(min_length=1, max_length=16)
    """The only groups with administrator rights anywhere: sudo on nodes, Slurm AdminLevel,
    Kubernetes cluster-admin."""
    tenant_groups: dict[Name, tuple[DirectoryGroup, ...]] = {}
    """Tenant -> the directory groups of its users."""
    oidc: Oidc | None = None
    slurm_users_from_groups: bool = False
    """Render a sacctmgr script that makes each tenant group's members users of the tenant's account."""
    slurm_admin_level: Literal["Operator", "Administrator"] = "Administrator"
