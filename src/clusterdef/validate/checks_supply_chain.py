"""Signed images: an image policy that requires signatures has registries to allow and keys to
verify with, and every key file is a real public key."""

from __future__ import annotations

from typing import Iterable

from ..errors import Finding, error
from ..limits import InputError
from ..signing import KeyError_, key_pem
from .registry import Context, check


@check("image-policy")
def image_policy(ctx: Context) -> Iterable[Finding]:
    k = ctx.definition.kubernetes
    if k is None or k.image_policy is None:
        return
    p = k.image_policy
    where = ("kubernetes", "image_policy")
    if not p.registries:
        at = where + ("registries",) if "registries" in p.model_fields_set else where
        yield error("image-policy-no-registries", at,
                    "the image policy allows no registry, so every tenant pod would be refused",
                    "list the registries tenants pull from (registries: [nvcr.io/nvidia, registry.example/team]); "
                    "images from anywhere else are refused")
    if p.require_signatures and not p.keys:
        at = where + ("require_signatures",) if "require_signatures" in p.model_fields_set else where
        yield error("image-policy-no-keys", at,
                    "signatures are required but no key is given to verify them",
                    "add `keys: {release: {public_key_file: keys/cosign.pub}}` (the public key the images are "
                    "signed with), or set require_signatures: false for an allow-list only")
    for name, key in p.keys.items():
        try:
            key_pem(key, ctx.base_dir)
        except (KeyError_, InputError) as exc:
            field = "public_key" if key.public_key is not None else "public_key_file"
            yield error("image-policy-key-invalid", where + ("keys", name, field),
                        exc.findings[0].message if isinstance(exc, InputError) else str(exc),
                        "give the PEM public key (`cosign generate-key-pair` writes cosign.pub; "
                        "`openssl pkey -pubout` turns a private key's file into one)")
