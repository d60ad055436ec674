//! The dashboard's accounts over HTTP (#56): sign-up, a log-in kept in an HttpOnly,
//! SameSite cookie whose actions need the session's CSRF token, a new session at every
//! log-in (a planted one grants nothing), log-out revoking the log-in's token, a user's
//! page with their tests, machines and credit, and the worker key and retirement a
//! user makes there.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tonic::metadata::MetadataValue;
use xq_coordinator::access::accounts::SignupMode;
use xq_coordinator::scheduler::config::SchedulerConfig;
use xq_proto::v1;
use xq_proto::v1::accounts_client::AccountsClient;

use crate::common::{Backend, Served, channel, client, serve, test_request};

/// An answer: its status, its `Set-Cookie` headers and its body as JSON (or text).
struct Answer {
    status: u16,
    cookies: Vec<String>,
    body: Value,
}

async fn call(method: &str, url: &str, headers: &[(&str, &str)], body: Option<Value>) -> Answer {
    let client = HttpClient::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut builder = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let text = match body {
        Some(body) => {
            builder = builder.header("content-type", "application/json");
            body.to_string()
        }
        None => String::new(),
    };
    let response = client.request(builder.body(Full::new(Bytes::from(text))).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let cookies = response.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_owned()).collect();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Answer { status, cookies, body: serde_json::from_str(&text).unwrap_or(Value::String(text)) }
}

/// The `xq_session=...` pair a `Set-Cookie` header sets.
fn session_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}

async fn sign_up_and_log_in(base: &str, name: &str) -> (String, String) {
    let password = format!("{name}'s long password");
    let signed =
        call("POST", &format!("{base}/api/v1/signup"), &[], Some(json!({"name": name, "password": password}))).await;
    assert_eq!(signed.body, json!({"state": "active"}));
    let answer =
        call("POST", &format!("{base}/api/v1/session"), &[], Some(json!({"name": name, "password": password}))).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    (session_pair(&answer.cookies[0]), answer.body["csrf"].as_str().unwrap().to_owned())
}

async fn enroll(served: &Served, key: &str, machine_id: &str) -> u64 {
    let mut request = tonic::Request::new(v1::EnrollMachineRequest {
        machine_id: machine_id.to_owned(),
        name: machine_id.to_owned(),
    });
    request.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {key}")).unwrap());
    AccountsClient::new(channel(served.address).await).enroll_machine(request).await.unwrap().into_inner().worker_id
}

