use super::*;

fn a(n: usize) -> Vec<Assignment> {
    (0..n)
        .map(|i| Assignment {
            node_id: 1,
            core_index: i as u32,
        })
        .collect()
}

#[test]
fn create_delete_add_alter_assign() {
    let mut s = MetaState::default();
    let c = Command::create_topic("orders", 3, BTreeMap::new(), a(3));
    assert!(matches!(s.apply(&c), Ok(Change::TopicCreated { .. })));
    let e = s.apply(&c).unwrap_err();
    assert!(matches!(e, Refusal::TopicAlreadyExists { .. }));
    let e = s
        .apply(&Command::AddPartitions {
            name: "orders".into(),
            new_total: 2,
            assignments: vec![],
        })
        .unwrap_err();
    assert!(matches!(e, Refusal::InvalidPartitions { .. }));
    s.apply(&Command::AddPartitions {
        name: "orders".into(),
        new_total: 5,
        assignments: a(2),
    })
    .unwrap();
    assert_eq!(s.topic("orders").unwrap().partitions, 5);
    s.apply(&Command::SetAssignment {
        name: "orders".into(),
        partition: 4,
        assignment: Assignment {
            node_id: 9,
            core_index: 1,
        },
    })
    .unwrap();
    assert_eq!(s.assignment("orders", 4).unwrap().node_id, 9);
    let e = s
        .apply(&Command::SetAssignment {
            name: "orders".into(),
            partition: 5,
            assignment: Assignment {
                node_id: 9,
                core_index: 1,
            },
        })
        .unwrap_err();
    assert!(matches!(e, Refusal::UnknownTopicOrPartition { .. }));
    let mut set = BTreeMap::new();
    set.insert("retention.ms".to_string(), "1000".to_string());
    s.apply(&Command::AlterConfigs {
        name: "orders".into(),
        set,
        remove: vec![],
    })
    .unwrap();
    assert_eq!(s.topic("orders").unwrap().configs["retention.ms"], "1000");
    s.apply(&Command::DeleteTopic {
        name: "orders".into(),
    })
    .unwrap();
    assert!(s.topics.is_empty() && s.assignments.is_empty());
    let e = s
        .apply(&Command::DeleteTopic {
            name: "orders".into(),
        })
        .unwrap_err();
    assert!(matches!(e, Refusal::UnknownTopicOrPartition { .. }));
}

#[test]
fn refusals() {
    let mut s = MetaState::default();
    let e = s
        .apply(&Command::create_topic("t", 0, BTreeMap::new(), vec![]))
        .unwrap_err();
    assert!(matches!(e, Refusal::InvalidPartitions { .. }));
    let e = s
        .apply(&Command::create_topic("bad/name", 1, BTreeMap::new(), a(1)))
        .unwrap_err();
    assert!(matches!(e, Refusal::InvalidTopic { .. }));
    let e = s
        .apply(&Command::create_topic("t", 2, BTreeMap::new(), a(1)))
        .unwrap_err();
    assert!(matches!(e, Refusal::InvalidAssignment { .. }));
    assert_eq!(s, MetaState::default());
}

#[test]
fn subscriber_copy_follows_changes() {
    let mut s = MetaState::default();
    let mut copy = MetaState::default();
    for cmd in [
        Command::create_topic("a", 2, BTreeMap::new(), a(2)),
        Command::AddPartitions {
            name: "a".into(),
            new_total: 4,
            assignments: a(2),
        },
        Command::create_topic("b", 1, BTreeMap::new(), a(1)),
        Command::DeleteTopic { name: "b".into() },
    ] {
        let ch = s.apply(&cmd).unwrap();
        assert!(copy.apply_change(&ch));
    }
    assert_eq!(s, copy);
}

fn topics(s: &mut MetaState, names: &[(&str, usize)]) {
    for (n, p) in names {
        s.apply(&Command::create_topic(
            *n,
            *p as u32,
            BTreeMap::new(),
            a(*p),
        ))
        .unwrap();
    }
}

fn fanout_reason(e: Refusal) -> String {
    assert!(
        matches!(
            e,
            Refusal::InvalidConfig { .. } | Refusal::InvalidFanout { .. }
        ),
        "{e}"
    );
    e.to_string()
}

