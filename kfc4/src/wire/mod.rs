//! The codec of the five barrier admin APIs (keys 1010–1014, version 0 only), in Kafka's
//! flexible framing.
//!
//! A frame is `size i32` then a header then a body. Requests use request header v2:
//! `api_key i16 | api_version i16 | correlation_id i32 | client_id NULLABLE_STRING (i16
//! length, -1 null) | TAGGED_FIELDS`; responses use response header v1: `correlation_id i32 |
//! TAGGED_FIELDS`. In bodies a string is a COMPACT_STRING (unsigned varint `len + 1`, then
//! UTF-8 bytes; 0 is null where nullable), an array a COMPACT_ARRAY (unsigned varint
//! `n + 1`, then the elements; 0 is null where nullable), and every struct, the body
//! included, ends with TAGGED_FIELDS (unsigned varint count, then per field `tag uvarint |
//! size uvarint | bytes`). Encoders write no tagged fields; decoders skip unknown ones.
//!
//! Bodies, in wire order (`[...]`: a compact array, `_t`: tagged fields), exactly as krabka's
//! KFC-4 speaks them:
//!
//! ```text
//! 1010 AlterBarrierGroups     rq: groups [group | topics [string] | interval_ms i64 (-1: off)
//!                                 | retained_cuts i32 | delete bool | _t] | _t
//!                             rs: throttle_time_ms i32 | results [group | error_code i16
//!                                 | error_message nullable | _t] | _t
//! 1011 DescribeBarrierGroups  rq: groups [string] (empty: every group) | _t
//!                             rs: throttle_time_ms i32 | groups [group | error_code i16
//!                                 | error_message nullable | topics [string] | interval_ms i64
//!                                 | retained_cuts i32 | last_epoch i64 | coordinator_id i32
//!                                 | _t] | _t
//! 1012 TriggerBarrier         rq: group | timeout_ms i32 | _t
//!                             rs: throttle_time_ms i32 | error_code i16 | error_message nullable
//!                                 | epoch i64 | status i8 (0 complete, 1 partial) | topics
//!                                 [topic | partitions [partition i32 | offset i64 | _t] | _t]
//!                                 | missing [topic | partition i32 | _t] | _t
//! 1013 ListBarrierCuts        rq: group | from_epoch i64 | max_results i32 (< 0: all) | _t
//!                             rs: throttle_time_ms i32 | error_code i16 | error_message nullable
//!                                 | cuts [epoch i64 | triggered_at i64 | completed_at i64
//!                                 | status i8 | topics [...as above] | missing [...] | _t] | _t
//! 1014 WriteBarrierMarkers    rq: group | epoch i64 | triggered_at i64 | topics [topic
//!                                 | partitions [partition i32 | expected_leader_epoch i32
//!                                 | _t] | _t] | _t
//!                             rs: topics [topic | partitions [partition i32 | error_code i16
//!                                 | offset i64 | _t] | _t] | _t          (no throttle time)
//! ```
//!
//! Decoders take hostile bytes: they refuse truncation, trailing bytes, strings over
//! [`MAX_WIRE_STRING_BYTES`], more than [`MAX_TAGGED_FIELDS`] tagged fields in one struct,
//! unsigned varints over 32 bits, and element counts the bytes left could not hold; a cut's
//! topic names are also held to [`MAX_TOPIC_NAME_BYTES`] (a cut's `missing` partitions are
//! flattened into one `(topic, partition)` each, so the name's length bounds how much memory
//! a few bytes can ask for).

use std::fmt;

use bytes::BufMut;

use crate::reader::{DecodeError, ErrorContext};

use crate::{Cut, CutStatus, MAX_TOPIC_NAME_BYTES};

/// AlterBarrierGroups: create, change or delete barrier groups.
pub const ALTER_BARRIER_GROUPS: i16 = 1010;
/// DescribeBarrierGroups: the groups' definitions and latest epochs.
pub const DESCRIBE_BARRIER_GROUPS: i16 = 1011;
/// TriggerBarrier: start an injection now (optionally waiting for its cut).
pub const TRIGGER_BARRIER: i16 = 1012;
/// ListBarrierCuts: a group's retained cuts.
pub const LIST_BARRIER_CUTS: i16 = 1013;
/// WriteBarrierMarkers: write a cut's markers into partitions (coordinator to leaders).
pub const WRITE_BARRIER_MARKERS: i16 = 1014;
/// The one version of every barrier API.
pub const BARRIER_API_VERSION: i16 = 0;
/// Error code: the group has an injection under way.
pub const BARRIER_INJECTION_IN_PROGRESS: i16 = 1000;
/// The request header version of the barrier APIs (flexible).
pub const REQUEST_HEADER_VERSION: i16 = 2;
/// The response header version of the barrier APIs (flexible).
pub const RESPONSE_HEADER_VERSION: i16 = 1;
/// The epoch of a refused TriggerBarrier, and the `last_epoch` of a described group's error
/// row.
pub const NO_EPOCH: i64 = -1;
/// The `coordinator_id` of a described group whose coordinator is not known.
pub const NO_COORDINATOR: i32 = -1;
/// The `interval_ms` of a group with no periodic injection (any negative value reads so).
pub const INTERVAL_OFF_MS: i64 = crate::INTERVAL_OFF_MS;
/// The `expected_leader_epoch` a WriteBarrierMarkers partition carries by default: it is
/// fenced (FENCED_LEADER_EPOCH), as krabka's newest broker does.
pub const UNKNOWN_LEADER_EPOCH: i32 = -1;
/// The longest string a decoder accepts, in bytes (Kafka's `i16` string limit).
pub const MAX_WIRE_STRING_BYTES: usize = 32_767;
/// The most tagged fields a decoder skips in one struct.
pub const MAX_TAGGED_FIELDS: usize = 64;
/// The `api_key` of a [`WireError`] for a frame too short to hold one.
pub const UNKNOWN_API_KEY: i16 = -1;

