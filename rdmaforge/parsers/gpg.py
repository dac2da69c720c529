"""Parse `gpg --with-colons` listings."""

from __future__ import annotations


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
