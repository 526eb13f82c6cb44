// Apache Kafka 4.4's Java client against a ringlog broker: transactions (issue #14).
//
// usage: java -cp KAFKA_CLIENTS_JARS:. TxnCheck BOOTSTRAP
//
// - commit and abort over 3 partitions: a read_committed consumer sees exactly the committed
//   records, a read_uncommitted one sees all of them;
// - fencing: a second producer with the same transactional.id fences the first, whose next
//   commit throws ProducerFencedException and its sends are refused.
//
// Prints "OK <summary>" on success; exits 1 with "FAIL: <step>: <detail>" otherwise.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnCheck {
    static KafkaProducer<String, String> producer(String bootstrap, String tid) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 30000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        return new KafkaProducer<>(p);
    }

    static List<String> readAll(String bootstrap, String topic, int partitions, String isolation, int want) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30000;
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) got.add(r.value());
                boolean atEnd = true;
                for (TopicPartition tp : tps) atEnd &= consumer.position(tp) >= end.get(tp);
                if (atEnd && got.size() >= want) break;
            }
        }
        return got;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = "java-txn-" + UUID.randomUUID().toString().substring(0, 8);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }

        Check.step("commit and abort");
        List<String> committed = new ArrayList<>();
        List<String> aborted = new ArrayList<>();
        try (KafkaProducer<String, String> p = producer(bootstrap, "java-tid-" + topic)) {
            p.initTransactions();
            for (int round = 0; round < 4; round++) {
                p.beginTransaction();
                List<String> vals = new ArrayList<>();
                for (int i = 0; i < 30; i++) {
                    String v = "r" + round + "-" + i;
                    vals.add(v);
                    p.send(new ProducerRecord<>(topic, i % 3, null, v));
                }
                if (round % 2 == 0) {
                    p.commitTransaction();
                    committed.addAll(vals);
                } else {
                    p.flush();
                    p.abortTransaction();
                    aborted.addAll(vals);
                }
            }
        }
        List<String> rc = readAll(bootstrap, topic, 3, "read_committed", committed.size());
        Collections.sort(rc);
        List<String> wantRc = new ArrayList<>(committed);
        Collections.sort(wantRc);
        Check.check(rc.equals(wantRc), "read_committed saw " + rc.size() + " records, want the " + wantRc.size() + " committed");
        List<String> ru = readAll(bootstrap, topic, 3, "read_uncommitted", committed.size() + aborted.size());
        Check.check(ru.size() == committed.size() + aborted.size(), "read_uncommitted saw " + ru.size() + ", want " + (committed.size() + aborted.size()));

        Check.step("fencing");
        String tid = "java-fence-" + topic;
        KafkaProducer<String, String> a = producer(bootstrap, tid);
        a.initTransactions();
        a.beginTransaction();
        a.send(new ProducerRecord<>(topic, 0, null, "from-a")).get(30, TimeUnit.SECONDS);
        try (KafkaProducer<String, String> b = producer(bootstrap, tid)) {
            b.initTransactions();
            b.beginTransaction();
            b.send(new ProducerRecord<>(topic, 0, null, "from-b"));
            b.commitTransaction();
        }
        // The old instance commits what it sent: the coordinator refuses its stale epoch.
        String fencedBy = null;
        try {
            a.commitTransaction();
        } catch (ProducerFencedException e) {
            fencedBy = e.getClass().getSimpleName();
        } catch (Exception e) {
            Check.fail("the fenced producer's commit failed with " + e + ", want ProducerFencedException");
        }
        Check.check(fencedBy != null, "the fenced producer's commit succeeded");
        // Its writes are refused too (the partition knows the newer epoch).
        String sendRefused = null;
        try (KafkaProducer<String, String> stale = a) {
            stale.send(new ProducerRecord<>(topic, 0, null, "late-a")).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            sendRefused = e.getClass().getSimpleName();
        }
        Check.check(sendRefused != null, "a fenced producer's send was accepted");
        List<String> after = readAll(bootstrap, topic, 3, "read_committed", committed.size() + 1);
        Check.check(after.contains("from-b") && !after.contains("from-a") && !after.contains("late-a"),
              "after fencing read_committed holds from-b only (" + after.size() + " records)");
        System.out.println("OK committed=" + committed.size() + " aborted=" + aborted.size() + " fenced_by=" + fencedBy);
    }
}
