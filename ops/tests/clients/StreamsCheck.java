// A Kafka Streams 4.4 word count, run unchanged against ringlog and against the Kafka peer
// (ops/tests/streams_java.rs drives it, one phase per process, so that a run can be SIGKILLed):
//
//   StreamsCheck BOOTSTRAP PROTOCOL setup                 create the topics
//   StreamsCheck BOOTSTRAP PROTOCOL produce FROM TO       write lines FROM..TO (idempotent, acks=all)
//   StreamsCheck BOOTSTRAP PROTOCOL run STATE_DIR TOTAL   count until the output holds the counts of
//                                                         lines 0..TOTAL; prints RUNNING once, then
//                                                         "PROGRESS N" (the words counted in the
//                                                         committed output) as it grows, then
//                                                         "OK restored=N ..." (changelog records
//                                                         restored into the store)
//   StreamsCheck BOOTSTRAP PROTOCOL verify TOTAL          the output, read_committed: every word's
//                                                         counts are exactly 1, 2, ..., its count
//
// PROTOCOL is the Streams group protocol: classic, or streams (KIP-1071). The application runs
// with processing.guarantee=exactly_once_v2 and no record cache, so every input word yields one
// output record: a count that repeats or skips after a crash would be a broken exactly-once.
// Its store "counts" is backed by a compacted changelog topic, from which a run with an empty
// state directory restores it.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;

public final class StreamsCheck {
    static final String INPUT = "wc-lines";
    static final String OUTPUT = "wc-counts";
    static final String STORE = "counts";
    static final int PARTITIONS = 3;
    static final int VOCABULARY = 40;
    /// How long a run may take to reach its counts.
    static final Duration RUN_LIMIT = Duration.ofSeconds(150);

    static String line(int i) {
        return word(i * 7) + " " + word(i * 3 + 1) + " " + word(i / 5);
    }

    static String word(int n) {
        return String.format("w%02d", Math.floorMod(n, VOCABULARY));
    }

    static Map<String, Long> expected(int total) {
        Map<String, Long> counts = new HashMap<>();
        for (int i = 0; i < total; i++) {
            for (String w : line(i).split(" ")) counts.merge(w, 1L, Long::sum);
        }
        return counts;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) Check.fail("usage: BOOTSTRAP PROTOCOL setup|produce|run|verify ...");
        String bootstrap = args[0];
        String protocol = args[1];
        String appId = "wordcount-" + protocol;
        switch (args[2]) {
            case "setup" -> setup(bootstrap);
            case "produce" -> produce(bootstrap, Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            case "run" -> run(bootstrap, protocol, appId, args[3], Integer.parseInt(args[4]));
            case "verify" -> verify(bootstrap, appId, Integer.parseInt(args[3]));
            default -> Check.fail("unknown phase " + args[2]);
        }
        System.exit(0);
    }


    static void setup(String bootstrap) throws Exception {
        Check.step("create topics");
        try (Admin admin = Check.admin(bootstrap)) {
            admin.createTopics(List.of(
                    new NewTopic(INPUT, PARTITIONS, (short) 1),
                    new NewTopic(OUTPUT, PARTITIONS, (short) 1)))
                .all().get();
        }
        System.out.println("OK topics");
    }