/// The fewest bytes of a compact string (its length).
const STRING_MIN_BYTES: usize = 1;
/// The fewest bytes of a `topic | partitions [...] | _t` element.
const TOPIC_MIN_BYTES: usize = 1 + 1 + 1;
/// The fewest bytes of a [`GroupAlteration`].
const GROUP_ALTERATION_MIN_BYTES: usize = 1 + 1 + 8 + 4 + 1 + 1;
/// The fewest bytes of a [`GroupResult`].
const GROUP_RESULT_MIN_BYTES: usize = 1 + 2 + 1 + 1;
/// The fewest bytes of a [`DescribedGroup`].
const DESCRIBED_GROUP_MIN_BYTES: usize = 1 + 2 + 1 + 1 + 8 + 4 + 8 + 4 + 1;
/// The fewest bytes of a cut.
const CUT_MIN_BYTES: usize = 8 + 8 + 8 + 1 + 1 + 1 + 1;
/// The bytes of a `partition i32 | offset i64 | _t` element (with no tagged fields).
const PARTITION_OFFSET_MIN_BYTES: usize = 4 + 8 + 1;
/// The fewest bytes of a `topic | partition i32 | _t` element.
const MISSING_PARTITION_MIN_BYTES: usize = 1 + 4 + 1;
/// The fewest bytes of a `partition i32 | expected_leader_epoch i32 | _t` element.
const MARKER_TARGET_MIN_BYTES: usize = 4 + 4 + 1;
/// The fewest bytes of a [`MarkerResult`].
const MARKER_RESULT_MIN_BYTES: usize = 4 + 2 + 8 + 1;

/// A frame that could not be decoded: `what` is the API key of the frame
/// ([`UNKNOWN_API_KEY`] when it holds none), `at_byte` an offset in the frame after its size
/// prefix.
pub type WireError = DecodeError<i16>;

/// Whether `key` is one of the five barrier APIs.
pub fn is_barrier_api(key: i16) -> bool {
    (ALTER_BARRIER_GROUPS..=WRITE_BARRIER_MARKERS).contains(&key)
}

/// A request header (v2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHeader {
    /// The API key.
    pub api_key: i16,
    /// The API version (always [`BARRIER_API_VERSION`] once decoded).
    pub api_version: i16,
    /// Echoed in the response.
    pub correlation_id: i32,
    /// The client's id, if it sent one.
    pub client_id: Option<String>,
}

/// One group to create, change or delete.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupAlteration {
    /// The group.
    pub name: String,
    /// The topics its cuts cover.
    pub topics: Vec<String>,
    /// How often it is triggered, in milliseconds; [`INTERVAL_OFF_MS`]: never by itself.
    pub interval_ms: i64,
    /// How many published cuts are kept.
    pub retained_cuts: i32,
    /// Delete the group (the other fields are then ignored).
    pub delete: bool,
}

/// AlterBarrierGroups request (key 1010).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlterBarrierGroupsRequest {
    /// The groups to alter, each on its own, in order.
    pub groups: Vec<GroupAlteration>,
}

/// The outcome for one group of an AlterBarrierGroups request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupResult {
    /// The group.
    pub name: String,
    /// 0, or the Kafka error code.
    pub error_code: i16,
    /// A message for the error, if any.
    pub error_message: Option<String>,
}

/// AlterBarrierGroups response (key 1010).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlterBarrierGroupsResponse {
    /// Kafka's throttle time, in milliseconds.
    pub throttle_time_ms: i32,
    /// One per requested group, in request order.
    pub results: Vec<GroupResult>,
}

/// DescribeBarrierGroups request (key 1011).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeBarrierGroupsRequest {
    /// The groups to describe; empty for every group.
    pub groups: Vec<String>,
}

/// One group of a DescribeBarrierGroups response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    /// The group.
    pub name: String,
    /// 0, or the Kafka error code (the other fields then hold their defaults).
    pub error_code: i16,
    /// A message for the error, if any.
    pub error_message: Option<String>,
    /// The topics its cuts cover.
    pub topics: Vec<String>,
    /// How often it is triggered, in milliseconds; [`INTERVAL_OFF_MS`]: never by itself.
    pub interval_ms: i64,
    /// How many published cuts are kept.
    pub retained_cuts: i32,
    /// The epoch of the last published cut (0: none yet; [`NO_EPOCH`] in an error row).
    pub last_epoch: i64,
    /// The node id of its coordinator ([`NO_COORDINATOR`]: not known).
    pub coordinator_id: i32,
}