#[test]
fn fanout_attach_detach_and_rules() {
    let mut s = MetaState::default();
    topics(
        &mut s,
        &[("orders", 2), ("audit", 4), ("retry", 2), ("x", 1)],
    );
    let ch = s
        .apply(&Command::attach_child("orders", "audit", 0, vec![5, 7]))
        .unwrap();
    let Change::ChildAttached { link } = ch else {
        panic!("{ch:?}")
    };
    assert_eq!(link.epoch.len(), FANOUT_EPOCH_HEX_CHARS);
    assert_eq!(link.attach_offsets, vec![5, 7]);
    assert_eq!(s.fanout_links.of_child("audit").unwrap().parent, "orders");
    // Unknown topics.
    let e = s
        .apply(&Command::attach_child("nope", "retry", 0, vec![0]))
        .unwrap_err();
    assert!(matches!(e, Refusal::UnknownTopicOrPartition { .. }));
    // Self, second parent, chains both ways, bad offsets, delay over a year.
    let r = fanout_reason(
        s.apply(&Command::attach_child("retry", "retry", 0, vec![0, 0]))
            .unwrap_err(),
    );
    assert!(r.contains("own child"), "{r}");
    let r = fanout_reason(
        s.apply(&Command::attach_child("retry", "audit", 0, vec![0, 0]))
            .unwrap_err(),
    );
    assert!(r.contains("one parent per child"), "{r}");
    let r = fanout_reason(
        s.apply(&Command::attach_child("audit", "x", 0, vec![0; 4]))
            .unwrap_err(),
    );
    assert!(r.contains("no chains"), "{r}");
    let r = fanout_reason(
        s.apply(&Command::attach_child("x", "orders", 0, vec![0]))
            .unwrap_err(),
    );
    assert!(r.contains("no chains"), "{r}");
    let r = fanout_reason(
        s.apply(&Command::attach_child("orders", "retry", 0, vec![0]))
            .unwrap_err(),
    );
    assert!(r.contains("attach offsets"), "{r}");
    let r = fanout_reason(
        s.apply(&Command::attach_child(
            "orders",
            "retry",
            MAX_FANOUT_DELAY_MS + 1,
            vec![0, 0],
        ))
        .unwrap_err(),
    );
    assert!(r.contains("one year"), "{r}");
    let bad_epoch = Command::AttachChild {
        parent: "orders".into(),
        child: "retry".into(),
        delay_ms: 0,
        epoch: "xyz".into(),
        attach_offsets: vec![0, 0],
    };
    assert!(fanout_reason(s.apply(&bad_epoch).unwrap_err()).contains("epoch"));
    s.apply(&Command::attach_child(
        "orders",
        "retry",
        MAX_FANOUT_DELAY_MS,
        vec![0, 0],
    ))
    .unwrap();
    // Detach: wrong parent refused, right parent removes only that link.
    let r = fanout_reason(
        s.apply(&Command::DetachChild {
            parent: "x".into(),
            child: "audit".into(),
        })
        .unwrap_err(),
    );
    assert!(r.contains("not attached"), "{r}");
    let ch = s
        .apply(&Command::DetachChild {
            parent: "orders".into(),
            child: "audit".into(),
        })
        .unwrap();
    assert!(matches!(ch, Change::ChildDetached { .. }));
    assert!(s.fanout_links.of_child("audit").is_none());
    assert!(s.fanout_links.of_child("retry").is_some());
    // Re-attach is a fresh epoch.
    let e1 = link.epoch;
    let Change::ChildAttached { link } = s
        .apply(&Command::attach_child("orders", "audit", 0, vec![9, 9]))
        .unwrap()
    else {
        panic!()
    };
    assert_ne!(link.epoch, e1);
    assert_eq!(s.check_invariants(), Ok(()));
}

#[test]
fn fanout_children_cap() {
    let mut s = MetaState::default();
    topics(&mut s, &[("p", 1)]);
    for i in 0..=MAX_FANOUT_CHILDREN_PER_PARENT {
        let c = format!("c{i}");
        topics(&mut s, &[(c.as_str(), 1)]);
        let r = s.apply(&Command::attach_child("p", c, 0, vec![0]));
        if i < MAX_FANOUT_CHILDREN_PER_PARENT {
            r.unwrap();
        } else {
            assert!(fanout_reason(r.unwrap_err()).contains("at most 108"));
        }
    }
}

