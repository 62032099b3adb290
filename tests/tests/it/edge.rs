//! The edge: seat counts cacheable by a CDN, and the CDN configuration in deploy/nginx driven by
//! real nginx in front of the real services.

use std::time::Duration;

use floodgate_tests::client::{Refused, RoomClient};
use floodgate_tests::edge::Edge;
use floodgate_tests::{unique, SaleSpec, TestApp, TestOptions};

async fn sale(app: &TestApp) -> String {
    let sale = unique("edge-");
    let spec = SaleSpec {
        pools: vec![("p1".into(), 10), ("p2".into(), 4)],
        opens_in: Duration::from_secs(3_600),
        ..SaleSpec::default()
    };
    app.create_sale(&sale, &spec).await;
    sale
}

/// A GET with one extra request header.
async fn get_with(app: &TestApp, url: &str, header: &str, value: &str) -> reqwest::Response {
    app.http
        .get(url)
        .header(header, value)
        .send()
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../migrations")]
async fn seat_counts_are_cacheable_compressed_and_revalidated(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = sale(&app).await;
    let url = format!("http://{}/v1/sales/{sale}/seats.json", app.gateway);
    // reqwest here neither decompresses nor sends Accept-Encoding by itself.
    let plain = app.http.get(&url).send().await.unwrap();
    assert_eq!(plain.status(), 200);
    let headers = plain.headers().clone();
    assert_eq!(
        headers["cache-control"],
        "public, max-age=1, stale-while-revalidate=5"
    );
    assert_eq!(headers["vary"], "Accept-Encoding");
    assert!(headers.get("content-encoding").is_none());
    let etag = headers["etag"].to_str().unwrap().to_owned();
    let body: serde_json::Value = plain.json().await.unwrap();
    assert_eq!(body["sale"], sale.as_str());
    assert_eq!(body["pools"][0]["available"], 10);
    assert_eq!(body["pools"][1]["capacity"], 4);

    for (accept, coding) in [("gzip", "gzip"), ("gzip, br", "br")] {
        let r = get_with(&app, &url, "accept-encoding", accept).await;
        assert_eq!(r.headers()["content-encoding"], coding);
        assert_ne!(
            r.headers()["etag"].to_str().unwrap(),
            etag,
            "an ETag per encoding"
        );
    }
    // A revalidation with the current ETag is a 304 with no body.
    let r = get_with(&app, &url, "if-none-match", &etag).await;
    assert_eq!(r.status(), 304);
    assert!(r.bytes().await.unwrap().is_empty());
    // Unknown sales are a JSON 404, and are not remembered.
    let r = app
        .http
        .get(format!("http://{}/v1/sales/nope/seats.json", app.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[sqlx::test(migrations = "../migrations")]
async fn behind_the_cdn_a_thousand_viewers_cost_the_origin_a_handful_of_requests(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = sale(&app).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let url = edge.url(&format!("/v1/sales/{sale}/seats.json"));
    let origin_hits = || async {
        app.metric(app.gateway_admin, "floodgate_seat_snapshot_requests_total")
            .await
            .unwrap_or(0.0)
    };
    let before = origin_hits().await;

    // A thousand requests within two seconds, fifty at a time, as browsers would send them.
    let started = tokio::time::Instant::now();
    let client = reqwest::Client::new();
    let mut served = 0;
    for _ in 0..20 {
        let wave = (0..50).map(|_| {
            let client = client.clone();
            let url = url.clone();
            async move {
                let r = client
                    .get(&url)
                    .header("accept-encoding", "gzip, deflate, br")
                    .send()
                    .await
                    .unwrap();
                (
                    r.status().as_u16(),
                    r.headers().get("content-encoding").cloned(),
                )
            }
        });
        for (status, coding) in futures::future::join_all(wave).await {
            assert_eq!(status, 200);
            assert_eq!(coding.as_ref().map(|c| c.to_str().unwrap()), Some("br"));
            served += 1;
        }
    }
    let elapsed = started.elapsed();
    let hits = origin_hits().await - before;
    assert_eq!(served, 1_000);
    assert!(
        elapsed < Duration::from_secs(2),
        "the edge answered a thousand requests in {elapsed:?}"
    );
    assert!(
        (1.0..=6.0).contains(&hits),
        "{hits} requests reached the origin"
    );

    // The waiting room works through it: a client joins over the proxied WebSocket.
    let ws = format!("ws://{}/ws?sale={sale}", edge.addr);
    let client = RoomClient::join(&ws).await.expect("joins through the edge");
    assert_eq!(client.ticket, 1);
}

#[sqlx::test(migrations = "../migrations")]
async fn the_static_catalog_is_published_precompressed_and_cached_at_the_edge(db: sqlx::PgPool) {
    let dir = std::env::temp_dir().join(unique("floodgate-static-"));
    std::fs::create_dir_all(&dir).unwrap();
    let options = TestOptions {
        static_dir: Some(dir.clone()),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db.clone(), options).await;
    let sale = sale(&app).await;
    let path = floodgate_booking::publish_static::publish(&db, &sale, &dir)
        .await
        .unwrap();
    assert!(path.with_extension("json.br").exists() && path.with_extension("json.gz").exists());
    // The index a visitor picks a sale from lists it.
    let index: serde_json::Value = app
        .get_json(&format!("http://{}/data/sales/index.json", app.gateway))
        .await;
    assert_eq!(index["sales"][0]["sale"], sale.as_str(), "{index}");
    assert_eq!(
        index["sales"][0]["catalog_url"],
        format!("/data/sales/{sale}.json")
    );

    let url = format!("http://{}/data/sales/{sale}.json", app.gateway);
    let plain = app.http.get(&url).send().await.unwrap();
    assert_eq!(plain.status(), 200);
    assert_eq!(
        plain.headers()["cache-control"],
        "public, max-age=60, stale-while-revalidate=600"
    );
    let etag = plain.headers()["etag"].to_str().unwrap().to_owned();
    let catalog: serde_json::Value = plain.json().await.unwrap();
    assert_eq!(catalog["sale"], sale.as_str());
    assert_eq!(catalog["trains"][0]["id"], "12951");
    assert_eq!(catalog["classes"][0]["code"], "3A");
    assert_eq!(catalog["pools"].as_array().unwrap().len(), 2);
    assert_eq!(catalog["pools"][0]["fare_minor"], 150_000);

    let compressed = get_with(&app, &url, "accept-encoding", "br, gzip").await;
    assert_eq!(compressed.headers()["content-encoding"], "br");
    assert_ne!(compressed.headers()["etag"].to_str().unwrap(), etag);
    let revalidated = get_with(&app, &url, "if-none-match", &etag).await;
    assert_eq!(revalidated.status(), 304);

    // At the edge, the second viewer is served from the cache.
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let at_edge = edge.url(&format!("/data/sales/{sale}.json"));
    let first = app.http.get(&at_edge).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let second = app.http.get(&at_edge).send().await.unwrap();
    assert_eq!(second.headers()["x-cache"], "HIT");
    let _ = std::fs::remove_dir_all(&dir);
}

#[sqlx::test(migrations = "../migrations")]
async fn scripts_and_styles_have_content_hashed_immutable_names(db: sqlx::PgPool) {
    let static_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../static");
    let options = TestOptions {
        static_dir: Some(static_dir.clone()),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let page = app
        .http
        .get(format!("http://{}/", app.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(page.headers()["cache-control"], "no-cache");
    let page = page.text().await.unwrap();
    let script = page
        .split('"')
        .find(|part| part.starts_with("/assets/app.") && part.ends_with(".js"))
        .unwrap_or_else(|| panic!("the page names a hashed script:\n{page}"))
        .to_owned();
    assert!(page.contains("href=\"/assets/style."), "{page}");

    let url = format!("http://{}{script}", app.gateway);
    let plain = app.http.get(&url).send().await.unwrap();
    assert_eq!(
        plain.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert!(plain.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    let served = plain.text().await.unwrap();
    // The page's script imports the client module by its hashed name, served the same way.
    let module = served
        .split('"')
        .find(|part| part.starts_with("/assets/floodgate-client.") && part.ends_with(".js"))
        .unwrap_or_else(|| panic!("app.js imports the hashed client module"))
        .to_owned();
    let signin = served
        .split('"')
        .find(|part| part.starts_with("/assets/signin.") && part.ends_with(".js"))
        .unwrap_or_else(|| panic!("app.js imports the hashed sign-in module"))
        .to_owned();
    let on_disk = std::fs::read_to_string(static_dir.join("app.js")).unwrap();
    assert_eq!(
        served,
        on_disk
            .replace(
                "from \"./floodgate-client.js\"",
                &format!("from \"{module}\"")
            )
            .replace("from \"./signin.js\"", &format!("from \"{signin}\""))
    );
    // The sign-in module imports the library from npm by its hashed name in turn.
    let signin_served = app
        .http
        .get(format!("http://{}{signin}", app.gateway))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        signin_served.contains("from \"/assets/oauth4webapi."),
        "{signin_served}"
    );
    let module = app
        .http
        .get(format!("http://{}{module}", app.gateway))
        .send()
        .await
        .unwrap();
    assert_eq!(
        module.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(
        module.bytes().await.unwrap(),
        std::fs::read(static_dir.join("floodgate-client.js")).unwrap()
    );
    let compressed = get_with(&app, &url, "accept-encoding", "gzip, br").await;
    assert_eq!(compressed.headers()["content-encoding"], "br");
    // A name that is not (or no longer) a hashed asset is a 404, never a stale script.
    let stale = app
        .http
        .get(format!(
            "http://{}/assets/app.0000000000000000.js",
            app.gateway
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 404);
}

/// Through the edge, each client is counted as the address the edge saw it come from, whatever
/// `X-Forwarded-For` it sends itself: clients on 127.0.0.2 and 127.0.0.3 reach the gateway
/// through nginx on 127.0.0.1, the one trusted hop.
#[sqlx::test(migrations = "../migrations")]
async fn behind_the_edge_each_client_is_its_own_address_whatever_it_claims(db: sqlx::PgPool) {
    let options = TestOptions {
        max_connections_per_ip: 2,
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let ws = format!("ws://{}/ws?sale={sale}", edge.addr);
    let join = |from: &'static str, forged: Option<&'static str>| {
        let ws = ws.clone();
        async move {
            let headers: Vec<(&str, &str)> =
                forged.map(|f| ("x-forwarded-for", f)).into_iter().collect();
            RoomClient::join_from(&ws, Some(from.parse().unwrap()), &headers).await
        }
    };
    let too_many = |refused: Refused| {
        assert_eq!(
            (refused.status, refused.body["error"].as_str()),
            (429, Some("too_many_connections"))
        );
    };

    // One client, its two sessions, then refused; another client beside it is not.
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(join("127.0.0.2", None).await.expect("127.0.0.2 joins"));
    }
    too_many(
        join("127.0.0.2", None)
            .await
            .err()
            .expect("a third from 127.0.0.2"),
    );
    // A client claiming to be someone else each time is still itself.
    for forged in ["10.0.0.1", "10.0.0.2"] {
        let client = join("127.0.0.3", Some(forged)).await;
        held.push(client.unwrap_or_else(|r| panic!("127.0.0.3 ({forged}) refused: {r:?}")));
    }
    too_many(
        join("127.0.0.3", Some("10.0.0.3, 127.0.0.1"))
            .await
            .err()
            .expect("a third from 127.0.0.3, whatever it claims"),
    );
}

/// The edge names the client by the address it saw, replacing whatever `X-Forwarded-For`
/// arrived: a hop in front of it inside the gateways' trusted ranges (a load balancer that
/// rewrote the client's address to its node's, in the Pod network's 10.0.0.0/8) must not let the
/// client's own header through as if the edge had vouched for it. Here that hop is 127.0.0.5,
/// trusted as the gateways trust their network, and a client behind it claiming a new address
/// each time is still one client.
#[sqlx::test(migrations = "../migrations")]
async fn a_trusted_hop_before_the_edge_does_not_let_a_clients_own_address_through(
    db: sqlx::PgPool,
) {
    let options = TestOptions {
        max_connections_per_ip: 2,
        trusted_proxies: vec!["127.0.0.1".parse().unwrap(), "127.0.0.5".parse().unwrap()],
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let ws = format!("ws://{}/ws?sale={sale}", edge.addr);
    let mut held = Vec::new();
    let mut refused = None;
    for n in 1..=4 {
        let forged = format!("127.0.7.{n}");
        let from = Some("127.0.0.5".parse().unwrap());
        match RoomClient::join_from(&ws, from, &[("x-forwarded-for", &forged)]).await {
            Ok(client) => held.push(client),
            Err(r) => {
                refused = Some(r);
                break;
            }
        }
    }
    let refused = refused.unwrap_or_else(|| {
        panic!(
            "{} sessions from behind one hop, each claiming an address of its own",
            held.len()
        )
    });
    assert_eq!(held.len(), 2, "the limit is 2 an address");
    assert_eq!(
        (refused.status, refused.body["error"].as_str()),
        (429, Some("too_many_connections"))
    );
}

/// An app whose gateways take two sessions an address and trust no range of addresses (only the
/// edge's word), with a sale of its own.
async fn two_sessions_an_address_trusting_no_range(db: sqlx::PgPool) -> (TestApp, String) {
    let options = TestOptions {
        max_connections_per_ip: 2,
        trusted_proxies: Vec::new(),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    (app, sale)
}

/// Behind a CDN or an L7 load balancer, the edge is told the hop's ranges
/// (`FLOODGATE_EDGE_REAL_IP_FROM`) and counts each client by the address the hop names in
/// `X-Forwarded-For`, as do the gateways after it: people behind the hop (127.0.0.5) are each
/// their own, each to the limit of two; a client that does not come through the hop is itself,
/// whatever it claims.
#[sqlx::test(migrations = "../migrations")]
async fn behind_a_named_hop_each_client_is_the_address_it_names(db: sqlx::PgPool) {
    let (app, sale) = two_sessions_an_address_trusting_no_range(db).await;
    let edge = Edge::start_with_settings(
        &[app.gateway],
        app.booking,
        &[("FLOODGATE_EDGE_REAL_IP_FROM", "127.0.0.5/32, 192.0.2.0/24")],
    )
    .await;
    let ws = edge.ws_url(&sale);
    let join = |from: &'static str, named: &'static str| {
        let ws = ws.clone();
        async move {
            let headers = [("x-forwarded-for", named)];
            RoomClient::join_from(&ws, Some(from.parse().unwrap()), &headers).await
        }
    };
    let mut held = Vec::new();
    // Four people behind the hop, each named by it: without the setting they would all be the
    // hop's address, and the third refused.
    for named in ["127.0.9.1", "127.0.9.2", "127.0.9.3", "127.0.9.4"] {
        let client = join("127.0.0.5", named).await;
        held.push(client.unwrap_or_else(|r| panic!("{named} behind the hop: {r:?}")));
    }
    held.push(
        join("127.0.0.5", "127.0.9.1")
            .await
            .expect("127.0.9.1's second"),
    );
    let third = join("127.0.0.5", "127.0.9.1")
        .await
        .err()
        .expect("127.0.9.1's third");
    assert_eq!(
        (third.status, third.body["error"].as_str()),
        (429, Some("too_many_connections"))
    );
    // Not the hop: its own claims are nothing.
    let mut refused = None;
    for named in ["127.0.8.1", "127.0.8.2", "127.0.8.3"] {
        match join("127.0.0.6", named).await {
            Ok(client) => held.push(client),
            Err(r) => {
                refused = Some(r);
                break;
            }
        }
    }
    let refused = refused.expect("127.0.0.6 is one client, whatever it names");
    assert_eq!(refused.status, 429, "{refused:?}");
}

/// With no address range trusted at all (a cluster whose Pod network is not the 10.0.0.0/8 a
/// setting once guessed), the edge's word (`X-Floodgate-Edge`, from the key it shares with the
/// services) is what makes a gateway take the address the edge forwards: clients on 127.0.0.2
/// and 127.0.0.3 are each their own through it. A stranger reaching the gateway directly with a
/// made-up word is itself, whatever address it claims.
#[sqlx::test(migrations = "../migrations")]
async fn the_edges_word_vouches_for_it_where_no_range_is_trusted(db: sqlx::PgPool) {
    let (app, sale) = two_sessions_an_address_trusting_no_range(db).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let through_edge = edge.ws_url(&sale);
    let mut held = Vec::new();
    // Two from each client through the edge: without the word, all four would be the edge's
    // address (127.0.0.1), and the third refused.
    for from in ["127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"] {
        let client = RoomClient::join_from(&through_edge, Some(from.parse().unwrap()), &[]).await;
        held.push(client.unwrap_or_else(|r| panic!("{from} refused: {r:?}")));
    }
    let third = RoomClient::join_from(&through_edge, Some("127.0.0.2".parse().unwrap()), &[])
        .await
        .err()
        .expect("a third from 127.0.0.2");
    assert_eq!(
        (third.status, third.body["error"].as_str()),
        (429, Some("too_many_connections"))
    );

    // Directly, with a made-up word and a new address claimed each time: one client.
    let direct = app.ws_url(&sale);
    let mut refused = None;
    for n in 1..=3 {
        let claimed = format!("127.0.8.{n}");
        let headers = [
            ("x-forwarded-for", claimed.as_str()),
            (
                "x-floodgate-edge",
                "0000000000000000000000000000000000000000000000000000000000000000",
            ),
        ];
        match RoomClient::join_from(&direct, Some("127.0.0.4".parse().unwrap()), &headers).await {
            Ok(client) => held.push(client),
            Err(r) => {
                refused = Some((n, r));
                break;
            }
        }
    }
    let (n, refused) =
        refused.expect("three sessions from 127.0.0.4, each claiming another address");
    assert_eq!(n, 3, "the limit is 2 an address");
    assert_eq!(
        (refused.status, refused.body["error"].as_str()),
        (429, Some("too_many_connections"))
    );
}

/// The Kubernetes edge names its one gateway Service three times (so that a draining or full
/// gateway's 503 is tried again, on whichever Pod the Service picks next). A refused upgrade
/// must not take that gateway out of the edge's rotation: nginx marks a server that failed
/// down for ten seconds by default, and with every entry the same, two or three 503s on `/ws`
/// would make every path of the site the edge's own 503 for everyone.
#[sqlx::test(migrations = "../migrations")]
async fn a_full_gateways_refusals_do_not_take_it_out_of_the_edges_rotation(db: sqlx::PgPool) {
    let options = TestOptions {
        max_sessions: Some(1),
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    let sale = sale(&app).await;
    let edge = Edge::start(&[app.gateway, app.gateway, app.gateway], app.booking).await;
    let ws = format!("ws://{}/ws?sale={sale}", edge.addr);
    let _one = RoomClient::join(&ws)
        .await
        .expect("the gateway's one session");
    for _ in 0..4 {
        let refused = RoomClient::join(&ws)
            .await
            .err()
            .expect("the gateway is full");
        assert_eq!(
            (refused.status, refused.body["error"].as_str()),
            (503, Some("gateway_full")),
            "the gateway's own refusal, passed on: {refused:?}"
        );
    }
    // The rest of the site is still served by that gateway, at once.
    for path in [format!("/v1/sales/{sale}/seats.json"), "/v1/nowhere".into()] {
        let answer = reqwest::get(edge.url(&path)).await.unwrap();
        let status = answer.status();
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_ne!(body["error"], "unavailable", "{path}: {status} {body}");
        assert!(status == 200 || status == 404, "{path}: {status} {body}");
    }
}

/// The payment provider's webhooks reach the booking service through the edge (an unsigned one
/// is the booking service's 400 `signature_missing`, not the gateway's 404).
#[sqlx::test(migrations = "../migrations")]
async fn the_edge_routes_the_payment_webhook_to_the_booking_service(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let request = app
        .http
        .post(edge.url("/v1/payments/webhook"))
        .header("content-type", "application/json")
        .body("{}");
    let (status, body) = app.answer(request).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("signature_missing")),
        "{body}"
    );
}

#[sqlx::test(migrations = "../migrations")]
async fn the_page_forbids_framing_foreign_scripts_and_referrers(db: sqlx::PgPool) {
    // The page keeps identity and resume tokens in its storage: it may run only its own
    // scripts, may not be framed (clickjacking), and sends no Referer to the places it links to.
    let site = std::env::temp_dir().join(unique("floodgate-page-"));
    std::fs::create_dir_all(&site).unwrap();
    floodgate_tests::copy_page(&site);
    let options = TestOptions {
        static_dir: Some(site.clone()),
        ..TestOptions::default()
    };
    let app = TestApp::spawn_with(db, options).await;
    for path in ["/", "/index.html"] {
        let page = app
            .http
            .get(format!("http://{}{path}", app.gateway))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        let headers = page.headers();
        let csp = headers["content-security-policy"].to_str().unwrap();
        for directive in [
            "default-src 'none'".to_owned(),
            "script-src 'self'".to_owned(),
            // The page's own origin, and the sign-in's (its discovery and token endpoint).
            format!("connect-src 'self' http://{};", app.sandbox),
            "frame-ancestors 'none'".to_owned(),
            "base-uri 'none'".to_owned(),
            "object-src 'none'".to_owned(),
        ] {
            assert!(
                csp.contains(directive.as_str()),
                "{path}: {csp} lacks {directive}"
            );
        }
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(headers["referrer-policy"], "no-referrer");
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["x-frame-options"], "DENY");
    }
    std::fs::remove_dir_all(&site).unwrap();
}

/// What the edge answers by itself is JSON like every other refusal, never nginx's HTML: with
/// no origin answering, a 503 `unavailable` with `Retry-After`; past its per-address request
/// rate, a 429 `too_many_requests` with `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edges_own_answers_are_json() {
    // Origins that do not exist: nothing listens on these ports.
    let nowhere = floodgate_tests::gateways::free_port();
    let edge = Edge::start(&[nowhere], nowhere).await;
    let http = reqwest::Client::new();
    let check = |status: u16, code: &'static str| {
        move |r: reqwest::Response| async move {
            assert_eq!(r.status(), status);
            assert!(r.headers().contains_key("retry-after"), "{:?}", r.headers());
            assert_eq!(r.headers()["content-type"], "application/json");
            let body: serde_json::Value = r.json().await.expect("a JSON body");
            assert_eq!(body["error"], code, "{body}");
            assert!(body["message"].is_string(), "{body}");
        }
    };
    for path in ["/", "/v1/sales/s/reservations", "/v1/payments/webhook"] {
        let r = http.get(edge.url(path)).send().await.unwrap();
        check(503, "unavailable")(r).await;
    }
    // The waiting room's door takes 50 requests a second an address (a burst of 100): a
    // stranger's flood is refused by the edge itself.
    let flood =
        futures::future::join_all((0..300).map(|_| http.get(edge.url("/ws?sale=s")).send())).await;
    let mut refused = 0;
    for r in flood {
        let r = r.unwrap();
        if r.status() == 429 {
            refused += 1;
            check(429, "too_many_requests")(r).await;
        }
    }
    assert!(
        refused > 0,
        "300 requests at once from one address, none refused"
    );
}

/// Plain http:// (the load balancer's port 80) is answered with a redirect to the same address
/// over https://, where the page's sign-in works and the waiting room's socket is encrypted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_sent_to_https() {
    let nowhere = floodgate_tests::gateways::free_port();
    let edge = Edge::start(&[nowhere], nowhere).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = http
        .get(format!("http://{}/?sale=s1", edge.redirect))
        .header("host", "tickets.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 308);
    assert_eq!(
        answer.headers()["location"],
        "https://tickets.example.com/?sale=s1"
    );
}

/// edge.sh refuses, naming the setting, what would have the edge count everyone as one address
/// (the PROXY protocol with no load balancer's ranges) or write directives of a stranger's into
/// nginx's file (an origin list holding `;`).
#[test]
fn edge_sh_refuses_settings_that_would_break_the_edge() {
    let script = floodgate_tests::containers::repo().join("deploy/nginx/edge.sh");
    let dir = std::env::temp_dir().join(unique("floodgate-edge-sh-"));
    let run = |settings: &[(&str, &str)]| {
        let out = std::process::Command::new(&script)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/bin")
            .env("FLOODGATE_EDGE_PREFIX", &dir)
            .env("FLOODGATE_EDGE_KEY", floodgate_tests::edge_key())
            .env("FLOODGATE_EDGE_GATEWAYS", "127.0.0.1:1")
            .env("FLOODGATE_EDGE_BOOKING", "127.0.0.1:1")
            .envs(settings.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, said) = run(&[("FLOODGATE_EDGE_LISTEN", "8000 proxy_protocol")]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("FLOODGATE_EDGE_REAL_IP_FROM"), "{said}");
    let (code, said) = run(&[("FLOODGATE_EDGE_GATEWAYS", "127.0.0.1:1; return 200 owned")]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("FLOODGATE_EDGE_GATEWAYS"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}