impl Default for DescribedGroup {
    /// An error row's defaults.
    fn default() -> Self {
        DescribedGroup {
            name: String::new(),
            error_code: 0,
            error_message: None,
            topics: Vec::new(),
            interval_ms: INTERVAL_OFF_MS,
            retained_cuts: 0,
            last_epoch: NO_EPOCH,
            coordinator_id: NO_COORDINATOR,
        }
    }
}

/// DescribeBarrierGroups response (key 1011).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeBarrierGroupsResponse {
    /// Kafka's throttle time, in milliseconds.
    pub throttle_time_ms: i32,
    /// The groups described.
    pub groups: Vec<DescribedGroup>,
}

/// TriggerBarrier request (key 1012).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TriggerBarrierRequest {
    /// The group to trigger.
    pub group: String,
    /// How long the injection retries refused markers before it publishes the cut as
    /// partial, in milliseconds (0 or less: the broker's `barrier-injection-timeout-ms`).
    /// The answer waits for the cut.
    pub timeout_ms: i32,
}

/// Per topic, `(partition, offset)` of a cut's markers.
pub type CutOffsets = Vec<(String, Vec<(i32, i64)>)>;

/// TriggerBarrier response (key 1012).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerBarrierResponse {
    /// Kafka's throttle time, in milliseconds.
    pub throttle_time_ms: i32,
    /// 0, or the Kafka error code.
    pub error_code: i16,
    /// A message for the error, if any.
    pub error_message: Option<String>,
    /// The cut's epoch ([`NO_EPOCH`] when refused).
    pub epoch: i64,
    /// The cut's [`CutStatus`] code (a refusal says partial, as krabka does).
    pub status: i8,
    /// Per topic, the offset of each marker.
    pub topics: CutOffsets,
    /// The `(topic, partition)` targets that never took their marker.
    pub missing: Vec<(String, i32)>,
}

impl Default for TriggerBarrierResponse {
    /// A refusal's defaults (epoch -1, status partial, no offsets).
    fn default() -> Self {
        TriggerBarrierResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            epoch: NO_EPOCH,
            status: CutStatus::Partial.code(),
            topics: Vec::new(),
            missing: Vec::new(),
        }
    }
}

/// ListBarrierCuts request (key 1013).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListBarrierCutsRequest {
    /// The group.
    pub group: String,
    /// The oldest epoch to list (inclusive).
    pub from_epoch: i64,
    /// The most cuts to list, oldest first (negative: all).
    pub max_results: i32,
}

/// ListBarrierCuts response (key 1013).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListBarrierCutsResponse {
    /// Kafka's throttle time, in milliseconds.
    pub throttle_time_ms: i32,
    /// 0, or the Kafka error code.
    pub error_code: i16,
    /// A message for the error, if any.
    pub error_message: Option<String>,
    /// The cuts, oldest first.
    pub cuts: Vec<Cut>,
}

/// WriteBarrierMarkers request (key 1014).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteBarrierMarkersRequest {
    /// The barrier group.
    pub group: String,
    /// The cut's epoch.
    pub epoch: i64,
    /// When the injection was triggered (ms since the epoch): the marker's timestamp.
    pub triggered_at_ms: i64,
    /// Per topic, `(partition, expected_leader_epoch)` of each partition to mark.
    pub topics: Vec<(String, Vec<(i32, i32)>)>,
}

/// The outcome for one partition of a WriteBarrierMarkers request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MarkerResult {
    /// The partition.
    pub partition: i32,
    /// 0, or the Kafka error code.
    pub error_code: i16,
    /// The marker's offset (-1 on error).
    pub offset: i64,
}

/// WriteBarrierMarkers response (key 1014).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteBarrierMarkersResponse {
    /// Per topic, one result per requested partition, in request order.
    pub topics: Vec<(String, Vec<MarkerResult>)>,
}

/// A decoded barrier request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BarrierRequest {
    /// Key 1010.
    Alter(AlterBarrierGroupsRequest),
    /// Key 1011.
    Describe(DescribeBarrierGroupsRequest),
    /// Key 1012.
    Trigger(TriggerBarrierRequest),
    /// Key 1013.
    List(ListBarrierCutsRequest),
    /// Key 1014.
    WriteMarkers(WriteBarrierMarkersRequest),
}

impl BarrierRequest {
    /// The request's API key.
    pub fn api_key(&self) -> i16 {
        match self {
            BarrierRequest::Alter(_) => ALTER_BARRIER_GROUPS,
            BarrierRequest::Describe(_) => DESCRIBE_BARRIER_GROUPS,
            BarrierRequest::Trigger(_) => TRIGGER_BARRIER,
            BarrierRequest::List(_) => LIST_BARRIER_CUTS,
            BarrierRequest::WriteMarkers(_) => WRITE_BARRIER_MARKERS,
        }
    }
}