#[test]
fn fanout_retention_floor() {
    let hour = FANOUT_RETENTION_MARGIN_MS;
    let mut s = MetaState::default();
    topics(&mut s, &[("p", 1), ("d", 1), ("n", 1)]);
    let set = |v: &str| Command::AlterConfigs {
        name: "p".into(),
        set: [(RETENTION_MS_CONFIG.to_string(), v.to_string())].into(),
        remove: vec![],
    };
    s.apply(&set(&(2 * hour).to_string())).unwrap();
    // A 2 h delay needs 3 h of parent retention.
    let r = fanout_reason(
        s.apply(&Command::attach_child("p", "d", 2 * hour, vec![0]))
            .unwrap_err(),
    );
    assert!(r.contains("delay + 1 h"), "{r}");
    s.apply(&Command::attach_child("p", "d", hour, vec![0]))
        .unwrap();
    // A child without delay sets no floor.
    s.apply(&Command::attach_child("p", "n", 0, vec![0]))
        .unwrap();
    // Lowering retention below the floor is refused; -1 (forever) and equal pass.
    let e = s.apply(&set(&(2 * hour - 1).to_string())).unwrap_err();
    assert!(matches!(
        e,
        Refusal::InvalidConfig { .. } | Refusal::InvalidFanout { .. }
    ));
    assert_eq!(
        s.topic("p").unwrap().configs[RETENTION_MS_CONFIG],
        (2 * hour).to_string()
    );
    s.apply(&set("-1")).unwrap();
    s.apply(&set(&(2 * hour).to_string())).unwrap();
}

#[test]
fn fanout_follows_delete_and_add_partitions() {
    let mut s = MetaState::default();
    let mut copy = MetaState::default();
    let mut run = |s: &mut MetaState, cmd: Command| {
        let ch = s.apply(&cmd).unwrap();
        assert!(copy.apply_change(&ch), "{ch:?}");
    };
    for (n, p) in [("p", 2), ("c1", 1), ("c2", 3)] {
        run(
            &mut s,
            Command::create_topic(n, p, BTreeMap::new(), a(p as usize)),
        );
    }
    run(&mut s, Command::attach_child("p", "c1", 0, vec![3, 4]));
    run(&mut s, Command::attach_child("p", "c2", 10, vec![3, 4]));
    run(
        &mut s,
        Command::AddPartitions {
            name: "p".into(),
            new_total: 4,
            assignments: a(2),
        },
    );
    assert_eq!(
        s.fanout_links.of_child("c1").unwrap().attach_offsets,
        vec![3, 4, 0, 0]
    );
    run(&mut s, Command::DeleteTopic { name: "c1".into() });
    assert!(s.fanout_links.of_child("c1").is_none());
    assert!(s.fanout_links.of_child("c2").is_some());
    run(&mut s, Command::DeleteTopic { name: "p".into() });
    assert!(s.fanout_links.links.is_empty());
    assert_eq!(s, copy);
    assert_eq!(s.check_invariants(), Ok(()));
}

/// Raft log entries written before fan-out existed must still decode: the new command
/// variants may not grow the archived `Command`.
#[test]
fn archived_command_size_unchanged() {
    assert_eq!(std::mem::size_of::<ArchivedCommand>(), 56);
}

/// AlterClientQuota sets and removes keys; an entity left without keys is gone; bad keys,
/// values and entities are refused; a subscriber's copy follows.
#[test]
fn client_quotas_alter_and_follow() {
    let mut s = MetaState::default();
    let mut copy = s.clone();
    let entity = QuotaEntity {
        user: QuotaPart::Absent,
        client_id: QuotaPart::Named("slow".into()),
    };
    let alter = |set: &[(&str, f64)], remove: &[&str]| Command::AlterClientQuota {
        alter: Box::new(QuotaAlteration {
            entity: entity.clone(),
            set: set
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_bits()))
                .collect(),
            remove: remove.iter().map(|k| k.to_string()).collect(),
        }),
    };
    let c = s
        .apply(&alter(
            &[
                ("producer_byte_rate", 1048576.0),
                ("request_percentage", 50.0),
            ],
            &[],
        ))
        .unwrap();
    assert!(copy.apply_change(&c));
    assert_eq!(s.client_quotas.len(), 1);
    assert_eq!(
        s.client_quotas[0].value("producer_byte_rate"),
        Some(1048576.0)
    );
    let c = s.apply(&alter(&[], &["request_percentage"])).unwrap();
    assert!(copy.apply_change(&c));
    assert_eq!(s.client_quotas[0].value("request_percentage"), None);
    assert_eq!(s, copy);
    for bad in [
        alter(&[("bytes_per_fortnight", 1.0)], &[]),
        alter(&[("producer_byte_rate", 0.0)], &[]),
        alter(&[("producer_byte_rate", f64::NAN)], &[]),
        Command::AlterClientQuota {
            alter: Box::new(QuotaAlteration {
                entity: QuotaEntity {
                    user: QuotaPart::Absent,
                    client_id: QuotaPart::Absent,
                },
                set: BTreeMap::new(),
                remove: vec![],
            }),
        },
    ] {
        assert!(
            matches!(s.apply(&bad), Err(Refusal::InvalidQuota { .. })),
            "{bad:?}"
        );
    }
    let c = s.apply(&alter(&[], &["producer_byte_rate"])).unwrap();
    assert!(copy.apply_change(&c));
    assert!(s.client_quotas.is_empty());
    assert_eq!(s, copy);
    assert_eq!(s.check_invariants(), Ok(()));
}

