#!/usr/bin/env bash
# Builds the miniature chain's build image, localhost/rocm-pants/mini-box:bookworm, from
# Debian packages (no registry is needed: debootstrap, then `<engine> import`).
#
# The image is pinned by this recipe: it carries the recipe's sha256 as a label and is
# rebuilt only when the recipe changes. Builds never use the tag: they key on the image's
# id (its config digest), read on each run, so a rebuilt image rebuilds the chain.
# Usage: build_image.sh [ENGINE]   (podman, the default, or docker)
set -euo pipefail
engine="${1:-podman}"
image=localhost/rocm-pants/mini-box:bookworm
# What the miniature chain's builds run: bash, Python 3.11 (Debian 12's) with venv, the LLVM
# toolchain (clang-19 with the AMDGPU target, lld), a host C compiler and Python headers for
# extension modules, the system cmake and ninja (builds driven as PyTorch's are), ccache.
packages=bash,coreutils,python3,python3-venv,python3-dev,gcc,libc6-dev,clang-19,lld-19,llvm-19,cmake,ninja-build,ccache
recipe="$(sha256sum "$0" | cut -d' ' -f1)"

have="$("$engine" image inspect --format '{{index .Labels "org.rocm-pants.recipe"}}' "$image" 2>/dev/null || true)"
if [[ "$have" == "$recipe" ]]; then
  exit 0
fi
echo "Building the container image $image (debootstrap of Debian 12 + $packages; a few minutes, once)" >&2
work="$(mktemp -d /var/tmp/mini-box.XXXXXX)"
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include="$packages" bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
  { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
# Downloaded packages and package lists are not part of what builds need.
rm -rf "$work/rootfs"/var/cache/apt/archives/*.deb "$work/rootfs"/var/lib/apt/lists/* "$work/rootfs"/var/log/*
tar -C "$work/rootfs" --numeric-owner -c . | "$engine" import \
  --change "LABEL org.rocm-pants.recipe=$recipe" \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  - "$image" >/dev/null
echo "Built $image: $("$engine" image inspect --format '{{.Id}}' "$image")" >&2
