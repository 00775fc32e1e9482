#!/bin/sh
# Smoke test of docker/docker-compose.yml on a machine with a Docker engine and Compose v2:
# bring the default topology up, check that the broker is healthy and both consumers receive
# what the producer sends, SIGKILL Redis and start it again (AOF), check that the exchange goes on,
# then stop everything and delete the volumes. Bounded: every wait gives up after a deadline.
#
#   sh scripts/docker_smoke.sh              # builds the image first
#   NO_BUILD=1 sh scripts/docker_smoke.sh   # uses rocketredis:latest as it is
#
# Exit code 0 when every check passed. Run from the repository root.
set -eu

COMPOSE="docker compose -f docker/docker-compose.yml"
URL="redis://redis:6379/0"

fail() {
  echo "docker smoke: FAILED: $*" >&2
  $COMPOSE logs --tail 20 >&2 || true
  $COMPOSE down -v >/dev/null 2>&1 || true
  exit 1
}

# received_by N: how many "received message" lines consumer replica N has printed so far
# (Compose may put an escape code before each line, so the pattern is not anchored).
received_by() {
  $COMPOSE logs --no-log-prefix --index "$1" consumer 2>/dev/null | grep -c 'received message' || true
}

# wait_received N MIN SECONDS: until replica N has printed at least MIN "received" lines.
wait_received() {
  deadline=$(($(date +%s) + $3))
  until [ "$(received_by "$1")" -ge "$2" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "consumer $1 received fewer than $2 messages in $3 s"
    sleep 1
  done
}

if [ -z "${NO_BUILD:-}" ]; then
  $COMPOSE build || fail "build"
fi
$COMPOSE up -d --no-build --wait --wait-timeout 120 || fail "the topology did not come up healthy"
echo "docker smoke: up"

wait_received 1 5 60
wait_received 2 5 60
$COMPOSE exec -T broker mq broker --check --url "$URL" --namespace mq || fail "mq broker --check"
echo "docker smoke: both consumers receive, the broker is healthy"

before1=$(received_by 1)
before2=$(received_by 2)
$COMPOSE kill -s SIGKILL redis >/dev/null || fail "kill redis"
$COMPOSE start redis >/dev/null || fail "start redis"
wait_received 1 $((before1 + 5)) 90
wait_received 2 $((before2 + 5)) 90
echo "docker smoke: Redis SIGKILLed and restarted from its AOF; the exchange goes on"

$COMPOSE exec -T broker mq group progress StackConsumers --url "$URL" --namespace mq || fail "mq group progress"
$COMPOSE down -v --timeout 30 || fail "down"
echo "docker smoke: passed"
