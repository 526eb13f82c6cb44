//! Client telemetry (KIP-714): GetTelemetrySubscriptions and PushTelemetry, answered as a
//! Kafka 4.4 broker without a client-metrics receiver answers them. Such a broker does not
//! advertise the two APIs (so clients do not send them), but answers a client that sends them
//! anyway: no metric is requested (an empty subscription tells the client not to push), and a
//! push is checked and its metrics dropped. ringlog has no receiver and no client-metrics
//! subscriptions, so it does the same, with no state per client: a subscription id is a pure
//! function of the client instance id, computed as Kafka computes it for an empty
//! subscription, so a push carrying the id its GetTelemetrySubscriptions gave is accepted by
//! any node. The metrics are a slice of the request frame (bounded by the frame limit) and are
//! never copied.

use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
    PushTelemetryResponse,
};
use uuid::Uuid;

use crate::codes;

/// The push interval an empty subscription names: Kafka's default
/// (`ClientMetricsConfigs.INTERVAL_MS_DEFAULT`, 5 minutes).
pub const PUSH_INTERVAL_MS: i32 = 300_000;
/// The largest metrics payload a push may carry: Kafka's default `telemetry.max.bytes`.
pub const TELEMETRY_MAX_BYTES: i32 = 1024 * 1024;
/// The compression types a client may push with, in Kafka's order of preference: zstd, lz4,
/// gzip, snappy.
const ACCEPTED_COMPRESSION_TYPES: [i8; 4] = [4, 3, 1, 2];
/// The compression type ids Kafka knows (none, gzip, snappy, lz4, zstd).
const COMPRESSION_TYPE_IDS: std::ops::RangeInclusive<i8> = 0..=4;
/// Kafka's reserved UUIDs (`Uuid.RESERVED`): zero and one. Neither identifies a client.
const RESERVED_IDS: [Uuid; 2] = [Uuid::nil(), Uuid::from_u128(1)];
/// The most new client instance ids tried before one is taken as it is (the first is all but
/// certain to do: see [`new_client_instance_id`]).
const MAX_CLIENT_ID_DRAWS: usize = 8;

/// Kafka's `Uuid.hashCode`: the two 64-bit halves XORed, then the two 32-bit halves of that.
fn java_uuid_hash(id: Uuid) -> i32 {
    let (high, low) = id.as_u64_pair();
    let x = high ^ low;
    ((x >> 32) as i32) ^ (x as i32)
}

/// The subscription id of client `id` when no metric is subscribed: Kafka's
/// `computeSubscriptionId` (the CRC32C of the metric set's text, `[]`, followed by the push
/// interval, XORed with the client id's hash).
pub fn subscription_id(id: Uuid) -> i32 {
    let text = format!("[]{PUSH_INTERVAL_MS}");
    (crc32c::crc32c(text.as_bytes()) as i32) ^ java_uuid_hash(id)
}

/// A fresh random client instance id, as Kafka's `Uuid.randomUuid` makes one: a version 4
/// UUID that is not reserved and whose base64 text does not start with `-` (which a command
/// line would take for an option).
fn new_client_instance_id() -> Uuid {
    let mut id = Uuid::nil();
    for _ in 0..MAX_CLIENT_ID_DRAWS {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&meta::state::random_u64().to_be_bytes());
        bytes[8..].copy_from_slice(&meta::state::random_u64().to_be_bytes());
        id = uuid::Builder::from_random_bytes(bytes).into_uuid();
        // Base64 `-` is 62: the first byte's top six bits.
        if !RESERVED_IDS.contains(&id) && id.as_bytes()[0] >> 2 != 62 {
            break;
        }
    }
    id
}

/// GetTelemetrySubscriptions: the client's instance id (a new one when it sent zero) and an
/// empty subscription.
pub fn get_telemetry_subscriptions(
    req: &GetTelemetrySubscriptionsRequest,
) -> GetTelemetrySubscriptionsResponse {
    let id = if req.client_instance_id.is_nil() {
        new_client_instance_id()
    } else {
        req.client_instance_id
    };
    GetTelemetrySubscriptionsResponse::default()
        .with_client_instance_id(id)
        .with_subscription_id(subscription_id(id))
        .with_accepted_compression_types(ACCEPTED_COMPRESSION_TYPES.to_vec())
        .with_push_interval_ms(PUSH_INTERVAL_MS)
        .with_telemetry_max_bytes(TELEMETRY_MAX_BYTES)
        .with_delta_temporality(true)
        .with_requested_metrics(Vec::new())
}

