// The client side of the MirrorMaker 2 test (ops/tests/mirror_maker.rs), one step per process:
//
//   MirrorCheck produce BOOTSTRAP TOPIC N PREFIX       create TOPIC (1 partition), write N records
//                                                      "PREFIX-i" keyed "k-i" with a header
//   MirrorCheck commit BOOTSTRAP GROUP TOPIC OFFSET    commit GROUP's offset of TOPIC-0
//   MirrorCheck records BOOTSTRAP TOPIC N PREFIX SECS  wait until TOPIC-0 holds exactly the N
//                                                      records produce wrote, in order
//   MirrorCheck offset BOOTSTRAP GROUP TOPIC SECS [N]  wait until GROUP has an offset of TOPIC-0
//                                                      (N: until it is N); prints "OK offset=N"
//
// Each prints an "OK ..." line, or "FAIL: ..." on stderr and exits 1 (Check.java).

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class MirrorCheck {
    static final String HEADER = "origin";

    public static void main(String[] args) throws Exception {
        if (args.length < 2) Check.fail("usage: produce|commit|records|offset BOOTSTRAP ...");
        String bootstrap = args[1];
        switch (args[0]) {
            case "produce" -> produce(bootstrap, args[2], Integer.parseInt(args[3]), args[4]);
            case "commit" -> commit(bootstrap, args[2], args[3], Long.parseLong(args[4]));
            case "records" -> records(bootstrap, args[2], Integer.parseInt(args[3]), args[4],
                Integer.parseInt(args[5]));
            case "offset" -> offset(bootstrap, args[2], args[3], Integer.parseInt(args[4]),
                args.length > 5 ? Long.parseLong(args[5]) : -1);
            default -> Check.fail("unknown step " + args[0]);
        }
        System.exit(0);
    }


    static void produce(String bootstrap, String topic, int n, String prefix) throws Exception {
        Check.step("create " + topic);
        try (Admin admin = Check.admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Check.step("produce " + n + " into " + topic);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                ProducerRecord<String, String> r =
                    new ProducerRecord<>(topic, 0, "k-" + i, prefix + "-" + i);
                r.headers().add(HEADER, prefix.getBytes(StandardCharsets.UTF_8));
                producer.send(r);
            }
            producer.flush();
        }
        System.out.println("OK produced " + n);
    }

    static void commit(String bootstrap, String group, String topic, long offset) throws Exception {
        Check.step("commit " + group + " " + topic + "@" + offset);
        try (Admin admin = Check.admin(bootstrap)) {
            admin.alterConsumerGroupOffsets(group,
                Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(offset))).all().get();
        }
        System.out.println("OK committed " + offset);
    }

    static KafkaConsumer<String, String> reader(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static void records(String bootstrap, String topic, int n, String prefix, int secs)
            throws Exception {
        Check.step("wait for " + topic);
        long deadline = System.nanoTime() + Duration.ofSeconds(secs).toNanos();
        try (Admin admin = Check.admin(bootstrap)) {
            while (!admin.listTopics().names().get().contains(topic)) {
                Check.check(System.nanoTime() < deadline, topic + " was not created in " + secs + " s");
                Thread.sleep(200);
            }
        }
        Check.step("read " + n + " records of " + topic);
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = reader(bootstrap)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            while (got.size() < n) {
                Check.check(System.nanoTime() < deadline,
                    got.size() + " of " + n + " records of " + topic + " in " + secs + " s");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r);
            }
            Check.step("no more than " + n + " records in " + topic);
            long end = c.endOffsets(List.of(tp)).get(tp);
            Check.check(end == n, topic + " ends at " + end + ", want " + n);
        }
        Check.step("the records of " + topic);
        for (int i = 0; i < n; i++) {
            ConsumerRecord<String, String> r = got.get(i);
            Check.check(r.offset() == i, "record " + i + " at offset " + r.offset());
            Check.check(("k-" + i).equals(r.key()) && (prefix + "-" + i).equals(r.value()),
                "record " + i + ": " + r.key() + "=" + r.value());
            Header h = r.headers().lastHeader(HEADER);
            Check.check(h != null && prefix.equals(new String(h.value(), StandardCharsets.UTF_8)),
                "record " + i + " lost its header: " + r.headers());
        }
        System.out.println("OK records=" + n);
    }

    static void offset(String bootstrap, String group, String topic, int secs, long want)
            throws Exception {
        Check.step("wait for " + group + "'s offset of " + topic);
        TopicPartition tp = new TopicPartition(topic, 0);
        long deadline = System.nanoTime() + Duration.ofSeconds(secs).toNanos();
        try (Admin admin = Check.admin(bootstrap)) {
            while (true) {
                Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                OffsetAndMetadata o = offsets.get(tp);
                if (o != null && (want < 0 || o.offset() == want)) {
                    System.out.println("OK offset=" + o.offset());
                    return;
                }
                Check.check(System.nanoTime() < deadline,
                    (want < 0 ? "no offset" : "no offset " + want) + " of " + topic + " for "
                        + group + " in " + secs + " s: " + offsets);
                Thread.sleep(500);
            }
        }
    }
}
