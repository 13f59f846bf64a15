# tests/hosts.sh — simulated hosts on one machine for the suites (sourced after tests/lib.sh). A host
# is a holder process (a sleep) in its own network, UTS and mount namespaces: its own host name, its
# own /etc/hosts (the file given) and /dev/shm, and, when the suite asks, its own view of folders
# (bind mounts that exist in that host's mount namespace only). Two hosts are joined by a veth pair;
# nothing else is reachable from them. Everything is removed by hosts_cleanup: every process still
# inside a host's namespaces, then the holders (the namespaces, the veth pair and the mounts go with
# them). Used by t_multihost (ranks started over a remote-shell agent) and t_slurm (a slurmd per host).
# Not what runs on the hosts: the suites start that.
# shellcheck shell=bash disable=SC2034  # (sourced: the suites read what is set here)
HOSTS_HOLDERS=()
declare -A HOST_PID=()
HOSTS_ERR=

# hosts_need: 0 when this machine can make hosts (root, unshare, nsenter, ip), else 1 with HOSTS_ERR
hosts_need() {
  [ "$(id -u)" = 0 ] || { HOSTS_ERR="needs root for network namespaces"; return 1; }
  local p
  for p in unshare nsenter ip; do
    command -v $p >/dev/null || { HOSTS_ERR="$p not found (make deps installs util-linux, iproute2)"; return 1; }
  done
}

# hosts_start NAME HOSTS-FILE DIR [MOUNTS]: host NAME with HOSTS-FILE as its /etc/hosts; DIR keeps its
# log; MOUNTS is shell run in the new namespaces before the holder sleeps ("&& mount --bind A B ...").
# 0, or 1 with HOSTS_ERR when the kernel refuses namespaces.
hosts_start() {
  local name=$1 hostsfile=$2 dir=$3 extra=${4:-}
  unshare --net --uts --mount --propagation private --fork sh -c \
    "hostname $name && mount --bind '$hostsfile' /etc/hosts && mount -t tmpfs -o size=256m tmpfs /dev/shm $extra && echo up > '$dir/up.$name' && exec sleep 100000" \
    </dev/null >"$dir/holder.$name.log" 2>&1 &
  local u=$!; disown $u
  for _ in $(seq 100); do [ -f "$dir/up.$name" ] && break; kill -0 $u 2>/dev/null || break; sleep 0.1; done
  [ -f "$dir/up.$name" ] || { HOSTS_ERR="namespaces refused: $(head -c 200 "$dir/holder.$name.log")"; return 1; }
  local p; p=$(pgrep -P $u)
  HOSTS_HOLDERS+=("$p" "$u")
  HOST_PID[$name]=$p
}

# hosts_link A ADDR-A B ADDR-B IFNAME: a veth pair IFNAME0 (in A) - IFNAME1 (in B), addresses ADDR/24,
# loopback up on both. 0, or 1 with HOSTS_ERR.
hosts_link() {
  local pa=${HOST_PID[$1]} pb=${HOST_PID[$3]} err
  if ! err=$(ip link add "${5}0" netns "$pa" type veth peer name "${5}1" netns "$pb" 2>&1); then
    HOSTS_ERR="veth pair refused: $(head -c 200 <<<"$err")"; return 1
  fi
  nsenter -t "$pa" -n sh -c "ip addr add $2/24 dev ${5}0 && ip link set ${5}0 up && ip link set lo up" &&
  nsenter -t "$pb" -n sh -c "ip addr add $4/24 dev ${5}1 && ip link set ${5}1 up && ip link set lo up" ||
    { HOSTS_ERR="could not configure the veth pair"; return 1; }
}

# hosts_exec NAME CMD...: CMD inside host NAME's namespaces (network, host name, mounts), in the current folder
hosts_exec() { local p=${HOST_PID[$1]}; shift; nsenter -t "$p" -n -u -m --wd="$PWD" "$@"; }

# hosts_cleanup: every process inside the hosts' namespaces, then the holders
hosts_cleanup() {
  local p d pid ns
  for p in "${HOSTS_HOLDERS[@]}"; do
    ns=$(readlink "/proc/$p/ns/net" 2>/dev/null) || continue
    for d in /proc/[0-9]*; do
      pid=${d#/proc/}
      [ "$pid" != "$p" ] && [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$ns" ] && kill -9 "$pid" 2>/dev/null
    done
    kill -9 "$p" 2>/dev/null
  done
  HOSTS_HOLDERS=()
  wait 2>/dev/null
}
