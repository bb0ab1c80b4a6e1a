#!/usr/bin/env bash
# Fetches cudnn-frontend's header-only C++ API (for the cuda backend's cuDNN flash attention)
# into PREFIX/include: NVIDIA ships it in the nvidia-cudnn-frontend wheel on PyPI, whose include/
# folder is the headers (about 3 MB unpacked); nothing of the wheel is installed or run.
#   third_party/fetch-cudnn-frontend.sh PREFIX
# Exit 0 when PREFIX/include/cudnn_frontend.h exists afterwards. Idempotent.
set -euo pipefail
prefix="${1:?usage: fetch-cudnn-frontend.sh PREFIX}"
version="${CUDNN_FRONTEND_VERSION:-1.32.0}"
if [ -f "$prefix/include/cudnn_frontend.h" ]; then exit 0; fi
python="$(command -v python3 || command -v python)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Any one build of the wheel: the headers are the same in every one.
"$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" \
  --python-version 3.11 --platform manylinux_2_28_x86_64 "nvidia-cudnn-frontend==$version"
wheel="$(ls "$tmp"/nvidia_cudnn_frontend-*.whl)"
mkdir -p "$prefix"
"$python" - "$wheel" "$prefix" <<'PY'
import sys, zipfile
wheel, prefix = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith("include/")]
    if not any(n == "include/cudnn_frontend.h" for n in names):
        sys.exit("fetch-cudnn-frontend.sh: %s has no include/cudnn_frontend.h" % wheel)
    z.extractall(prefix, names)
PY
test -f "$prefix/include/cudnn_frontend.h"
echo "cudnn-frontend $version headers in $prefix/include"