    static void produce(String bootstrap, int from, int to) throws Exception {
        Check.step("produce " + from + ".." + to);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            for (int i = from; i < to; i++) {
                producer.send(new ProducerRecord<>(INPUT, "line-" + i, line(i)));
            }
            producer.flush();
        }
        System.out.println("OK produced " + (to - from));
    }

    static void run(String bootstrap, String protocol, String appId, String stateDir, int total)
            throws Exception {
        Check.step("start streams (" + protocol + ")");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // A killed run's member leaves no group for long (Kafka's minimum session, 6 s; a
        // classic Streams member does not leave its group when it closes either).
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(INPUT, Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(v -> Arrays.asList(v.split(" ")))
            .groupBy((k, w) -> w, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as(STORE))
            .toStream()
            .to(OUTPUT, Produced.with(Serdes.String(), Serdes.Long()));

        AtomicLong restored = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long end, long n) {
                restored.addAndGet(n);
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long n) {}
        });
        streams.setUncaughtExceptionHandler(e -> {
            failure.compareAndSet(null, e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        long t0 = System.nanoTime();
        streams.start();

        Check.step("count lines 0.." + total);
        Map<String, Long> want = expected(total);
        Map<String, Long> seen = new HashMap<>();
        boolean announced = false;
        long progress = 0;
        try (KafkaConsumer<String, Long> out = outputReader(bootstrap)) {
            long deadline = System.nanoTime() + RUN_LIMIT.toNanos();
            while (!seen.equals(want)) {
                Throwable e = failure.get();
                if (e != null) {
                    Check.fail("the application failed: " + describe(e));
                }
                if (streams.state() == KafkaStreams.State.ERROR
                        || streams.state() == KafkaStreams.State.NOT_RUNNING) {
                    Check.fail("the application stopped (" + streams.state() + ")");
                }
                if (!announced && streams.state() == KafkaStreams.State.RUNNING) {
                    System.out.println("RUNNING");
                    announced = true;
                }
                if (System.nanoTime() > deadline) {
                    Check.fail("no final counts after " + RUN_LIMIT + ": " + difference(want, seen));
                }
                for (ConsumerRecord<String, Long> r : out.poll(Duration.ofMillis(200))) {
                    seen.put(r.key(), r.value());
                }
                long counted = seen.values().stream().mapToLong(Long::longValue).sum();
                if (counted != progress) {
                    progress = counted;
                    System.out.println("PROGRESS " + counted);
                }
            }
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        Check.step("close");
        streams.close(Duration.ofSeconds(30));
        System.out.printf("OK restored=%d words=%d seconds=%.1f%n", restored.get(), want.size(), secs);
    }

    static String describe(Throwable e) {
        StringBuilder s = new StringBuilder();
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (s.length() > 0) s.append(" <- ");
            s.append(c.getClass().getName()).append(": ").append(c.getMessage());
        }
        return s.toString();
    }

    static String difference(Map<String, Long> want, Map<String, Long> seen) {
        List<String> d = new ArrayList<>();
        for (Map.Entry<String, Long> e : want.entrySet()) {
            Long got = seen.get(e.getKey());
            if (!e.getValue().equals(got)) d.add(e.getKey() + " want " + e.getValue() + " got " + got);
        }
        return d.size() + " words differ, e.g. " + d.subList(0, Math.min(5, d.size()));
    }

    static KafkaConsumer<String, Long> outputReader(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, LongDeserializer.class.getName());
        KafkaConsumer<String, Long> c = new KafkaConsumer<>(p);
        List<TopicPartition> parts = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) parts.add(new TopicPartition(OUTPUT, i));
        c.assign(parts);
        c.seekToBeginning(parts);
        return c;
    }

    static void verify(String bootstrap, String appId, int total) throws Exception {
        Check.step("read the output");
        Map<String, Long> want = expected(total);
        Map<String, List<Long>> sequences = new HashMap<>();
        long records = 0;
        try (KafkaConsumer<String, Long> out = outputReader(bootstrap)) {
            List<TopicPartition> parts = new ArrayList<>(out.assignment());
            Map<TopicPartition, Long> ends = out.endOffsets(parts);
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (!reached(out, ends)) {
                Check.check(System.nanoTime() < deadline, "the output's end not reached: " + ends);
                for (ConsumerRecord<String, Long> r : out.poll(Duration.ofMillis(200))) {
                    sequences.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
                    records++;
                }
            }
        }
        Check.step("exactly once");
        Check.check(sequences.keySet().equals(want.keySet()),
            "words " + sequences.keySet() + ", want " + want.keySet());
        for (Map.Entry<String, Long> e : want.entrySet()) {
            List<Long> got = sequences.get(e.getKey());
            List<Long> exact = new ArrayList<>();
            for (long n = 1; n <= e.getValue(); n++) exact.add(n);
            Check.check(got.equals(exact), e.getKey() + ": counts " + got + ", want 1.." + e.getValue());
        }

        Check.step("the store's changelog");
        String changelog = appId + "-" + STORE + "-changelog";
        try (Admin admin = Check.admin(bootstrap)) {
            Set<String> topics = admin.listTopics().names().get();
            Check.check(topics.contains(changelog), changelog + " missing among " + topics);
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, changelog);
            Config config = admin.describeConfigs(List.of(r)).all().get().get(r);
            String policy = config.get("cleanup.policy").value();
            Check.check(policy.contains("compact"), changelog + " cleanup.policy=" + policy);
        }
        System.out.println("OK words=" + want.size() + " records=" + records + " changelog=compact");
    }

    static boolean reached(KafkaConsumer<String, Long> c, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) return false;
        }
        return true;
    }
}
