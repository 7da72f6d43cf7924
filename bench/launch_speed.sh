#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Starts a throw-away sshd on 127.0.0.1 (own config, host key and authorized_keys in a temporary
# directory, as tests/gui/tst_launch.cpp does) and measures bench_launch: 32 ranks through it.
#   bench/launch_speed.sh [BUILD_DIR] [RANKS] [HOSTS...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build/default}"
RANKS="${2:-32}"
shift 2 2>/dev/null || true
HOSTS=("${@:-1 4 8}")
T=$(mktemp -d)
trap 'kill "$(cat "$T/sshd.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$T"' EXIT
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N "" -f "$T/host_key"
ssh-keygen -q -t ed25519 -N "" -f "$T/client_key"
cp "$T/client_key.pub" "$T/authorized_keys"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$T/sshd_config" <<CFG
Port $PORT
ListenAddress 127.0.0.1
HostKey $T/host_key
AuthorizedKeysFile $T/authorized_keys
PidFile $T/sshd.pid
UsePAM no
StrictModes no
PasswordAuthentication no
PermitRootLogin prohibit-password
MaxSessions 128
MaxStartups 128
LogLevel ERROR
CFG
/usr/sbin/sshd -f "$T/sshd_config"
for _ in $(seq 50); do [[ -s "$T/sshd.pid" ]] && break; sleep 0.1; done
printf 'Host node1 node2 node3 node4 node5 node6 node7 node8\n  HostName 127.0.0.1\n  Port %s\n  User %s\n  IdentityFile %s\n' \
  "$PORT" "$(id -un)" "$T/client_key" > "$T/ssh_config"
echo "launch speed: $(nproc) cores, sshd $(/usr/sbin/sshd -V 2>&1 | head -1)"
for h in ${HOSTS[@]}; do
  "$BUILD/bench/bench_launch" --ssh-config "$T/ssh_config" --known-hosts "$T/known_hosts" --ranks "$RANKS" --hosts "$h"
done
