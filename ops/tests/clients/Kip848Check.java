// Apache Kafka 4.4's Java consumer with the KIP-848 group protocol (group.protocol=consumer)
// against a ringlog broker (issue #12).
//
// usage: java -cp KAFKA_CLIENTS_JARS:. Kip848Check MODE BOOTSTRAP ...
//   produce  BOOTSTRAP TOPIC N            N keyed records "v<i>" (acks=all); prints "OK produced N"
//   member   BOOTSTRAP GROUP TOPIC LEAVE [PROTOCOL]  one group member (PROTOCOL: consumer, the
//            default; consumer-regex, subscribed by the broker-side regex "TOPIC.*"; or classic
//            with the cooperative-sticky assignor): prints "ASSIGNED <nanos> <epoch>
//            <p,p,..>" at every assignment change (nanos: System.nanoTime, CLOCK_MONOTONIC on
//            Linux, the same clock in every process; epoch: groupMetadata().generationId()),
//            "REC <partition> <offset> <value>" per record, commits after every batch
//            (commitSync), and leaves the group (close) and prints "OK member <records>"
//            when LEAVE says: LEAVE seconds without a record (from its start, its last record
//            or its last partitions assigned), or, for "until:PATH", once PATH exists
//   describe BOOTSTRAP GROUP MEMBERS      waits until describeConsumerGroups shows a CONSUMER
//            group with MEMBERS members owning partitions, then checks that listGroups lists it
//            among the consumer groups and not the classic ones; prints "OK <type> <state> ..."
//   verify   BOOTSTRAP GROUP TOPIC         the group's committed offsets equal the end offsets
//   rebalance BOOTSTRAP TOPIC PROTOCOL ROUNDS the rebalance benchmark (scripts/rebalance-bench.sh)
//
// Exits 1 with "FAIL: <step>: <detail>" when a check fails.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Kip848Check {

    static void produce(String bootstrap, String topic, int n) throws Exception {
        Check.step("produce");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) pr.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            pr.flush();
        }
        System.out.println("OK produced " + n);
    }

    static String partitions(Collection<TopicPartition> tps) {
        return tps.stream().map(TopicPartition::partition).sorted()
                .map(String::valueOf).collect(Collectors.joining(","));
    }

    /// commitSync, which a classic member may be refused while it rebalances
    /// (RebalanceInProgressException, CommitFailedException: as with any Kafka broker); the
    /// records since are committed by a later call.
    static boolean tryCommit(KafkaConsumer<String, String> c) {
        try {
            c.commitSync();
            return true;
        } catch (org.apache.kafka.common.errors.RebalanceInProgressException | CommitFailedException e) {
            System.out.println("COMMIT_RETRY " + e.getClass().getSimpleName());
            return false;
        }
    }

    /// `leave`: a number of seconds (the member leaves after that long without a record or
    /// a new assignment), or "until:PATH" (the member leaves once PATH exists: the test
    /// decides when, whatever the machine's speed).
    static void member(String bootstrap, String group, String topic, String leave, String protocol) {
        Check.step("member");
        java.nio.file.Path leaveFile = leave.startsWith("until:")
                ? java.nio.file.Path.of(leave.substring("until:".length())) : null;
        long idleS = leaveFile == null ? Long.parseLong(leave) : 0;
        // "consumer-regex": the consumer protocol, subscribed by a broker-side regex
        // (SubscriptionPattern "<TOPIC>.*").
        boolean byRegex = protocol.equals("consumer-regex");
        if (byRegex) protocol = "consumer";
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        if (protocol.equals("classic")) {
            c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    CooperativeStickyAssignor.class.getName());
        }
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        long records = 0;
        // The idle time counts from the last record or the last partitions assigned (a member
        // that joins late is not gone before it got its share).
        long[] lastRecord = {System.nanoTime()};
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            Set<TopicPartition> owned = new TreeSet<>(Comparator.comparingInt(TopicPartition::partition));
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                void report() {
                    System.out.println("ASSIGNED " + System.nanoTime() + " "
                            + consumer.groupMetadata().generationId() + " " + partitions(owned));
                    System.out.flush();
                }
                public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    // What was processed is committed before the partitions go.
                    tryCommit(consumer);
                    owned.removeAll(tps);
                    report();
                }
                public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    if (!tps.isEmpty()) lastRecord[0] = System.nanoTime();
                    owned.addAll(tps);
                    report();
                }
                public void onPartitionsLost(Collection<TopicPartition> tps) {
                    owned.removeAll(tps);
                    report();
                }
            };
            if (byRegex) {
                consumer.subscribe(new SubscriptionPattern(topic + ".*"), listener);
            } else {
                consumer.subscribe(List.of(topic), listener);
            }
            while (leaveFile != null ? !java.nio.file.Files.exists(leaveFile)
                    : System.nanoTime() - lastRecord[0] < TimeUnit.SECONDS.toNanos(idleS)) {
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : batch) {
                    System.out.println("REC " + r.partition() + " " + r.offset() + " " + r.value());
                    records++;
                }
                System.out.flush();
                if (!batch.isEmpty()) {
                    lastRecord[0] = System.nanoTime();
                    tryCommit(consumer);
                    // A slow consumer: the test kills and adds members mid-stream.
                    try { Thread.sleep(40); } catch (InterruptedException e) { return; }
                }
            }
            // Everything read is committed before the member leaves.
            for (int i = 0; !tryCommit(consumer); i++) {
                Check.check(i < 100, "the last commit never succeeded");
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    System.out.println("REC " + r.partition() + " " + r.offset() + " " + r.value());
                    records++;
                }
            }
        }
        System.out.println("OK member " + records);
    }

    static void describe(String bootstrap, String group, int members) throws Exception {
        Check.step("describe");
        try (Admin admin = Check.admin(bootstrap)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            String last = "";
            while (System.nanoTime() < deadline) {
                ConsumerGroupDescription d;
                try {
                    d = admin.describeConsumerGroups(List.of(group))
                            .describedGroups().get(group).get(30, TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException e) {
                    // The members may not have joined yet.
                    Check.check(e.getCause() instanceof org.apache.kafka.common.errors.GroupIdNotFoundException,
                            "describeConsumerGroups: " + e.getCause());
                    last = String.valueOf(e.getCause().getMessage());
                    Thread.sleep(200);
                    continue;
                }
                int owned = d.members().stream()
                        .mapToInt(m -> m.assignment().topicPartitions().size()).sum();
                last = d.type() + " " + d.groupState() + " members=" + d.members().size()
                        + " owned=" + owned + " assignor=" + d.partitionAssignor()
                        + " epoch=" + d.groupEpoch().orElse(-1);
                if (d.type() == GroupType.CONSUMER && d.members().size() == members && owned > 0
                        && d.members().stream().allMatch(m -> m.memberEpoch().orElse(-1) > 0)) {
                    // Every listed member has a client id and a host.
                    for (MemberDescription m : d.members()) {
                        Check.check(!m.clientId().isEmpty() && !m.host().isEmpty(), "member " + m);
                    }
                    // Listed as a consumer group (kafka-consumer-groups --list), not a classic one.
                    Check.step("listGroups");
                    Collection<GroupListing> consumers = admin.listGroups(
                            new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER)))
                            .all().get(30, TimeUnit.SECONDS);
                    Check.check(consumers.stream().anyMatch(g -> g.groupId().equals(group)
                            && g.type().equals(Optional.of(GroupType.CONSUMER))
                            && g.protocol().equals("consumer")), "consumer groups " + consumers);
                    Collection<GroupListing> classic = admin.listGroups(
                            new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC)))
                            .all().get(30, TimeUnit.SECONDS);
                    Check.check(classic.stream().noneMatch(g -> g.groupId().equals(group)),
                            "classic groups " + classic);
                    System.out.println("OK " + last);
                    return;
                }
                Thread.sleep(200);
            }
            Check.fail("the group never showed " + members + " consumer members: " + last);
        }
    }

    static void verify(String bootstrap, String group, String topic) throws Exception {
        Check.step("verify");
        try (Admin admin = Check.admin(bootstrap)) {
            int n = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
                    .get(topic).partitions().size();
            Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
            for (int p = 0; p < n; p++) ask.put(new TopicPartition(topic, p), OffsetSpec.latest());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends =
                    admin.listOffsets(ask).all().get(30, TimeUnit.SECONDS);
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                            .get(30, TimeUnit.SECONDS);
            for (TopicPartition tp : ask.keySet()) {
                OffsetAndMetadata c = committed.get(tp);
                long end = ends.get(tp).offset();
                Check.check(c != null && c.offset() == end,
                        tp + " committed " + c + ", end offset " + end);
            }
            System.out.println("OK committed offsets are the end offsets of " + n + " partitions");
        }
    }

    /// One consumer polling in a thread of its own, its owned partitions readable from others.
    static final class Polling implements Runnable {
        final Properties config;
        final String topic;
        final Set<Integer> owned = java.util.concurrent.ConcurrentHashMap.newKeySet();
        volatile boolean stop;
        final Thread thread = new Thread(this);

        Polling(Properties config, String topic) {
            this.config = config;
            this.topic = topic;
            thread.start();
        }

        public void run() {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(config)) {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                        tps.forEach(tp -> owned.remove(tp.partition()));
                    }
                    public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                        tps.forEach(tp -> owned.add(tp.partition()));
                    }
                });
                while (!stop) c.poll(Duration.ofMillis(50));
            }
        }

        void close() throws InterruptedException {
            stop = true;
            thread.join();
        }
    }

    static void awaitOwned(String what, java.util.function.BooleanSupplier done) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!done.getAsBoolean()) {
            Check.check(System.nanoTime() < deadline, what);
            Thread.sleep(2);
        }
    }

    /// The benchmark of issue #12: one member owns every partition of TOPIC; a second one
    /// joins 0-3 s later (a random moment of the first one's heartbeat cycle); the time from its subscribe until every partition is owned again, split between
    /// the two with none owned twice. PROTOCOL: "consumer" (KIP-848) or "classic"
    /// (cooperative-sticky). Prints "ROUND <protocol> <ms>" per round.
    static void rebalance(String bootstrap, String topic, String protocol, int rounds) throws Exception {
        Check.step("rebalance " + protocol);
        int n;
        try (Admin admin = Check.admin(bootstrap)) {
            n = admin.describeTopics(List.of(topic)).allTopicNames().get(30, TimeUnit.SECONDS)
                    .get(topic).partitions().size();
        }
        List<Double> times = new ArrayList<>();
        Random random = new Random(848);
        for (int r = 0; r < rounds; r++) {
            Properties c = new Properties();
            c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            c.put(ConsumerConfig.GROUP_ID_CONFIG, "rebalance-" + protocol + "-" + r + "-" + System.nanoTime());
            c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            if (protocol.equals("classic")) {
                c.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                        CooperativeStickyAssignor.class.getName());
            }
            c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            Polling a = new Polling(c, topic);
            awaitOwned("the first member never owned every partition", () -> a.owned.size() == n);
            // The second member comes at a random moment of the first one's heartbeat cycle
            // (3 s), as joins do.
            Thread.sleep(random.nextInt(3000));
            long t0 = System.nanoTime();
            Polling b = new Polling(c, topic);
            awaitOwned("the partitions were never split", () -> {
                Set<Integer> both = new HashSet<>(a.owned);
                both.retainAll(b.owned);
                return !a.owned.isEmpty() && !b.owned.isEmpty() && both.isEmpty()
                        && a.owned.size() + b.owned.size() == n;
            });
            double ms = (System.nanoTime() - t0) / 1e6;
            times.add(ms);
            System.out.println("ROUND " + protocol + " " + String.format("%.1f", ms));
            System.out.flush();
            b.close();
            a.close();
        }
        Collections.sort(times);
        System.out.println("OK " + protocol + " median_ms " + String.format("%.1f", times.get(times.size() / 2)));
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
            case "member" -> member(args[1], args[2], args[3], args[4],
                    args.length > 5 ? args[5] : "consumer");
            case "describe" -> describe(args[1], args[2], Integer.parseInt(args[3]));
            case "verify" -> verify(args[1], args[2], args[3]);
            case "rebalance" -> rebalance(args[1], args[2], args[3], Integer.parseInt(args[4]));
            default -> Check.fail("unknown mode " + args[0]);
        }
    }
}
