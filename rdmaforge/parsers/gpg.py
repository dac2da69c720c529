"""Parse `gpg --with-colons` listings; armor a binary keyring."""

from __future__ import annotations

import base64


def fingerprints(colon_listing: str) -> list[str]:
    """Fingerprints of the primary keys in a `gpg --with-colons` listing (the `fpr` line after each `pub`)."""
    result: list[str] = []
    expect_primary = False
    for line in colon_listing.splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            expect_primary = True
        elif fields[0] == "fpr" and expect_primary and len(fields) > 9:
            result.append(fields[9].upper())
            expect_primary = False
        elif fields[0] == "sub":
            expect_primary = False
    return result


#: RFC 4880 6.1: the CRC-24 that ends an armored block.
_CRC24_INIT, _CRC24_POLY = 0xB704CE, 0x1864CFB


def _crc24(data: bytes) -> int:
    crc = _CRC24_INIT
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= _CRC24_POLY
    return crc & 0xFFFFFF


def armor(keyring_b64: str) -> str:
    """A binary OpenPGP keyring (base64, as slurp reads it) as an armored public key block (RFC 4880 6.2), the form
    rpm and dnf read: what `gpg --armor --export` writes for the same packets, lines of 64, the CRC-24 last."""
    data = base64.b64decode(keyring_b64)
    body = base64.b64encode(data).decode("ascii")
    lines = [body[at : at + 64] for at in range(0, len(body), 64)]
    crc = base64.b64encode(_crc24(data).to_bytes(3, "big")).decode("ascii")
    return (
        "\n".join(["-----BEGIN PGP PUBLIC KEY BLOCK-----", "", *lines, f"={crc}", "-----END PGP PUBLIC KEY BLOCK-----"])
        + "\n"
    )
