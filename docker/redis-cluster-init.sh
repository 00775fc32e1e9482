#!/bin/sh
# One-shot job of the `cluster` compose profile: join the nodes into a Redis Cluster of masters
# (no replicas), then wait until the cluster serves every slot. Safe to run again: an existing
# cluster is left as it is. Nodes: $REDIS_CLUSTER_NODES, "host:port" separated by spaces.
set -eu

NODES=${REDIS_CLUSTER_NODES:-"redis-node-1:6379 redis-node-2:6379 redis-node-3:6379"}
first=${NODES%% *}
first_host=${first%:*}
first_port=${first##*:}

info() {
  redis-cli -h "$first_host" -p "$first_port" cluster info
}

if info | grep -q '^cluster_slots_assigned:16384'; then
  echo "cluster already created"
else
  # CLUSTER MEET takes IP addresses, not host names: resolve the service names first.
  addresses=""
  for node in $NODES; do
    host=${node%:*}
    ip=$(getent ahostsv4 "$host" | head -n 1 | cut -d' ' -f1)
    if [ -z "$ip" ]; then
      echo "cannot resolve $host" >&2
      exit 1
    fi
    addresses="$addresses $ip:${node##*:}"
  done
  # shellcheck disable=SC2086 # one argument per address
  redis-cli --cluster create $addresses --cluster-replicas 0 --cluster-yes
fi

tries=0
until info | grep -q '^cluster_state:ok'; do
  tries=$((tries + 1))
  if [ "$tries" -ge 30 ]; then
    echo "cluster_state is not ok after 30 s" >&2
    exit 1
  fi
  sleep 1
done
echo "cluster ok"
