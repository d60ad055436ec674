//! Users' accounts end to end (#56 part 1): sign-up under each mode, acceptance by an
//! admin or an approver, log-in for tokens of the user's role, an approver who may
//! approve others' jobs but never its own, revocation of a user with every token it
//! holds, all kept across a restart; and the attacks on the new surface: password
//! guessing, names with markup or control characters, sign-ups where none are taken.

use std::process::Command;

use tonic::Code;
use xq_coordinator::access::accounts::{ATTEMPTS, SignupMode};
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;
use xq_proto::v1::accounts_client::AccountsClient;

use crate::common::{
    BACKENDS, Served, TempDir, binary, channel, client, fresh_database, serve, serve_on, test_request,
};

async fn accounts(served: &Served) -> AccountsClient<tonic::transport::Channel> {
    AccountsClient::new(channel(served.address).await)
}

async fn sign_up(served: &Served, name: &str, password: &str) -> Result<String, tonic::Status> {
    let request = v1::SignupRequest { name: name.to_owned(), password: password.to_owned() };
    Ok(accounts(served).await.signup(request).await?.into_inner().state)
}

async fn log_in(served: &Served, name: &str, password: &str) -> Result<v1::LoginReply, tonic::Status> {
    let request = v1::LoginRequest { name: name.to_owned(), password: password.to_owned(), expires_seconds: 0 };
    Ok(accounts(served).await.login(request).await?.into_inner())
}

fn name(name: &str) -> v1::UserName {
    v1::UserName { name: name.to_owned() }
}

