#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium and its WebDriver for the browser test.
# Idempotent: does nothing when both binaries are already present.
set -euo pipefail

if [[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]]; then
  echo "chromium and chromedriver already installed"
  exit 0
fi

SUDO=""
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-browser: need root (or sudo) to apt-get install chromium chromium-driver" >&2
    exit 2
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver
/usr/bin/chromium --version
/usr/bin/chromedriver --version
