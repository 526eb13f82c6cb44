// Apache Kafka 4.4's Java Admin client against a ringlog broker: the Admin calls behind
// kafka-log-dirs, kafka-transactions describe-producers and kafka-get-offsets (issue #12).
//
// usage: java -cp KAFKA_CLIENTS_JARS:. AdminParity BOOTSTRAP
//
// - describeLogDirs: the one data dir, every partition of a topic with its size (non-zero
//   after a produce), offset lag 0, and the filesystem's total and usable bytes;
// - describeProducers: an idempotent producer's id, epoch and last sequence on its partition;
//   a transactional producer's open transaction start offset while it is open;
// - listOffsets with earliest, latest and max-timestamp specs;
// - electLeaders: ElectionNotNeeded for a single replica; alterReplicaLogDirs: a no-op to the
//   data dir itself, LogDirNotFound elsewhere;
// - describeFeatures (kafka-features describe): transaction.version at 0, group.version at 1
//   (KIP-848 consumer groups);
// - describeMetadataQuorum (kafka-metadata-quorum describe): the metastore's leader, voters and
//   high watermark.
//
// Prints "OK <summary>" on success; exits 1 with "FAIL: <step>: <detail>" otherwise.

import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.requests.DescribeLogDirsResponse;
import org.apache.kafka.common.serialization.StringSerializer;

public class AdminParity {
    static KafkaProducer<String, String> producer(String bootstrap, String tid) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        if (tid != null) p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = "parity-" + UUID.randomUUID().toString().substring(0, 8);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            TopicPartition p0 = new TopicPartition(topic, 0);
            long t0 = System.currentTimeMillis();
            try (KafkaProducer<String, String> p = producer(bootstrap, null)) {
                for (int i = 0; i < 10; i++) {
                    p.send(new ProducerRecord<>(topic, 0, t0 + (i == 6 ? 100_000 : i), null, "v" + i)).get(30, TimeUnit.SECONDS);
                }
            }

