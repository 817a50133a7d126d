"""``python -m npugather jars``: the connector's jars, comma-separated (for ``--jars``).
``python -m npugather zip FILE``: this package as a zip (for ``--py-files``)."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

USAGE = (
    "usage: python -m npugather jars        print the connector's jars, comma-separated\n"
    "       python -m npugather zip FILE    write this package as a zip for --py-files"
)


def main(argv: list[str]) -> int:
    if argv == ["jars"]:
        from npugather._jars import jars

        print(",".join(jars()))
        return 0
    if len(argv) == 2 and argv[0] == "zip":
        package = Path(__file__).resolve().parent
        with zipfile.ZipFile(argv[1], "w", zipfile.ZIP_DEFLATED) as archive:
            for source in sorted([*package.rglob("*.py"), package / "options.json"]):
                archive.write(source, Path("npugather") / source.relative_to(package))
        print(argv[1])
        return 0
    print(USAGE, file=sys.stderr)
    return 0 if argv in (["-h"], ["--help"]) else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
