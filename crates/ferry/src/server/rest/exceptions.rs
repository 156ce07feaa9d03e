//! `GET /jobs/:jobid/exceptions`: the job's failures in Flink's shape
//! (`JobExceptionsInfoWithHistory`). The legacy fields carry the newest
//! failure (`root-exception`) and, while the job is RESTARTING or FAILED,
//! the task it hit (`all-exceptions`); `exceptionHistory` lists every
//! recorded failure newest first. `?maxExceptions=N` (default 20, as
//! Flink) limits both lists; `?failureLabelFilter=key:value,...` keeps the
//! history entries carrying all those labels.

use super::error::ApiError;
use super::jobs::find_job;
use super::AppState;
use crate::api::flink::{
    ExceptionHistory, ExceptionInfo, ExecutionExceptionInfo, JobExceptionsInfo, RootExceptionInfo,
};
use crate::server::view::{JobView, SINK_NAME};
use axum::extract::{Path, Query, State};
use axum::Json;
use ferry_engine::status::ExceptionRecord;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Flink's default of `maxExceptions`.
const DEFAULT_MAX_EXCEPTIONS: usize = 20;

/// Flink's placeholder for a location it does not know.
const UNASSIGNED: &str = "(unassigned)";

/// The failure label saying whether the job restarted after the failure
/// (`"true"`) or the failure ended it (`"false"`).
pub(super) const LABEL_RESTARTED: &str = "restarted";

#[derive(Deserialize)]
pub(super) struct ExceptionsQuery {
    #[serde(rename = "maxExceptions")]
    max_exceptions: Option<String>,
    #[serde(rename = "failureLabelFilter")]
    failure_label_filter: Option<String>,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Selection {
    pub max: usize,
    /// (key, value) pairs an entry must all carry.
    pub labels: Vec<(String, String)>,
}

impl Selection {
    fn parse(q: &ExceptionsQuery) -> Result<Self, ApiError> {
        let max = match q.max_exceptions.as_deref().map(str::trim) {
            None => DEFAULT_MAX_EXCEPTIONS,
            Some(v) => v.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "Invalid value '{v}' for query parameter maxExceptions: expected a non-negative integer"
                ))
            })?,
        };
        let mut labels = Vec::new();
        for pair in q
            .failure_label_filter
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let Some((k, v)) = pair.split_once(':') else {
                return Err(ApiError::bad_request(format!(
                    "Invalid value '{pair}' for query parameter failureLabelFilter: expected key:value"
                )));
            };
            labels.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(Selection { max, labels })
    }
}

/// The operator a failure happened in, by the engine's failure name
/// (`source`: the job's source operator); `None` for a failure of the
/// whole job (checkpointing, restore, ...).
fn task_name(exception_name: &str, source: &str) -> Option<String> {
    match exception_name {
        "SinkWrite" => Some(SINK_NAME.to_string()),
        "SourceRead" => Some(source.to_string()),
        _ => None,
    }
}

fn labels(r: &ExceptionRecord) -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL_RESTARTED.to_string(), r.restarted.to_string())])
}

fn history_entry(r: &ExceptionRecord, source: &str) -> RootExceptionInfo {
    RootExceptionInfo {
        info: ExceptionInfo {
            exception_name: r.exception_name.clone(),
            stacktrace: r.message.clone(),
            timestamp: r.timestamp_ms as i64,
            task_name: task_name(&r.exception_name, source),
            location: None,
            endpoint: None,
            task_manager_id: None,
            failure_labels: labels(r),
        },
        concurrent_exceptions: vec![],
    }
}

/// The body for `records` (newest first) of a job whose source operator is
/// `source`; `failing` when the job is RESTARTING or FAILED now, so its
/// newest failure is the tasks' current one.
pub(super) fn exceptions_body(
    records: &[ExceptionRecord],
    source: &str,
    failing: bool,
    selection: &Selection,
) -> JobExceptionsInfo {
    let newest = records.first();
    let current: Vec<ExecutionExceptionInfo> = newest
        .filter(|_| failing)
        .and_then(|r| {
            task_name(&r.exception_name, source).map(|task| ExecutionExceptionInfo {
                exception: r.message.clone(),
                task,
                location: UNASSIGNED.into(),
                timestamp: r.timestamp_ms as i64,
                task_manager_id: UNASSIGNED.into(),
            })
        })
        .into_iter()
        .collect();
    let all_exceptions: Vec<_> = current.iter().take(selection.max).cloned().collect();
    let matching: Vec<&ExceptionRecord> = records
        .iter()
        .filter(|r| {
            let l = labels(r);
            selection
                .labels
                .iter()
                .all(|(k, v)| l.get(k).is_some_and(|have| have == v))
        })
        .collect();
    let entries: Vec<RootExceptionInfo> = matching
        .iter()
        .take(selection.max)
        .map(|r| history_entry(r, source))
        .collect();
    JobExceptionsInfo {
        root_exception: newest.map(|r| r.message.clone()),
        timestamp: newest.map(|r| r.timestamp_ms as i64),
        truncated: all_exceptions.len() < current.len(),
        all_exceptions,
        exception_history: ExceptionHistory {
            truncated: entries.len() < matching.len(),
            entries,
        },
    }
}

