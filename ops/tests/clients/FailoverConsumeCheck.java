// A Java consumer (kafka-clients 4.3) that reads partition 0 of TOPIC from offset 0 while the
// test moves its leader (replication, issue #18), until it holds WANT records; it never
// resets its position (auto.offset.reset=none), so a wrong leader-epoch answer after the
// failover (KIP-320 position validation through OffsetForLeaderEpoch) would end it with a
// LogTruncationException or a reset error. Prints "READ <n>" as it goes, one "V <offset>
// <value>" per record and "OK records=<n>" at the end.
//
// usage: FailoverConsumeCheck BOOTSTRAP TOPIC WANT
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class FailoverConsumeCheck {
    /// How long it reads at most before it gives up.
    private static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        int want = Integer.parseInt(args[2]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        Check.step("consume");
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            int read = 0;
            long next = 0;
            while (read < want) {
                Check.check(System.currentTimeMillis() < deadline,
                        "only " + read + " of " + want + " records within " + DEADLINE_MS + " ms");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    Check.check(r.offset() == next,
                            "offset " + r.offset() + " where " + next + " was next");
                    System.out.println("V " + r.offset() + " " + r.value());
                    next = r.offset() + 1;
                    read++;
                }
                System.out.println("READ " + read);
                System.out.flush();
            }
            Check.check(c.position(tp) == want, "position " + c.position(tp) + " after " + want);
        } catch (Exception e) {
            Check.fail(e.toString());
        }
        System.out.println("OK records=" + want);
    }
}