/// A decoded barrier response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BarrierResponse {
    /// Key 1010.
    Alter(AlterBarrierGroupsResponse),
    /// Key 1011.
    Describe(DescribeBarrierGroupsResponse),
    /// Key 1012.
    Trigger(TriggerBarrierResponse),
    /// Key 1013.
    List(ListBarrierCutsResponse),
    /// Key 1014.
    WriteMarkers(WriteBarrierMarkersResponse),
}

impl BarrierResponse {
    /// The API key of the request this answers.
    pub fn api_key(&self) -> i16 {
        match self {
            BarrierResponse::Alter(_) => ALTER_BARRIER_GROUPS,
            BarrierResponse::Describe(_) => DESCRIBE_BARRIER_GROUPS,
            BarrierResponse::Trigger(_) => TRIGGER_BARRIER,
            BarrierResponse::List(_) => LIST_BARRIER_CUTS,
            BarrierResponse::WriteMarkers(_) => WRITE_BARRIER_MARKERS,
        }
    }
}

/// Decodes a request frame (the bytes after its 4-byte size prefix): header v2 then body.
/// Refuses keys other than the five barrier APIs, versions other than 0, trailing bytes.
pub fn decode_request_frame(frame: &[u8]) -> Result<(RequestHeader, BarrierRequest), WireError> {
    let mut r = Reader::new(UNKNOWN_API_KEY, frame);
    let api_key = r.i16("api_key")?;
    r.ctx = api_key;
    if !is_barrier_api(api_key) {
        return Err(r.err_at(0, format!("api_key: {api_key} is not a barrier API")));
    }
    let at = r.pos;
    let api_version = r.i16("api_version")?;
    if api_version != BARRIER_API_VERSION {
        return Err(r.err_at(
            at,
            format!(
                "api_version: version {api_version} of api {api_key} is not supported \
                 (only {BARRIER_API_VERSION})"
            ),
        ));
    }
    let correlation_id = r.i32("correlation_id")?;
    let client_id = r.nullable_str16("client_id", MAX_WIRE_STRING_BYTES)?;
    r.tagged_fields("header")?;
    let header = RequestHeader {
        api_key,
        api_version,
        correlation_id,
        client_id,
    };
    let request = match api_key {
        ALTER_BARRIER_GROUPS => BarrierRequest::Alter(read_alter_request(&mut r)?),
        DESCRIBE_BARRIER_GROUPS => BarrierRequest::Describe(read_describe_request(&mut r)?),
        TRIGGER_BARRIER => BarrierRequest::Trigger(read_trigger_request(&mut r)?),
        LIST_BARRIER_CUTS => BarrierRequest::List(read_list_request(&mut r)?),
        _ => BarrierRequest::WriteMarkers(read_write_markers_request(&mut r)?),
    };
    r.finish()?;
    Ok((header, request))
}

/// Encodes a request frame, its 4-byte big-endian size prefix included (version 0, header v2).
pub fn encode_request_frame(
    correlation_id: i32,
    client_id: Option<&str>,
    req: &BarrierRequest,
) -> Vec<u8> {
    let mut out = vec![0; 4];
    out.put_i16(req.api_key());
    out.put_i16(BARRIER_API_VERSION);
    out.put_i32(correlation_id);
    match client_id {
        None => out.put_i16(-1),
        // A length `i16` cannot describe is written as i16::MIN, which decoders refuse.
        Some(id) => match i16::try_from(id.len()) {
            Ok(len) => {
                out.put_i16(len);
                out.put_slice(id.as_bytes());
            }
            Err(_) => out.put_i16(i16::MIN),
        },
    }
    put_no_tags(&mut out);
    match req {
        BarrierRequest::Alter(r) => put_alter_request(&mut out, r),
        BarrierRequest::Describe(r) => put_describe_request(&mut out, r),
        BarrierRequest::Trigger(r) => put_trigger_request(&mut out, r),
        BarrierRequest::List(r) => put_list_request(&mut out, r),
        BarrierRequest::WriteMarkers(r) => put_write_markers_request(&mut out, r),
    }
    set_size_prefix(out)
}

/// Encodes a response frame, its 4-byte big-endian size prefix included (header v1).
pub fn encode_response_frame(correlation_id: i32, resp: &BarrierResponse) -> Vec<u8> {
    let mut out = vec![0; 4];
    out.put_i32(correlation_id);
    put_no_tags(&mut out);
    match resp {
        BarrierResponse::Alter(r) => put_alter_response(&mut out, r),
        BarrierResponse::Describe(r) => put_describe_response(&mut out, r),
        BarrierResponse::Trigger(r) => put_trigger_response(&mut out, r),
        BarrierResponse::List(r) => put_list_response(&mut out, r),
        BarrierResponse::WriteMarkers(r) => put_write_markers_response(&mut out, r),
    }
    set_size_prefix(out)
}

