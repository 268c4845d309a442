// Publishes COUNT messages and checks every ack. Usage: node producer.js [COUNT]
// PULSAR_WS_URL defaults to ws://localhost:8080, TOPIC to my-topic.
const WebSocket = require('ws');

const base = process.env.PULSAR_WS_URL || 'ws://localhost:8080';
const topic = process.env.TOPIC || 'my-topic';
const count = parseInt(process.argv[2] || '1', 10);
const ws = new WebSocket(`${base}/ws/v2/producer/persistent/public/default/${topic}`);

let acks = 0;
let failed = 0;
ws.on('open', () => {
  for (let i = 0; i < count; i++) {
    ws.send(JSON.stringify({
      payload: Buffer.from(`Hello World ${i}`).toString('base64'),
      properties: { key1: 'value1' },
      context: String(i),
    }));
  }
});
ws.on('message', (data) => {
  const ack = JSON.parse(data);
  if (ack.result === 'ok') {
    console.log('published %s %s', ack.context, ack.messageId);
  } else {
    failed++;
    console.error('failed to publish: %s', data);
  }
  if (++acks === count) {
    ws.close();
    process.exitCode = failed ? 1 : 0;
  }
});
ws.on('error', (err) => { console.error(err.message); process.exit(1); });
