#!/bin/sh
# Runs train.py with OpenBLAS. Debian's python3-torch is built against the
# generic BLAS interface and, with the reference libblas3, matrix products run at
# under 1 GFLOP/s; OpenBLAS makes training about 15 times faster. The OpenBLAS
# package is unpacked into a cache folder (no system change) and put first on
# LD_LIBRARY_PATH for this process only. Arguments go to train.py, or, after
# a first --script FILE, to that script (scripts/pysiglip/train_tiny.py).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
script=scripts/train_default/train.py
if [ "${1:-}" = "--script" ]; then
	script=$2
	shift 2
fi
cache=${CONDITION_BLAS_CACHE:-/tmp/condition-openblas}
lib=$cache/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ ! -e "$lib/libblas.so.3" ] && [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]; then
	lib=/usr/lib/x86_64-linux-gnu/openblas-pthread
fi
if [ ! -e "$lib/libblas.so.3" ]; then
	mkdir -p "$cache/deb"
	(cd "$cache/deb" && apt-get download libopenblas0-pthread)
	for f in "$cache"/deb/*.deb; do dpkg-deb -x "$f" "$cache"; done
fi
# BLAS threads: --threads N if given, else the settings file's (--settings FILE or settings.json).
settings=$root/scripts/train_default/settings.json
threads=
prev=
for a in "$@"; do
	case $prev in
	--settings) settings=$a ;;
	--threads) threads=$a ;;
	esac
	prev=$a
done
if [ -z "$threads" ]; then
	threads=$(/usr/bin/python3 "$root/scripts/train_default/trainsettings.py" "$settings" threads)
fi
# OpenBLAS picks its matrix kernels by CPU, and kernels differ in rounding. On
# a CPU with AVX-512 BF16 (AMD Zen 4 and 5, Intel Cooper Lake and Sapphire
# Rapids) the Cooper Lake kernels are pinned: the committed model was trained
# with them (chosen by OpenBLAS on an AMD EPYC Zen 5), and a Sapphire Rapids
# Xeon would otherwise get others. OPENBLAS_CORETYPE set by the caller wins.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then
	export OPENBLAS_CORETYPE=Cooperlake
fi
cd "$root"
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads \
	exec /usr/bin/python3 "$script" "$@"
