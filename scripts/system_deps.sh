#!/usr/bin/env bash
# Installs the Debian packages the test suite needs when they are missing (tests start
# their own servers on 127.0.0.1). Needs root or passwordless sudo on a fresh machine.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
[ "${#need[@]}" -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
echo "installing system packages: ${need[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
