#!/usr/bin/env bash
# The interpreter of one Python version (e.g. 3.13) on this machine: python3.13 on the PATH,
# else a pyenv or system install. Exits 1 naming what to install when there is none.
set -euo pipefail
version="$1"
for candidate in "python${version}" "$HOME"/.pyenv/versions/"${version}".*/bin/python"${version}" \
    /usr/bin/python"${version}" /usr/local/bin/python"${version}"; do
  if command -v "$candidate" >/dev/null 2>&1 && \
      "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '${version}'.split('.'))))" \
      2>/dev/null; then
    command -v "$candidate"
    exit 0
  fi
done
echo "no Python ${version} found (install it, e.g. apt-get install python${version}-venv, or pyenv install ${version})" >&2
exit 1