/// Applies `cmd` to `s` and the resulting change to `copy` (a subscriber's copy).
fn both(s: &mut MetaState, copy: &mut MetaState, cmd: &Command) -> Result<Change, Refusal> {
    let ch = s.apply(cmd)?;
    assert!(copy.apply_change(&ch), "{ch:?}");
    Ok(ch)
}

fn barrier_refusal(r: Result<Change, Refusal>) -> String {
    match r {
        Err(e @ Refusal::InvalidBarrierGroup { .. }) => e.to_string(),
        other => panic!("expected InvalidBarrierGroup, got {other:?}"),
    }
}

/// Define creates a group (topics sorted, each once), define again replaces it, delete
/// removes it; deleting an unknown group is refused; the copy follows.
#[test]
fn barrier_groups_define_replace_delete() {
    let mut s = MetaState::default();
    let mut copy = MetaState::default();
    for (n, p) in [("a", 1u32), ("b", 2), ("c", 3)] {
        both(
            &mut s,
            &mut copy,
            &Command::create_topic(n, p, BTreeMap::new(), a(p as usize)),
        )
        .unwrap();
    }
    let ch = both(
        &mut s,
        &mut copy,
        &Command::define_barrier_group("g", ["b", "a", "b"], 5_000, 10),
    )
    .unwrap();
    let want = BarrierGroupDef {
        name: "g".into(),
        topics: vec!["a".into(), "b".into()],
        interval_ms: 5_000,
        retained_cuts: 10,
    };
    assert_eq!(ch, Change::BarrierGroupDefined { def: want.clone() });
    assert_eq!(s.barrier_group("g"), Some(&want));
    assert_eq!(
        s.barrier_groups
            .groups_of_topic("b")
            .map(|g| g.name.as_str())
            .collect::<Vec<_>>(),
        ["g"]
    );
    assert_eq!(s.barrier_groups.groups_of_topic("c").count(), 0);
    // Replace: new topics, interval and retention.
    both(
        &mut s,
        &mut copy,
        &Command::define_barrier_group("g", ["c"], 60_000, 3),
    )
    .unwrap();
    both(
        &mut s,
        &mut copy,
        &Command::define_barrier_group("h", ["a", "c"], 1_000, 1),
    )
    .unwrap();
    assert_eq!(s.barrier_groups.groups.len(), 2);
    let g = s.barrier_group("g").unwrap();
    assert_eq!(
        (g.topics.clone(), g.interval_ms, g.retained_cuts),
        (vec!["c".to_string()], 60_000, 3)
    );
    assert_eq!(s, copy);
    assert_eq!(s.check_invariants(), Ok(()));
    let ch = both(
        &mut s,
        &mut copy,
        &Command::DeleteBarrierGroup { name: "g".into() },
    )
    .unwrap();
    assert_eq!(ch, Change::BarrierGroupDeleted { name: "g".into() });
    assert!(s.barrier_group("g").is_none());
    assert!(s.barrier_group("h").is_some());
    let before = s.clone();
    let e = s
        .apply(&Command::DeleteBarrierGroup { name: "g".into() })
        .unwrap_err();
    assert_eq!(e, Refusal::UnknownBarrierGroup { name: "g".into() });
    assert!(e.to_string().contains("unknown barrier group 'g'"), "{e}");
    assert_eq!(s, before);
    assert_eq!(s, copy);
    // A copy that never saw the group cannot delete it: it is stale.
    let mut stale = MetaState::default();
    assert!(!stale.apply_change(&Change::BarrierGroupDeleted { name: "h".into() }));
    assert_eq!(s.check_invariants(), Ok(()));
}

