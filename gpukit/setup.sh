# gpukit/setup.sh — sourced from a kit folder (build/gpu-kit/setup.sh): makes the kit's
# Debian packages and the machine's CUDA libraries usable by the carried binaries. Returns non-zero
# with one clear line on stderr when it cannot.
#
#   1. unpacks debs/*.deb with `dpkg -x` (or, without dpkg, an ar + tar fallback in python3) into a
#      private prefix, $KIT_PREFIX (default /tmp/meshsweep-kit-UID), never into /; a stamp of
#      debs/LIST skips the unpacking when the prefix is already current;
#   2. exports PATH (the kit's mpirun, orted), LD_LIBRARY_PATH (the machine's CUDA first, then the
#      kit's OpenBLAS — the folder its alternatives symlink would point at —, the kit's libraries (/usr/lib and /lib),
#      Open MPI's and PMIx's), OPAL_PREFIX, PMIX_INSTALL_PREFIX and PMIx's plugin folder (so the
#      relocated Open MPI finds its plugins and help files under the prefix, not under /usr), and
#      OMPI_MCA_plm_rsh_agent=false where there is no ssh/rsh (Open MPI 4.1.0 asks for one even on one node);
#   3. picks the binary set (sets/cu13, sets/cu12: kit_pick_set): the newest whose CUDA major the
#      driver supports (nvidia-smi's "CUDA Version"; unknown without nvidia-smi: any) and whose
#      libraries (sets/NAME.sonames: cuBLAS, cuBLASLt, NCCL, cudart when not static) are all found,
#      trying in order $CUDA_HOME/lib64, $LD_LIBRARY_PATH, /usr/local/cuda/lib64,
#      /usr/local/cuda-N*/lib64 (and lib), the nvidia-* wheel folders of the machine's python3 (as a
#      PyTorch image has them) and `ldconfig -p`; KIT_SET=NAME forces one. It prints "kit set: NAME
#      (why)" and one "cuda library: SONAME -> PATH" line per library, unpacks the set into
#      $KIT_DIR/tree/build (again only when the set changed), or says in one line what is missing.
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

# the folders that may hold the machine's CUDA libraries, in the order they are tried (one a line)
kit_cuda_dirs() {
  local d s major=$1
  [ -n "${CUDA_HOME:-}" ] && echo "$CUDA_HOME/lib64"
  local IFS=:; for d in ${LD_LIBRARY_PATH:-}; do [ -n "$d" ] && echo "$d"; done; unset IFS
  echo /usr/local/cuda/lib64
  for d in /usr/local/cuda-"$major"*/lib64 /usr/local/cuda-"$major"*/lib; do [ -d "$d" ] && echo "$d"; done
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path: print(p)' 2>/dev/null | awk '!seen[$0]++' |
    while read -r s; do
      for d in "$s"/nvidia/*/lib "$s"/nvidia/cu*/lib; do [ -d "$d" ] && echo "$d"; done
    done
  fi
  return 0
}

# kit_find_libs NAME: "SONAME PATH" for every library of set NAME, or "SONAME" alone for one not found
kit_find_libs() {
  local name=$1 so d found dirs=()
  while read -r d; do dirs+=("$d"); done < <(kit_cuda_dirs "${name#cu}")
  while read -r so; do
    [ -n "$so" ] || continue
    found=""
    for d in "${dirs[@]}"; do [ -e "$d/$so" ] && { found=$d/$so; break; }; done
    [ -n "$found" ] || found=$(ldconfig -p 2>/dev/null | awk -v so="$so" '$1 == so { print $NF; exit }')
    echo "$so $found"
  done < "$KIT_DIR/sets/$name.sonames"
}

kit_unpack_set() { # NAME: into $KIT_DIR/tree/build, unless it holds that set already
  local a=$KIT_DIR/sets/$1.tar.xz b=$KIT_DIR/tree/build stamp
  stamp="$1 $(cksum < "$a")"
  [ "$(cat "$b/.kit-set" 2>/dev/null)" = "$stamp" ] && return 0
  rm -rf "$b"; mkdir -p "$b" || { echo "setup: cannot create $b" >&2; return 1; }
  if ! { command -v xz >/dev/null 2>&1 && tar -xJf "$a" -C "$b"; }; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$a" "$b" 2>/dev/null \
      || { echo "setup: cannot unpack $a (needs xz or python3)" >&2; return 1; }
  fi
  echo "$stamp" > "$b/.kit-set"
}