/// Decodes a response frame to a request of `api_key` (the bytes after its size prefix):
/// its correlation id and body. Refuses keys other than the barrier APIs, trailing bytes.
pub fn decode_response_frame(
    api_key: i16,
    frame: &[u8],
) -> Result<(i32, BarrierResponse), WireError> {
    let mut r = Reader::new(api_key, frame);
    if !is_barrier_api(api_key) {
        return Err(r.err_at(0, format!("api_key: {api_key} is not a barrier API")));
    }
    let correlation_id = r.i32("correlation_id")?;
    r.tagged_fields("header")?;
    let response = match api_key {
        ALTER_BARRIER_GROUPS => BarrierResponse::Alter(read_alter_response(&mut r)?),
        DESCRIBE_BARRIER_GROUPS => BarrierResponse::Describe(read_describe_response(&mut r)?),
        TRIGGER_BARRIER => BarrierResponse::Trigger(read_trigger_response(&mut r)?),
        LIST_BARRIER_CUTS => BarrierResponse::List(read_list_response(&mut r)?),
        _ => BarrierResponse::WriteMarkers(read_write_markers_response(&mut r)?),
    };
    r.finish()?;
    Ok((correlation_id, response))
}

// ---- bodies: encoding ----

fn put_alter_request(out: &mut Vec<u8>, r: &AlterBarrierGroupsRequest) {
    put_array(out, &r.groups, |out, g| {
        put_string(out, &g.name);
        put_array(out, &g.topics, |out, t| put_string(out, t));
        out.put_i64(g.interval_ms);
        out.put_i32(g.retained_cuts);
        put_bool(out, g.delete);
        put_no_tags(out);
    });
    put_no_tags(out);
}

fn put_alter_response(out: &mut Vec<u8>, r: &AlterBarrierGroupsResponse) {
    out.put_i32(r.throttle_time_ms);
    put_array(out, &r.results, |out, g| {
        put_string(out, &g.name);
        out.put_i16(g.error_code);
        put_nullable_string(out, g.error_message.as_deref());
        put_no_tags(out);
    });
    put_no_tags(out);
}

fn put_describe_request(out: &mut Vec<u8>, r: &DescribeBarrierGroupsRequest) {
    put_array(out, &r.groups, |out, g| put_string(out, g));
    put_no_tags(out);
}

fn put_describe_response(out: &mut Vec<u8>, r: &DescribeBarrierGroupsResponse) {
    out.put_i32(r.throttle_time_ms);
    put_array(out, &r.groups, |out, g| {
        put_string(out, &g.name);
        out.put_i16(g.error_code);
        put_nullable_string(out, g.error_message.as_deref());
        put_array(out, &g.topics, |out, t| put_string(out, t));
        out.put_i64(g.interval_ms);
        out.put_i32(g.retained_cuts);
        out.put_i64(g.last_epoch);
        out.put_i32(g.coordinator_id);
        put_no_tags(out);
    });
    put_no_tags(out);
}

fn put_trigger_request(out: &mut Vec<u8>, r: &TriggerBarrierRequest) {
    put_string(out, &r.group);
    out.put_i32(r.timeout_ms);
    put_no_tags(out);
}

fn put_trigger_response(out: &mut Vec<u8>, r: &TriggerBarrierResponse) {
    out.put_i32(r.throttle_time_ms);
    out.put_i16(r.error_code);
    put_nullable_string(out, r.error_message.as_deref());
    out.put_i64(r.epoch);
    out.put_i8(r.status);
    put_cut_offsets(out, &r.topics, &r.missing);
    put_no_tags(out);
}

fn put_list_request(out: &mut Vec<u8>, r: &ListBarrierCutsRequest) {
    put_string(out, &r.group);
    out.put_i64(r.from_epoch);
    out.put_i32(r.max_results);
    put_no_tags(out);
}

fn put_list_response(out: &mut Vec<u8>, r: &ListBarrierCutsResponse) {
    out.put_i32(r.throttle_time_ms);
    out.put_i16(r.error_code);
    put_nullable_string(out, r.error_message.as_deref());
    put_array(out, &r.cuts, |out, c| {
        out.put_i64(c.epoch);
        out.put_i64(c.triggered_at_ms);
        out.put_i64(c.completed_at_ms);
        out.put_i8(c.status.code());
        put_cut_offsets(out, &c.offsets, &c.missing);
        put_no_tags(out);
    });
    put_no_tags(out);
}

/// A cut's `topics [topic | partitions [partition | offset | _t] | _t] | missing [topic |
/// partition | _t]` (TriggerBarrier's answer and ListBarrierCuts' cuts).
fn put_cut_offsets(out: &mut Vec<u8>, topics: &CutOffsets, missing: &[(String, i32)]) {
    put_array(out, topics, |out, (topic, partitions)| {
        put_string(out, topic);
        put_array(out, partitions, |out, (partition, offset)| {
            out.put_i32(*partition);
            out.put_i64(*offset);
            put_no_tags(out);
        });
        put_no_tags(out);
    });
    put_array(out, missing, |out, (topic, partition)| {
        put_string(out, topic);
        out.put_i32(*partition);
        put_no_tags(out);
    });
}