/// Every define rule and limit is refused with `InvalidBarrierGroup` (the state is left
/// untouched); the bounds themselves are accepted.
#[test]
fn barrier_group_limits() {
    let mut s = MetaState::default();
    let names: Vec<String> = (0..=MAX_TOPICS_PER_BARRIER_GROUP)
        .map(|i| format!("t{i:03}"))
        .collect();
    for n in &names {
        s.apply(&Command::create_topic(n.as_str(), 1, BTreeMap::new(), a(1)))
            .unwrap();
    }
    s.apply(&Command::create_topic(
        "__consumer_offsets",
        1,
        BTreeMap::new(),
        a(1),
    ))
    .unwrap();
    let before = s.clone();
    let def = |name: &str, topics: &[&str], interval_ms: u64, retained_cuts: u32| {
        Command::define_barrier_group(name, topics.iter().copied(), interval_ms, retained_cuts)
    };
    let long = "n".repeat(MAX_BARRIER_GROUP_NAME_BYTES + 1);
    for (cmd, want) in [
        (def("", &["t000"], 5_000, 1), "name is empty"),
        (
            def(&long, &["t000"], 5_000, 1),
            "MAX_BARRIER_GROUP_NAME_BYTES",
        ),
        (def("a/b", &["t000"], 5_000, 1), "[a-zA-Z0-9._-]"),
        (def("..", &["t000"], 5_000, 1), "'.' and '..'"),
        (def("g", &[], 5_000, 1), "no topics"),
        (def("g", &["nope"], 5_000, 1), "'nope' does not exist"),
        (
            def("g", &["t000", "__consumer_offsets"], 5_000, 1),
            "'__consumer_offsets' is internal",
        ),
        (
            def("g", &["t000"], MIN_BARRIER_INTERVAL_MS - 1, 1),
            "interval_ms 999",
        ),
        (
            def("g", &["t000"], MAX_BARRIER_INTERVAL_MS + 1, 1),
            "interval_ms 604800001",
        ),
        (def("g", &["t000"], 5_000, 0), "retained_cuts 0"),
        (
            def("g", &["t000"], 5_000, MAX_RETAINED_CUTS + 1),
            "retained_cuts 10001",
        ),
    ] {
        let r = barrier_refusal(s.apply(&cmd));
        assert!(r.contains(want), "{cmd:?}: {r}");
        assert_eq!(s, before);
    }
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let r = barrier_refusal(s.apply(&def("g", &all, 5_000, 1)));
    assert!(r.contains("101 distinct topics"), "{r}");
    // Duplicates are collapsed before the count: 100 distinct topics, named twice, pass.
    let mut twice = all[..MAX_TOPICS_PER_BARRIER_GROUP].to_vec();
    twice.extend_from_slice(&all[..MAX_TOPICS_PER_BARRIER_GROUP]);
    s.apply(&def("g", &twice, 5_000, 1)).unwrap();
    assert_eq!(
        s.barrier_group("g").unwrap().topics.len(),
        MAX_TOPICS_PER_BARRIER_GROUP
    );
    // The bounds themselves.
    let longest = "n".repeat(MAX_BARRIER_GROUP_NAME_BYTES);
    s.apply(&def(&longest, &["t000"], MIN_BARRIER_INTERVAL_MS, 1))
        .unwrap();
    s.apply(&def(
        "g.x-Y_1",
        &["t000"],
        MAX_BARRIER_INTERVAL_MS,
        MAX_RETAINED_CUTS,
    ))
    .unwrap();
    // At most MAX_BARRIER_GROUPS groups; replacing one at the cap is fine.
    for i in s.barrier_groups.groups.len()..MAX_BARRIER_GROUPS {
        s.apply(&def(&format!("g{i}"), &["t001"], 5_000, 1))
            .unwrap();
    }
    assert_eq!(s.barrier_groups.groups.len(), MAX_BARRIER_GROUPS);
    let full = s.clone();
    let r = barrier_refusal(s.apply(&def("one-more", &["t001"], 5_000, 1)));
    assert!(r.contains("100 barrier groups at most"), "{r}");
    assert_eq!(s, full);
    s.apply(&def("g", &["t002"], 5_000, 7)).unwrap();
    assert_eq!(s.barrier_group("g").unwrap().retained_cuts, 7);
    s.apply(&Command::DeleteBarrierGroup { name: "g".into() })
        .unwrap();
    s.apply(&def("one-more", &["t001"], 5_000, 1)).unwrap();
    assert_eq!(s.check_invariants(), Ok(()));
}

