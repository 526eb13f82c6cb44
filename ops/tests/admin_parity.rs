//! Kafka 4 parity for the Admin calls behind Kafka's tools (issue #12), with the Java client
//! (kafka-clients 4.4 from Maven Central, `scripts/kafka-peer.sh`): describeLogDirs (kafka-log-dirs),
//! describeProducers (kafka-transactions describe-producers), listOffsets with the earliest,
//! latest and max-timestamp specs (kafka-get-offsets), electLeaders and alterReplicaLogDirs
//! (refused cleanly: one replica, one dir), describeMetadataQuorum (kafka-metadata-quorum).
//! See `tests/clients/AdminParity.java`.

mod support;

use support::*;

#[test]
fn java_admin_describes_log_dirs_producers_offsets_and_the_quorum() {
    let mut broker = Broker::start(2);
    let ok = support::java::run_check("AdminParity", &broker.bootstrap());
    eprintln!("{ok}");
    broker.assert_alive();
    broker.terminate();
}
