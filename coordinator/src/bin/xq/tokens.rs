//! The admin's commands: `xq token create|list|revoke` and `xq audit`.

use anyhow::bail;
use clap::Subcommand;
use xq_proto::client::Client;
use xq_proto::v1;

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Creates a token, shown once: --role admin or submitter.
    Create {
        #[arg(long)]
        role: String,
        /// Who it is for.
        #[arg(long)]
        name: String,
        /// It expires after this many days (0: never).
        #[arg(long, default_value_t = 0.0)]
        expires_days: f64,
    },
    /// Lists every token: id, role, name, created, expires, revoked.
    List,
    /// Revokes a token (a worker's too) by its id.
    Revoke { id: String },
}

/// `xq token ...`.
pub async fn run(client: &mut Client, action: TokenCommand) -> anyhow::Result<()> {
    match action {
        TokenCommand::Create { role, name, expires_days } => {
            if !(expires_days.is_finite() && expires_days >= 0.0) {
                bail!("--expires-days {expires_days}: a number of days, 0 for never");
            }
            let expires_seconds = (expires_days * 86_400.0).ceil() as u64;
            let reply = client.create_token(v1::CreateTokenRequest { role, name, expires_seconds }).await?.into_inner();
            eprintln!("token {} (shown once; `xq token revoke {}` revokes it):", reply.id, reply.id);
            out!("{}", reply.token);
        }
        TokenCommand::List => {
            for token in client.list_tokens(v1::ListTokensRequest {}).await?.into_inner().tokens {
                let when = |ms: i64, none: &str| if ms == 0 { none.to_owned() } else { ms.to_string() };
                out!(
                    "{} {} '{}'{} created {} expires {} revoked {}",
                    token.id,
                    token.role,
                    token.name,
                    if token.worker_id == 0 { String::new() } else { format!(" worker {}", token.worker_id) },
                    token.created_ms,
                    when(token.expires_ms, "never"),
                    when(token.revoked_ms, "no"),
                );
            }
        }
        TokenCommand::Revoke { id } => {
            client.revoke_token(v1::RevokeTokenRequest { id: id.clone() }).await?;
            out!("token {id} revoked");
        }
    }
    Ok(())
}

/// `xq audit`: the audit log, newest first.
pub async fn audit(client: &mut Client, limit: u32) -> anyhow::Result<()> {
    for entry in client.list_audit(v1::ListAuditRequest { limit }).await?.into_inner().entries {
        out!("{} {} {} {}", entry.at_ms, entry.actor, entry.action, entry.detail);
    }
    Ok(())
}
