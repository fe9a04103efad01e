"""Public keys that verify signed images: read bounded, parsed by `cryptography`, written back in
canonical PEM (so nothing but the key itself reaches a rendered policy)."""

from __future__ import annotations

from pathlib import Path

from . import limits

MAX_KEY_BYTES = 64 * 1024


class KeyError_(ValueError):
    """The file is not a usable public key."""


def _canonical(key, what: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if not isinstance(key, (ec.EllipticCurvePublicKey, rsa.RSAPublicKey, ed25519.Ed25519PublicKey)):
        raise KeyError_(f"{what} holds a {type(key).__name__}, not an ECDSA, RSA or Ed25519 key")
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def public_key_pem(path: Path) -> str:
    """A PEM public key file, in canonical PEM."""
    from cryptography.hazmat.primitives import serialization

    data = limits.read_bytes(path, "definition")
    if len(data) > MAX_KEY_BYTES:
        raise KeyError_(f"{path.name} is {len(data)} bytes, far more than a public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyError_(f"{path.name} is not a PEM public key ({exc.__class__.__name__})") from None
    return _canonical(key, path.name)


def inline_key_pem(b64: str) -> str:
    """The base64 SubjectPublicKeyInfo (the body of a PEM public key), in canonical PEM."""
    import base64
    import binascii

    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_der_public_key(base64.b64decode(b64, validate=True))
    except (ValueError, TypeError, binascii.Error) as exc:
        raise KeyError_(f"the inline key is not a public key ({exc.__class__.__name__})") from None
    return _canonical(key, "the inline key")


def key_pem(key, base_dir: Path) -> str:
    """A SigningKey of the model (inline or a file beside the definition), in canonical PEM."""
    if key.public_key is not None:
        return inline_key_pem(key.public_key)
    return public_key_pem(base_dir / key.public_key_file)