fn put_write_markers_request(out: &mut Vec<u8>, r: &WriteBarrierMarkersRequest) {
    put_string(out, &r.group);
    out.put_i64(r.epoch);
    out.put_i64(r.triggered_at_ms);
    put_array(out, &r.topics, |out, (topic, partitions)| {
        put_string(out, topic);
        put_array(out, partitions, |out, (partition, leader_epoch)| {
            out.put_i32(*partition);
            out.put_i32(*leader_epoch);
            put_no_tags(out);
        });
        put_no_tags(out);
    });
    put_no_tags(out);
}

fn put_write_markers_response(out: &mut Vec<u8>, r: &WriteBarrierMarkersResponse) {
    put_array(out, &r.topics, |out, (topic, results)| {
        put_string(out, topic);
        put_array(out, results, |out, m| {
            out.put_i32(m.partition);
            out.put_i16(m.error_code);
            out.put_i64(m.offset);
            put_no_tags(out);
        });
        put_no_tags(out);
    });
    put_no_tags(out);
}

// ---- bodies: decoding ----

fn read_alter_request(r: &mut Reader<'_>) -> Result<AlterBarrierGroupsRequest, WireError> {
    let groups = r.array("groups", GROUP_ALTERATION_MIN_BYTES, |r| {
        let name = r.string("groups[].group")?;
        let topics = r.array("groups[].topics", STRING_MIN_BYTES, |r| {
            r.string("groups[].topics[]")
        })?;
        let interval_ms = r.i64("groups[].interval_ms")?;
        let retained_cuts = r.i32("groups[].retained_cuts")?;
        let delete = r.bool("groups[].delete")?;
        r.tagged_fields("groups[]")?;
        Ok(GroupAlteration {
            name,
            topics,
            interval_ms,
            retained_cuts,
            delete,
        })
    })?;
    r.tagged_fields("body")?;
    Ok(AlterBarrierGroupsRequest { groups })
}

fn read_alter_response(r: &mut Reader<'_>) -> Result<AlterBarrierGroupsResponse, WireError> {
    let throttle_time_ms = r.i32("throttle_time_ms")?;
    let results = r.array("results", GROUP_RESULT_MIN_BYTES, |r| {
        let name = r.string("results[].group")?;
        let error_code = r.i16("results[].error_code")?;
        let error_message = r.nullable_string("results[].error_message")?;
        r.tagged_fields("results[]")?;
        Ok(GroupResult {
            name,
            error_code,
            error_message,
        })
    })?;
    r.tagged_fields("body")?;
    Ok(AlterBarrierGroupsResponse {
        throttle_time_ms,
        results,
    })
}

fn read_describe_request(r: &mut Reader<'_>) -> Result<DescribeBarrierGroupsRequest, WireError> {
    let groups = r.array("groups", STRING_MIN_BYTES, |r| r.string("groups[]"))?;
    r.tagged_fields("body")?;
    Ok(DescribeBarrierGroupsRequest { groups })
}

fn read_describe_response(r: &mut Reader<'_>) -> Result<DescribeBarrierGroupsResponse, WireError> {
    let throttle_time_ms = r.i32("throttle_time_ms")?;
    let groups = r.array("groups", DESCRIBED_GROUP_MIN_BYTES, |r| {
        let group = DescribedGroup {
            name: r.string("groups[].group")?,
            error_code: r.i16("groups[].error_code")?,
            error_message: r.nullable_string("groups[].error_message")?,
            topics: r.array("groups[].topics", STRING_MIN_BYTES, |r| {
                r.string("groups[].topics[]")
            })?,
            interval_ms: r.i64("groups[].interval_ms")?,
            retained_cuts: r.i32("groups[].retained_cuts")?,
            last_epoch: r.i64("groups[].last_epoch")?,
            coordinator_id: r.i32("groups[].coordinator_id")?,
        };
        r.tagged_fields("groups[]")?;
        Ok(group)
    })?;
    r.tagged_fields("body")?;
    Ok(DescribeBarrierGroupsResponse {
        throttle_time_ms,
        groups,
    })
}

fn read_trigger_request(r: &mut Reader<'_>) -> Result<TriggerBarrierRequest, WireError> {
    let group = r.string("group")?;
    let timeout_ms = r.i32("timeout_ms")?;
    r.tagged_fields("body")?;
    Ok(TriggerBarrierRequest { group, timeout_ms })
}

fn read_trigger_response(r: &mut Reader<'_>) -> Result<TriggerBarrierResponse, WireError> {
    let throttle_time_ms = r.i32("throttle_time_ms")?;
    let error_code = r.i16("error_code")?;
    let error_message = r.nullable_string("error_message")?;
    let epoch = r.i64("epoch")?;
    let status = r.status("status")?.code();
    let (topics, missing) = r.cut_offsets("")?;
    r.tagged_fields("body")?;
    Ok(TriggerBarrierResponse {
        throttle_time_ms,
        error_code,
        error_message,
        epoch,
        status,
        topics,
        missing,
    })
}

