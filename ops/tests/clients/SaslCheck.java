// Apache Kafka 4.4's Java client over SASL_PLAINTEXT with SCRAM-SHA-512 against a ringlog SASL
// listener (issue #19).
//
// usage: java -cp KAFKA_CLIENTS_JARS:. SaslCheck BOOTSTRAP USER PASSWORD TOPIC [CA_PEM]
// (with CA_PEM: SASL_SSL, the broker's certificate checked against that CA)
// With SASL_CHECK_SPREAD_MS in the environment the 50 records are spread over that long, so
// that a broker with a short session lifetime (KIP-368) has the clients re-authenticate.
//
// As USER: creates TOPIC, produces 50 records (acks=all, idempotent), reads them back; then
// the same admin call with a wrong password must fail with SaslAuthenticationException.
// Prints "OK <summary>" on success; exits 1 with "FAIL: <step>: <detail>" otherwise.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SaslCheck {
    static String ca;

    static Properties sasl(String bootstrap, String user, String password) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, ca == null ? "SASL_PLAINTEXT" : "SASL_SSL");
        if (ca != null) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", ca);
        }
        p.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-512");
        p.put(SaslConfigs.SASL_JAAS_CONFIG,
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        return p;
    }

    static void fail(String step, Object detail) {
        System.out.println("FAIL: " + step + ": " + detail);
        System.exit(1);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], user = args[1], password = args[2], topic = args[3];
        ca = args.length > 4 ? args[4] : null;
        Properties ap = sasl(bootstrap, user, password);
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        Properties pp = sasl(bootstrap, user, password);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            long spreadMs = Long.parseLong(System.getenv().getOrDefault("SASL_CHECK_SPREAD_MS", "0"));
            for (int i = 0; i < 50; i++) {
                p.send(new ProducerRecord<>(topic, 0, null, "v" + i)).get(30, TimeUnit.SECONDS);
                if (spreadMs > 0) Thread.sleep(spreadMs / 50);
            }
        }
        Properties cp = sasl(bootstrap, user, password);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seek(tp, 0);
            long deadline = System.currentTimeMillis() + 30000;
            while (got.size() < 50 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) got.add(r.value());
            }
        }
        for (int i = 0; i < 50; i++) {
            if (got.size() != 50 || !got.get(i).equals("v" + i)) fail("read back", got);
        }
        Properties bad = sasl(bootstrap, user, password + "-wrong");
        bad.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 10000);
        bad.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        try (Admin admin = Admin.create(bad)) {
            admin.listTopics().names().get(15, TimeUnit.SECONDS);
            fail("wrong password", "accepted");
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof SaslAuthenticationException)) fail("wrong password", e.getCause());
        }
        System.out.println("OK produced and read 50 records over SCRAM-SHA-512; a wrong password is refused");
    }
}
