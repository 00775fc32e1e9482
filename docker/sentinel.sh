#!/bin/sh
# A sentinel of the `ha` compose profile: writes its (writable) config, then runs redis-server --sentinel.
set -eu
cat > /tmp/sentinel.conf <<CONF
port 26379
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel monitor mymaster ${SENTINEL_MASTER_HOST:-redis-ha-master} 6379 2
sentinel down-after-milliseconds mymaster ${SENTINEL_DOWN_AFTER_MS:-5000}
sentinel failover-timeout mymaster 30000
CONF
exec redis-server /tmp/sentinel.conf --sentinel
