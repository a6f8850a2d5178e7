#!/usr/bin/env bash
# Installs Debian's Prometheus server for the canary rehearsal tests (sglab canary --target sim scrapes the
# simulators with a real Prometheus and reads it through its HTTP API). Idempotent: does nothing when the
# binary is already present. Only the binary is used: the package's own service is never started by sglab.
set -euo pipefail

if [[ -x /usr/bin/prometheus ]]; then
  echo "prometheus already installed: $(/usr/bin/prometheus --version 2>&1 | head -1)"
  exit 0
fi

SUDO=""
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-prometheus: need root (or sudo) to apt-get install prometheus" >&2
    exit 2
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# policy-rc.d 101: the package's postinst must not start (or enable) its own Prometheus service
POLICY=/usr/sbin/policy-rc.d
CREATED=""
if [[ ! -e $POLICY ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee $POLICY >/dev/null
  $SUDO chmod 755 $POLICY
  CREATED=1
fi
trap '[[ -n "$CREATED" ]] && $SUDO rm -f '"$POLICY" EXIT
$SUDO apt-get install -y -q --no-install-recommends prometheus
/usr/bin/prometheus --version 2>&1 | head -1