#[tokio::test]
async fn a_session_is_an_http_only_cookie_made_anew_at_log_in_whose_actions_need_its_csrf_token() {
    let config = SchedulerConfig { signup: SignupMode::Open, ..Default::default() };
    let served = serve(Backend::Sqlite, config).await;
    let base = format!("http://{}", served.address);
    let password = "alice's long password";
    let signup = json!({"name": "alice", "password": password});
    let signed = call("POST", &format!("{base}/api/v1/signup"), &[], Some(signup)).await;
    assert_eq!(signed.body, json!({"state": "active"}));
    // A form of another site cannot post JSON: sign-up and log-in take JSON only.
    let form = call("POST", &format!("{base}/api/v1/session"), &[("content-type", "text/plain")], None).await;
    assert_eq!(form.status, 415, "{}", form.body);

    // Session fixation: a session planted in alice's browser before she logs in (here
    // bob's own) is not the one she is logged in with, and stays bob's.
    let (bob_cookie, bob_csrf) = sign_up_and_log_in(&base, "bob").await;
    let credentials = json!({"name": "alice", "password": password});
    let login = call("POST", &format!("{base}/api/v1/session"), &[("cookie", &bob_cookie)], Some(credentials)).await;
    assert_eq!(login.status, 200, "{}", login.body);
    assert_eq!(login.body["user"], json!("alice"));
    assert_eq!(login.cookies.len(), 1);
    let set = &login.cookies[0];
    for part in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=604800"] {
        assert!(set.contains(part), "{set}");
    }
    assert!(!set.contains("Secure"), "no Secure over plain HTTP: {set}");
    let cookie = session_pair(set);
    assert_ne!(cookie, bob_cookie);
    let planted = call("GET", &format!("{base}/api/v1/session"), &[("cookie", &bob_cookie)], None).await;
    assert_eq!(planted.body["user"], json!("bob"), "{}", planted.body);
    // Behind a TLS reverse proxy the cookie is Secure too.
    let proxied = call(
        "POST",
        &format!("{base}/api/v1/session"),
        &[("x-forwarded-proto", "https")],
        Some(json!({"name": "alice", "password": password})),
    )
    .await;
    assert!(proxied.cookies[0].contains("; Secure"), "{:?}", proxied.cookies);
    let made_up = call("GET", &format!("{base}/api/v1/session"), &[("cookie", "xq_session=s:made-up")], None).await;
    assert_eq!(made_up.status, 401);
    let me = call("GET", &format!("{base}/api/v1/session"), &[("cookie", &cookie)], None).await;
    assert_eq!((&me.body["user"], &me.body["role"]), (&json!("alice"), &json!("submitter")), "{}", me.body);
    let csrf = me.body["csrf"].as_str().unwrap().to_owned();
    assert_eq!(csrf, login.body["csrf"].as_str().unwrap());

    // CSRF: the cookie alone, or with another session's token, does nothing.
    let keys = format!("{base}/api/v1/worker-keys");
    let zeros = "0".repeat(64);
    for headers in [
        vec![("cookie", cookie.as_str())],
        vec![("cookie", cookie.as_str()), ("x-csrf-token", zeros.as_str())],
        vec![("cookie", cookie.as_str()), ("x-csrf-token", bob_csrf.as_str())],
    ] {
        let refused = call("POST", &keys, &headers, Some(json!({"name": "lab"}))).await;
        assert_eq!(refused.status, 403, "{headers:?}: {}", refused.body);
    }
    let made = call("POST", &keys, &[("cookie", &cookie), ("x-csrf-token", &csrf)], Some(json!({"name": "lab"}))).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let key = made.body["token"].as_str().unwrap().to_owned();

    // The user's page: her machine and her test (made with a token of hers from xq).
    let worker = enroll(&served, &key, "m-1").await;
    let token = {
        let mut accounts = AccountsClient::new(channel(served.address).await);
        let login = v1::LoginRequest { name: "alice".to_owned(), password: password.to_owned(), expires_seconds: 0 };
        accounts.login(login).await.unwrap().into_inner().token
    };
    let mut alice = client(served.address, &token).await;
    let request = test_request(&mut alice, 10, None).await;
    let job = alice.create_test(request).await.unwrap().into_inner().job_id;
    let page = call("GET", &format!("{base}/api/v1/users/alice"), &[], None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(page.body["machines"][0]["worker_id"], json!(worker), "{}", page.body);
    assert_eq!(page.body["tests"][0]["job_id"], json!(job), "{}", page.body);
    assert_eq!(page.body["state"], json!("active"));
    assert_eq!(call("GET", &format!("{base}/api/v1/users/nobody"), &[], None).await.status, 404);

    // A machine is retired by its user, not by another.
    let retire = format!("{base}/api/v1/workers/{worker}/retire");
    let by_bob = call("POST", &retire, &[("cookie", &bob_cookie), ("x-csrf-token", &bob_csrf)], Some(json!({}))).await;
    assert_eq!(by_bob.status, 403, "{}", by_bob.body);
    let retired = call("POST", &retire, &[("cookie", &cookie), ("x-csrf-token", &csrf)], Some(json!({}))).await;
    assert_eq!(retired.body["standing"], json!("disabled"), "{}", retired.body);

    // A test made through the session: bob's session cannot stop it.
    let engine = crate::common::upload(&mut alice, "engine", "engine", b"#!/bin/sh\n").await.unwrap();
    let body =
        json!({"new": {"sha256": engine.sha256}, "base": {"sha256": engine.sha256}, "tc": "10+0.1", "pairs": 10});
    let tests = format!("{base}/api/v1/tests");
    let through = call("POST", &tests, &[("cookie", &cookie), ("x-csrf-token", &csrf)], Some(body)).await;
    assert_eq!(through.status, 200, "{}", through.body);
    let session_job = through.body["job_id"].as_u64().unwrap();
    let stop = |job: u64| format!("{base}/api/v1/jobs/{job}/stop");
    let by_bob = call("POST", &stop(session_job), &[("cookie", &bob_cookie), ("x-csrf-token", &bob_csrf)], None).await;
    assert_eq!(by_bob.status, 403, "{}", by_bob.body);

    // Log-out needs the CSRF token too, revokes the log-in's token and clears the cookie.
    let out = format!("{base}/api/v1/session");
    assert_eq!(call("DELETE", &out, &[("cookie", &cookie)], None).await.status, 403);
    let logged_out = call("DELETE", &out, &[("cookie", &cookie), ("x-csrf-token", &csrf)], None).await;
    assert_eq!(logged_out.status, 204, "{}", logged_out.body);
    assert!(logged_out.cookies[0].contains("Max-Age=0"), "{:?}", logged_out.cookies);
    assert_eq!(call("GET", &out, &[("cookie", &cookie)], None).await.status, 401, "its token revoked");
    // It ended the session, not her work: the test it made runs on, and her next
    // session stops it and the one made with her xq token (the same user's).
    let job_state = |job: u64| format!("{base}/api/v1/jobs/{job}");
    assert_eq!(call("GET", &job_state(session_job), &[], None).await.body["state"], json!("running"));
    let again = call("POST", &out, &[], Some(json!({"name": "alice", "password": password}))).await;
    let (cookie, csrf) = (session_pair(&again.cookies[0]), again.body["csrf"].as_str().unwrap().to_owned());
    for made in [session_job, job] {
        let stopped = call("POST", &stop(made), &[("cookie", &cookie), ("x-csrf-token", &csrf)], None).await;
        assert_eq!(stopped.body["state"], json!("stopped"), "job {made}: {}", stopped.body);
    }

    // A client token pasted in (the operator's: no password) is a session too, left in
    // force at log-out.
    let admin_login = call("POST", &out, &[], Some(json!({"token": served.client_token}))).await;
    assert_eq!(admin_login.body["role"], json!("admin"), "{}", admin_login.body);
    let admin_cookie = session_pair(&admin_login.cookies[0]);
    assert!(admin_cookie.starts_with("xq_session=t:"));
    let admin_csrf = admin_login.body["csrf"].as_str().unwrap().to_owned();
    let admin_out = call("DELETE", &out, &[("cookie", &admin_cookie), ("x-csrf-token", &admin_csrf)], None).await;
    assert_eq!(admin_out.status, 204);
    let mut admin = client(served.address, &served.client_token).await;
    assert!(admin.list_workers(v1::ListWorkersRequest {}).await.is_ok(), "the pasted token stays in force");
    let refused = call("POST", &out, &[], Some(json!({"token": "not a token"}))).await;
    assert_eq!(refused.status, 400);

    // Guessing a password through the dashboard meets the same bound as xq login's.
    let mut statuses = Vec::new();
    for _ in 0..11 {
        let guess = json!({"name": "bob", "password": "wrong password!"});
        statuses.push(call("POST", &out, &[], Some(guess)).await.status);
    }
    assert!(statuses[..9].iter().all(|&s| s == 401), "{statuses:?}");
    assert_eq!(statuses[10], 429, "{statuses:?}");
}