            Check.step("describeLogDirs");
            int broker = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).iterator().next().id();
            Map<String, LogDirDescription> dirs =
                admin.describeLogDirs(List.of(broker)).descriptions().get(broker).get(30, TimeUnit.SECONDS);
            Check.check(dirs.size() == 1, "one log dir, got " + dirs.keySet());
            LogDirDescription d = dirs.values().iterator().next();
            Check.check(d.error() == null, "log dir error " + d.error());
            Check.check(d.totalBytes().isPresent() && d.totalBytes().getAsLong() > 0, "total bytes " + d.totalBytes());
            Check.check(d.usableBytes().isPresent() && d.usableBytes().getAsLong() > 0, "usable bytes " + d.usableBytes());
            ReplicaInfo r0 = d.replicaInfos().get(p0);
            Check.check(r0 != null, "partition 0 listed: " + d.replicaInfos().keySet());
            Check.check(r0.size() > 0 && r0.offsetLag() == 0, "size " + r0.size() + " lag " + r0.offsetLag());
            Check.check(d.replicaInfos().containsKey(new TopicPartition(topic, 1)), "partition 1 listed");
            Check.check(d.replicaInfos().keySet().stream().anyMatch(tp -> tp.topic().equals("__consumer_offsets")),
                  "internal partitions listed too");

            Check.step("describeProducers");
            DescribeProducersResult.PartitionProducerState ps =
                admin.describeProducers(List.of(p0)).partitionResult(p0).get(30, TimeUnit.SECONDS);
            Check.check(ps.activeProducers().size() == 1, "one producer, got " + ps.activeProducers());
            ProducerState st = ps.activeProducers().get(0);
            Check.check(st.lastSequence() == 9 && st.producerEpoch() == 0, "producer " + st);
            Check.check(st.lastTimestamp() == t0 + 9, "last timestamp " + st.lastTimestamp() + " want " + (t0 + 9));
            Check.check(st.currentTransactionStartOffset().isEmpty(), "no open transaction: " + st);
            // An open transaction shows its start offset.
            TopicPartition p1 = new TopicPartition(topic, 1);
            KafkaProducer<String, String> txp = producer(bootstrap, "parity-" + topic);
            txp.initTransactions();
            txp.beginTransaction();
            txp.send(new ProducerRecord<>(topic, 1, null, "open")).get(30, TimeUnit.SECONDS);
            List<ProducerState> open =
                admin.describeProducers(List.of(p1)).partitionResult(p1).get(30, TimeUnit.SECONDS).activeProducers();
            Check.check(open.size() == 1 && open.get(0).currentTransactionStartOffset().equals(OptionalLong.of(0)),
                  "open transaction at offset 0: " + open);
            txp.abortTransaction();
            txp.close();

            Check.step("listOffsets");
            Map<TopicPartition, OffsetSpec> specs = Map.of(p0, OffsetSpec.earliest());
            Check.check(admin.listOffsets(specs).partitionResult(p0).get(30, TimeUnit.SECONDS).offset() == 0, "earliest");
            Check.check(admin.listOffsets(Map.of(p0, OffsetSpec.latest())).partitionResult(p0).get(30, TimeUnit.SECONDS).offset() == 10, "latest");
            ListOffsetsResult.ListOffsetsResultInfo max =
                admin.listOffsets(Map.of(p0, OffsetSpec.maxTimestamp())).partitionResult(p0).get(30, TimeUnit.SECONDS);
            Check.check(max.offset() == 6 && max.timestamp() == t0 + 100_000, "max timestamp at offset 6: " + max);
            Check.step("electLeaders");
            Map<TopicPartition, Optional<Throwable>> el =
                admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, Set.of(p0)).partitions().get(30, TimeUnit.SECONDS);
            Check.check(el.get(p0).isPresent()
                  && el.get(p0).get() instanceof org.apache.kafka.common.errors.ElectionNotNeededException,
                  "preferred election on a single replica: " + el);

            Check.step("alterReplicaLogDirs");
            String dir = dirs.keySet().iterator().next();
            org.apache.kafka.common.TopicPartitionReplica rep = new org.apache.kafka.common.TopicPartitionReplica(topic, 0, broker);
            admin.alterReplicaLogDirs(Map.of(rep, dir)).values().get(rep).get(30, TimeUnit.SECONDS);
            try {
                admin.alterReplicaLogDirs(Map.of(rep, "/nowhere")).values().get(rep).get(30, TimeUnit.SECONDS);
                Check.fail("a move to another dir succeeded");
            } catch (java.util.concurrent.ExecutionException e) {
                Check.check(e.getCause() instanceof org.apache.kafka.common.errors.LogDirNotFoundException,
                      "a move to another dir: " + e.getCause());
            }

            Check.step("describeFeatures");
            FeatureMetadata fm = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
            SupportedVersionRange tv = fm.supportedFeatures().get("transaction.version");
            Check.check(tv != null && tv.minVersion() == 0 && tv.maxVersion() == 0, "supported transaction.version " + fm);
            SupportedVersionRange gv = fm.supportedFeatures().get("group.version");
            Check.check(gv != null && gv.maxVersion() == 1, "supported group.version " + fm);
            FinalizedVersionRange fgv = fm.finalizedFeatures().get("group.version");
            Check.check(fgv != null && fgv.maxVersionLevel() == 1, "finalized group.version " + fm);
            FinalizedVersionRange ftv = fm.finalizedFeatures().get("transaction.version");
            Check.check(ftv != null && ftv.maxVersionLevel() == 0, "finalized transaction.version " + fm);

            Check.step("describeMetadataQuorum");
            QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get(30, TimeUnit.SECONDS);
            Check.check(q.leaderId() == 1, "leader " + q.leaderId());
            Check.check(q.voters().size() == 1 && q.voters().get(0).replicaId() == 1, "voters " + q.voters());
            Check.check(q.voters().get(0).logEndOffset() > 0 && q.highWatermark() > 0,
                  "log end " + q.voters().get(0).logEndOffset() + " high watermark " + q.highWatermark());
            Check.check(q.observers().isEmpty(), "observers " + q.observers());

            System.out.println("OK log_dir=" + dirs.keySet().iterator().next() + " p0_bytes=" + r0.size()
                + " producer=" + st.producerId());
        }
    }
}
