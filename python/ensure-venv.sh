#!/usr/bin/env bash
# The test interpreter of the python module when no -Dnpugather.python is given:
#   ensure-venv.sh VENV
# makes VENV with python3 -m venv and pip installs "PACKAGE[test]" (PACKAGE: this folder, its
# pinned test requirements in pyproject.toml) into it. A VENV made from the same pyproject.toml
# (a stamp of its hash) is kept as it is, so only the first build, or one after pyproject.toml
# changed, downloads anything.
set -euo pipefail
venv=${1:?usage: ensure-venv.sh VENV}
package=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stamp=$venv/npugather-requirements.sha256
want=$(sha256sum "$package/pyproject.toml" | cut -d' ' -f1)
if [[ -f $stamp && $(< "$stamp") == "$want" ]] && "$venv/bin/python" -c '' > /dev/null 2>&1; then
  exit 0
fi
rm -rf "$venv"
# Debian's python3 makes no venv without python3-venv (ensurepip): say so in one line.
if ! command -v python3 > /dev/null 2>&1 || ! python3 -c 'import ensurepip, venv' > /dev/null 2>&1; then
  echo "ensure-venv.sh: python3 -m venv is unavailable: install python3-venv (Debian), or pass" \
    "-Dnpugather.python=<an interpreter with pip install \"./python[test]\">" >&2
  exit 1
fi
echo "ensure-venv.sh: making $venv with pip install \"./python[test]\" (pyproject.toml changed or no venv yet)"
python3 -m venv "$venv"
"$venv/bin/pip" install --disable-pip-version-check --progress-bar off -q "$package[test]"
echo "$want" > "$stamp"
