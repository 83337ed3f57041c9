#!/usr/bin/env bash
# Pack the third-party Python packages of Sparkfield's jobs into one relocatable archive for
# the executors (venv-pack), to be shipped with `./submit.sh JOB --python-env ARCHIVE` or
# `submit.python_env` in a conf profile.
#
#   scripts/pack_env.sh [--extras geo,process,text] [--output build/sparkfield-env.tar.gz]
#                       [--compress-level 4]
#
# The archive holds the dependencies of the chosen extras (pyproject.toml), not pyspark (the
# cluster's Spark provides it) and not Sparkfield itself (submit.sh ships the library with
# --py-files, so code and environment are versioned apart). Its python links to the interpreter
# it was built with: every node needs the same Python (here python3.11) at the same path, or
# build the archive on an image matching the nodes'.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EXTRAS="geo,process,text"
OUTPUT="$ROOT/build/sparkfield-env.tar.gz"
LEVEL=4
BASE_PY="${PYTHON:-python3.11}"
while [ $# -gt 0 ]; do
  case "$1" in
    --extras) EXTRAS="$2"; shift 2 ;;
    --output) OUTPUT="$2"; shift 2 ;;
    --compress-level) LEVEL="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "error: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v "$BASE_PY" >/dev/null || { echo "error: $BASE_PY not found (set PYTHON=...)" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sparkfield-env.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
"$BASE_PY" - "$ROOT/pyproject.toml" "$EXTRAS" > "$WORK/requirements.txt" <<'PYEOF'
import re, sys, tomllib

project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = [e for e in sys.argv[2].split(",") if e]
optional = project.get("optional-dependencies", {})
unknown = [e for e in extras if e not in optional]
if unknown:
    sys.exit(f"error: unknown extras {unknown}; known: {sorted(optional)}")
reqs = list(project["dependencies"])
for e in extras:
    reqs += optional[e]
name = lambda r: re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower()
seen = set()
for r in reqs:
    if name(r) in ("pyspark", project["name"]) or r in seen:
        continue
    seen.add(r)
    print(r)
PYEOF

"$BASE_PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --upgrade pip
"$WORK/venv/bin/python" -m pip install -q -r "$WORK/requirements.txt"
# venv-pack itself stays outside the packed environment
"$WORK/venv/bin/python" -m pip install -q --target "$WORK/packer" "venv-pack==0.2.0"
mkdir -p "$(dirname "$OUTPUT")"
rm -f "$OUTPUT.tmp"
PYTHONPATH="$WORK/packer" "$BASE_PY" -m venv_pack -p "$WORK/venv" -o "$OUTPUT.tmp" \
  --format tar.gz --compress-level "$LEVEL" -q
mv -f "$OUTPUT.tmp" "$OUTPUT"
echo "packed $(wc -l < "$WORK/requirements.txt") requirements ($EXTRAS) into $OUTPUT" \
  "($(du -h "$OUTPUT" | cut -f1))"
