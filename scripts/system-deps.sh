#!/usr/bin/env bash
# Installs the system programs the full test suite uses, on Debian/Ubuntu:
#   nsys  - Nsight Systems (Debian non-free package `nsight-systems`, 2022.4) for the
#           end-to-end `launchprof profile` tests on CPU-only workloads;
#   chromium - headless browser checks of the HTML reports.
# Idempotent; skips what is already installed. Needs root (or sudo) for apt.
set -euo pipefail
need=()
command -v nsys >/dev/null 2>&1 || need+=(nsight-systems)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [[ " ${need[*]} " == *" nsight-systems "* ]] && [ -r /etc/os-release ] && grep -q '^ID=debian' /etc/os-release; then
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  if ! grep -rqs "non-free" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: non-free contrib\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$codename" "$codename" | $SUDO tee /etc/apt/sources.list.d/launchprof-non-free.sources >/dev/null
  fi
fi
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
