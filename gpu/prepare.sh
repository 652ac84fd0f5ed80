#!/bin/sh
# gpu/prepare.sh - run in a configured checkout on a machine with Debian's
# package registry: gathers into .gpu/ what gpu/setup.sh and gpu/check.sh
# need on a GPU machine that has no registry (see gpu/README.md).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ -f Makefile ] || { echo "gpu/prepare.sh: run ./configure first" >&2; exit 1; }
mkdir -p .gpu
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null ||
    echo '/.gpu/' >> .git/info/exclude
rm -f .gpu/*.deb .gpu/clgrad-*.tar.gz
apt-get update -qq >/dev/null 2>&1 || true
missing=
for p in ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers \
         opencl-clhpp-headers opencl-headers libclblast1 libclblast-dev \
         libclfft2 libclfft-dev check libsubunit0 libsubunit-dev \
         libpkgconf3 pkgconf pkgconf-bin libjson-c5 libjson-c-dev \
         libopenblas0 libopenblas0-pthread libopenblas-dev \
         libopenblas-pthread-dev libgfortran5; do
    (cd .gpu && apt-get download "$p" >/dev/null 2>&1) || missing="$missing $p"
done
[ -z "$missing" ] || { echo "gpu/prepare.sh: could not download:$missing" >&2; exit 1; }
make dist >/dev/null
mv -f clgrad-*.tar.gz .gpu/
du -sh .gpu
