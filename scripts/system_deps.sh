#!/usr/bin/env bash
# Installs the Debian packages the test suite needs when they are missing (tests start their
# own servers on 127.0.0.1): Java 17, Graphviz (process maps), PostgreSQL and its JDBC driver
# (extraction over JDBC), Chromium (headless visual checks). Needs root or passwordless sudo.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ "${#need[@]}" -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
