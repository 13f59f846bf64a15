# gpukit/setup.sh — sourced from a kit folder (build/gpu-kit/setup.sh): makes the kit's
# Debian packages and the machine's CUDA libraries usable by the carried binaries. Returns non-zero
# with one clear line on stderr when it cannot.
#
#   1. unpacks debs/*.deb with `dpkg -x` (or, without dpkg, an ar + tar fallback in python3) into a
#      private prefix, $KIT_PREFIX (default /tmp/meshsweep-kit-UID), never into /; a stamp of
#      debs/LIST skips the unpacking when the prefix is already current;
#   2. exports PATH (the kit's mpirun, orted), LD_LIBRARY_PATH (the machine's CUDA first, then the
#      kit's OpenBLAS — the folder its alternatives symlink would point at —, the kit's libraries (/usr/lib and /lib),
#      Open MPI's and PMIx's), OPAL_PREFIX and PMIX_INSTALL_PREFIX (so the relocated Open MPI finds its
#      plugins and help files under the prefix, not under /usr);
#   3. finds each CUDA library of cuda-sonames (cudart, cuBLAS, cuBLASLt, NCCL) trying in order
#      $CUDA_HOME/lib64, /usr/local/cuda/lib64, the nvidia-* wheel folders of the machine's python3
#      and `ldconfig -p`, and prints one line per library with the path taken.
# Not here: running anything (run.sh does).
KIT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KIT_PREFIX=${KIT_PREFIX:-/tmp/meshsweep-kit-$(id -u)}
export KIT_DIR KIT_PREFIX

kit_unpack_deb() { # DEB DEST
  if command -v dpkg >/dev/null 2>&1; then dpkg -x "$1" "$2"; return; fi
  command -v python3 >/dev/null 2>&1 || { echo "setup: neither dpkg nor python3 to unpack $1" >&2; return 1; }
  python3 - "$1" "$2" <<'PY'
import io, sys, tarfile
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"!<arch>\n", "not an ar archive"
pos = 8
while pos < len(data):
    name = data[pos:pos + 16].decode().strip().rstrip("/"); size = int(data[pos + 48:pos + 58].decode().strip())
    body = data[pos + 60:pos + 60 + size]; pos += 60 + size + (size & 1)
    if name.startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(body)).extractall(sys.argv[2])
PY
}

kit_setup() {
  local list=$KIT_DIR/debs/LIST stamp=$KIT_PREFIX/.meshsweep-kit-stamp
  [ -f "$list" ] || { echo "setup: $list missing (is $KIT_DIR a kit made by make gpu-kit?)" >&2; return 1; }
  if ! cmp -s "$list" "$stamp" 2>/dev/null; then
    rm -rf "$KIT_PREFIX"; mkdir -p "$KIT_PREFIX" || { echo "setup: cannot create $KIT_PREFIX" >&2; return 1; }
    local d
    for d in "$KIT_DIR"/debs/*.deb; do
      kit_unpack_deb "$d" "$KIT_PREFIX" || { echo "setup: cannot unpack $(basename "$d") into $KIT_PREFIX" >&2; return 1; }
    done
    cp "$list" "$stamp"
  fi
  local P=$KIT_PREFIX/usr ML=$KIT_PREFIX/usr/lib/x86_64-linux-gnu
  # what the alternatives system would have made: mpirun, and the OpenBLAS the binaries link by soname
  [ -e "$P/bin/mpirun" ] || ln -sf orterun "$P/bin/mpirun"
  [ -e "$P/bin/mpiexec" ] || ln -sf orterun "$P/bin/mpiexec"
  [ -x "$P/bin/orterun" ] || { echo "setup: the kit has no orterun (openmpi-bin) under $P/bin" >&2; return 1; }

  # ---- the machine's CUDA libraries
  local dirs=() pysite=() s
  [ -n "${CUDA_HOME:-}" ] && dirs+=("$CUDA_HOME/lib64")
  dirs+=(/usr/local/cuda/lib64)
  if command -v python3 >/dev/null 2>&1; then
    while read -r s; do pysite+=("$s"); done < <(python3 -c 'import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path: print(p)' 2>/dev/null | awk '!seen[$0]++')
    for s in "${pysite[@]}"; do
      for d in "$s"/nvidia/*/lib "$s"/nvidia/cu*/lib; do [ -d "$d" ] && dirs+=("$d"); done
    done
  fi
  local cuda_path="" so found d
  while read -r so; do
    [ -n "$so" ] || continue
    found=""
    for d in "${dirs[@]}"; do [ -e "$d/$so" ] && { found=$d/$so; break; }; done
    [ -n "$found" ] || found=$(ldconfig -p 2>/dev/null | awk -v so="$so" '$1 == so { print $NF; exit }')
    if [ -z "$found" ]; then
      echo "setup: $so not found in ${CUDA_HOME:+\$CUDA_HOME/lib64, }/usr/local/cuda/lib64, python3's nvidia-* wheels or ldconfig -p" >&2
      return 1
    fi
    echo "cuda library: $so -> $found"
    d=$(dirname "$found")
    case ":$cuda_path:" in *":$d:"*) ;; *) cuda_path=${cuda_path:+$cuda_path:}$d;; esac
  done < "$KIT_DIR/cuda-sonames"

  export PATH=$P/bin:$PATH
  export LD_LIBRARY_PATH=${cuda_path:+$cuda_path:}$ML/openblas-pthread:$ML:$KIT_PREFIX/lib/x86_64-linux-gnu:$ML/openmpi/lib:$ML/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$P
  export PMIX_INSTALL_PREFIX=$ML/pmix2
  # the Debian defaults file lives in /etc/openmpi, which the prefix does not relocate
  export OMPI_MCA_mca_base_param_files=$KIT_PREFIX/etc/openmpi/openmpi-mca-params.conf
  echo "kit prefix: $KIT_PREFIX (mpirun: $P/bin/mpirun)"
}
kit_setup