#[tokio::test]
async fn users_sign_up_are_accepted_log_in_approve_others_jobs_and_are_revoked_across_a_restart() {
    for backend in BACKENDS {
        let dir = TempDir::new("accounts");
        let url = fresh_database(backend, &dir.0).await;
        let config = || SchedulerConfig { require_approval: true, signup: SignupMode::Approval, ..Default::default() };
        let served = serve_on(&dir.0, &url, config(), 1000).await;
        let mut admin = client(served.address, &served.client_token).await;

        // Two sign-ups wait; a pending user cannot log in.
        assert_eq!(sign_up(&served, "alice", "alice's long password").await.unwrap(), "pending");
        assert_eq!(sign_up(&served, "bob", "bob's long password!").await.unwrap(), "pending");
        let waiting = log_in(&served, "alice", "alice's long password").await.unwrap_err();
        assert_eq!(waiting.code(), Code::FailedPrecondition, "{waiting:?}");
        let taken = sign_up(&served, "ALICE", "another long password").await.unwrap_err();
        assert_eq!(taken.code(), Code::InvalidArgument, "a name differing in case only: {taken:?}");

        // The admin accepts both and makes Bob an approver.
        admin.accept_user(name("alice")).await.unwrap();
        admin
            .set_user_role(v1::SetUserRoleRequest { name: "bob".to_owned(), role: "approver".to_owned() })
            .await
            .unwrap();
        let bob_info = admin.accept_user(name("bob")).await.unwrap().into_inner();
        assert_eq!((bob_info.role.as_str(), bob_info.state.as_str()), ("approver", "active"));
        let wrong = log_in(&served, "alice", "not alice's password").await.unwrap_err();
        assert_eq!(wrong.code(), Code::Unauthenticated);
        let unknown = log_in(&served, "carol", "not alice's password").await.unwrap_err();
        assert_eq!((unknown.code(), unknown.message()), (wrong.code(), wrong.message()), "no name is told apart");

        // Logged in, each holds a token of its role.
        let alice_login = log_in(&served, "alice", "alice's long password").await.unwrap();
        let bob_login = log_in(&served, "bob", "bob's long password!").await.unwrap();
        assert_eq!((alice_login.role.as_str(), bob_login.role.as_str()), ("submitter", "approver"));
        let mut alice = client(served.address, &alice_login.token).await;
        let mut bob = client(served.address, &bob_login.token).await;
        let denied = alice.list_users(v1::ListUsersRequest {}).await.unwrap_err();
        assert_eq!(denied.code(), Code::PermissionDenied, "a submitter lists no users");

        // Alice's test waits; Bob approves it. Bob's own waits too, and only another
        // approves it.
        let request = test_request(&mut alice, 8, None).await;
        let alices = alice.create_test(request).await.unwrap().into_inner();
        assert_eq!(alices.state, "pending");
        assert_eq!(bob.approve_job(v1::JobId { job_id: alices.job_id }).await.unwrap().into_inner().state, "running");
        let request = test_request(&mut bob, 8, None).await;
        let bobs = bob.create_test(request).await.unwrap().into_inner();
        assert_eq!(bobs.state, "pending", "an approver's own job waits");
        let own = bob.approve_job(v1::JobId { job_id: bobs.job_id }).await.unwrap_err();
        assert_eq!(own.code(), Code::PermissionDenied, "{own:?}");
        let alice_approves = alice.approve_job(v1::JobId { job_id: bobs.job_id }).await.unwrap_err();
        assert_eq!(alice_approves.code(), Code::PermissionDenied);
        admin.approve_job(v1::JobId { job_id: bobs.job_id }).await.unwrap();

        // The lists: each user with its tokens in force; each token with its user.
        let users = bob.list_users(v1::ListUsersRequest {}).await.unwrap().into_inner().users;
        let listed: Vec<(&str, &str, &str)> =
            users.iter().map(|u| (u.name.as_str(), u.role.as_str(), u.state.as_str())).collect();
        assert_eq!(
            listed,
            [("alice", "submitter", "active"), ("bob", "approver", "active"), ("operator", "admin", "active")]
        );
        assert_eq!(users[0].token_ids, std::slice::from_ref(&alice_login.id));
        let tokens = admin.list_tokens(v1::ListTokensRequest {}).await.unwrap().into_inner().tokens;
        let alice_token = tokens.iter().find(|t| t.id == alice_login.id).unwrap();
        assert_eq!((alice_token.user.as_str(), alice_token.role.as_str()), ("alice", "submitter"));
        assert!(tokens.iter().any(|t| t.user == "operator" && t.role == "admin"), "the admin's own: {tokens:?}");

        // Revoking Alice revokes her token and stops her running test; she cannot log in.
        let revoked = admin.revoke_user(name("alice")).await.unwrap().into_inner();
        assert_eq!((revoked.state.as_str(), revoked.token_ids.len()), ("revoked", 0));
        let refused = alice.list_jobs(v1::ListJobsRequest::default()).await.unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated);
        let stopped = admin.get_job(v1::JobId { job_id: alices.job_id }).await.unwrap().into_inner();
        assert_eq!(
            (stopped.state.as_str(), stopped.outcome.as_str()),
            ("stopped", "its submitter's token was revoked")
        );
        let again = log_in(&served, "alice", "alice's long password").await.unwrap_err();
        assert_eq!(again.code(), Code::PermissionDenied);

        // After a restart: the users as they were, Bob's token still his.
        drop((alice, bob, admin));
        drop(served);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let served = serve_on(&dir.0, &url, config(), 1000).await;
        let mut bob = client(served.address, &bob_login.token).await;
        let users = bob.list_users(v1::ListUsersRequest {}).await.unwrap().into_inner().users;
        let states: Vec<&str> = users.iter().map(|u| u.state.as_str()).collect();
        assert_eq!(states, ["revoked", "active", "active"], "{backend:?}");
        assert_eq!(log_in(&served, "alice", "alice's long password").await.unwrap_err().code(), Code::PermissionDenied);
        assert_eq!(log_in(&served, "bob", "bob's long password!").await.unwrap().role, "approver");
    }
}

