use super::*;

fn sample() -> Split {
    Split {
        table_id: "tid".into(),
        table_name: "db.t".into(),
        tablet_id: "tab".into(),
        partition_key_start: vec![0, 0, 0, 1],
        partition_key_end: Vec::new(),
        lower_bound: Some(vec![0x80, 0, 0, 5]),
        upper_bound: None,
        projection: vec!["a".into(), "b".into()],
        predicates: vec![pb::ColumnPredicatePb {
            column: Some("a".into()),
            predicate: Some(pb::column_predicate_pb::Predicate::IsNotNull(
                pb::column_predicate_pb::IsNotNull {},
            )),
        }],
        snapshot: Some(HybridTime::from_raw(77 << 12)),
        snapshot_read: true,
        diff_start: Some(HybridTime::from_raw(70 << 12)),
        fault_tolerant: true,
        batch_size_bytes: Some(1024),
        limit: None,
        replica_selection: ReplicaSelection::ClosestReplica,
        columnar: false,
        cache_blocks: false,
        resume_key: None,
    }
}

#[test]
fn round_trip() {
    let s = sample();
    let bytes = s.to_bytes();
    assert_eq!(&bytes[..4], b"FSPL");
    assert_eq!(Split::from_bytes(&bytes).unwrap(), s);
    let resumed = s.clone().with_resume_key(vec![0x80, 0, 0, 9]);
    let back = Split::from_bytes(&resumed.to_bytes()).unwrap();
    assert_eq!(back.resume_key(), Some(&[0x80, 0, 0, 9][..]));
    assert_eq!(back, resumed);
    // Empty projections and READ_LATEST survive too.
    let mut latest = sample();
    latest.projection.clear();
    latest.snapshot = None;
    latest.snapshot_read = false;
    latest.diff_start = None;
    latest.fault_tolerant = false;
    assert_eq!(Split::from_bytes(&latest.to_bytes()).unwrap(), latest);
}

#[test]
fn spec_of_a_split() {
    let s = sample();
    let spec = s.scan_spec();
    assert_eq!(
        spec.diff,
        Some((
            HybridTime::from_raw(70 << 12),
            HybridTime::from_raw(77 << 12)
        ))
    );
    assert_eq!(spec.partition_key_start, vec![0, 0, 0, 1]);
    assert_eq!(spec.raw_predicates.len(), 1);
    assert!(!spec.cache_blocks);
    let mut now = sample();
    now.snapshot = None;
    now.diff_start = None;
    assert_eq!(now.scan_spec().read_mode, ReadMode::Snapshot(None));
}

#[test]
fn a_diff_split_as_a_snapshot_at_its_end() {
    let s = sample().with_resume_key(vec![0x80, 0, 0, 9]);
    let snap = s.as_snapshot_at_end();
    let spec = snap.scan_spec();
    assert_eq!(spec.diff, None);
    assert_eq!(
        spec.read_mode,
        ReadMode::Snapshot(Some(HybridTime::from_raw(77 << 12)))
    );
    assert_eq!(snap.resume_key(), s.resume_key());
    assert_eq!(snap.projection(), s.projection());
    assert_eq!(snap.tablet_id(), s.tablet_id());
}

#[test]
fn rejects_garbage_and_newer_versions() {
    assert!(Split::from_bytes(b"").is_err());
    assert!(Split::from_bytes(b"nope").is_err());
    assert!(Split::from_bytes(b"FSPL\xff\xff").is_err());
    let mut bytes = MAGIC.to_vec();
    SplitPb {
        version: 2,
        table_id: "t".into(),
        table_name: "t".into(),
        tablet_id: "x".into(),
        ..Default::default()
    }
    .encode(&mut bytes)
    .unwrap();
    let err = Split::from_bytes(&bytes).unwrap_err().to_string();
    assert!(err.contains("version 2"), "{err}");
    // Arbitrary bytes after the magic never panic.
    let mut rng = crate::partition::testutil::Rng(3);
    for _ in 0..2000 {
        let mut b = MAGIC.to_vec();
        b.extend(rng.bytes(40));
        let _ = Split::from_bytes(&b);
    }
}

#[test]
fn bound_intersections() {
    assert_eq!(max_lower(None, Some(b"b")), Some(b"b".to_vec()));
    assert_eq!(max_lower(Some(b"c"), Some(b"b")), Some(b"c".to_vec()));
    assert_eq!(min_upper(Some(b"c"), None), Some(b"c".to_vec()));
    assert_eq!(min_upper(Some(b"c"), Some(b"b")), Some(b"b".to_vec()));
    assert_eq!(min_upper(None, None), None);
    assert_eq!(min_partition_end(b"", b"x"), b"x".to_vec());
    assert_eq!(min_partition_end(b"y", b"x"), b"x".to_vec());
    assert_eq!(max_partition(b"", b"x"), b"x".to_vec());
}