fn read_list_request(r: &mut Reader<'_>) -> Result<ListBarrierCutsRequest, WireError> {
    let group = r.string("group")?;
    let from_epoch = r.i64("from_epoch")?;
    let max_results = r.i32("max_results")?;
    r.tagged_fields("body")?;
    Ok(ListBarrierCutsRequest {
        group,
        from_epoch,
        max_results,
    })
}

fn read_list_response(r: &mut Reader<'_>) -> Result<ListBarrierCutsResponse, WireError> {
    let throttle_time_ms = r.i32("throttle_time_ms")?;
    let error_code = r.i16("error_code")?;
    let error_message = r.nullable_string("error_message")?;
    let cuts = r.array("cuts", CUT_MIN_BYTES, |r| {
        let epoch = r.i64("cuts[].epoch")?;
        let triggered_at_ms = r.i64("cuts[].triggered_at")?;
        let completed_at_ms = r.i64("cuts[].completed_at")?;
        let status = r.status("cuts[].status")?;
        let (offsets, missing) = r.cut_offsets("cuts[].")?;
        r.tagged_fields("cuts[]")?;
        Ok(Cut {
            epoch,
            triggered_at_ms,
            completed_at_ms,
            status,
            offsets,
            missing,
        })
    })?;
    r.tagged_fields("body")?;
    Ok(ListBarrierCutsResponse {
        throttle_time_ms,
        error_code,
        error_message,
        cuts,
    })
}

fn read_write_markers_request(r: &mut Reader<'_>) -> Result<WriteBarrierMarkersRequest, WireError> {
    let group = r.string("group")?;
    let epoch = r.i64("epoch")?;
    let triggered_at_ms = r.i64("triggered_at")?;
    let topics = r.topic_partitions("topics", MARKER_TARGET_MIN_BYTES, |r| {
        let partition = r.i32("topics[].partitions[].partition")?;
        let leader_epoch = r.i32("topics[].partitions[].expected_leader_epoch")?;
        Ok((partition, leader_epoch))
    })?;
    r.tagged_fields("body")?;
    Ok(WriteBarrierMarkersRequest {
        group,
        epoch,
        triggered_at_ms,
        topics,
    })
}

fn read_write_markers_response(
    r: &mut Reader<'_>,
) -> Result<WriteBarrierMarkersResponse, WireError> {
    let topics = r.array("topics", TOPIC_MIN_BYTES, |r| {
        let topic = r.string("topics[].topic")?;
        let results = r.array("topics[].partitions", MARKER_RESULT_MIN_BYTES, |r| {
            let result = MarkerResult {
                partition: r.i32("topics[].partitions[].partition")?,
                error_code: r.i16("topics[].partitions[].error_code")?,
                offset: r.i64("topics[].partitions[].offset")?,
            };
            r.tagged_fields("topics[].partitions[]")?;
            Ok(result)
        })?;
        r.tagged_fields("topics[]")?;
        Ok((topic, results))
    })?;
    r.tagged_fields("body")?;
    Ok(WriteBarrierMarkersResponse { topics })
}

// ---- primitives ----

/// Fills in the 4-byte size prefix reserved at the start of `out`.
fn set_size_prefix(mut out: Vec<u8>) -> Vec<u8> {
    let size = u32::try_from(out.len().saturating_sub(4)).unwrap_or(u32::MAX);
    if let Some(prefix) = out.get_mut(..4) {
        prefix.copy_from_slice(&size.to_be_bytes());
    }
    out
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Writes a compact length (`n + 1`); one `u32` cannot describe saturates, and decoders refuse it.
fn put_compact_len(out: &mut Vec<u8>, n: usize) {
    let n = u32::try_from(n)
        .ok()
        .and_then(|n| n.checked_add(1))
        .unwrap_or(u32::MAX);
    put_uvarint(out, n);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    put_compact_len(out, s.len());
    out.put_slice(s.as_bytes());
}

fn put_nullable_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => put_string(out, s),
    }
}

fn put_array<T>(out: &mut Vec<u8>, items: &[T], mut each: impl FnMut(&mut Vec<u8>, &T)) {
    put_compact_len(out, items.len());
    for item in items {
        each(out, item);
    }
}

fn put_bool(out: &mut Vec<u8>, b: bool) {
    out.put_u8(u8::from(b));
}

fn put_no_tags(out: &mut Vec<u8>) {
    put_uvarint(out, 0);
}

/// The API key a wire error names.
impl ErrorContext for i16 {
    const WHOLE: &'static str = "body";
    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "barrier api {self} frame")
    }
}

/// The shared bounds-checked cursor, with the flexible framing's reads on top.
struct Reader<'a>(crate::reader::Reader<'a, i16>);

impl<'a> std::ops::Deref for Reader<'a> {
    type Target = crate::reader::Reader<'a, i16>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Reader<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl<'a> Reader<'a> {
    fn new(api_key: i16, buf: &'a [u8]) -> Self {
        Reader(crate::reader::Reader::new(api_key, buf))
    }

    /// Kafka's BOOLEAN: any byte but 0 is true.
    fn bool(&mut self, field: &str) -> Result<bool, WireError> {
        Ok(self.i8(field)? != 0)
    }

