// Apache Kafka 4.4's Java client against a ringlog broker: Admin.deleteRecords (issue #12).
//
// usage: java -cp KAFKA_CLIENTS_JARS:. DeleteRecordsCheck BOOTSTRAP TOPIC delete|verify
//
// delete: creates TOPIC (2 partitions), produces 50 records to each, deletes p0 before offset
//   40 and p1 before the high watermark (beforeOffset(-1)), checks the low watermarks
//   returned, that a step back is a no-op and one past the high watermark is refused, that a
//   consumer seeking to 0 on p0 gets OffsetOutOfRangeException (auto.offset.reset=none) or is
//   reset to 40 (earliest), and that listOffsets(earliest) is 40 / 50.
// verify (after a broker restart): listOffsets(earliest) is still 40 / 50, and p0 reads 40..49.
//
// Prints "OK <summary>" on success; exits 1 with "FAIL: <step>: <detail>" otherwise.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class DeleteRecordsCheck {
    static final int PER_PARTITION = 50;
    static final long P0_DELETE_BEFORE = 40;

    static KafkaConsumer<String, String> consumer(String bootstrap, String reset) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(c);
    }

    static Map<TopicPartition, Long> earliest(Admin admin, List<TopicPartition> tps) throws Exception {
        Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
        for (TopicPartition tp : tps) ask.put(tp, OffsetSpec.earliest());
        Map<TopicPartition, Long> out = new HashMap<>();
        admin.listOffsets(ask).all().get(30, TimeUnit.SECONDS)
                .forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    /// The offsets p's records read from `from` until the end (seek, then poll).
    static List<Long> readFrom(String bootstrap, TopicPartition tp, long from, long end) {
        List<Long> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, "earliest")) {
            c.assign(List.of(tp));
            c.seek(tp, from);
            long deadline = System.currentTimeMillis() + 30000;
            while ((got.isEmpty() || got.get(got.size() - 1) < end - 1)
                    && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    got.add(r.offset());
                }
            }
        }
        return got;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], phase = args[2];
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        List<TopicPartition> both = List.of(p0, p1);
        try (Admin admin = Check.admin(bootstrap)) {
            if (phase.equals("delete")) {
                Check.step("create topic");
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);

                Check.step("produce");
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ProducerConfig.ACKS_CONFIG, "all");
                p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                    List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
                    for (int i = 0; i < 2 * PER_PARTITION; i++) {
                        sent.add(producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, "v" + i)));
                    }
                    for (java.util.concurrent.Future<RecordMetadata> f : sent) f.get(30, TimeUnit.SECONDS);
                }

                Check.step("deleteRecords");
                Map<TopicPartition, RecordsToDelete> del = new HashMap<>();
                del.put(p0, RecordsToDelete.beforeOffset(P0_DELETE_BEFORE));
                del.put(p1, RecordsToDelete.beforeOffset(-1));
                Map<TopicPartition, DeletedRecords> done = new HashMap<>();
                for (var e : admin.deleteRecords(del).lowWatermarks().entrySet()) {
                    done.put(e.getKey(), e.getValue().get(30, TimeUnit.SECONDS));
                }
                Check.check(done.get(p0).lowWatermark() == P0_DELETE_BEFORE, "p0 low watermark " + done.get(p0).lowWatermark());
                Check.check(done.get(p1).lowWatermark() == PER_PARTITION, "p1 low watermark " + done.get(p1).lowWatermark());

                Check.step("deleteRecords backwards");
                long back = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(10)))
                        .lowWatermarks().get(p0).get(30, TimeUnit.SECONDS).lowWatermark();
                Check.check(back == P0_DELETE_BEFORE, "a step back moved the low watermark to " + back);

                Check.step("deleteRecords past the high watermark");
                try {
                    admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(1000)))
                            .lowWatermarks().get(p0).get(30, TimeUnit.SECONDS);
                    Check.fail("accepted");
                } catch (ExecutionException e) {
                    Check.check(e.getCause() instanceof org.apache.kafka.common.errors.OffsetOutOfRangeException, "refused with " + e.getCause());
                }

                Check.step("consumer seeks below the log start (auto.offset.reset=none)");
                try (KafkaConsumer<String, String> c = consumer(bootstrap, "none")) {
                    c.assign(List.of(p0));
                    c.seek(p0, 0);
                    boolean thrown = false;
                    long deadline = System.currentTimeMillis() + 30000;
                    while (!thrown && System.currentTimeMillis() < deadline) {
                        try {
                            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(500));
                            Check.check(rs.isEmpty(), "read " + rs.count() + " records below the log start");
                        } catch (org.apache.kafka.clients.consumer.OffsetOutOfRangeException e) {
                            thrown = true;
                            Check.check(e.offsetOutOfRangePartitions().containsKey(p0), "exception names " + e.offsetOutOfRangePartitions());
                        }
                    }
                    Check.check(thrown, "no OffsetOutOfRangeException within 30 s");
                }

                Check.step("consumer seeks below the log start (auto.offset.reset=earliest)");
                List<Long> got = readFrom(bootstrap, p0, 0, PER_PARTITION);
                Check.check(!got.isEmpty() && got.get(0) == P0_DELETE_BEFORE, "reset read from " + got);
                Check.check(got.size() == PER_PARTITION - P0_DELETE_BEFORE, "read " + got);
            }

            Check.step(phase + ": listOffsets earliest");
            Map<TopicPartition, Long> start = earliest(admin, both);
            Check.check(start.get(p0) == P0_DELETE_BEFORE, "p0 earliest " + start.get(p0));
            Check.check(start.get(p1) == PER_PARTITION, "p1 earliest " + start.get(p1));
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (TopicPartition tp : both) latest.put(tp, OffsetSpec.latest());
            var end = admin.listOffsets(latest).all().get(30, TimeUnit.SECONDS);
            Check.check(end.get(p0).offset() == PER_PARTITION && end.get(p1).offset() == PER_PARTITION,
                    "latest " + end.get(p0).offset() + " / " + end.get(p1).offset());

            if (phase.equals("verify")) {
                Check.step("verify: p0 from the beginning");
                List<Long> got = readFrom(bootstrap, p0, 0, PER_PARTITION);
                Check.check(!got.isEmpty() && got.get(0) == P0_DELETE_BEFORE && got.size() == PER_PARTITION - P0_DELETE_BEFORE,
                        "read " + got);
            }
        }
        System.out.println("OK " + phase + ": p0 starts at " + P0_DELETE_BEFORE + ", p1 at " + PER_PARTITION);
    }
}
