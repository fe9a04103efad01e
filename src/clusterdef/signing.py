"""Public keys that verify signed images: read bounded, parsed by `cryptography`, written back in
canonical PEM (so nothing but the key itself reaches a rendered policy)."""

from __future__ import annotations

from pathlib import Path

from . import limits

MAX_KEY_BYTES = 64 * 1024


class KeyError_(ValueError):
    """The file is not a usable public key."""


def public_key_pem(path: Path) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    data = limits.read_bytes(path, "definition")
    if len(data) > MAX_KEY_BYTES:
        raise KeyError_(f"{path.name} is {len(data)} bytes, far more than a public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyError_(f"{path.name} is not a PEM public key ({exc.__class__.__name__})") from None
    if not isinstance(key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey, ed25519.Ed25519PublicKey)):
        raise KeyError_(f"{path.name} holds a {type(key).__name__}, not an ECDSA, RSA or Ed25519 key")
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
