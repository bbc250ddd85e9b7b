#!/usr/bin/env bash
# Make sure Debian's chromium is at /usr/bin/chromium for the browser tests
# (tests/browser drive it with Playwright; Playwright never downloads a browser).
# Installs the `chromium` package with apt-get only when it is missing.
set -euo pipefail

[ -x /usr/bin/chromium ] && exit 0

echo "Installing Debian's chromium package for the browser tests (apt-get)..." >&2
# apt-get needs root: use sudo when this is not run as root (a CI user, a laptop);
# env passes the non-interactive front end through sudo, which drops the environment.
apt=(env DEBIAN_FRONTEND=noninteractive apt-get -qq)
[ "$(id -u)" -eq 0 ] || apt=(sudo "${apt[@]}")
"${apt[@]}" update >/dev/null
# The same install as the machines the tests were written on (with the recommends,
# among them fonts-liberation: the screenshots show the usual fonts).
"${apt[@]}" install -y chromium >/dev/null
