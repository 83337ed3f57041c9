#!/usr/bin/env bash
# Builds the library's jar (the Java functions under libs/jvm) into
# libs/sparkfield/resources/jvm/sparkfield-jvm.jar with javac (JDK 17+) against the jars of
# the venv's pyspark. The jar is kept in the repository, so installing the library needs no
# JDK; its manifest records the SHA-256 of the sources it was built from, which a test compares
# with the sources (run `make jar` after changing them).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
command -v javac >/dev/null 2>&1 || { echo "javac (JDK 17+) is needed to build the jar" >&2; exit 1; }
jars="$("$PY" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')"
sources=$(find libs/jvm -name '*.java' | LC_ALL=C sort)
digest=$("$PY" -c 'import sys; sys.path.insert(0, "libs")
from sparkfield.core.java_functions import source_digest; print(source_digest())')
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac --release 17 -Xlint:all,-path -Werror -cp "$jars/*" -d "$out/classes" $sources
printf 'Sparkfield-Source-SHA256: %s\n' "$digest" > "$out/manifest.txt"
mkdir -p libs/sparkfield/resources/jvm
jar --create --file "$out/sparkfield-jvm.jar" --manifest "$out/manifest.txt" -C "$out/classes" .
mv "$out/sparkfield-jvm.jar" libs/sparkfield/resources/jvm/sparkfield-jvm.jar
echo "built libs/sparkfield/resources/jvm/sparkfield-jvm.jar ($digest)"
