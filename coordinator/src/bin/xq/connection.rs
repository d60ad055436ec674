//! The one client set-up every command that talks to a coordinator shares: where it
//! is, the token, and the CA for TLS.

use std::path::PathBuf;

use clap::Args;
use xq_proto::client::{self, Client};

#[derive(Args, Clone)]
pub struct Connection {
    /// The coordinator's URL.
    #[arg(long, global = true, env = "XQ_COORDINATOR", default_value = "http://127.0.0.1:7420")]
    pub coordinator: String,
    /// A client token; better in XQ_TOKEN or --token-file, since a command line is
    /// visible to every user of the machine (`ps`).
    #[arg(long, global = true, env = "XQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the client token (such as <data>/client-token).
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// The CA certificate (PEM) for a TLS coordinator.
    #[arg(long, global = true)]
    pub ca_cert: Option<PathBuf>,
}

/// Connects to the coordinator named by `connection`.
pub async fn connect(connection: &Connection) -> anyhow::Result<Client> {
    let address = client::Address {
        url: &connection.coordinator,
        token: connection.token.as_deref(),
        token_file: connection.token_file.as_deref(),
        ca_cert: connection.ca_cert.as_deref(),
    };
    if let Some(warning) = client::plaintext_warning(&connection.coordinator) {
        eprintln!("xq: warning: {warning}");
    }
    Ok(client::connect_to(&address).await?)
}
