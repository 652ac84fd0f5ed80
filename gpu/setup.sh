# gpu/setup.sh - sourced on the GPU machine from the checkout root
# (`. gpu/setup.sh`): unpacks .gpu/*.deb under /opt/clgrad-deps (never into
# the system's directories), registers the NVIDIA driver's OpenCL library
# with the ICD loader through OCL_ICD_VENDORS, and points the compiler,
# linker, loader and pkg-config at the unpacked packages.
# CG_GPU_ICD_LIB names another OpenCL library (a dry run on PoCL).
D=${CG_GPU_DEPS:-/opt/clgrad-deps}
mkdir -p "$D"
for f in .gpu/*.deb; do dpkg -x "$f" "$D"; done
lib=${CG_GPU_ICD_LIB:-}
[ -n "$lib" ] || lib=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 \
    /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
    /usr/lib64/libnvidia-opencl.so.1 2>/dev/null | head -n1)
[ -n "$lib" ] || lib=$(find / -xdev -name 'libnvidia-opencl.so.1' 2>/dev/null | head -n1)
mkdir -p "$D/vendors"
rm -f "$D"/vendors/*.icd
if [ -n "$lib" ]; then echo "$lib" > "$D/vendors/gpu.icd"
else echo "gpu/setup.sh: libnvidia-opencl.so.1 not found" >&2; fi
export OCL_ICD_VENDORS=$D/vendors
M=$D/usr/lib/x86_64-linux-gnu
# OpenBLAS lives in openblas-pthread/: its plain names are alternatives
# that only the package's postinst makes.
export CPATH=$D/usr/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$M:$M/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$M:$M/openblas-pthread${lib:+:$(dirname "$lib")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$D/usr/bin:$PATH
# Only the unpacked .pc files, each with the unpacked tree as its root.
export PKG_CONFIG=$D/usr/bin/pkgconf
export PKG_CONFIG_LIBDIR=$M/pkgconfig:$M/openblas-pthread/pkgconfig:$D/usr/share/pkgconfig
unset PKG_CONFIG_PATH
export PKG_CONFIG_SYSROOT_DIR=$D
echo "gpu/setup.sh: OpenCL library ${lib:-none}, packages under $D"
