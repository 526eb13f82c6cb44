use super::*;

/// krabka's own round-trip samples (its protocol crate's test values).
fn requests() -> Vec<BarrierRequest> {
    vec![
        BarrierRequest::Alter(AlterBarrierGroupsRequest {
            groups: vec![
                GroupAlteration {
                    name: "orders".into(),
                    topics: vec!["orders".into(), "payments".into()],
                    interval_ms: 60_000,
                    retained_cuts: 32,
                    delete: false,
                },
                GroupAlteration {
                    name: "retired".into(),
                    interval_ms: INTERVAL_OFF_MS,
                    delete: true,
                    ..Default::default()
                },
            ],
        }),
        BarrierRequest::Alter(AlterBarrierGroupsRequest::default()),
        BarrierRequest::Describe(DescribeBarrierGroupsRequest { groups: vec![] }),
        BarrierRequest::Describe(DescribeBarrierGroupsRequest {
            groups: vec!["a".into(), "".into(), "ünï".into()],
        }),
        BarrierRequest::Trigger(TriggerBarrierRequest {
            group: "g".into(),
            timeout_ms: 5_000,
        }),
        BarrierRequest::List(ListBarrierCutsRequest {
            group: "g".into(),
            from_epoch: 0,
            max_results: -1,
        }),
        BarrierRequest::WriteMarkers(WriteBarrierMarkersRequest {
            group: "orders".into(),
            epoch: 41,
            triggered_at_ms: 1_724_500_000_000,
            topics: vec![
                ("orders".into(), vec![(0, 4), (3, -1), (7, 17)]),
                ("payments".into(), vec![]),
            ],
        }),
    ]
}

fn sample_cut_offsets() -> (CutOffsets, Vec<(String, i32)>) {
    (
        vec![
            ("orders".into(), vec![(0, 1024), (1, 2048)]),
            ("payments".into(), vec![]),
        ],
        vec![("payments".into(), 4)],
    )
}

fn responses() -> Vec<BarrierResponse> {
    let (topics, missing) = sample_cut_offsets();
    vec![
        BarrierResponse::Alter(AlterBarrierGroupsResponse {
            throttle_time_ms: 3,
            results: vec![
                GroupResult {
                    name: "a".into(),
                    error_code: 0,
                    error_message: None,
                },
                GroupResult {
                    name: "b".into(),
                    error_code: 40,
                    error_message: Some("invalid interval".into()),
                },
            ],
        }),
        BarrierResponse::Describe(DescribeBarrierGroupsResponse {
            throttle_time_ms: 5,
            groups: vec![
                DescribedGroup {
                    name: "orders".into(),
                    error_code: 0,
                    error_message: None,
                    topics: vec!["orders".into()],
                    interval_ms: 30_000,
                    retained_cuts: 64,
                    last_epoch: 12,
                    coordinator_id: 3,
                },
                DescribedGroup {
                    name: "audit".into(),
                    error_code: 91,
                    error_message: Some("barrier group not found".into()),
                    ..Default::default()
                },
            ],
        }),
        BarrierResponse::Trigger(TriggerBarrierResponse {
            throttle_time_ms: 3,
            error_code: 0,
            error_message: Some("one partition had no leader".into()),
            epoch: 41,
            status: CutStatus::Partial.code(),
            topics: topics.clone(),
            missing: missing.clone(),
        }),
        BarrierResponse::Trigger(TriggerBarrierResponse {
            error_code: BARRIER_INJECTION_IN_PROGRESS,
            error_message: Some("epoch 7 is being injected".into()),
            ..Default::default()
        }),
        BarrierResponse::List(ListBarrierCutsResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            cuts: vec![
                Cut {
                    epoch: 12,
                    triggered_at_ms: 1_724_500_000_000,
                    completed_at_ms: 1_724_500_000_120,
                    status: CutStatus::Complete,
                    offsets: topics,
                    missing: vec![],
                },
                Cut {
                    epoch: 13,
                    triggered_at_ms: 1_724_500_060_000,
                    completed_at_ms: 1_724_500_090_000,
                    status: CutStatus::Partial,
                    offsets: vec![("a".into(), vec![(0, 5)])],
                    missing,
                },
            ],
        }),
        BarrierResponse::WriteMarkers(WriteBarrierMarkersResponse {
            topics: vec![(
                "orders".into(),
                vec![
                    MarkerResult {
                        partition: 0,
                        error_code: 0,
                        offset: 9412,
                    },
                    MarkerResult {
                        partition: 3,
                        error_code: 6,
                        offset: -1,
                    },
                ],
            )],
        }),
    ]
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "whole bytes");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("test hex"))
        .collect()
}