/// PushTelemetry: Kafka's checks of a push, in its order (a reserved client id, a
/// subscription id other than the client's, an unknown compression type, metrics above
/// [`TELEMETRY_MAX_BYTES`]); a push that passes is accepted and its metrics dropped.
pub fn push_telemetry(req: &PushTelemetryRequest) -> PushTelemetryResponse {
    let id = req.client_instance_id;
    let code = if RESERVED_IDS.contains(&id) {
        codes::INVALID_REQUEST
    } else if req.subscription_id != subscription_id(id) {
        codes::UNKNOWN_SUBSCRIPTION_ID
    } else if !COMPRESSION_TYPE_IDS.contains(&req.compression_type) {
        codes::UNSUPPORTED_COMPRESSION_TYPE
    } else if req.metrics.len() > TELEMETRY_MAX_BYTES as usize {
        codes::TELEMETRY_TOO_LARGE
    } else {
        codes::NONE
    };
    PushTelemetryResponse::default().with_error_code(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn a_subscription_id_is_kafkas_for_an_empty_subscription() {
        // Kafka's hash of a UUID: halves XORed (0x0102030405060708 ^ 0x1112131415161718 =
        // 0x1010101010101010), then 0x10101010 ^ 0x10101010 = 0.
        let id = Uuid::from_u128(0x0102_0304_0506_0708_1112_1314_1516_1718);
        assert_eq!(java_uuid_hash(id), 0);
        let crc = crc32c::crc32c(b"[]300000") as i32;
        assert_eq!(subscription_id(id), crc);
        let other = Uuid::from_u128(0xffff_ffff_0000_0000_0000_0000_0000_0001);
        assert_eq!(java_uuid_hash(other), -1 ^ 1);
        assert_eq!(subscription_id(other), crc ^ (-1 ^ 1));
    }

    #[test]
    fn a_client_gets_an_empty_subscription_and_keeps_its_id() {
        let id = Uuid::from_u128(42);
        let r = get_telemetry_subscriptions(
            &GetTelemetrySubscriptionsRequest::default().with_client_instance_id(id),
        );
        assert_eq!(r.error_code, 0);
        assert_eq!(r.client_instance_id, id);
        assert_eq!(r.subscription_id, subscription_id(id));
        assert!(r.requested_metrics.is_empty());
        assert_eq!(r.push_interval_ms, PUSH_INTERVAL_MS);
        assert_eq!(r.telemetry_max_bytes, TELEMETRY_MAX_BYTES);
        assert!(r.delta_temporality);
        // A new client (id zero) is given an id of its own, a different one each time.
        let fresh = |_| {
            get_telemetry_subscriptions(&GetTelemetrySubscriptionsRequest::default())
                .client_instance_id
        };
        let (a, b) = (fresh(0), fresh(1));
        assert!(!RESERVED_IDS.contains(&a) && a != b);
        assert_eq!(a.get_version_num(), 4);
    }

    #[test]
    fn a_push_is_checked_in_kafkas_order_and_then_accepted() {
        let id = Uuid::from_u128(42);
        let push = PushTelemetryRequest::default()
            .with_client_instance_id(id)
            .with_subscription_id(subscription_id(id))
            .with_metrics(Bytes::from_static(b"metrics"));
        let code = |r: PushTelemetryRequest| push_telemetry(&r).error_code;
        assert_eq!(code(push.clone()), codes::NONE);
        assert_eq!(
            code(push.clone().with_client_instance_id(Uuid::nil())),
            codes::INVALID_REQUEST
        );
        assert_eq!(
            code(push.clone().with_client_instance_id(Uuid::from_u128(1))),
            codes::INVALID_REQUEST
        );
        assert_eq!(
            code(push.clone().with_subscription_id(subscription_id(id) ^ 1)),
            codes::UNKNOWN_SUBSCRIPTION_ID
        );
        assert_eq!(
            code(push.clone().with_compression_type(5)),
            codes::UNSUPPORTED_COMPRESSION_TYPE
        );
        let big = Bytes::from(vec![0u8; TELEMETRY_MAX_BYTES as usize + 1]);
        assert_eq!(
            code(push.clone().with_metrics(big)),
            codes::TELEMETRY_TOO_LARGE
        );
        // The subscription is checked before the compression type.
        assert_eq!(
            code(push.with_subscription_id(0).with_compression_type(-1)),
            codes::UNKNOWN_SUBSCRIPTION_ID
        );
    }
}