/// The attacks on the new surface (#56 part 5): guessing a password is bounded per name
/// whatever the address, a right password past the bound is refused as well; names with
/// markup, control or look-alike characters and short passwords are refused; a
/// coordinator that takes no sign-ups takes none, and an open one makes users active.
#[tokio::test]
async fn password_guessing_is_bounded_per_name_and_names_with_markup_are_refused() {
    let served =
        serve(crate::common::Backend::Sqlite, SchedulerConfig { signup: SignupMode::Open, ..Default::default() }).await;
    assert_eq!(sign_up(&served, "dora", "dora's long password").await.unwrap(), "active");
    for guess in 0..ATTEMPTS {
        let refused = log_in(&served, "dora", &format!("guess number {guess}")).await.unwrap_err();
        assert_eq!(refused.code(), Code::Unauthenticated, "guess {guess}");
    }
    let bounded = log_in(&served, "dora", "dora's long password").await.unwrap_err();
    assert_eq!(bounded.code(), Code::ResourceExhausted, "past the bound the right password waits too: {bounded:?}");
    // Another name is not held back by Dora's guesser.
    assert_eq!(sign_up(&served, "erin", "erin's long password").await.unwrap(), "active");
    assert_eq!(log_in(&served, "erin", "erin's long password").await.unwrap().role, "submitter");

    for bad in ["<script>x</script>", "eve\u{1b}[2J", "line\nbreak", "ｅve", "a b", ""] {
        let refused = sign_up(&served, bad, "a long enough password").await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad:?}: {refused:?}");
    }
    assert_eq!(sign_up(&served, "frank", "short").await.unwrap_err().code(), Code::InvalidArgument);

    // A flood of sign-ups waits in a bounded queue (three here; 1,000 by default).
    let bounded = SchedulerConfig { signup: SignupMode::Approval, pending_users: 3, ..Default::default() };
    let flooded = serve(crate::common::Backend::Sqlite, bounded).await;
    for index in 0..3 {
        assert_eq!(sign_up(&flooded, &format!("flood-{index}"), "a long enough password").await.unwrap(), "pending");
    }
    let full = sign_up(&flooded, "flood-3", "a long enough password").await.unwrap_err();
    assert_eq!(full.code(), Code::PermissionDenied, "{full:?}");
    assert!(full.message().contains("3 sign-ups already wait"), "{full:?}");
    let mut admin = client(flooded.address, &flooded.client_token).await;
    admin.accept_user(name("flood-0")).await.unwrap();
    assert_eq!(sign_up(&flooded, "flood-3", "a long enough password").await.unwrap(), "pending", "a place freed");

    let closed =
        serve(crate::common::Backend::Sqlite, SchedulerConfig { signup: SignupMode::Closed, ..Default::default() })
            .await;
    assert_eq!(sign_up(&closed, "gina", "gina's long password").await.unwrap_err().code(), Code::PermissionDenied);
}

/// `xq signup` and `xq login` as a user types them: the password from the environment,
/// the token kept under the user's own config directory (mode 0600) and used by the
/// next command without a token named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xq_signs_up_logs_in_and_uses_the_kept_token() {
    let served =
        serve(crate::common::Backend::Sqlite, SchedulerConfig { signup: SignupMode::Open, ..Default::default() }).await;
    let home = TempDir::new("xq-home");
    let url = format!("http://{}", served.address);
    let xq = |args: &[&str]| {
        let output = Command::new(binary("xq"))
            .args(["--coordinator", &url])
            .args(args)
            .env("HOME", &home.0)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XQ_TOKEN")
            .env("XQ_PASSWORD", "hana's long password")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    };
    let (ok, text) = xq(&["list"]);
    assert!(!ok && text.contains("xq login"), "without a token it says how to get one: {text}");
    let (ok, text) = xq(&["signup", "hana"]);
    assert!(ok && text.contains("signed up"), "{text}");
    let (ok, text) = xq(&["login", "hana"]);
    assert!(ok && text.contains("logged in as submitter"), "{text}");
    let kept = home.0.join(".config/xq/token");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&kept).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let (ok, text) = xq(&["list"]);
    assert!(ok, "the kept token serves: {text}");
}
