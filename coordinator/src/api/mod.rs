//! The coordinator's surfaces: the gRPC services for workers and clients, the HTTP
//! dashboard and its JSON API, and the admission in front of both.

pub mod admission;
pub mod grpc;
pub mod http;
