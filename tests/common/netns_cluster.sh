#!/bin/bash
# SPDX-License-Identifier: MIT
# A test cluster of "nodes" that are really separate hosts as far as the network goes: each node is
# a network namespace with its own address on a private bridge (one bridge per rack, the racks
# joined by one link that `rate` can limit), and every process started in it with `exec` also gets
# the node's hostname (a UTS namespace) and an /etc/hosts that names every node. The file system
# stays shared, as NFS is on a cluster. No route leaves the machine: the nodes have only the
# private subnet; this host (the "workstation": the dashboard or CLI) has an address on rack 1.
# Root only. tests/common/netns_cluster.h drives it; by hand:
#   netns_cluster.sh up DIR TAG NODES OWNER_PID [RACKS]   -> prints the subnet, e.g. 10.77.3
#   netns_cluster.sh exec TAG NODE COMMAND...               (NODE from 1)
#   netns_cluster.sh link TAG NODE up|down
#   netns_cluster.sh rate TAG RATE|off [BURST]              (tbf on the link between the racks)
#   netns_cluster.sh down TAG
#   netns_cluster.sh sweep                                  (removes clusters whose owner is gone)
# Names: namespaces cppl-TAG-nodeN, links cpplTAG{b1,b2,u1,u2,nN}; TAG is short (interface names
# have 15 characters), e.g. the owner's pid and a letter. State: /run/clusterppl-netns/TAG.
set -euo pipefail

STATE=/run/clusterppl-netns
LOCK=/run/clusterppl-netns.lock

die() { echo "netns_cluster.sh: $*" >&2; exit 1; }
state_of() { [ -f "$STATE/$1" ] || die "no cluster $1 (no $STATE/$1)"; cat "$STATE/$1"; }
field() { sed -n "s/^$2=//p" <<<"$1"; }

