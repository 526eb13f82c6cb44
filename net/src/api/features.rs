//! The broker's features (KIP-584): what ApiVersions reports, and UpdateFeatures (v0–2,
//! `kafka-features upgrade|downgrade|disable`). ringlog's features are fixed by its release:
//! each is supported at exactly the level it is finalized at. An update to that level is
//! answered as Kafka's controller answers one that changes nothing (success); any other level,
//! upgrade type or feature is refused with INVALID_UPDATE_VERSION and Kafka's wording, the
//! whole request with it, as Kafka refuses every update of a request when one fails.

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::str_bytes;
use crate::codes::INVALID_UPDATE_VERSION;

/// The features ApiVersions v3+ reports (what `kafka-features describe` prints), each
/// supported and finalized at its one level: transactions as version 1 of the protocol
/// (`transaction.version` 0: no KIP-890), and the KIP-848 consumer group protocol beside
/// classic groups (`group.version` 1).
pub const FEATURES: &[(&str, i16)] = &[("group.version", 1), ("transaction.version", 0)];

/// The finalized features never change: one epoch for ever.
pub const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// Kafka's `FeatureUpdate.UpgradeType` codes (UpdateFeatures v1+; v0 has `allow_downgrade`).
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

/// What Kafka's controller puts ahead of the error of the update that failed.
const FEATURE_ERROR_PREFIX: &str =
    "The update failed for all features since the following feature had an error: ";

/// UpdateFeatures: success (one result per update at v0 and v1; v2 has no results) when every
/// update asks for its feature's finalized level, else the first refusal, with no results.
/// `validate_only` changes nothing here: no update ever changes anything.
pub fn update_features(version: i16, req: &UpdateFeaturesRequest) -> UpdateFeaturesResponse {
    if let Some(why) = req.feature_updates.iter().find_map(|u| refusal(version, u)) {
        return UpdateFeaturesResponse::default()
            .with_error_code(INVALID_UPDATE_VERSION)
            .with_error_message(Some(str_bytes(format!("{FEATURE_ERROR_PREFIX}{why}"))));
    }
    let results = if version <= 1 {
        let ok = |u: &FeatureUpdateKey| {
            UpdatableFeatureResult::default().with_feature(u.feature.clone())
        };
        req.feature_updates.iter().map(ok).collect()
    } else {
        Vec::new()
    };
    UpdateFeaturesResponse::default().with_results(results)
}

/// Why `u` cannot be applied, in Kafka's words (`None`: it asks for the finalized level).
fn refusal(version: i16, u: &FeatureUpdateKey) -> Option<String> {
    let (name, level) = (u.feature.as_str(), u.max_version_level);
    let upgrade_type = match (version, u.allow_downgrade) {
        (0, true) => SAFE_DOWNGRADE,
        (0, false) => UPGRADE,
        _ => u.upgrade_type,
    };
    let invalid = |why: String| {
        Some(format!(
            "Invalid update version {level} for feature {name}. {why}"
        ))
    };
    if !(UPGRADE..=UNSAFE_DOWNGRADE).contains(&upgrade_type) {
        return invalid("The controller does not support the given upgrade type.".into());
    }
    if level < 0 {
        return invalid("A feature version cannot be less than 0.".into());
    }
    match FEATURES.iter().find(|(n, _)| *n == name) {
        None => invalid("ringlog does not support this feature.".into()),
        Some(&(_, finalized)) if level != finalized => invalid(format!(
            "ringlog supports only version {finalized} of it (its features are fixed by its \
             release)."
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(feature: &str, level: i16, upgrade_type: i8) -> FeatureUpdateKey {
        FeatureUpdateKey::default()
            .with_feature(str_bytes(feature))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type)
    }

    fn request(updates: Vec<FeatureUpdateKey>) -> UpdateFeaturesRequest {
        UpdateFeaturesRequest::default().with_feature_updates(updates)
    }

    #[test]
    fn the_finalized_level_is_accepted_and_changes_nothing() {
        let req = request(vec![
            update("group.version", 1, UPGRADE),
            update("transaction.version", 0, UPGRADE),
        ]);
        for version in 0..=2 {
            let r = update_features(version, &req);
            assert_eq!(r.error_code, 0, "v{version}: {:?}", r.error_message);
            let names: Vec<&str> = r.results.iter().map(|x| x.feature.as_str()).collect();
            let want: &[&str] = if version <= 1 {
                &["group.version", "transaction.version"]
            } else {
                &[]
            };
            assert_eq!(names, want, "v{version}");
            assert!(r.results.iter().all(|x| x.error_code == 0));
        }
        // Safe and unsafe downgrades to the same level change nothing either.
        let same = request(vec![update("group.version", 1, UNSAFE_DOWNGRADE)]);
        assert_eq!(update_features(2, &same).error_code, 0);
    }

    #[test]
    fn any_other_level_type_or_feature_refuses_the_whole_request() {
        let cases = [
            (update("group.version", 5, UPGRADE), "Invalid update version 5 for feature group.version. ringlog supports only version 1"),
            (update("group.version", 0, SAFE_DOWNGRADE), "Invalid update version 0 for feature group.version. ringlog supports only version 1"),
            (update("group.version", -1, UPGRADE), "A feature version cannot be less than 0."),
            (update("group.version", 1, 9), "The controller does not support the given upgrade type."),
            (update("share.version", 1, UPGRADE), "ringlog does not support this feature."),
        ];
        for (bad, text) in cases {
            // The good update first: it is refused with the bad one.
            let req = request(vec![update("group.version", 1, UPGRADE), bad]);
            for version in 1..=2 {
                let r = update_features(version, &req);
                assert_eq!(r.error_code, INVALID_UPDATE_VERSION, "{text}");
                let message = r.error_message.as_deref().unwrap_or_default();
                assert!(message.starts_with(FEATURE_ERROR_PREFIX), "{message}");
                assert!(message.contains(text), "{message}");
                assert!(r.results.is_empty());
            }
        }
    }

    #[test]
    fn version_0_reads_allow_downgrade_instead_of_the_upgrade_type() {
        let mut down = update("group.version", 1, 0);
        down.allow_downgrade = true;
        assert_eq!(
            update_features(0, &request(vec![down.clone()])).error_code,
            0
        );
        // From v1 the same key's upgrade type 0 is no type Kafka knows.
        assert_eq!(
            update_features(1, &request(vec![down])).error_code,
            INVALID_UPDATE_VERSION
        );
    }
}