/// A request frame (size prefix excluded) with header v2: `api_key`, version 0,
/// correlation id 1, client id null, no tagged fields; then `body`.
fn request_frame(api_key: i16, body: &str) -> Vec<u8> {
    let mut f = api_key.to_be_bytes().to_vec();
    f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x00]);
    f.extend(hex(body));
    f
}

/// A response frame (size prefix excluded) with header v1: correlation id 1, no tagged
/// fields; then `body`.
fn response_frame(body: &str) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 1, 0x00];
    f.extend(hex(body));
    f
}

/// Golden bodies of every request and response, written out by hand from krabka's
/// layouts (field by field in the comments), never by this encoder: each must decode to
/// its value and encode to its bytes.
#[test]
fn golden_bodies() {
    let orders_cut = || "orders-cut".to_string();
    // 1010 request: [{"orders-cut", [orders, payments], 60000, 32, false},
    //                {"retired", [], -1, 0, true}]
    let alter_req = BarrierRequest::Alter(AlterBarrierGroupsRequest {
        groups: vec![
            GroupAlteration {
                name: orders_cut(),
                topics: vec!["orders".into(), "payments".into()],
                interval_ms: 60_000,
                retained_cuts: 32,
                delete: false,
            },
            GroupAlteration {
                name: "retired".into(),
                topics: vec![],
                interval_ms: -1,
                retained_cuts: 0,
                delete: true,
            },
        ],
    });
    let alter_req_hex = concat!(
        "03", // groups: 2
        "0b",
        "6f72646572732d637574", // "orders-cut"
        "03",
        "076f7264657273",
        "097061796d656e7473", // topics [orders, payments]
        "000000000000ea60",   // interval_ms 60000
        "00000020",           // retained_cuts 32
        "00",
        "00", // delete false, _tags
        "08",
        "72657469726564", // "retired"
        "01",             // topics: 0
        "ffffffffffffffff",
        "00000000", // interval -1, retained 0
        "01",
        "00", // delete true, _tags
        "00", // body _tags
    );
    // 1010 response: throttle 0; [{"orders-cut", 0, null}, {"retired", 91, "..."}]
    let alter_resp = BarrierResponse::Alter(AlterBarrierGroupsResponse {
        throttle_time_ms: 0,
        results: vec![
            GroupResult {
                name: orders_cut(),
                error_code: 0,
                error_message: None,
            },
            GroupResult {
                name: "retired".into(),
                error_code: 91,
                error_message: Some("barrier group retired does not exist".into()),
            },
        ],
    });
    let alter_resp_hex = concat!(
        "00000000",
        "03", // throttle 0, results: 2
        "0b6f72646572732d637574",
        "0000",
        "00",
        "00", // "orders-cut", 0, null, _tags
        "0872657469726564",
        "005b", // "retired", 91
        "25",
        "626172726965722067726f7570207265746972656420646f6573206e6f74206578697374",
        "00",
        "00",
    );
    // 1011 requests: every group (an empty array); two named groups.
    let describe_all = BarrierRequest::Describe(DescribeBarrierGroupsRequest::default());
    let describe_named = BarrierRequest::Describe(DescribeBarrierGroupsRequest {
        groups: vec![orders_cut(), "audit".into()],
    });
    let describe_named_hex = concat!("03", "0b6f72646572732d637574", "06617564697400");
    // 1011 response: a described group and an error row with krabka's defaults.
    let describe_resp = BarrierResponse::Describe(DescribeBarrierGroupsResponse {
        throttle_time_ms: 0,
        groups: vec![
            DescribedGroup {
                name: orders_cut(),
                error_code: 0,
                error_message: None,
                topics: vec!["orders".into(), "payments".into()],
                interval_ms: 30_000,
                retained_cuts: 5,
                last_epoch: 7,
                coordinator_id: 2,
            },
            DescribedGroup {
                name: "audit".into(),
                error_code: 91,
                error_message: Some("no such barrier group".into()),
                ..Default::default()
            },
        ],
    });
    let describe_resp_hex = concat!(
        "00000000",
        "03",
        "0b6f72646572732d637574",
        "0000",
        "00",                                 // "orders-cut", 0, null
        "03076f7264657273097061796d656e7473", // topics
        "0000000000007530",
        "00000005", // interval 30000, retained 5
        "0000000000000007",
        "00000002",
        "00", // last_epoch 7, coordinator 2, _tags
        "066175646974",
        "005b", // "audit", 91
        "16",
        "6e6f207375636820626172726965722067726f7570",
        "01",
        "ffffffffffffffff",
        "00000000", // topics [], interval -1, retained 0
        "ffffffffffffffff",
        "ffffffff",
        "00", // last_epoch -1, coordinator -1
        "00",
    );
    // 1012 request and a complete answer: orders p0 @1024, p1 @2048.
    let trigger_req = BarrierRequest::Trigger(TriggerBarrierRequest {
        group: orders_cut(),
        timeout_ms: 30_000,
    });
    let trigger_req_hex = concat!("0b6f72646572732d637574", "00007530", "00");
    let trigger_resp = BarrierResponse::Trigger(TriggerBarrierResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        epoch: 7,
        status: 0,
        topics: vec![("orders".into(), vec![(0, 1024), (1, 2048)])],
        missing: vec![],
    });
    let trigger_resp_hex = concat!(
        "00000000",
        "0000",
        "00", // throttle, error 0, null
        "0000000000000007",
        "00", // epoch 7, complete
        "02",
        "076f7264657273",
        "03", // topics: orders, 2 partitions
        "00000000",
        "0000000000000400",
        "00", // p0 @1024
        "00000001",
        "0000000000000800",
        "00", // p1 @2048
        "00", // topic _tags
        "01",
        "00", // missing: 0, body _tags
    );
    // A refusal: epoch -1 and status partial, as krabka answers.
    let refused = BarrierResponse::Trigger(TriggerBarrierResponse {
        error_code: 16,
        error_message: Some("this broker does not coordinate barrier group orders-cut".into()),
        ..Default::default()
    });
    let refused_hex = concat!(
        "00000000", "0010", "39",
        "746869732062726f6b657220646f6573206e6f7420636f6f7264696e61746520626172726965722067726f7570206f72646572732d637574",
        "ffffffffffffffff", "01", "01", "01", "00",
    );
    // 1013 request: from epoch 0, every cut; a response with one cut.
    let list_req = BarrierRequest::List(ListBarrierCutsRequest {
        group: orders_cut(),
        from_epoch: 0,
        max_results: -1,
    });
    let list_req_hex = concat!(
        "0b6f72646572732d637574",
        "0000000000000000",
        "ffffffff",
        "00"
    );
    let list_resp = BarrierResponse::List(ListBarrierCutsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        cuts: vec![Cut {
            epoch: 7,
            triggered_at_ms: 1_724_500_000_000,
            completed_at_ms: 1_724_500_000_042,
            status: CutStatus::Complete,
            offsets: vec![("orders".into(), vec![(0, 1024), (1, 2048)])],
            missing: vec![],
        }],
    });
    let list_resp_hex = concat!(
        "00000000",
        "0000",
        "00",
        "02",               // throttle, 0, null, cuts: 1
        "0000000000000007", // epoch 7
        "000001918435bd00",
        "000001918435bd2a", // triggered, completed
        "00",               // complete
        "02076f726465727303",
        "000000000000000000000400",
        "00",
        "000000010000000000000800",
        "00",
        "00",
        "01",
        "00", // missing: 0, cut _tags
        "00",
    );
    // 1014 request: orders p0 and p1 expecting leader epoch 3; the answer marks p0 at
    // 1024 and fences p1 (FENCED_LEADER_EPOCH, 74); no throttle time.
    let wbm_req = BarrierRequest::WriteMarkers(WriteBarrierMarkersRequest {
        group: orders_cut(),
        epoch: 7,
        triggered_at_ms: 1_724_500_000_000,
        topics: vec![("orders".into(), vec![(0, 3), (1, 3)])],
    });
    let wbm_req_hex = concat!(
        "0b6f72646572732d637574",
        "0000000000000007",
        "000001918435bd00",
        "02",
        "076f7264657273",
        "03",
        "00000000",
        "00000003",
        "00",
        "00000001",
        "00000003",
        "00",
        "00",
        "00",
    );
    let wbm_resp = BarrierResponse::WriteMarkers(WriteBarrierMarkersResponse {
        topics: vec![(
            "orders".into(),
            vec![
                MarkerResult {
                    partition: 0,
                    error_code: 0,
                    offset: 1024,
                },
                MarkerResult {
                    partition: 1,
                    error_code: 74,
                    offset: -1,
                },
            ],
        )],
    });
    let wbm_resp_hex = concat!(
        "02",
        "076f7264657273",
        "03",
        "00000000",
        "0000",
        "0000000000000400",
        "00",
        "00000001",
        "004a",
        "ffffffffffffffff",
        "00",
        "00",
        "00",
    );

    let requests = [
        (alter_req, alter_req_hex),
        (describe_all, "0100"),
        (describe_named, describe_named_hex),
        (trigger_req, trigger_req_hex),
        (list_req, list_req_hex),
        (wbm_req, wbm_req_hex),
    ];
    for (req, body) in requests {
        let frame = request_frame(req.api_key(), body);
        assert_eq!(
            encode_request_frame(1, None, &req)[4..],
            frame[..],
            "{req:?}"
        );
        assert_eq!(decode_request_frame(&frame).expect("decodes").1, req);
    }
    let responses = [
        (alter_resp, alter_resp_hex),
        (describe_resp, describe_resp_hex),
        (trigger_resp, trigger_resp_hex),
        (refused, refused_hex),
        (list_resp, list_resp_hex),
        (wbm_resp, wbm_resp_hex),
    ];
    for (resp, body) in responses {
        let frame = response_frame(body);
        assert_eq!(encode_response_frame(1, &resp)[4..], frame[..], "{resp:?}");
        assert_eq!(
            decode_response_frame(resp.api_key(), &frame).expect("decodes"),
            (1, resp)
        );
    }
}