fn view_body(v: &JobView, selection: &Selection) -> JobExceptionsInfo {
    let failing = v.is_restarting() || matches!(v.status, ferry_engine::JobStatus::Failed { .. });
    exceptions_body(&v.exceptions, &v.source_operator(), failing, selection)
}

pub(super) async fn job_exceptions(
    State(state): State<AppState>,
    Path(jobid): Path<String>,
    Query(q): Query<ExceptionsQuery>,
) -> Result<Json<JobExceptionsInfo>, ApiError> {
    let job = find_job(&state, &jobid)?;
    let selection = Selection::parse(&q)?;
    Ok(Json(view_body(&job.view(), &selection)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Kudu source's operator name.
    const SOURCE_NAME: &str = "Source: KuduSource";

    fn record(t: u64, name: &str, restarted: bool) -> ExceptionRecord {
        ExceptionRecord {
            timestamp_ms: t,
            exception_name: name.into(),
            message: format!("{name} failed at {t}"),
            restarted,
        }
    }

    fn all(max: usize) -> Selection {
        Selection {
            max,
            labels: vec![],
        }
    }

    #[test]
    fn a_job_that_never_failed_has_no_exceptions() {
        let body = exceptions_body(&[], SOURCE_NAME, false, &all(20));
        assert_eq!(body.root_exception, None);
        assert_eq!(body.timestamp, None);
        assert!(body.all_exceptions.is_empty() && !body.truncated);
        assert!(body.exception_history.entries.is_empty());
        assert!(!body.exception_history.truncated);
    }

    #[test]
    fn the_newest_failure_is_the_root_and_the_history_is_newest_first() {
        let records = [
            record(3_000, "SinkWrite", true),
            record(2_000, "Checkpoint", true),
            record(1_000, "SourceRead", true),
        ];
        let body = exceptions_body(&records, SOURCE_NAME, true, &all(20));
        assert_eq!(
            body.root_exception.as_deref(),
            Some("SinkWrite failed at 3000")
        );
        assert_eq!(body.timestamp, Some(3_000));
        assert_eq!(body.all_exceptions.len(), 1);
        assert_eq!(body.all_exceptions[0].task, SINK_NAME);
        let names: Vec<_> = body
            .exception_history
            .entries
            .iter()
            .map(|e| (e.info.exception_name.as_str(), e.info.task_name.as_deref()))
            .collect();
        assert_eq!(
            names,
            [
                ("SinkWrite", Some(SINK_NAME)),
                ("Checkpoint", None),
                ("SourceRead", Some(SOURCE_NAME)),
            ]
        );
        assert_eq!(
            body.exception_history.entries[0].info.failure_labels[LABEL_RESTARTED],
            "true"
        );
        // Running again: the tasks have no failure, the history stays.
        let running = exceptions_body(&records, SOURCE_NAME, false, &all(20));
        assert!(running.all_exceptions.is_empty());
        assert_eq!(running.root_exception, body.root_exception);
        assert_eq!(running.exception_history.entries.len(), 3);
    }

    #[test]
    fn max_exceptions_cuts_both_lists_and_says_so() {
        let records = [
            record(3_000, "SinkWrite", false),
            record(2_000, "SinkWrite", true),
            record(1_000, "SinkWrite", true),
        ];
        let body = exceptions_body(&records, SOURCE_NAME, true, &all(2));
        assert_eq!(body.exception_history.entries.len(), 2);
        assert!(body.exception_history.truncated);
        assert!(!body.truncated);
        let none = exceptions_body(&records, SOURCE_NAME, true, &all(0));
        assert!(none.all_exceptions.is_empty() && none.truncated);
        assert!(none.exception_history.entries.is_empty());
        assert!(none.exception_history.truncated);
        assert_eq!(none.timestamp, Some(3_000), "the root is not limited");
    }

    #[test]
    fn failure_label_filter_keeps_matching_entries() {
        let records = [
            record(3_000, "SinkWrite", false),
            record(2_000, "SinkWrite", true),
        ];
        let sel = Selection::parse(&ExceptionsQuery {
            max_exceptions: Some("5".into()),
            failure_label_filter: Some("restarted:false".into()),
        })
        .expect("parse");
        let body = exceptions_body(&records, SOURCE_NAME, true, &sel);
        assert_eq!(body.exception_history.entries.len(), 1);
        assert_eq!(body.exception_history.entries[0].info.timestamp, 3_000);
        assert!(!body.exception_history.truncated);
    }

    #[test]
    fn bad_query_values_are_refused_naming_the_parameter() {
        for (max, filter, param) in [
            (Some("ten"), None, "maxExceptions"),
            (Some("-1"), None, "maxExceptions"),
            (None, Some("restarted"), "failureLabelFilter"),
        ] {
            let err = Selection::parse(&ExceptionsQuery {
                max_exceptions: max.map(str::to_string),
                failure_label_filter: filter.map(str::to_string),
            })
            .expect_err("refused");
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(err.message.contains(param), "{}", err.message);
        }
    }
}
