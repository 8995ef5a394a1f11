#!/usr/bin/env bash
# Test hosts (issue 26): a small internetwork of Linux network namespaces, so that the
# live system runs across "machines" with addresses and links of their own, not on one
# loopback interface. Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2.
#
#   bash scripts/netns.sh up [PREFIX]     # build it (PREFIX defaults to "atl")
#   bash scripts/netns.sh down [PREFIX]   # take it all away
#   bash scripts/netns.sh check           # exit 0 when namespaces can be made here
#
# The network, in the shape of topologies/line3.toml:
#
#   management LAN 10.89.0.0/24, a bridge in PREFIX-lan, one veth from each machine:
#     PREFIX-ctl .1 (name service, connection manager, call generator)
#     PREFIX-s1 .11   PREFIX-s2 .12   PREFIX-s3 .13 (one switch server each)
#     PREFIX-a .21    PREFIX-b .22 (the hosts)
#   fibres, one veth pair each (a /30 per link; the lower address on the left end):
#     a   -- s1:0   10.89.1.1  / 10.89.1.2
#     s1:1 -- s2:0  10.89.2.1  / 10.89.2.2
#     s2:1 -- s3:0  10.89.3.1  / 10.89.3.2
#     s3:1 -- b     10.89.4.1  / 10.89.4.2
#
# Control traffic crosses the LAN; cells cross only the fibres. Nothing is routed out of
# these namespaces: they have no default route and no link to the host's own network.
set -euo pipefail

cmd="${1:-}"
p="${2:-atl}"
machines=(ctl s1 s2 s3 a b)

ns() { echo "$p-$1"; }

down() {
  for m in "${machines[@]}" lan; do
    ip netns del "$(ns "$m")" 2>/dev/null || true
  done
}

up() {
  down
  ip netns add "$(ns lan)"
  ip -n "$(ns lan)" link set lo up
  ip -n "$(ns lan)" link add br0 type bridge
  ip -n "$(ns lan)" link set br0 up
  local i=0
  declare -A mgmt=([ctl]=1 [s1]=11 [s2]=12 [s3]=13 [a]=21 [b]=22)
  for m in "${machines[@]}"; do
    ip netns add "$(ns "$m")"
    ip -n "$(ns "$m")" link set lo up
    # The machine's end is m0; the bridge's end is l-MACHINE.
    ip link add "$p-m$i" type veth peer name "$p-l$i"
    ip link set "$p-m$i" netns "$(ns "$m")"
    ip link set "$p-l$i" netns "$(ns lan)"
    ip -n "$(ns "$m")" link set "$p-m$i" name m0
    ip -n "$(ns "$m")" addr add "10.89.0.${mgmt[$m]}/24" dev m0
    ip -n "$(ns "$m")" link set m0 up
    ip -n "$(ns lan)" link set "$p-l$i" master br0
    ip -n "$(ns lan)" link set "$p-l$i" up
    i=$((i + 1))
  done
  # The fibres: LEFT RIGHT SUBNET.
  local n=0
  for link in "a s1 1" "s1 s2 2" "s2 s3 3" "s3 b 4"; do
    read -r l r net <<<"$link"
    ip link add "$p-f${n}l" type veth peer name "$p-f${n}r"
    ip link set "$p-f${n}l" netns "$(ns "$l")"
    ip link set "$p-f${n}r" netns "$(ns "$r")"
    ip -n "$(ns "$l")" addr add "10.89.$net.1/30" dev "$p-f${n}l"
    ip -n "$(ns "$r")" addr add "10.89.$net.2/30" dev "$p-f${n}r"
    ip -n "$(ns "$l")" link set "$p-f${n}l" up
    ip -n "$(ns "$r")" link set "$p-f${n}r" up
    n=$((n + 1))
  done
}

check() {
  local t="atlcheck$$"
  ip netns add "$t" && ip netns del "$t"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  check) check ;;
  *)
    echo "usage: $0 up|down|check [PREFIX]" >&2
    exit 2
    ;;
esac
