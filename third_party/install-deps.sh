#!/usr/bin/env bash
# Installs what moebench needs to build and test from Debian/Ubuntu packages. Idempotent.
set -euo pipefail
pkgs=(cmake ninja-build g++ make git ca-certificates
      libopenmpi-dev openmpi-bin libopenblas-dev
      libcli11-dev nlohmann-json3-dev doctest-dev libvalijson-dev
      libssl-dev python3 python3-jsonschema python3-matplotlib)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps.sh: installing ${missing[*]} (a minute or two)" >&2
  log="$(mktemp)"
  # apt's and dpkg's progress to a log, shown only when the installation fails.
  if ! { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "install-deps.sh: apt-get failed (above); install the packages named above by hand" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
fi
