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
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
