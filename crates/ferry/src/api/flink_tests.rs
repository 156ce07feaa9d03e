//! Flink's field names, pinned: each body serialized against the JSON
//! Flink's REST API documents.

use super::*;
use serde_json::json;

/// Serializes `body` and compares it with `expected` field by field
/// (key order aside), then reads it back.
fn round_trip<T>(body: &T, expected: serde_json::Value)
where
    T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(body).expect("serialize");
    let got: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(got, expected, "{text}");
    let back: T = serde_json::from_str(&text).expect("deserialize");
    assert_eq!(&back, body);
}

#[test]
fn job_overview_uses_flinks_kebab_case_names() {
    let tasks: StateCounts = [("running".to_string(), 4), ("total".to_string(), 4)]
        .into_iter()
        .collect();
    let body = MultipleJobsDetails {
        jobs: vec![JobOverview {
            jid: "0123456789abcdef0123456789abcdef".into(),
            name: "ferry-replication-t".into(),
            state: "RUNNING".into(),
            start_time: 1_700_000_000_000,
            end_time: -1,
            duration: 5_000,
            last_modification: 1_700_000_000_000,
            tasks,
        }],
    };
    let expected = r#"{"jobs":[{"jid":"0123456789abcdef0123456789abcdef","name":"ferry-replication-t","state":"RUNNING","start-time":1700000000000,"end-time":-1,"duration":5000,"last-modification":1700000000000,"tasks":{"running":4,"total":4}}]}"#;
    assert_eq!(serde_json::to_string(&body).expect("serialize"), expected);
    round_trip(&body, serde_json::from_str(expected).expect("JSON"));
}

#[test]
fn savepoint_status_uses_kebab_case_failure_cause() {
    let done = AsynchronousOperationResult {
        status: QueueStatus {
            id: QueueStatusId::Completed,
        },
        operation: Some(SavepointInfo {
            location: Some("file:///sp/savepoint-012345-abcdefabcdef".into()),
            failure_cause: None,
        }),
    };
    assert_eq!(
        serde_json::to_string(&done).expect("serialize"),
        r#"{"status":{"id":"COMPLETED"},"operation":{"location":"file:///sp/savepoint-012345-abcdefabcdef"}}"#
    );
    let failed = AsynchronousOperationResult {
        status: QueueStatus {
            id: QueueStatusId::Completed,
        },
        operation: Some(SavepointInfo {
            location: None,
            failure_cause: Some(FailureCause::operation_failed("disk full")),
        }),
    };
    round_trip(
        &failed,
        json!({
            "status": { "id": "COMPLETED" },
            "operation": { "failure-cause": {
                "class": "ferry.OperationFailed",
                "stack-trace": "disk full",
                "serialized-throwable": null,
                "message": "disk full",
            } },
        }),
    );
    let running: AsynchronousOperationResult<SavepointInfo> = AsynchronousOperationResult {
        status: QueueStatus {
            id: QueueStatusId::InProgress,
        },
        operation: None,
    };
    assert_eq!(
        serde_json::to_string(&running).expect("serialize"),
        r#"{"status":{"id":"IN_PROGRESS"},"operation":null}"#
    );
}

#[test]
fn checkpoint_status_uses_camel_case_names() {
    let done = AsynchronousOperationResult {
        status: QueueStatus {
            id: QueueStatusId::Completed,
        },
        operation: Some(CheckpointInfo {
            checkpoint_id: Some(7),
            failure_cause: None,
        }),
    };
    round_trip(
        &done,
        json!({ "status": { "id": "COMPLETED" }, "operation": { "checkpointId": 7 } }),
    );
    let failed = CheckpointInfo {
        checkpoint_id: None,
        failure_cause: Some(FailureCause::operation_failed("x")),
    };
    let v = serde_json::to_value(&failed).expect("serialize");
    assert!(v.get("failureCause").is_some() && v.get("failure-cause").is_none());
}

