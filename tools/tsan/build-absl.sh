#!/usr/bin/env bash
# Builds Debian's own Abseil (the exact source and patches of the installed
# libabsl20220623 package) with -fsanitize=thread into PREFIX, for `make tsan`.
#
# Why: Debian's libabsl is built without ThreadSanitizer, so absl::Mutex and
# absl::CondVar (which gRPC's own locks wrap too) synchronise through futexes
# TSan cannot see, and every Mutex-guarded access looks like a race. With the
# instrumented build first on LD_LIBRARY_PATH, our code and gRPC both lock
# through an Abseil TSan understands. Same soname, same inline namespace
# (debian3), same options: only the instrumentation differs.
#
# Usage: tools/tsan/build-absl.sh PREFIX   (idempotent: a stamp file records the build)
set -euo pipefail
prefix=${1:?usage: build-absl.sh PREFIX}
version=20220623.1
debrev=1+deb12u2
stamp="$prefix/.podium-absl-$version-$debrev"
[ -f "$stamp" ] && exit 0
installed=$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null || true)
if [ "$installed" != "$version-$debrev" ]; then
  echo "build-absl.sh: libabsl-dev is '$installed', this script builds $version-$debrev;" \
       "update version/debrev and the checksums below to the installed package" >&2
  exit 1
fi
pool=http://deb.debian.org/debian/pool/main/a/abseil
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
curl -fsSO "$pool/abseil_$version.orig.tar.gz"
curl -fsSO "$pool/abseil_$version-$debrev.debian.tar.xz"
sha256sum -c - <<SUMS
abfe2897f3a30edaa74bc34365afe3c2a3cd012091a97dc7e008f7016adcd5fe  abseil_$version.orig.tar.gz
e08490fc7b6f3beca1925953b0c4fb92df2de5e2a01295e4641e2a3d4e528eeb  abseil_$version-$debrev.debian.tar.xz
SUMS
tar xzf "abseil_$version.orig.tar.gz"
cd "abseil-$version"
tar xJf "../abseil_$version-$debrev.debian.tar.xz"
while read -r p; do
  [ -n "$p" ] && patch -p1 -s < "debian/patches/$p"
done < debian/patches/series
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_STANDARD=17 \
  -DBUILD_SHARED_LIBS=ON -DBUILD_TESTING=OFF "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_INSTALL_PREFIX="$prefix" > /dev/null
cmake --build build -j"$(nproc)"
cmake --install build > /dev/null
touch "$stamp"
