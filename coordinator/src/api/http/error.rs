//! A refused HTTP request: its status and what was wrong, as JSON; the gRPC statuses
//! the shared code answers with, mapped to HTTP's.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A refused request: its HTTP status and what was wrong.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub(super) fn bad(message: impl Into<String>) -> Self {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

/// The gRPC status codes the shared code answers with, as HTTP statuses.
impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        use tonic::Code;
        let code = match status.code() {
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
            // Stored data the server cannot read back: its fault, said plainly.
            Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
            Code::FailedPrecondition | Code::AlreadyExists => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(code, status.message().to_owned())
    }
}

impl From<crate::scheduler::ScheduleError> for ApiError {
    fn from(error: crate::scheduler::ScheduleError) -> Self {
        tonic::Status::from(error).into()
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad(format!("the query: {}", rejection.body_text()))
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        ApiError(rejection.status(), format!("the body: {}", rejection.body_text()))
    }
}