#[test]
fn trigger_bodies_keep_flinks_mixed_cases() {
    let savepoint = SavepointTriggerRequestBody {
        target_directory: Some("file:///sp".into()),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_string(&savepoint).expect("serialize"),
        r#"{"target-directory":"file:///sp","cancel-job":false}"#
    );
    let stop = StopWithSavepointRequestBody {
        target_directory: Some("file:///sp".into()),
        drain: true,
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_string(&stop).expect("serialize"),
        r#"{"targetDirectory":"file:///sp","drain":true}"#
    );
    let checkpoint = CheckpointTriggerRequestBody {
        checkpoint_type: Some(CheckpointType::Full),
        trigger_id: None,
    };
    assert_eq!(
        serde_json::to_string(&checkpoint).expect("serialize"),
        r#"{"checkpointType":"FULL"}"#
    );
    round_trip(
        &TriggerResponse {
            request_id: "ab".into(),
        },
        json!({ "request-id": "ab" }),
    );
    // Flink's names only: the snake_case spelling is refused.
    assert!(
        serde_json::from_str::<SavepointTriggerRequestBody>(r#"{"target_directory":"/x"}"#)
            .is_err()
    );
    assert_eq!(
        serde_json::to_string(&Acknowledged {}).expect("serialize"),
        "{}"
    );
}

#[test]
fn cluster_overview_and_checkpoint_config_field_names() {
    let overview = ClusterOverview {
        taskmanagers: 1,
        slots_total: 2,
        slots_available: 0,
        jobs_running: 1,
        jobs_finished: 0,
        jobs_cancelled: 0,
        jobs_failed: 0,
        flink_version: "ferry 0".into(),
        flink_commit: "unknown".into(),
    };
    round_trip(
        &overview,
        json!({
            "taskmanagers": 1, "slots-total": 2, "slots-available": 0,
            "jobs-running": 1, "jobs-finished": 0, "jobs-cancelled": 0, "jobs-failed": 0,
            "flink-version": "ferry 0", "flink-commit": "unknown",
        }),
    );
    let restored = RestoredCheckpoint {
        id: 3,
        restore_timestamp: 10,
        is_savepoint: true,
        external_path: "file:///sp".into(),
    };
    round_trip(
        &restored,
        json!({ "id": 3, "restore_timestamp": 10, "is_savepoint": true, "external_path": "file:///sp" }),
    );
    let summary = StatsSummary::default();
    assert_eq!(
        serde_json::to_string(&summary).expect("serialize"),
        r#"{"min":0,"max":0,"avg":0,"p50":0.0,"p90":0.0,"p95":0.0,"p99":0.0,"p999":0.0}"#
    );
}

#[test]
fn errors_are_a_list_of_messages() {
    round_trip(
        &ErrorResponse {
            errors: vec!["Job x not found".into()],
        },
        json!({ "errors": ["Job x not found"] }),
    );
}

#[test]
fn exceptions_keep_flinks_legacy_and_history_names() {
    let labels: BTreeMap<String, String> = [("restarted".to_string(), "true".to_string())]
        .into_iter()
        .collect();
    let body = JobExceptionsInfo {
        root_exception: Some("writing sink table 't': TimedOut".into()),
        timestamp: Some(1_700_000_000_000),
        all_exceptions: vec![ExecutionExceptionInfo {
            exception: "writing sink table 't': TimedOut".into(),
            task: "Sink: Writer".into(),
            location: "(unassigned)".into(),
            timestamp: 1_700_000_000_000,
            task_manager_id: "(unassigned)".into(),
        }],
        truncated: false,
        exception_history: ExceptionHistory {
            entries: vec![
                RootExceptionInfo {
                    info: ExceptionInfo {
                        exception_name: "SinkWrite".into(),
                        stacktrace: "writing sink table 't': TimedOut".into(),
                        timestamp: 1_700_000_000_000,
                        task_name: Some("Sink: Writer".into()),
                        location: None,
                        endpoint: None,
                        task_manager_id: None,
                        failure_labels: labels.clone(),
                    },
                    concurrent_exceptions: vec![],
                },
                RootExceptionInfo {
                    info: ExceptionInfo {
                        exception_name: "Checkpoint".into(),
                        stacktrace: "disk full".into(),
                        timestamp: 1_699_999_999_000,
                        task_name: None,
                        location: None,
                        endpoint: None,
                        task_manager_id: None,
                        failure_labels: labels,
                    },
                    concurrent_exceptions: vec![],
                },
            ],
            truncated: true,
        },
    };
    round_trip(
        &body,
        json!({
            "root-exception": "writing sink table 't': TimedOut",
            "timestamp": 1_700_000_000_000i64,
            "all-exceptions": [{
                "exception": "writing sink table 't': TimedOut",
                "task": "Sink: Writer",
                "location": "(unassigned)",
                "timestamp": 1_700_000_000_000i64,
                "taskManagerId": "(unassigned)",
            }],
            "truncated": false,
            "exceptionHistory": {
                "entries": [
                    {
                        "exceptionName": "SinkWrite",
                        "stacktrace": "writing sink table 't': TimedOut",
                        "timestamp": 1_700_000_000_000i64,
                        "taskName": "Sink: Writer",
                        "failureLabels": { "restarted": "true" },
                        "concurrentExceptions": [],
                    },
                    {
                        "exceptionName": "Checkpoint",
                        "stacktrace": "disk full",
                        "timestamp": 1_699_999_999_000i64,
                        "failureLabels": { "restarted": "true" },
                        "concurrentExceptions": [],
                    },
                ],
                "truncated": true,
            },
        }),
    );
    let never_failed = JobExceptionsInfo {
        root_exception: None,
        timestamp: None,
        all_exceptions: vec![],
        truncated: false,
        exception_history: ExceptionHistory {
            entries: vec![],
            truncated: false,
        },
    };
    assert_eq!(
        serde_json::to_string(&never_failed).expect("serialize"),
        r#"{"root-exception":null,"timestamp":null,"all-exceptions":[],"truncated":false,"exceptionHistory":{"entries":[],"truncated":false}}"#
    );
}