    /// An unsigned varint of at most 32 bits (5 bytes).
    fn uvarint(&mut self, field: &str) -> Result<u32, WireError> {
        let at = self.pos;
        let mut value: u32 = 0;
        for i in 0..5 {
            let [b] = self.fixed::<1>(field)?;
            if i == 4 && b > 0x0f {
                return Err(self.err_at(at, format!("{field}: unsigned varint over 32 bits")));
            }
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.err_at(at, format!("{field}: unsigned varint over 5 bytes")))
    }

    fn nullable_string_max(
        &mut self,
        field: &str,
        max_bytes: usize,
    ) -> Result<Option<String>, WireError> {
        let at = self.pos;
        let n = self.uvarint(field)?;
        match (n as usize).checked_sub(1) {
            None => Ok(None),
            Some(len) => self.utf8(field, at, len, max_bytes).map(Some),
        }
    }

    /// A COMPACT_NULLABLE_STRING.
    fn nullable_string(&mut self, field: &str) -> Result<Option<String>, WireError> {
        self.nullable_string_max(field, MAX_WIRE_STRING_BYTES)
    }

    /// A COMPACT_STRING that must not be null, of at most `max_bytes`.
    fn string_max(&mut self, field: &str, max_bytes: usize) -> Result<String, WireError> {
        let at = self.pos;
        self.nullable_string_max(field, max_bytes)?
            .ok_or_else(|| self.err_at(at, format!("{field}: null where a string is required")))
    }

    /// A COMPACT_STRING that must not be null.
    fn string(&mut self, field: &str) -> Result<String, WireError> {
        self.string_max(field, MAX_WIRE_STRING_BYTES)
    }

    /// A topic name of a cut (at most [`MAX_TOPIC_NAME_BYTES`]).
    fn topic_name(&mut self, field: &str) -> Result<String, WireError> {
        self.string_max(field, MAX_TOPIC_NAME_BYTES)
    }

    /// A COMPACT_ARRAY (never null in these layouts): its count, checked against the bytes
    /// left before anything is allocated, then its elements.
    fn array<T>(
        &mut self,
        field: &str,
        min_element_bytes: usize,
        mut each: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        let at = self.pos;
        let n = self.uvarint(field)?;
        let count = (n as usize)
            .checked_sub(1)
            .ok_or_else(|| self.err_at(at, format!("{field}: null where an array is required")))?;
        self.check_count(field, at, count, min_element_bytes)?;
        (0..count).map(|_| each(self)).collect()
    }

    /// A cut status (0 complete, 1 partial; any other value is refused).
    fn status(&mut self, field: &str) -> Result<CutStatus, WireError> {
        let at = self.pos;
        let code = self.i8(field)?;
        CutStatus::from_code(code)
            .ok_or_else(|| self.err_at(at, format!("{field}: unknown status {code}")))
    }

    /// `[topic | partitions [what `each` reads | _t] | _t]`: per topic, its partitions'.
    fn topic_partitions<T>(
        &mut self,
        field: &str,
        min_partition_bytes: usize,
        mut each: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<(String, Vec<T>)>, WireError> {
        self.array(field, TOPIC_MIN_BYTES, |r| {
            let topic = r.topic_name("topics[].topic")?;
            let partitions = r.array("topics[].partitions", min_partition_bytes, |r| {
                let partition = each(r)?;
                r.tagged_fields("topics[].partitions[]")?;
                Ok(partition)
            })?;
            r.tagged_fields("topics[]")?;
            Ok((topic, partitions))
        })
    }

    /// A cut's `topics` and `missing` (field names prefixed with `prefix`).
    fn cut_offsets(&mut self, prefix: &str) -> Result<(CutOffsets, Vec<(String, i32)>), WireError> {
        let topics = self.topic_partitions(
            &format!("{prefix}topics"),
            PARTITION_OFFSET_MIN_BYTES,
            |r| {
                let partition = r.i32("topics[].partitions[].partition")?;
                let offset = r.i64("topics[].partitions[].offset")?;
                Ok((partition, offset))
            },
        )?;
        let missing = self.array(
            &format!("{prefix}missing"),
            MISSING_PARTITION_MIN_BYTES,
            |r| {
                let topic = r.topic_name("missing[].topic")?;
                let partition = r.i32("missing[].partition")?;
                r.tagged_fields("missing[]")?;
                Ok((topic, partition))
            },
        )?;
        Ok((topics, missing))
    }

    /// Skips a struct's TAGGED_FIELDS (none are known in version 0).
    fn tagged_fields(&mut self, field: &str) -> Result<(), WireError> {
        let at = self.pos;
        let count = self.uvarint(field)? as usize;
        if count > MAX_TAGGED_FIELDS {
            return Err(self.err_at(
                at,
                format!(
                    "{field}: {count} tagged fields, more than the limit of {MAX_TAGGED_FIELDS}"
                ),
            ));
        }
        for _ in 0..count {
            self.uvarint(field)?;
            let size = self.uvarint(field)? as usize;
            self.take(size, field)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
