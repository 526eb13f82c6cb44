// What Kafka's `kafka-configs --entity-type users|clients` does, through the Admin API it is
// built on (the tool itself is not in the jars these machines have), against ringlog
// (issue #19): client quotas set, described, filtered and removed (AlterClientQuotas,
// DescribeClientQuotas), a bad key refused, and a user's SCRAM credential added, described
// and deleted (AlterUserScramCredentials, DescribeUserScramCredentials); and what
// `kafka-acls --add/--list/--remove` does (CreateAcls, DescribeAcls, DeleteAcls) with a
// prefixed pattern.
//
// usage: java -cp KAFKA_CLIENTS_JARS:. QuotaCheck BOOTSTRAP CLIENT_ID BYTES_PER_SEC [READER_ID [BUSY_ID]]
// Leaves producer_byte_rate=BYTES_PER_SEC set on CLIENT_ID (and consumer_byte_rate on
// READER_ID, request_percentage=0.01 on BUSY_ID). Prints "OK <summary>" on
// success; exits 1 with "FAIL: <step>: <detail>" otherwise.

import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.quota.*;

public class QuotaCheck {
    static void fail(String step, Object detail) {
        System.out.println("FAIL: " + step + ": " + detail);
        System.exit(1);
    }

    static Map<ClientQuotaEntity, Map<String, Double>> describe(Admin admin, ClientQuotaFilter f) throws Exception {
        return admin.describeClientQuotas(f).entities().get(30, TimeUnit.SECONDS);
    }

