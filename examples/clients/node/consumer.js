// Consumes COUNT messages, acknowledging each. Usage: node consumer.js COUNT
const WebSocket = require('ws');

const base = process.env.PULSAR_WS_URL || 'ws://localhost:8080';
const topic = process.env.TOPIC || 'my-topic';
const sub = process.env.SUBSCRIPTION || 'my-sub';
const count = parseInt(process.argv[2] || '1', 10);
const ws = new WebSocket(
  `${base}/ws/v2/consumer/persistent/public/default/${topic}/${sub}?subscriptionInitialPosition=Earliest`);

let received = 0;
ws.on('message', (data) => {
  const msg = JSON.parse(data);
  console.log('received %s %s', msg.messageId, Buffer.from(msg.payload, 'base64').toString());
  ws.send(JSON.stringify({ messageId: msg.messageId }));
  if (++received === count) ws.close();
});
ws.on('error', (err) => { console.error(err.message); process.exit(1); });
