// The official RocketMQ 5 Node.js producer sending as fast as it can with a fixed number of sends in
// flight (bench/proxy.py). Arguments: endpoint topic count inflight bodySize warmup. Prints one JSON
// line: the rate (msg/s, after the warm-up), the p50/p99 send latency (ms) of the timed sends, when
// the timed sends began and ended (epoch ms: several clients' rates are added over their common window)
// and the client's own CPU (user + system) per timed send, µs: one Node.js process runs on one core.
const { Producer } = require('rocketmq-client-nodejs');

async function main() {
  const [endpoint, topic, countArg, inflightArg, sizeArg, warmupArg] = process.argv.slice(2);
  const count = Number(countArg), inflight = Number(inflightArg), warmup = Number(warmupArg || 200);
  const body = Buffer.alloc(Number(sizeArg), 120);
  const producer = new Producer({ endpoints: endpoint, logger: { info() {}, warn() {}, error: console.error, debug() {} } });
  await producer.startup();
  const latencies = [];
  let next = 0;
  async function lane(total, record) {
    while (next < total) {
      next += 1;
      const start = process.hrtime.bigint();
      await producer.send({ topic, body });
      if (record) latencies.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
  }
  // the warm-up: routes, connections and the endpoint's caches, not timed
  await Promise.all(Array.from({ length: inflight }, () => lane(warmup, false)));
  next = 0;
  const startMs = Date.now();
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: inflight }, () => lane(count, true)));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  console.log(JSON.stringify({
    rate: count / seconds, p50_ms: at(0.5), p99_ms: at(0.99), sent: latencies.length, start_ms: startMs, end_ms: Date.now(),
    cpu_us_per_msg: (cpu.user + cpu.system) / count,
  }));
  await producer.shutdown();
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