    static ClientQuotaEntity entity(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put(kv[i], kv[i + 1]);
        return new ClientQuotaEntity(m);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], clientId = args[1];
        double rate = Double.parseDouble(args[2]);
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        try (Admin admin = Admin.create(p)) {
            ClientQuotaEntity slow = entity(ClientQuotaEntity.CLIENT_ID, clientId);
            ClientQuotaEntity alice = entity(ClientQuotaEntity.USER, "alice", ClientQuotaEntity.CLIENT_ID, null);
            // kafka-configs --alter --entity-type clients --entity-name CLIENT_ID --add-config producer_byte_rate=...
            // kafka-configs --alter --entity-type users --entity-name alice --entity-type clients --entity-default --add-config ...
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(slow, List.of(new ClientQuotaAlteration.Op("producer_byte_rate", rate))),
                new ClientQuotaAlteration(alice, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 2e6),
                    new ClientQuotaAlteration.Op("request_percentage", 150.0)))
            )).all().get(30, TimeUnit.SECONDS);
            Map<ClientQuotaEntity, Map<String, Double>> all = describe(admin, ClientQuotaFilter.all());
            if (all.size() != 2 || !Map.of("producer_byte_rate", rate).equals(all.get(slow))
                || !Map.of("consumer_byte_rate", 2e6, "request_percentage", 150.0).equals(all.get(alice)))
                fail("describe all", all);
            // --describe --entity-type clients --entity-name CLIENT_ID (strict: that entity alone)
            Map<ClientQuotaEntity, Map<String, Double>> one = describe(admin, ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, clientId))));
            if (one.size() != 1 || !one.containsKey(slow)) fail("describe one", one);
            // --describe --entity-type users --entity-name alice (not strict: with any client part)
            Map<ClientQuotaEntity, Map<String, Double>> users = describe(admin, ClientQuotaFilter.contains(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice"))));
            if (users.size() != 1 || !users.containsKey(alice)) fail("describe users", users);
            Map<ClientQuotaEntity, Map<String, Double>> defaults = describe(admin, ClientQuotaFilter.contains(
                List.of(ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.CLIENT_ID))));
            if (defaults.size() != 1 || !defaults.containsKey(alice)) fail("describe defaults", defaults);
            // An unknown key is refused, and changes nothing.
            try {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(slow,
                    List.of(new ClientQuotaAlteration.Op("bytes_per_fortnight", 1.0))))).all().get(30, TimeUnit.SECONDS);
                fail("bad key", "accepted");
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof InvalidRequestException)) fail("bad key", e.getCause());
            }
            // --delete-config: removing every key of alice's entity removes it.
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice, List.of(
                new ClientQuotaAlteration.Op("consumer_byte_rate", null),
                new ClientQuotaAlteration.Op("request_percentage", null))))).all().get(30, TimeUnit.SECONDS);
            all = describe(admin, ClientQuotaFilter.all());
            if (all.size() != 1 || !all.containsKey(slow)) fail("describe after delete", all);

            // kafka-configs --alter --entity-type users --entity-name alice --add-config 'SCRAM-SHA-512=[password=...]'
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("alice",
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "alice-pw"))).all().get(30, TimeUnit.SECONDS);
            UserScramCredentialsDescription d = admin.describeUserScramCredentials(List.of("alice"))
                .description("alice").get(30, TimeUnit.SECONDS);
            if (d.credentialInfos().size() != 1 || d.credentialInfos().get(0).mechanism() != ScramMechanism.SCRAM_SHA_512
                || d.credentialInfos().get(0).iterations() != 8192)
                fail("describe user", d);
            // --delete-config SCRAM-SHA-512
            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)))
                .all().get(30, TimeUnit.SECONDS);
            Map<String, UserScramCredentialsDescription> left = admin.describeUserScramCredentials().all().get(30, TimeUnit.SECONDS);
            if (left.containsKey("alice")) fail("user deleted", left);

            // kafka-acls --add --allow-principal User:bob --operation Read --operation Describe
            //   --topic acl-tool- --resource-pattern-type prefixed
            ResourcePattern prefix = new ResourcePattern(ResourceType.TOPIC, "acl-tool-", PatternType.PREFIXED);
            List<AclBinding> acls = List.of(
                new AclBinding(prefix, new AccessControlEntry("User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW)),
                new AclBinding(prefix, new AccessControlEntry("User:bob", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)));
            admin.createAcls(acls).all().get(30, TimeUnit.SECONDS);
            // kafka-acls --list --topic acl-tool- --resource-pattern-type prefixed
            Collection<AclBinding> listed = admin.describeAcls(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "acl-tool-", PatternType.PREFIXED),
                AccessControlEntryFilter.ANY)).values().get(30, TimeUnit.SECONDS);
            if (!new HashSet<>(listed).equals(new HashSet<>(acls))) fail("list ACLs", listed);
            // kafka-acls --list --topic acl-tool-x (MATCH: the prefixed ACLs that apply to it)
            Collection<AclBinding> matching = admin.describeAcls(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "acl-tool-x", PatternType.MATCH),
                AccessControlEntryFilter.ANY)).values().get(30, TimeUnit.SECONDS);
            if (matching.size() != 2) fail("ACLs matching a topic", matching);
            // kafka-acls --remove --allow-principal User:bob --operation Read ...
            Collection<AclBinding> removed = admin.deleteAcls(List.of(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, "acl-tool-", PatternType.PREFIXED),
                new AccessControlEntryFilter("User:bob", null, AclOperation.READ, AclPermissionType.ALLOW))))
                .all().get(30, TimeUnit.SECONDS);
            if (removed.size() != 1) fail("remove ACL", removed);
            admin.deleteAcls(List.of(AclBindingFilter.ANY)).all().get(30, TimeUnit.SECONDS);
            Collection<AclBinding> none = admin.describeAcls(AclBindingFilter.ANY).values().get(30, TimeUnit.SECONDS);
            if (!none.isEmpty()) fail("ACLs left", none);

            if (args.length > 3) {
                ClientQuotaEntity reader = entity(ClientQuotaEntity.CLIENT_ID, args[3]);
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(reader,
                    List.of(new ClientQuotaAlteration.Op("consumer_byte_rate", rate))))).all().get(30, TimeUnit.SECONDS);
                if (!Map.of("consumer_byte_rate", rate).equals(describe(admin, ClientQuotaFilter.all()).get(reader)))
                    fail("reader quota", describe(admin, ClientQuotaFilter.all()));
            }
            if (args.length > 4) {
                ClientQuotaEntity busy = entity(ClientQuotaEntity.CLIENT_ID, args[4]);
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(busy,
                    List.of(new ClientQuotaAlteration.Op("request_percentage", 0.01))))).all().get(30, TimeUnit.SECONDS);
            }
        }
        System.out.println("OK quotas set, described, filtered, refused and removed; SCRAM user added, described and deleted; prefixed ACLs added, listed, matched and removed");
    }
}