/// The frame without its size prefix, after checking the prefix.
fn body(frame: &[u8]) -> &[u8] {
    let (size, rest) = frame.split_at(4);
    assert_eq!(
        u32::from_be_bytes(size.try_into().expect("4 bytes")) as usize,
        rest.len()
    );
    rest
}

#[test]
fn requests_round_trip() {
    for (i, req) in requests().into_iter().enumerate() {
        let client = if i % 2 == 0 { Some("client-1") } else { None };
        let frame = encode_request_frame(i as i32, client, &req);
        let (header, decoded) = decode_request_frame(body(&frame)).expect("decodes");
        assert_eq!(
            header,
            RequestHeader {
                api_key: req.api_key(),
                api_version: BARRIER_API_VERSION,
                correlation_id: i as i32,
                client_id: client.map(str::to_owned),
            }
        );
        assert_eq!(decoded, req);
    }
}

#[test]
fn responses_round_trip() {
    for (i, resp) in responses().into_iter().enumerate() {
        let frame = encode_response_frame(100 + i as i32, &resp);
        let decoded = decode_response_frame(resp.api_key(), body(&frame)).expect("decodes");
        assert_eq!(decoded, (100 + i as i32, resp));
    }
}

#[test]
fn trigger_request_bytes() {
    let req = BarrierRequest::Trigger(TriggerBarrierRequest {
        group: "g".into(),
        timeout_ms: 5,
    });
    let expected: Vec<u8> = vec![
        0x00, 0x00, 0x00, 0x13, // size 19
        0x03, 0xf4, // api_key 1012
        0x00, 0x00, // api_version 0
        0x00, 0x00, 0x00, 0x09, // correlation_id 9
        0x00, 0x01, b'c', // client_id "c" (i16 length)
        0x00, // header tagged fields: none
        0x02, b'g', // group "g" (uvarint length + 1)
        0x00, 0x00, 0x00, 0x05, // timeout_ms 5
        0x00, // body tagged fields: none
    ];
    assert_eq!(encode_request_frame(9, Some("c"), &req), expected);
    let (header, decoded) = decode_request_frame(&expected[4..]).expect("decodes");
    assert_eq!(header.client_id.as_deref(), Some("c"));
    assert_eq!(header.correlation_id, 9);
    assert_eq!(decoded, req);
}