# Process start time (clock ticks since boot): a pid reused by another process is not the owner.
start_time() { awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$1/stat" 2>/dev/null || true; }

free_subnet() {
    local used x
    used=$(ip -4 -o addr show | awk '{ print $4 }')
    for x in $(seq 0 254); do
        grep -q "^10\.77\.$x\." <<<"$used" || { echo "10.77.$x"; return; }
    done
    die "no free 10.77.X.0/24 subnet"
}

cmd_up() {
    local dir=$1 tag=$2 nodes=$3 owner=$4 racks=${5:-2}
    [ "$nodes" -ge 1 ] && [ "$nodes" -le 9 ] || die "1 to 9 nodes"
    [ "$racks" -ge 1 ] && [ "$racks" -le 2 ] || die "1 or 2 racks"
    [ ${#tag} -le 8 ] || die "tag \"$tag\" is longer than 8 characters"
    mkdir -p "$STATE"
    exec 9>"$LOCK"
    flock 9
    [ ! -e "$STATE/$tag" ] || die "cluster $tag exists"
    local net
    net=$(free_subnet)
    # The state first: a run killed half-way through `up` is swept like any other.
    printf 'owner=%s\nstart=%s\ndir=%s\nnodes=%s\nracks=%s\nnet=%s\n' "$owner" "$(start_time "$owner")" "$dir" "$nodes" "$racks" "$net" >"$STATE/$tag"
    {
        echo "127.0.0.1 localhost"
        echo "::1 localhost ip6-localhost ip6-loopback"
        echo "$net.254 head"
        for i in $(seq 1 "$nodes"); do echo "$net.$i node$i"; done
    } >"$dir/netns-hosts"
    local r
    for r in $(seq 1 "$racks"); do
        ip link add "cppl${tag}b$r" type bridge
        ip link set "cppl${tag}b$r" up
    done
    ip addr add "$net.254/24" dev "cppl${tag}b1"
    if [ "$racks" -eq 2 ]; then # the racks' uplink: one link between the two bridges
        ip link add "cppl${tag}u1" type veth peer name "cppl${tag}u2"
        ip link set "cppl${tag}u1" master "cppl${tag}b1" up
        ip link set "cppl${tag}u2" master "cppl${tag}b2" up
    fi
    local i ns rack
    for i in $(seq 1 "$nodes"); do
        ns="cppl-$tag-node$i"
        rack=$(( racks == 2 && i > (nodes + 1) / 2 ? 2 : 1 ))
        ip netns add "$ns"
        ip link add "cppl${tag}n$i" type veth peer name eth0 netns "$ns"
        ip link set "cppl${tag}n$i" master "cppl${tag}b$rack" up
        ip -n "$ns" addr add "$net.$i/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
    done
    echo "$net"
}

cmd_down() {
    local tag=$1 s nodes i ns pid
    s=$(cat "$STATE/$tag" 2>/dev/null || true)
    nodes=$(field "$s" nodes)
    for ns in $(ip netns list | awk '{ print $1 }' | grep "^cppl-$tag-node" || true); do
        for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    for i in $(ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | grep "^cppl${tag}[bnu][0-9]" || true); do
        ip link del "$i" 2>/dev/null || true
    done
    rm -f "$STATE/$tag"
    : "${nodes:=}"
}

cmd_sweep() {
    mkdir -p "$STATE"
    exec 9>"$LOCK"
    flock 9
    local f tag s owner start tags
    tags=""
    for f in "$STATE"/*; do
        [ -f "$f" ] || continue
        tag=$(basename "$f")
        s=$(cat "$f")
        owner=$(field "$s" owner)
        start=$(field "$s" start)
        if [ ! -d "/proc/$owner" ] || [ "$(start_time "$owner")" != "$start" ]; then tags="$tags $tag"; fi
    done
    # Namespaces or links without a state file (a run killed before it wrote one): owner unknown, gone.
    for ns in $(ip netns list | awk '{ print $1 }' | sed -n 's/^cppl-\([^-]*\)-node[0-9]*$/\1/p' | sort -u); do
        [ -f "$STATE/$ns" ] || tags="$tags $ns"
    done
    for tag in $tags; do
        echo "netns_cluster.sh: removing cluster $tag left by a run that is gone" >&2
        cmd_down "$tag"
    done
}

cmd_exec() {
    local tag=$1 node=$2
    shift 2
    local s
    s=$(state_of "$tag")
    # The node's network; a mount namespace of its own (private: the bind mount of the cluster's
    # hosts file stays in it) and a UTS one (its hostname). Not `ip netns exec`: it mounts a new
    # /sys without /sys/fs/cgroup, and slurmd refuses to start without its cgroup plugin.
    exec nsenter --net="/run/netns/cppl-$tag-node$node" unshare --mount --propagation private --uts -- \
        sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"' node-init "node$node" "$(field "$s" dir)/netns-hosts" "$@"
}

cmd_link() {
    ip link set "cppl$1n$2" "$3"
}

cmd_rate() {
    local tag=$1 rate=$2 burst=${3:-16kb} end
    for end in u1 u2; do
        tc qdisc del dev "cppl$tag$end" root 2>/dev/null || true
        # tbf (netem and fq are not in every kernel): a bucket of BURST (at least one 1514-byte
        # frame), packets queued up to 200 ms.
        [ "$rate" = off ] || tc qdisc add dev "cppl$tag$end" root tbf rate "$rate" burst "$burst" latency 200ms
    done
}

[ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces)"
case "${1:-}" in
up) shift; cmd_up "$@" ;;
down) shift; exec 9>"$LOCK"; flock 9; cmd_down "$1" ;;
sweep) cmd_sweep ;;
exec) shift; cmd_exec "$@" ;;
link) shift; cmd_link "$@" ;;
rate) shift; cmd_rate "$@" ;;
*) die "usage: up DIR TAG NODES OWNER_PID [RACKS] | exec TAG NODE CMD... | link TAG NODE up|down | rate TAG RATE|off [BURST] | down TAG | sweep" ;;
esac
