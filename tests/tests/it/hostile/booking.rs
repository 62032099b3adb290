//! The booking service's own limits (booking::limits), with no edge in front: a pass replayed from
//! many connections, a stranger's junk from an address others share, a stranger stuffing the
//! webhook with bad signatures. Each refusal is a 429 with its code and `Retry-After`, made before any Redis work.

use floodgate_protocol::api::booking::ReservationCreated;
use floodgate_protocol::payments::{sign, PaymentObject, WebhookEvent, SIGNATURE_HEADER};
use floodgate_tests::{unique, SaleSpec, TestApp, TestOptions};
use serde_json::Value;

/// POSTs a reservation with `token` and `key` from `http` (a client bound to some loopback
/// address): the status, the code and the reservation id.
async fn reserve(
    http: &reqwest::Client,
    app: &TestApp,
    sale: &str,
    token: &str,
    key: &str,
) -> (u16, Option<String>, Option<String>) {
    let response = http
        .post(app.reservations_url(sale))
        .bearer_auth(token)
        .header("idempotency-key", key)
        .json(&serde_json::json!({ "pool": "p1", "seats": 1 }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    if status == 429 {
        assert!(response.headers().contains_key("retry-after"));
    }
    let body: Value = response.json().await.unwrap_or_default();
    let text = |field: &str| body[field].as_str().map(str::to_owned);
    (status, text("error"), text("reservation_id"))
}

/// How many times the booking service ran `claim_token.lua` (the sale's slot's step).
async fn claims(app: &TestApp) -> f64 {
    let series = r#"floodgate_redis_script_duration_seconds_count{script="claim_token"}"#;
    app.metric(app.admin, series).await.unwrap_or(0.0)
}

fn from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(address.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
}

async fn sale(app: &TestApp) -> String {
    let sale = unique("limits-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 100)],
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    sale
}

/// One pass replayed with its key from many connections at once: a few replays are answered
/// (the same reservation), the rest refused before they reach Redis, so the pass cannot keep
/// the sale's slot and the pool's primary busy for everyone.
#[sqlx::test(migrations = "../migrations")]
async fn a_pass_replayed_from_many_connections_is_held_to_its_allowance(db: sqlx::PgPool) {
    let options = TestOptions {
        reservations_per_sec_per_pass: 2,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let token = app.token(&sale, 1, 1, 60_000);
    let key = unique("key-");
    let (status, _, first) = reserve(&app.http, &app, &sale, &token, &key).await;
    assert_eq!(status, 201);

    let before = claims(&app).await;
    let replays: Vec<_> = (0..40)
        .map(|n| {
            let (app, sale, token, key) = (&app, &sale, &token, &key);
            async move {
                let http = from(&format!("127.0.0.{}", 2 + n % 8));
                reserve(&http, app, sale, token, key).await
            }
        })
        .collect();
    let answers = futures::future::join_all(replays).await;
    let replayed: Vec<_> = answers.iter().filter(|a| a.0 == 201).collect();
    let limited = answers
        .iter()
        .filter(|a| a.0 == 429 && a.1.as_deref() == Some("reservation_rate_limited"))
        .count();
    assert!(
        replayed.iter().all(|a| a.2 == first),
        "a replay is the same reservation"
    );
    assert_eq!(replayed.len() + limited, 40, "{answers:?}");
    assert!(limited >= 30, "{limited} of 40 replays refused");
    let ran = claims(&app).await - before;
    assert!(
        ran <= replayed.len() as f64,
        "{ran} claims run for {} replays",
        replayed.len()
    );
}

/// One carrier's address: a stranger behind it sends reservations with passes that do not check,
/// held to the address's allowance; the people behind the same address, each with a pass that
/// checks, still book (a pass is held to its own allowance only). Before, the stranger's junk
/// spent the address's allowance and the people got 429 too.
#[sqlx::test(migrations = "../migrations")]
async fn junk_from_a_shared_address_does_not_spend_the_passes_behind_it(db: sqlx::PgPool) {
    let options = TestOptions {
        booking_requests_per_sec_per_ip: 2,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let mut limited = 0;
    for _ in 0..20 {
        let (status, code, _) = reserve(&app.http, &app, &sale, "not-a-pass", &unique("k-")).await;
        match status {
            429 => {
                assert_eq!(code.as_deref(), Some("booking_rate_limited"));
                limited += 1;
            }
            _ => assert_eq!(status, 401, "{code:?}"),
        }
    }
    assert!(limited >= 10, "{limited} of 20 junk requests refused");
    for ticket in 1..=10 {
        let token = app.token(&sale, ticket, 1, 60_000);
        let answer = reserve(&app.http, &app, &sale, &token, &unique("k-")).await;
        assert_eq!(
            answer.0, 201,
            "a person behind the same address: {answer:?}"
        );
    }
}

/// Passes without the edge's seal (a stranger's: the gateways seal every pass they issue) that
/// fail their check spend their network's share, and a network that spent it is refused them
/// before any check: from twenty addresses of one IPv4 /24, each well within its own allowance
/// (2 a second, bursts of 4), made-up passes (signed by a key no gateway holds) are refused 429
/// after the network's burst, while a person's sealed pass from the same /24 books, another
/// /24's junk is still only checked, and a genuine pass without its seal (sealed with a key
/// rotated out, say) from a third books at its address's price. Before, each address had its
/// own allowance, charged after the check: all twenty were checked (401).
#[sqlx::test(migrations = "../migrations")]
async fn unsealed_passes_from_a_network_pay_one_share_before_their_check(db: sqlx::PgPool) {
    let options = TestOptions {
        booking_requests_per_sec_per_ip: 2,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let forger = floodgate_protocol::token::TokenSigner::generate("forged");
    let junk = |ticket| {
        let sealed = floodgate_tests::pass(&forger, &sale, ticket, 1, 60_000, None);
        floodgate_protocol::unsealed(&sealed).to_owned()
    };
    let mut codes = Vec::new();
    for n in 0..20u64 {
        let http = from(&format!("127.0.17.{}", n + 1));
        let (status, code, _) = reserve(&http, &app, &sale, &junk(n), &unique("k-")).await;
        codes.push((status, code));
    }
    let limited = codes
        .iter()
        .filter(|c| **c == (429, Some("booking_rate_limited".into())))
        .count();
    assert!(limited >= 10, "{codes:?}");
    assert!(
        codes.iter().all(|(status, _)| [401, 429].contains(status)),
        "{codes:?}"
    );
    let person = from("127.0.17.99");
    let token = app.token(&sale, 1, 1, 60_000);
    let answer = reserve(&person, &app, &sale, &token, &unique("k-")).await;
    assert_eq!(answer.0, 201, "a person's sealed pass: {answer:?}");
    let elsewhere = reserve(&from("127.0.18.1"), &app, &sale, &junk(99), &unique("k-")).await;
    assert_eq!(elsewhere.0, 401, "another network's junk: {elsewhere:?}");
    let bare = floodgate_protocol::unsealed(&app.token(&sale, 2, 1, 60_000)).to_owned();
    let answer = reserve(&from("127.0.19.1"), &app, &sale, &bare, &unique("k-")).await;
    assert_eq!(answer.0, 201, "a genuine pass without its seal: {answer:?}");
}

/// Deliveries with a bad signature count against their address, and past its allowance are
/// answered 429; a delivery whose signature is valid is never refused for its rate, even from
/// that same address.
#[sqlx::test(migrations = "../migrations")]
async fn only_bad_webhook_signatures_count_against_an_address(db: sqlx::PgPool) {
    let options = TestOptions {
        webhook_failures_per_sec_per_ip: 1,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let event = WebhookEvent {
        id: unique("evt_"),
        kind: "payment.failed".into(),
        created: floodgate_protocol::now_millis() / 1000,
        data: PaymentObject {
            payment_id: "pay_x".into(),
            reference: "p1~nothing".into(),
            sale: sale.clone(),
            amount_minor: 1,
            currency: "INR".into(),
        },
    };
    let body = serde_json::to_vec(&event).unwrap();
    let now = floodgate_protocol::now_millis() / 1000;
    let deliver = |secret: &str| {
        let header = sign(secret.as_bytes(), now, &body);
        let request = app
            .http
            .post(format!("http://{}/v1/payments/webhook", app.booking))
            .header(SIGNATURE_HEADER, header)
            .header("content-type", "application/json")
            .body(body.clone());
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or_default();
            (
                status,
                body["error"].as_str().unwrap_or_default().to_owned(),
            )
        }
    };
    let mut answers = Vec::new();
    for _ in 0..10 {
        answers.push(deliver("a secret that is not the provider's").await);
    }
    let limited = answers
        .iter()
        .filter(|a| **a == (429, "webhook_rate_limited".to_owned()))
        .count();
    assert!(limited >= 5, "{answers:?}");
    assert!(answers
        .iter()
        .all(|a| a.0 == 429 || a.1 == "signature_invalid"));
    for _ in 0..5 {
        let (status, _) = deliver(&app.webhook_secret).await;
        assert_eq!(
            status, 200,
            "a valid delivery is never refused for its rate"
        );
    }
}

/// A settled reservation replayed (its key and body) is answered the original 201 from the
/// booking instance's memory: no claim in the sale's slot, no pool script, no replica wait.
#[sqlx::test(migrations = "../migrations")]
async fn replays_of_a_settled_reservation_cost_no_redis_work(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = sale(&app).await;
    let token = app.token(&sale, 1, 1, 60_000);
    let key = unique("key-");
    let (status, _, first) = reserve(&app.http, &app, &sale, &token, &key).await;
    assert_eq!(status, 201);
    let scripts = |name: &'static str| {
        let app = &app;
        async move {
            let series =
                format!(r#"floodgate_redis_script_duration_seconds_count{{script="{name}"}}"#);
            app.metric(app.admin, &series).await.unwrap_or(0.0)
        }
    };
    let before = (scripts("claim_token").await, scripts("reserve").await);
    for _ in 0..30 {
        let (status, _, again) = reserve(&app.http, &app, &sale, &token, &key).await;
        assert_eq!((status, &again), (201, &first));
    }
    let after = (scripts("claim_token").await, scripts("reserve").await);
    assert_eq!(after, before, "thirty replays ran no script");
    // Another key with the same pass is not a replay: it is refused as spent, by the scripts.
    let (status, code, _) = reserve(&app.http, &app, &sale, &token, "another-key").await;
    assert_eq!((status, code.as_deref()), (409, Some("token_spent")));
}

/// Through a gateway that passes the booking paths on (a single host, or a gateway behind an
/// edge), the booking service counts the client the gateway counts: behind a trusted edge, the
/// one the edge forwards for, not the edge nor the gateway.
#[sqlx::test(migrations = "../migrations")]
async fn the_gateway_passes_on_the_client_it_counts(db: sqlx::PgPool) {
    let loopback: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let options = TestOptions {
        booking_requests_per_sec_per_ip: 1,
        // The test plays the edge in front of the gateway; the gateway is the booking service's
        // trusted hop.
        trusted_proxies: vec![loopback],
        booking_trusted_proxies: vec![loopback],
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let url = format!("http://{}/v1/sales/{sale}/reservations", app.gateway);
    // Junk passes, which count against the address they come from.
    let book_as = |client: &'static str| {
        let (http, url) = (app.http.clone(), url.clone());
        let token = "not-a-pass";
        async move {
            let response = http
                .post(url)
                .bearer_auth(token)
                .header("idempotency-key", unique("k-"))
                .header("x-forwarded-for", client)
                .json(&serde_json::json!({ "pool": "p1", "seats": 1 }))
                .send()
                .await
                .unwrap();
            response.status().as_u16()
        }
    };
    // One client past its allowance (one a second, two at once)...
    let mut statuses = Vec::new();
    for _ in 1..=5 {
        statuses.push(book_as("203.0.113.7").await);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    // ...and another, through the same edge and gateway, is someone else: told why, not 429.
    assert_eq!(book_as("198.51.100.9").await, 401);
}

/// Reads and writes of an address have allowances of their own: reads (a reservation whose
/// secret the key does not prove, a buyer's list) are allowed far more than writes, and spending
/// them leaves the writes whole.
#[sqlx::test(migrations = "../migrations")]
async fn reads_have_an_allowance_of_their_own(db: sqlx::PgPool) {
    let options = TestOptions {
        booking_requests_per_sec_per_ip: 1,
        booking_reads_per_sec_per_ip: 1,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let held = hold(&app, &sale, 1).await;
    let id = &held.reservation_id;
    let mut reads = Vec::new();
    for _ in 0..6 {
        reads.push(ask_reservation(&app.http, &app, &sale, id, "a-guess", false).await);
    }
    assert!(
        reads.contains(&(429, Some("booking_rate_limited".into()))),
        "reads are limited too: {reads:?}"
    );
    // The reads spent their own allowance, not the writes': a write from the address is still
    // answered for what it is.
    let paying = ask_reservation(&app.http, &app, &sale, id, "a-guess", true).await;
    assert_eq!(paying, (404, Some("unknown_reservation".into())));
}

/// A hold of one seat in `p1`, made with ticket `ticket`'s pass.
async fn hold(app: &TestApp, sale: &str, ticket: u64) -> ReservationCreated {
    let token = app.token(sale, ticket, 1, 60_000);
    let held = app.reserve(sale, &token, &unique("k-"), "p1", 1).await;
    held.expect("201")
}

/// A reservation's own route, `GET` (`payment: false`) or `POST .../payment`, with `secret`, from
/// `http`: the status and the code.
async fn ask_reservation(
    http: &reqwest::Client,
    app: &TestApp,
    sale: &str,
    id: &str,
    secret: &str,
    payment: bool,
) -> (u16, Option<String>) {
    let url = format!("http://{}/v1/sales/{sale}/reservations/{id}", app.booking);
    let request = if payment {
        http.post(format!("{url}/payment"))
    } else {
        http.get(url)
    };
    let response = request.bearer_auth(secret).send().await.unwrap();
    let status = response.status().as_u16();
    if status == 429 {
        assert!(response.headers().contains_key("retry-after"));
    }
    let body: Value = response.json().await.unwrap_or_default();
    (status, body["error"].as_str().map(str::to_owned))
}

/// One carrier's address: a stranger behind it reads and pays reservations with made-up secrets
/// (its own guesses at real ids, and ids of nothing) until the address's allowances are spent;
/// the holders behind the same address still follow and pay their holds, since a secret the
/// service's key proves spends its reservation's allowance, never its address's. Before, the
/// address was charged first and the holders got 429 `booking_rate_limited` when they paid.
#[sqlx::test(migrations = "../migrations")]
async fn junk_secrets_from_a_shared_address_do_not_keep_its_holders_from_paying(db: sqlx::PgPool) {
    let options = TestOptions {
        booking_requests_per_sec_per_ip: 2,
        booking_reads_per_sec_per_ip: 2,
        holder_requests_per_sec: 4,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let mut holds = Vec::new();
    for ticket in 1..=3 {
        holds.push(hold(&app, &sale, ticket).await);
    }
    let nobody = format!("p1.{}", "0".repeat(32));
    for payment in [false, true] {
        let mut limited = 0;
        for n in 0..20 {
            let id = if n % 2 == 0 {
                &holds[0].reservation_id
            } else {
                &nobody
            };
            let guess = unique("guess-");
            match ask_reservation(&app.http, &app, &sale, id, &guess, payment).await {
                (429, code) => {
                    assert_eq!(code.as_deref(), Some("booking_rate_limited"));
                    limited += 1;
                }
                answer => assert_eq!(answer, (404, Some("unknown_reservation".into()))),
            }
        }
        assert!(limited >= 10, "{limited} of 20 junk requests refused");
    }
    for held in &holds {
        let (id, secret) = (&held.reservation_id, &held.secret);
        let read = ask_reservation(&app.http, &app, &sale, id, secret, false).await;
        assert_eq!(
            read.0, 200,
            "a holder behind the same address reads: {read:?}"
        );
        let paid = ask_reservation(&app.http, &app, &sale, id, secret, true).await;
        assert_eq!(paid.0, 202, "and pays: {paid:?}");
    }
}

/// A holder is held to their reservation's own allowance (4 a second, in bursts of 8), reads and
/// payments together: a script following its hold in a loop hears 429 `holder_rate_limited`,
/// and spends nobody else's allowance.
#[sqlx::test(migrations = "../migrations")]
async fn a_holder_is_held_to_the_reservations_own_allowance(db: sqlx::PgPool) {
    let options = TestOptions {
        booking_reads_per_sec_per_ip: 2,
        holder_requests_per_sec: 4,
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let held = hold(&app, &sale, 1).await;
    let (id, secret) = (&held.reservation_id, &held.secret);
    let mut answers = Vec::new();
    for _ in 0..40 {
        answers.push(ask_reservation(&app.http, &app, &sale, id, secret, false).await);
    }
    let limited = answers.iter().filter(|a| a.0 == 429).count();
    assert!(
        answers
            .iter()
            .all(|a| a.0 == 200 || *a == (429, Some("holder_rate_limited".to_owned()))),
        "{answers:?}"
    );
    assert!(limited > 0 && 40 - limited >= 8, "{answers:?}");
    // The address's reads (2 a second) were not spent: a guess from it is still told 404.
    let guess = ask_reservation(&app.http, &app, &sale, id, "a-guess", false).await;
    assert_eq!(guess, (404, Some("unknown_reservation".into())));
}

/// A secret no key of the service proves is answered 404 at once, with no Redis work: a
/// stranger's guesses at a real pool's reservations (from a /48, 256 times an address's reads
/// a second on each instance) never reach the pool's primary, where every reservation's script
/// runs and the autopilot measures them. Shown with the booking service's Redis cut off: the
/// guesses are still answered 404 (before, each read the pool, and was answered 503 here),
/// read and paid alike, and so is a secret stored before the key (it is a guess too).
#[sqlx::test(migrations = "../migrations")]
async fn secrets_no_key_proves_cost_no_redis_work(db: sqlx::PgPool) {
    use floodgate_tests::chaos::ChaosProxy;
    let redis = ChaosProxy::start(floodgate_tests::redis_addr()).await;
    let options = TestOptions {
        booking_redis_url: Some(format!("redis://{}", redis.addr)),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let held = hold(&app, &sale, 1).await;
    let id = &held.reservation_id;
    let stored = format!("legacy-{}", unique(""));
    let _: () = redis::cmd("HSET")
        .arg(app.keys.pool(&sale, "p1").reservation(id))
        .arg("secret")
        .arg(&stored)
        .query_async(&mut app.redis.clone())
        .await
        .unwrap();
    redis.cut();
    for secret in [stored.as_str(), "a-guess"] {
        for payment in [false, true] {
            let answer = ask_reservation(&app.http, &app, &sale, id, secret, payment).await;
            assert_eq!(
                answer,
                (404, Some("unknown_reservation".into())),
                "{secret}, payment {payment}"
            );
        }
    }
}

/// A ticket's pass is minted again each time its holder comes back within the pass's life:
/// it must be the same pass, byte for byte. Each distinct one is a credential of its own at the
/// edge (its own allowance there) and a signature check of its own at the booking service, so a
/// stranger coming back to one admitted place a thousand times would hold a thousand passes to
/// send. Before, each was issued "now" and differed from the last.
#[sqlx::test(migrations = "../migrations")]
async fn a_place_coming_back_gets_the_same_pass_again(db: sqlx::PgPool) {
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app
        .open_sale("same-pass-", floodgate_tests::SaleSpec::default())
        .await;
    let mut person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let first = person.admitted(std::time::Duration::from_secs(10)).await;
    let token = person.resume_token.clone();
    person.leave().await;
    let mut passes = vec![first];
    for _ in 0..2 {
        let mut back = RoomClient::resume(&app.ws_url(&sale), &token, &[])
            .await
            .unwrap();
        passes.push(back.admitted(std::time::Duration::from_secs(10)).await);
        back.leave().await;
    }
    assert!(passes.iter().all(|p| *p == passes[0]), "{passes:?}");
}
