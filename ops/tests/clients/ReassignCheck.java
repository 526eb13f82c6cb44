// The Java Admin client (kafka-clients 4.3) moves a replicated partition's replicas (KIP-455,
// issue #18): alterPartitionReassignments to TARGET (broker ids, the preferred leader
// first), listPartitionReassignments until it is no longer under way, describeTopics to see
// the replicas and ISR become the target, then electLeaders(PREFERRED) to hand leadership to
// the target's first replica. A replication factor change the options do not allow
// (KIP-860) is refused with InvalidReplicationFactorException. Prints "OK leader=<id> replicas=<ids>" at the end.
//
// usage: ReassignCheck BOOTSTRAP TOPIC TARGET(id,id,...)
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterPartitionReassignmentsOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;

public final class ReassignCheck {
    /// How long the reassignment and the election may take.
    private static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        List<Integer> target = new ArrayList<>();
        for (String id : args[2].split(",")) target.add(Integer.parseInt(id));
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(p)) {
            Check.step("a replication factor change not allowed is refused");
            List<Integer> longer = new ArrayList<>(target);
            longer.add(target.get(0));
            try {
                admin.alterPartitionReassignments(
                        Map.of(tp, Optional.of(new NewPartitionReassignment(longer))),
                        new AlterPartitionReassignmentsOptions().allowReplicationFactorChange(false))
                        .all().get();
                Check.fail("a reassignment to " + longer + " was accepted");
            } catch (ExecutionException e) {
                Check.check(e.getCause() instanceof InvalidReplicationFactorException,
                        "refused with " + e.getCause());
            }

            Check.step("alterPartitionReassignments");
            admin.alterPartitionReassignments(
                    Map.of(tp, Optional.of(new NewPartitionReassignment(target)))).all().get();

            Check.step("listPartitionReassignments until done");
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (true) {
                Map<TopicPartition, PartitionReassignment> ongoing =
                        admin.listPartitionReassignments(Set.of(tp)).reassignments().get();
                if (!ongoing.containsKey(tp)) break;
                Check.check(System.currentTimeMillis() < deadline,
                        "still under way after " + DEADLINE_MS + " ms: " + ongoing.get(tp));
                Thread.sleep(200);
            }

            Check.step("describeTopics shows the target");
            TopicPartitionInfo info = describe(admin, topic);
            Set<Integer> replicas = ids(info.replicas());
            Check.check(replicas.equals(Set.copyOf(target)), "replicas " + replicas);
            Check.check(ids(info.isr()).equals(Set.copyOf(target)), "isr " + ids(info.isr()));

            Check.step("electLeaders(PREFERRED)");
            int preferred = target.get(0);
            if (info.leader() == null || info.leader().id() != preferred) {
                admin.electLeaders(ElectionType.PREFERRED, Set.of(tp)).all().get();
            }
            while (true) {
                info = describe(admin, topic);
                if (info.leader() != null && info.leader().id() == preferred) break;
                Check.check(System.currentTimeMillis() < deadline,
                        "leader " + info.leader() + ", not " + preferred);
                Thread.sleep(200);
            }
            System.out.println("OK leader=" + info.leader().id() + " replicas="
                    + info.replicas().stream().map(n -> Integer.toString(n.id()))
                            .collect(Collectors.joining(",")));
        } catch (ExecutionException e) {
            Check.fail(e.getCause().toString());
        }
    }

    private static TopicPartitionInfo describe(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        return d.partitions().get(0);
    }

    private static Set<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).collect(Collectors.toSet());
    }
}
