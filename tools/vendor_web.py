"""Refresh the console's vendored front-end files (``make vendor-web``; a maintainer's
step, never run by the server, the tests or CI).

Fetches each package pinned in ``tools/web_assets.py`` with ``npm pack`` (the
npm registry, no CDN), copies the listed files into ``static/vendor/``, applies each
asset's text rewrites and rewrites ``static/vendor/VENDORED.md`` with the new hashes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tools.web_assets import ASSETS, MANIFEST, VENDOR, manifest_text


def rewrite(path: Path, rewrites: tuple[tuple[str, str], ...]) -> None:
    """Apply ``rewrites`` to the text file at ``path`` (a rewrite that finds nothing is an
    error: the package changed under it)."""
    if not rewrites:
        return
    text = path.read_text(encoding="utf-8")
    for old, new in rewrites:
        if old not in text:
            raise ValueError(f"{path.name}: {old!r} not found")
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


def update() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for package in sorted({a.package for a in ASSETS}):
            out = subprocess.run(
                ["npm", "pack", "--silent", package],
                cwd=work,
                check=True,
                capture_output=True,
                text=True,
            )
            tarball = work / out.stdout.strip().splitlines()[-1]
            folder = work / package.replace("/", "_")
            with tarfile.open(tarball) as tar:
                tar.extractall(folder, filter="data")
            for a in (a for a in ASSETS if a.package == package):
                target = VENDOR / a.target
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / "package" / a.source, target)
                rewrite(target, a.rewrites)
    MANIFEST.write_text(manifest_text(), encoding="utf-8")


if __name__ == "__main__":
    update()
    sys.stdout.write(MANIFEST.read_text(encoding="utf-8"))
