//! The simulated fleet's gRPC client: unary calls on a shared HTTP/2 connection with
//! nothing between a simulated worker and its h2 stream: no tower buffer, no hyper
//! dispatch task, no streaming codec. Real workers run on their own machines; here the
//! load generator shares the two cores with the coordinator it measures, so the less
//! of them it takes, the more the figures say about the coordinator.

use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use http::{HeaderValue, Request};
use tokio::net::TcpStream;

/// A call that did not return a reply.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("HTTP/2: {0}")]
    Transport(#[from] h2::Error),
    #[error("connecting: {0}")]
    Connect(#[from] std::io::Error),
    #[error("HTTP status {0}")]
    Http(http::StatusCode),
    #[error("gRPC status {code}: {message}")]
    Grpc { code: String, message: String },
    #[error("malformed reply: {0}")]
    Malformed(String),
}

/// One HTTP/2 connection to the coordinator, shared by many simulated workers.
#[derive(Clone)]
pub struct Connection {
    sender: SendRequest<Bytes>,
    authority: String,
}

impl Connection {
    /// Connects and starts the task that drives the connection.
    pub async fn open(address: SocketAddr) -> Result<Self, CallError> {
        let tcp = TcpStream::connect(address).await?;
        tcp.set_nodelay(true)?;
        // Windows large enough that flow control never holds a report back.
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 24)
            .handshake(tcp)
            .await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Connection { sender, authority: address.to_string() })
    }

    /// A caller on this connection presenting `token`.
    pub fn caller(&self, token: &str) -> Caller {
        let authorization = HeaderValue::from_str(&format!("Bearer {token}")).expect("tokens are printable ASCII");
        Caller { connection: self.clone(), authorization }
    }
}

/// A simulated worker's end of a connection.
#[derive(Clone)]
pub struct Caller {
    connection: Connection,
    authorization: HeaderValue,
}

impl Caller {
    /// Calls the unary method `path` (`/package.Service/Method`).
    pub async fn call<Reply: prost::Message + Default>(
        &mut self,
        path: &str,
        message: &impl prost::Message,
    ) -> Result<Reply, CallError> {
        let request = Request::post(format!("http://{}{path}", self.connection.authority))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("authorization", self.authorization.clone())
            .body(())
            .expect("a well-formed request");
        let mut sender = self.connection.sender.clone().ready().await?;
        let (response, mut stream) = sender.send_request(request, false)?;
        stream.send_data(frame(message), true)?;
        let (head, mut body) = response.await?.into_parts();
        if head.status != http::StatusCode::OK {
            return Err(CallError::Http(head.status));
        }
        grpc_status(&head.headers)?;
        let mut received = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk?;
            let _ = body.flow_control().release_capacity(chunk.len());
            received.extend_from_slice(&chunk);
        }
        if let Some(trailers) = body.trailers().await? {
            grpc_status(&trailers)?;
        }
        if received.len() < 5 || received[0] != 0 {
            return Err(CallError::Malformed(format!("{} bytes, not one uncompressed message", received.len())));
        }
        Reply::decode(&received[5..]).map_err(|e| CallError::Malformed(e.to_string()))
    }
}

/// A message in gRPC's length-prefixed framing, uncompressed.
fn frame(message: &impl prost::Message) -> Bytes {
    let mut buffer = BytesMut::with_capacity(5 + message.encoded_len());
    buffer.put_u8(0);
    buffer.put_u32(message.encoded_len() as u32);
    message.encode(&mut buffer).expect("the buffer has room");
    buffer.freeze()
}

/// A non-zero `grpc-status` as an error (absent: the status comes in the trailers).
fn grpc_status(headers: &http::HeaderMap) -> Result<(), CallError> {
    match headers.get("grpc-status").map(HeaderValue::as_bytes) {
        None | Some(b"0") => Ok(()),
        Some(code) => Err(CallError::Grpc {
            code: String::from_utf8_lossy(code).into_owned(),
            message: headers.get("grpc-message").and_then(|m| m.to_str().ok()).unwrap_or("").to_owned(),
        }),
    }
}
