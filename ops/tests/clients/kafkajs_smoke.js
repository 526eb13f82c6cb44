// kafkajs 2 against the broker: admin create, idempotent acks=all produce, a group consumer
// that reads everything and commits, and the committed offsets read back through the admin
// API. usage: node kafkajs_smoke.js BROKER[,BROKER...] TOPIC GROUP
const { Kafka, logLevel } = require('kafkajs');
const [broker, topic, group] = process.argv.slice(2);
const kafka = new Kafka({ clientId: 'kjs', brokers: broker.split(','), logLevel: logLevel.WARN });
(async () => {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] });
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true });
  await producer.connect();
  const N = 300;
  for (let i = 0; i < N; i += 50) {
    await producer.send({ topic, acks: -1, messages: Array.from({ length: 50 }, (_, j) => ({ key: 'k' + ((i + j) % 7), value: 'v' + (i + j) })) });
  }
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Set();
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timeout: got ' + seen.size)), 60000);
    consumer.run({ eachMessage: async ({ message }) => { seen.add(message.value.toString()); if (seen.size >= N) { clearTimeout(t); resolve(); } } });
  });
  await consumer.commitOffsets([]).catch(() => {});
  await consumer.disconnect();
  const admin2 = kafka.admin();
  await admin2.connect();
  const offs = await admin2.fetchOffsets({ groupId: group, topics: [topic] });
  await admin2.disconnect();
  console.log(JSON.stringify({ consumed: seen.size, offsets: offs }));
  process.exit(seen.size >= N ? 0 : 1);
})().catch(e => { console.error('FAILED', e); process.exit(1); });
