//! Users: `xq signup` and `xq login` (the calls made before holding a token) and the
//! admins' and approvers' `xq users list|accept|role|revoke`.

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use xq_proto::client::{self, Client};
use xq_proto::v1;

use crate::connection::Connection;

/// Where a password comes from: never the command line, which every user of the
/// machine sees (`ps`).
#[derive(Args)]
pub struct Password {
    /// A file holding the password (its first line); without it, XQ_PASSWORD, else the
    /// first line of standard input.
    #[arg(long)]
    password_file: Option<PathBuf>,
}

impl Password {
    fn read(&self) -> anyhow::Result<String> {
        let text = match (&self.password_file, std::env::var("XQ_PASSWORD")) {
            (Some(path), _) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            (None, Ok(password)) => password,
            (None, Err(_)) => {
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).context("reading the password from standard input")?;
                line
            }
        };
        let password = text.lines().next().unwrap_or_default().to_owned();
        if password.is_empty() {
            bail!("no password: --password-file, XQ_PASSWORD or a line on standard input");
        }
        Ok(password)
    }
}

/// `xq signup NAME`: asks the coordinator for an account.
pub async fn sign_up(connection: &Connection, name: String, password: &Password) -> anyhow::Result<()> {
    let mut accounts = accounts(connection).await?;
    let password = password.read()?;
    let reply = accounts.signup(v1::SignupRequest { name: name.clone(), password }).await?.into_inner();
    match reply.state.as_str() {
        "pending" => out!("{name}: signed up; an admin or an approver accepts you, then `xq login {name}`"),
        _ => out!("{name}: signed up; `xq login {name}` gives you a token"),
    }
    Ok(())
}

/// What `xq login` was asked.
pub struct Login {
    pub name: String,
    pub expires_days: f64,
    /// Where the token goes (default: where `xq` reads it when no other is named).
    pub save: Option<PathBuf>,
    /// Where a new worker key of the user goes, if one is wanted.
    pub worker_key: Option<PathBuf>,
}

/// `xq login NAME`: a token of the user, saved where `xq` reads it when no other is
/// named (or to `save`), and with `--worker-key` a worker key of the user: a volunteer's
/// second command of three.
pub async fn log_in(connection: &Connection, login: Login, password: &Password) -> anyhow::Result<()> {
    let Login { name, expires_days, save, worker_key } = login;
    if !(expires_days.is_finite() && expires_days >= 0.0) {
        bail!("--expires-days {expires_days}: a number of days, 0 for the coordinator's 30");
    }
    let mut accounts = accounts(connection).await?;
    let password = password.read()?;
    let expires_seconds = (expires_days * 86_400.0).ceil() as u64;
    let reply = accounts.login(v1::LoginRequest { name: name.clone(), password, expires_seconds }).await?.into_inner();
    let path = save.or_else(client::saved_token_file).context("no home directory to keep the token in: --save FILE")?;
    write_private(&path, &reply.token)?;
    out!("{name} logged in as {} (token {}), kept in {}", reply.role, reply.id, path.display());
    if let Some(key_file) = worker_key {
        let address = client::Address {
            url: &connection.coordinator,
            token: Some(&reply.token),
            token_file: None,
            ca_cert: connection.ca_cert.as_deref(),
        };
        let mut client = client::connect_to(&address).await?;
        let key_name = std::fs::read_to_string("/etc/hostname").map_or("machines".to_owned(), |h| h.trim().to_owned());
        let key = client.create_worker_key(v1::CreateWorkerKeyRequest { name: key_name }).await?.into_inner();
        write_private(&key_file, &key.token)?;
        out!(
            "worker key {} kept in {}: `xq-worker connect --key-file {}` on each of your machines",
            key.id,
            key_file.display(),
            key_file.display()
        );
    }
    Ok(())
}

async fn accounts(
    connection: &Connection,
) -> anyhow::Result<v1::accounts_client::AccountsClient<tonic::transport::Channel>> {
    if let Some(warning) = client::plaintext_warning(&connection.coordinator) {
        eprintln!("xq: warning: {}", warning.replace("the token", "the password"));
    }
    let ca = connection.ca_cert.as_ref().map(std::fs::read).transpose().context("reading --ca-cert")?;
    Ok(client::accounts(&connection.coordinator, ca).await?)
}

/// Writes `token` to `path`, readable by its owner only, the directory made if need be.
fn write_private(path: &std::path::Path, token: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    std::io::Write::write_all(&mut file, format!("{token}\n").as_bytes())?;
    Ok(())
}

#[derive(Subcommand)]
pub enum UserCommand {
    /// Lists the users: name, role, state, tokens in force (admins and approvers).
    List,
    /// Accepts a user who signed up and waits (admins and approvers).
    Accept { name: String },
    /// Gives a user a role: submitter, approver or admin (admins).
    Role { name: String, role: String },
    /// Revokes a user and every token it holds: its jobs and events stop (admins).
    Revoke { name: String },
}

/// `xq users ...`.
pub async fn run(client: &mut Client, action: UserCommand) -> anyhow::Result<()> {
    let show = |user: v1::UserInfo| {
        out!("{} {} {} tokens [{}]", user.name, user.role, user.state, user.token_ids.join(", "));
    };
    match action {
        UserCommand::List => {
            client.list_users(v1::ListUsersRequest {}).await?.into_inner().users.into_iter().for_each(show)
        }
        UserCommand::Accept { name } => show(client.accept_user(v1::UserName { name }).await?.into_inner()),
        UserCommand::Role { name, role } => {
            show(client.set_user_role(v1::SetUserRoleRequest { name, role }).await?.into_inner())
        }
        UserCommand::Revoke { name } => show(client.revoke_user(v1::UserName { name }).await?.into_inner()),
    }
    Ok(())
}