#[test]
fn unknown_tagged_fields_are_skipped() {
    let frame: Vec<u8> = vec![
        0x03, 0xf5, // api_key 1013
        0x00, 0x00, // api_version 0
        0x00, 0x00, 0x00, 0x01, // correlation_id 1
        0xff, 0xff, // client_id null
        0x01, 0x05, 0x02, 0xaa, 0xbb, // header: 1 tagged field, tag 5, 2 bytes
        0x02, b'g', // group "g"
        0, 0, 0, 0, 0, 0, 0, 3, // from_epoch 3
        0xff, 0xff, 0xff, 0xff, // max_results -1
        0x02, 0x00, 0x00, 0x81, 0x01, 0x01, 0x00, // body: tag 0 empty, tag 129 1 byte
    ];
    let (header, req) = decode_request_frame(&frame).expect("decodes");
    assert_eq!(header.client_id, None);
    assert_eq!(
        req,
        BarrierRequest::List(ListBarrierCutsRequest {
            group: "g".into(),
            from_epoch: 3,
            max_results: -1,
        })
    );
    // A tagged field running past the end is truncation.
    let mut short = frame.clone();
    short.truncate(frame.len() - 1);
    assert!(decode_request_frame(&short).is_err());
    // Too many tagged fields.
    let mut many = frame[..frame.len() - 7].to_vec();
    many.push(MAX_TAGGED_FIELDS as u8 + 1);
    many.extend(std::iter::repeat_n([0x00, 0x00], MAX_TAGGED_FIELDS + 1).flatten());
    let e = decode_request_frame(&many).expect_err("too many");
    assert!(e.detail.contains("tagged fields"), "{e}");
}