# picks the set, exports KIT_CUDA_PATH (the folders of its libraries) and unpacks it
kit_pick_set() {
  local smi=${GPU_CHECK_NVIDIA_SMI:-nvidia-smi} drv="" dmaj="" names=() n why="" line so path miss picked="" reason
  drv=$("$smi" 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9.]*\).*/\1/p' | head -n 1)
  dmaj=${drv%%.*}
  for n in $(cd "$KIT_DIR/sets" 2>/dev/null && ls *.tar.xz | sed 's/\.tar\.xz$//' | sort -t u -k 2 -rn); do names+=("$n"); done
  [ ${#names[@]} -gt 0 ] || { echo "setup: $KIT_DIR/sets has no binary set (is it a kit made by make gpu-kit?)" >&2; return 1; }
  if [ -n "${KIT_SET:-}" ]; then
    [ -f "$KIT_DIR/sets/$KIT_SET.tar.xz" ] || { echo "setup: KIT_SET=$KIT_SET: the kit's sets are ${names[*]}" >&2; return 1; }
    names=("$KIT_SET")
  fi
  for n in "${names[@]}"; do
    if [ -n "$dmaj" ] && [ "$dmaj" -lt "${n#cu}" ]; then why="$why; $n: the driver supports CUDA $drv"; continue; fi
    miss=""; KIT_CUDA_LINES=""
    while read -r so path; do
      if [ -z "$path" ]; then miss="$miss $so"; continue; fi
      KIT_CUDA_LINES="${KIT_CUDA_LINES}cuda library: $so -> $path"$'\n'
    done < <(kit_find_libs "$n")
    if [ -n "$miss" ]; then why="$why; $n: not found:$miss"; continue; fi
    picked=$n; break
  done
  if [ -z "$picked" ]; then
    echo "setup: no binary set of the kit fits this machine (${why#; }); looked in ${CUDA_HOME:+\$CUDA_HOME/lib64, }\$LD_LIBRARY_PATH, /usr/local/cuda*/lib64, python3's nvidia-* wheels and ldconfig -p (pip install nvidia-cublas-cu12 nvidia-nccl-cu12, or the cu13 ones, brings them)" >&2
    return 1
  fi
  reason="driver CUDA ${drv:-unknown (no nvidia-smi)}"
  [ "$picked" = "${names[0]}" ] || reason="$reason; ${why#; }"
  [ -z "${KIT_SET:-}" ] || reason="KIT_SET; $reason"
  echo "kit set: $picked ($reason)"
  printf '%s' "$KIT_CUDA_LINES"
  KIT_CUDA_PATH=""
  while read -r line; do
    path=${line##* -> }; path=$(dirname "$path")
    case ":$KIT_CUDA_PATH:" in *":$path:"*) ;; *) KIT_CUDA_PATH=${KIT_CUDA_PATH:+$KIT_CUDA_PATH:}$path;; esac
  done <<< "${KIT_CUDA_LINES%$'\n'}"
  kit_unpack_set "$picked"
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

  kit_pick_set || return 1
  export PATH=$P/bin:$PATH
  export LD_LIBRARY_PATH=${KIT_CUDA_PATH:+$KIT_CUDA_PATH:}$ML/openblas-pthread:$ML:$KIT_PREFIX/lib/x86_64-linux-gnu:$ML/openmpi/lib:$ML/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$P
  export PMIX_INSTALL_PREFIX=$ML/pmix2
  # PMIx 4.0 (Debian 11) does not take its plugin folder from PMIX_INSTALL_PREFIX: say it outright
  export PMIX_MCA_mca_base_component_path=$ML/pmix2/lib/pmix
  # the Debian defaults file lives in /etc/openmpi, which the prefix does not relocate
  export OMPI_MCA_mca_base_param_files=$KIT_PREFIX/etc/openmpi/openmpi-mca-params.conf
  # Open MPI 4.1.0 (Debian 11) looks for ssh or rsh even to start a one-node job or a singleton's
  # daemon; bare images have neither, and nothing remote is started here
  if ! command -v ssh >/dev/null 2>&1 && ! command -v rsh >/dev/null 2>&1; then
    export OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent:-false}
  fi
  echo "kit prefix: $KIT_PREFIX (mpirun: $P/bin/mpirun)"
}
kit_setup