/// Deleting a topic takes it out of every group; a group left without topics stays
/// defined with none; the topic created again is not put back; the copy follows.
#[test]
fn topic_deletion_leaves_barrier_groups() {
    let mut s = MetaState::default();
    let mut copy = MetaState::default();
    for n in ["a", "b"] {
        both(
            &mut s,
            &mut copy,
            &Command::create_topic(n, 1, BTreeMap::new(), a(1)),
        )
        .unwrap();
    }
    for (g, t) in [("both", &["a", "b"][..]), ("only-a", &["a"][..])] {
        both(
            &mut s,
            &mut copy,
            &Command::define_barrier_group(g, t.iter().copied(), 5_000, 2),
        )
        .unwrap();
    }
    both(
        &mut s,
        &mut copy,
        &Command::DeleteTopic { name: "a".into() },
    )
    .unwrap();
    assert_eq!(
        s.barrier_group("both").unwrap().topics,
        vec!["b".to_string()]
    );
    assert!(s.barrier_group("only-a").unwrap().topics.is_empty());
    assert_eq!(s, copy);
    assert_eq!(s.check_invariants(), Ok(()));
    both(
        &mut s,
        &mut copy,
        &Command::create_topic("a", 1, BTreeMap::new(), a(1)),
    )
    .unwrap();
    assert!(s.barrier_group("only-a").unwrap().topics.is_empty());
    // The empty group can be redefined or deleted.
    both(
        &mut s,
        &mut copy,
        &Command::define_barrier_group("only-a", ["a"], 5_000, 2),
    )
    .unwrap();
    both(
        &mut s,
        &mut copy,
        &Command::DeleteBarrierGroup {
            name: "both".into(),
        },
    )
    .unwrap();
    assert_eq!(s, copy);
    assert_eq!(s.check_invariants(), Ok(()));
}

/// A batch of barrier commands (as group commit applies them, refusals left out) gives the
/// same state on a copy that applies the batch's changes.
#[test]
fn barrier_apply_change_mirrors_apply() {
    let mut s = MetaState::default();
    let mut copy = MetaState::default();
    let cmds = [
        Command::create_topic("x", 2, BTreeMap::new(), a(2)),
        Command::create_topic("y", 1, BTreeMap::new(), a(1)),
        Command::define_barrier_group("g1", ["y", "x"], 2_000, 5),
        Command::define_barrier_group("bad", ["zzz"], 2_000, 5),
        Command::define_barrier_group("g2", ["x"], 3_000, 1),
        Command::define_barrier_group("g1", ["y"], 4_000, 6),
        Command::DeleteBarrierGroup { name: "g2".into() },
        Command::DeleteBarrierGroup { name: "g2".into() },
        Command::DeleteTopic { name: "y".into() },
    ];
    let changes: Vec<Change> = cmds.iter().filter_map(|c| s.apply(c).ok()).collect();
    assert_eq!(changes.len(), cmds.len() - 2);
    assert!(copy.apply_change(&Change::Batch(changes)));
    assert_eq!(s, copy);
    assert!(s.barrier_group("g1").unwrap().topics.is_empty());
    assert_eq!(s.check_invariants(), Ok(()));
}

/// `check_invariants` catches a broken barrier section.
#[test]
fn barrier_invariants() {
    let mut s = MetaState::default();
    for n in ["a", "b"] {
        s.apply(&Command::create_topic(n, 1, BTreeMap::new(), a(1)))
            .unwrap();
    }
    s.apply(&Command::define_barrier_group("g", ["a", "b"], 5_000, 2))
        .unwrap();
    let broken = |f: &dyn Fn(&mut BarrierGroupDef)| {
        let mut t = s.clone();
        f(t.barrier_groups.groups.get_mut("g").unwrap());
        t.check_invariants()
    };
    assert!(broken(&|g| g.name = "h".into()).is_err());
    assert!(broken(&|g| g.topics.reverse()).is_err());
    assert!(broken(&|g| g.topics.push("b".into())).is_err());
    assert!(broken(&|g| g.topics.push("c".into())).is_err());
    assert!(broken(&|g| g.interval_ms = 1).is_err());
    assert!(broken(&|g| g.interval_ms = BARRIER_INTERVAL_OFF_MS).is_ok());
    assert!(broken(&|g| g.retained_cuts = 0).is_err());
    let mut t = s.clone();
    t.barrier_groups.section_version = 1;
    assert!(t.check_invariants().is_err());
    assert_eq!(s.check_invariants(), Ok(()));
}