#[test]
fn refusals_name_what_they_refuse() {
    let frame = encode_request_frame(
        1,
        None,
        &BarrierRequest::Trigger(TriggerBarrierRequest::default()),
    );
    let mut v1 = frame[4..].to_vec();
    v1[3] = 1;
    let e = decode_request_frame(&v1).expect_err("version 1");
    assert_eq!((e.what, e.at_byte), (TRIGGER_BARRIER, 2));
    assert!(e.detail.contains("version 1 of api 1012"), "{e}");
    assert!(e
        .to_string()
        .starts_with("barrier api 1012 frame at byte 2: "));

    let mut other = frame[4..].to_vec();
    other[..2].copy_from_slice(&18i16.to_be_bytes()); // ApiVersions
    let e = decode_request_frame(&other).expect_err("key 18");
    assert!(e.detail.contains("not a barrier API"), "{e}");
    assert_eq!(
        decode_request_frame(&[0x03]).expect_err("short").what,
        UNKNOWN_API_KEY
    );

    let mut trailing = frame[4..].to_vec();
    trailing.push(0);
    let e = decode_request_frame(&trailing).expect_err("trailing");
    assert!(e.detail.contains("trailing"), "{e}");

    assert!(decode_response_frame(18, &[0, 0, 0, 0, 0]).is_err());
    let bad_status = BarrierResponse::Trigger(TriggerBarrierResponse {
        status: 2,
        ..Default::default()
    });
    let frame = encode_response_frame(1, &bad_status);
    let e = decode_response_frame(TRIGGER_BARRIER, &frame[4..]).expect_err("status 2");
    assert!(e.detail.contains("unknown status 2"), "{e}");

    // A null group, a huge array count, an overlong varint, a long string.
    let head: &[u8] = &[0x03, 0xf4, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x00];
    let with = |body: &[u8]| [head, body].concat();
    let e = decode_request_frame(&with(&[0x00, 0, 0, 0, 0, 0x00])).expect_err("null");
    assert!(e.detail.contains("null"), "{e}");
    let alter_head: &[u8] = &[0x03, 0xf2, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x00];
    let huge = [alter_head, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00]].concat();
    let e = decode_request_frame(&huge).expect_err("huge count");
    assert!(e.detail.contains("hold at most"), "{e}");
    let e = decode_request_frame(&with(&[0xff, 0xff, 0xff, 0xff, 0x1f])).expect_err("varint");
    assert!(e.detail.contains("varint"), "{e}");
    let e = decode_request_frame(&with(&[0x81, 0x80, 0x02])).expect_err("long string");
    assert!(e.detail.contains("limit"), "{e}");
    let e = decode_request_frame(&with(&[0x02, 0xff, 0, 0, 0, 0, 0x00])).expect_err("utf-8");
    assert!(e.detail.contains("UTF-8"), "{e}");
}

