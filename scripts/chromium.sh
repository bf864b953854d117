#!/usr/bin/env bash
# Makes sure Debian's Chromium is installed for the browser tests (idempotent).
# Usage: scripts/chromium.sh   → prints the executable path
set -euo pipefail
BIN="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$BIN" ]; then
  echo "[chromium] installing chromium (Debian) for the browser tests" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "[chromium] not root: install it with 'sudo apt-get install chromium' or set CHROMIUM_PATH" >&2
    exit 1
  fi
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
fi
echo "$BIN"
