//! Deadlines, exponential backoff with jitter, and the classification of
//! errors into "refresh and retry", "back off and retry" or "fail".