/// A tiny xorshift, for mutations.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn hostile_frames_never_panic() {
    let mut samples: Vec<(Option<i16>, Vec<u8>)> = Vec::new();
    for req in requests() {
        samples.push((None, encode_request_frame(1, Some("c"), &req)[4..].to_vec()));
    }
    for resp in responses() {
        samples.push((
            Some(resp.api_key()),
            encode_response_frame(1, &resp)[4..].to_vec(),
        ));
    }
    let decode = |key: Option<i16>, bytes: &[u8]| match key {
        None => decode_request_frame(bytes).is_ok(),
        Some(key) => decode_response_frame(key, bytes).is_ok(),
    };
    // Every strict prefix of a valid frame is refused.
    for (key, frame) in &samples {
        assert!(decode(*key, frame));
        for i in 0..frame.len() {
            assert!(!decode(*key, &frame[..i]), "a prefix of {i} bytes decoded");
        }
    }
    let mut state = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..5000 {
        let (key, frame) = &samples[(xorshift(&mut state) % samples.len() as u64) as usize];
        let mut m = frame.clone();
        for _ in 0..1 + xorshift(&mut state) % 4 {
            let i = (xorshift(&mut state) % m.len() as u64) as usize;
            m[i] = xorshift(&mut state) as u8;
        }
        match xorshift(&mut state) % 4 {
            0 => m.truncate((xorshift(&mut state) % (m.len() as u64 + 1)) as usize),
            1 => {
                let i = (xorshift(&mut state) % (m.len() as u64 + 1)) as usize;
                m.insert(i, xorshift(&mut state) as u8);
            }
            _ => {}
        }
        decode(*key, &m);
        // The same bytes read as every kind of response, and as a request.
        for k in ALTER_BARRIER_GROUPS..=WRITE_BARRIER_MARKERS {
            decode(Some(k), &m);
        }
        decode(None, &m);
    }
    // Plain random bytes.
    for _ in 0..2000 {
        let len = (xorshift(&mut state) % 64) as usize;
        let m: Vec<u8> = (0..len).map(|_| xorshift(&mut state) as u8).collect();
        decode(None, &m);
        decode(Some(LIST_BARRIER_CUTS), &m);
    }
}
