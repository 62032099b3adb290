//! The shipped edge (`deploy/nginx/cdn.conf`) limits every public location per client address
//! but the provider's webhook (which the booking service limits by failed signatures only), in
//! front of the services' own limits: read from the file, and a flood of the booking paths
//! from one address refused by a real nginx before the booking service hears of it.

use floodgate_tests::edge::Edge;
use floodgate_tests::{unique, SaleSpec, TestApp, TestOptions};

/// Every location block of `conf` but the named ones (`@...`, internal), with its body.
fn public_locations(conf: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = conf;
    while let Some(at) = rest.find("\n        location ") {
        let block = &rest[at + 1..];
        let head_end = block.find('{').expect("a location opens a block");
        let head = block[..head_end].trim().to_owned();
        let body_end = block
            .find("\n        }")
            .expect("a location closes its block");
        if !head.starts_with("location @") {
            found.push((head, block[head_end..body_end].to_owned()));
        }
        rest = &block[body_end..];
    }
    found
}

#[test]
fn every_public_location_of_the_edge_has_a_per_address_limit() {
    let path = floodgate_tests::containers::repo().join("deploy/nginx/cdn.conf");
    let conf = std::fs::read_to_string(path).unwrap();
    // The redirect of plain http:// and the edge's metrics (the file's last servers) pass
    // nothing on: the one answers 308 to everything, the other listens on a port of its own,
    // which no public Service names and only the monitoring namespace may reach.
    let (public, others) = conf
        .split_once("listen __REDIRECT__;")
        .expect("the redirect's server");
    assert!(!others.contains("proxy_pass"), "{others}");
    assert!(others.contains("listen __METRICS__;"), "{others}");
    let locations = public_locations(public);
    assert!(locations.len() >= 6, "{locations:?}");
    for (head, body) in &locations {
        // The webhook's deliveries are limited by the booking service, which alone can tell a
        // valid signature (never refused for its rate) from a forged one.
        if head == "location = /v1/payments/webhook" {
            assert!(
                !body.contains("limit_req"),
                "a valid webhook is never throttled"
            );
            continue;
        }
        // What the cache answers is not limited (an answer from it costs what a refusal
        // would); what it cannot answer goes through the pages' origin server, which is.
        if body.contains("proxy_pass http://floodgate_pages_origin") {
            assert!(body.contains("proxy_cache floodgate;"), "{head} is cached");
            continue;
        }
        assert!(
            body.contains("limit_req zone="),
            "{head} has no limit_req: every public location is limited per address"
        );
    }
    let origin = conf
        .split("listen unix:__PREFIX__/pages.sock;")
        .nth(1)
        .expect("the pages' origin server");
    assert!(origin.contains("limit_req zone=floodgate_pages"));
    // The check itself finds a location without one.
    let unlimited = conf.replacen("limit_req zone=floodgate_booking", "# gone", 1);
    assert!(public_locations(&unlimited)
        .iter()
        .any(|(_, body)| !body.contains("limit_req zone=")));
}

#[sqlx::test(migrations = "../migrations")]
async fn a_flood_of_the_booking_paths_stops_at_the_edge(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("edge-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let http = reqwest::Client::new();
    let url = edge.url(&format!("/v1/sales/{sale}/reservations"));
    let flood = (0..400).map(|_| http.post(&url).json(&serde_json::json!({})).send());
    let answers = futures::future::join_all(flood).await;
    let mut at_the_edge = 0;
    for answer in answers {
        let answer = answer.unwrap();
        if answer.status() == 429 {
            assert!(answer.headers().contains_key("retry-after"));
            let body: serde_json::Value = answer.json().await.unwrap();
            if body["error"] == "too_many_requests" {
                at_the_edge += 1;
            }
        }
    }
    assert!(
        at_the_edge >= 100,
        "{at_the_edge} of 400 refused by the edge"
    );
}

/// A stranger flooding `/place` without a token from one address spends that address's
/// allowance at the edge; the people behind the same address asking about their own places
/// (their resume tokens) meanwhile are counted by their tokens and get through. Before, the edge
/// counted every request of the address: 429 `too_many_requests`.
#[sqlx::test(migrations = "../migrations")]
async fn a_strangers_flood_at_the_edge_does_not_spend_the_people_behind_its_address(
    db: sqlx::PgPool,
) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-own-").await;
    let mut people = Vec::new();
    for _ in 0..3 {
        let url = app.ws_url(&sale);
        people.push(
            floodgate_tests::client::RoomClient::join(&url)
                .await
                .unwrap(),
        );
    }
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let http = reqwest::Client::new();
    let url = edge.url(&format!("/v1/sales/{sale}/place"));
    // Each person asks once while the flood goes on.
    let (at_the_edge, answers) = during_a_flood(&http, &url, async {
        let mut answers = Vec::new();
        for person in &people {
            tokio::time::sleep(std::time::Duration::from_millis(150)).await;
            let own = http
                .get(&url)
                .header("floodgate-resume", &person.resume_token)
                .send()
                .await
                .unwrap();
            answers.push((own.status().as_u16(), own.text().await.unwrap()));
        }
        answers
    })
    .await;
    assert!(at_the_edge >= 100, "{at_the_edge} refused by the edge");
    assert!(
        answers.iter().all(|(status, _)| *status == 200),
        "{answers:?}"
    );
}

/// On the booking paths the edge counts a request by its pass alone: a junk header of another
/// kind (a resume token, a puzzle's answer) does not make each copy a stranger. Before, the
/// edge keyed every location by the first credential of any kind, and a replay flood of one pass
/// with a fresh junk `Floodgate-Resume` each shed the edge's per-pass limit.
#[sqlx::test(migrations = "../migrations")]
async fn each_location_counts_its_own_credential(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("edge-pass-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let http = reqwest::Client::new();
    let url = edge.url(&format!("/v1/sales/{sale}/reservations"));
    let flood = (0..200).map(|i| {
        http.post(&url)
            .header("authorization", "Bearer one-pass-replayed")
            .header("floodgate-resume", format!("junk-{i}"))
            .json(&serde_json::json!({}))
            .send()
    });
    let mut at_the_edge = 0;
    for answer in futures::future::join_all(flood).await {
        let answer = answer.unwrap();
        if answer.status() == 429 {
            let body: serde_json::Value = answer.json().await.unwrap();
            at_the_edge += usize::from(body["error"] == "too_many_requests");
        }
    }
    assert!(
        at_the_edge >= 100,
        "{at_the_edge} of 200 refused by the edge"
    );
}

/// A genuine resume token sent with a fresh made-up seal each time is still one credential: the
/// edge counts it without its seal, so the token's own allowance (3 standings at once) holds at
/// the edge. Before, each made-up seal made a new credential to the zones that count a token by
/// its last characters, and the token went past its own limits there as often as it liked.
#[sqlx::test(migrations = "../migrations")]
async fn a_token_with_made_up_seals_is_still_one_credential(db: sqlx::PgPool) {
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-seals-").await;
    let person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = floodgate_protocol::unsealed(&person.resume_token).to_owned();
    person.leave().await;
    let edge = shipped_edge(&app).await;
    let http = reqwest::Client::new();
    let url = edge.url(&format!("/v1/sales/{sale}/place"));
    let mut at_the_edge = 0;
    for n in 0..8 {
        let made_up = format!("{n:0>21}A");
        let answer = http
            .get(&url)
            .header("floodgate-resume", format!("{token}~{made_up}"))
            .send()
            .await
            .unwrap();
        at_the_edge += usize::from(refused_at_the_edge(answer).await);
    }
    assert!(at_the_edge >= 4, "{at_the_edge} of 8 refused by the edge");
}

/// A resume token is counted by its MAC, not by its tail: on a sale whose id is long, every
/// place's token ends in the same characters (the sale's id), and one place asking too often
/// had the edge refuse every other place of the sale. Here a place past its allowance at the
/// edge, and another place of the same sale (an id of 60 characters) asking once is served.
#[sqlx::test(migrations = "../migrations")]
async fn each_place_of_a_sale_with_a_long_id_is_counted_on_its_own(db: sqlx::PgPool) {
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app
        .pending_sale("edge-a-sale-whose-id-is-as-long-as-they-come-")
        .await;
    assert!(sale.len() >= 48, "{sale}");
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let place = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
        tokens.push(place.resume_token.clone());
        place.leave().await;
    }
    let edge = shipped_edge(&app).await;
    let http = reqwest::Client::new();
    let url = edge.url(&format!("/v1/sales/{sale}/place"));
    let ask = |token: &str| http.get(&url).header("floodgate-resume", token).send();
    let mut refused = 0;
    for _ in 0..8 {
        refused += usize::from(refused_at_the_edge(ask(&tokens[0]).await.unwrap()).await);
    }
    assert!(refused >= 4, "{refused} of 8 refused by the edge");
    let other = ask(&tokens[1]).await.unwrap();
    assert_eq!(
        other.status(),
        200,
        "another place: {:?}",
        other.text().await
    );
}

/// A pass or a reservation's secret is counted without `Bearer` and the blanks after it: the
/// same secret sent with `Bearer` spelt in twelve ways is one credential, held to its own
/// allowance (8 at once) at the edge. Before, each spelling was a new credential there.
#[sqlx::test(migrations = "../migrations")]
async fn a_secret_is_one_credential_however_bearer_is_spelt(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = unique("edge-bearer-");
    app.create_sale(&sale, &SaleSpec::default()).await;
    let edge = shipped_edge(&app).await;
    let http = reqwest::Client::new();
    let url = edge.url(&format!("/v1/sales/{sale}/reservations"));
    let secret = "s".repeat(43);
    let mut at_the_edge = 0;
    for n in 0..12u8 {
        let bearer: String = "Bearer"
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i > 1 && n & (1 << (i - 2)) != 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect();
        let answer = http
            .post(&url)
            .header("authorization", format!("{bearer} {secret}"))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        at_the_edge += usize::from(refused_at_the_edge(answer).await);
    }
    assert!(at_the_edge >= 3, "{at_the_edge} of 12 refused by the edge");
}

/// The patterns that cut a credential to its tail are anchored at both ends: an unanchored
/// `.{1,200}$` is tried from every position of an 8 KB header, milliseconds of the edge's CPU
/// per request.
#[test]
fn the_credential_patterns_are_anchored() {
    let path = floodgate_tests::containers::repo().join("deploy/nginx/cdn.conf");
    let conf = std::fs::read_to_string(path).unwrap();
    let tails: Vec<&str> = conf
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("\"~") && l.contains("<tail>"))
        .collect();
    assert!(tails.len() >= 6, "{tails:?}");
    for pattern in &tails {
        assert!(
            pattern.starts_with("\"~^") && pattern.contains("$\""),
            "{pattern}"
        );
    }
    assert!(conf.lines().any(|l| l.trim() == "pcre_jit on;"));
}

/// A join has no body: one announced is refused at once, so a stranger cannot hold the edge's
/// sockets for an address (and its neighbours' joins) by trickling a body a byte at a time.
/// Before, nginx waited for the announced body, a minute between bytes.
#[sqlx::test(migrations = "../migrations")]
async fn a_join_with_a_body_is_refused_at_once(db: sqlx::PgPool) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-body-").await;
    let edge = Edge::start(&[app.gateway], app.booking).await;
    let mut socket = tokio::net::TcpStream::connect(edge.addr).await.unwrap();
    let head = format!(
        "GET /ws?sale={sale} HTTP/1.1\r\nHost: edge\r\nFloodgate-Identity: junk\r\n\
         Content-Length: 900000\r\n\r\nx"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut answer = [0u8; 12];
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        socket.read_exact(&mut answer),
    )
    .await;
    assert!(read.is_ok(), "no answer while the body trickles");
    assert_eq!(&answer, b"HTTP/1.1 413");
}

/// Floods `url` from this address (waves of 256 at once) while `meanwhile` runs: how many the
/// edge refused, and what `meanwhile` gave.
async fn during_a_flood<T>(
    http: &reqwest::Client,
    url: &str,
    meanwhile: impl std::future::Future<Output = T>,
) -> (usize, T) {
    let flooding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stranger = {
        let (http, url, flooding) = (http.clone(), url.to_owned(), flooding.clone());
        tokio::spawn(async move {
            let mut at_the_edge = 0;
            while flooding.load(std::sync::atomic::Ordering::Relaxed) {
                let wave = (0..256).map(|_| http.get(&url).send());
                for answer in futures::future::join_all(wave).await {
                    let answer = answer.unwrap();
                    if answer.status() == 429 {
                        let body: serde_json::Value = answer.json().await.unwrap_or_default();
                        at_the_edge += usize::from(body["error"] == "too_many_requests");
                    }
                }
            }
            at_the_edge
        })
    };
    let given = meanwhile.await;
    flooding.store(false, std::sync::atomic::Ordering::Relaxed);
    (stranger.await.unwrap(), given)
}

/// The shipped edge's configuration, as in the repository.
fn shipped_conf() -> String {
    let shipped = floodgate_tests::containers::repo().join("deploy/nginx/cdn.conf");
    std::fs::read_to_string(shipped).unwrap()
}

/// The shipped edge in front of `app`, as it is.
pub(super) async fn shipped_edge(app: &TestApp) -> Edge {
    shipped_edge_with(app, &[] as &[(&str, &str)]).await
}

/// The changes to the shipped edge that make its limit zone `zone` allow `rate` (nginx's
/// `5r/m`, say) with a burst of `burst`, whatever it ships with: a limit small enough for a
/// test to reach.
pub(super) fn shrunk(zone: &str, rate: &str, burst: u32) -> [(String, String); 2] {
    let conf = shipped_conf();
    let defined = format!("zone={zone}:");
    let at = conf
        .find(&defined)
        .unwrap_or_else(|| panic!("no zone {zone}"));
    let shipped_rate = &conf[at..at + conf[at..].find(';').expect("a line's end")];
    let size = shipped_rate.split(" rate=").next().expect("a size");
    let used = format!("zone={zone} burst=");
    let at = conf
        .find(&used)
        .unwrap_or_else(|| panic!("{zone} is used nowhere"));
    let digits: String = conf[at + used.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    [
        (shipped_rate.to_owned(), format!("{size} rate={rate}")),
        (format!("{used}{digits}"), format!("{used}{burst}")),
    ]
}

/// Whether `answer` is the edge's own refusal (429 `too_many_requests`), not a service's.
pub(super) async fn refused_at_the_edge(answer: reqwest::Response) -> bool {
    answer.status() == 429 && answer.text().await.unwrap().contains("too_many_requests")
}

/// The services with the page to serve (about 5 KB, the same for everyone).
pub(super) async fn with_the_page(db: sqlx::PgPool) -> TestApp {
    let site = std::env::temp_dir().join(unique("floodgate-page-"));
    std::fs::create_dir_all(&site).unwrap();
    floodgate_tests::copy_page(&site);
    let options = TestOptions {
        static_dir: Some(site),
        ..TestOptions::default()
    };
    TestApp::spawn_with(db, options).await
}

/// The shipped edge in front of `app`, each of `changes` (a text of cdn.conf, and what it
/// becomes everywhere) made: a limit made small enough for a test to reach.
pub(super) async fn shipped_edge_with(
    app: &TestApp,
    changes: &[(impl AsRef<str>, impl AsRef<str>)],
) -> Edge {
    let mut conf = shipped_conf();
    for (text, becomes) in changes {
        let (text, becomes) = (text.as_ref(), becomes.as_ref());
        assert!(conf.contains(text), "the shipped edge has {text}");
        conf = conf.replace(text, becomes);
    }
    let template = std::env::temp_dir()
        .join(unique("cdn-changed-"))
        .with_extension("conf");
    std::fs::write(&template, conf).unwrap();
    let edge = Edge::start_with(&[app.gateway], app.booking, &template).await;
    // The edge read it when it started.
    std::fs::remove_file(&template).unwrap();
    edge
}

/// The edge's cap on an address's sockets counts only those that name no person: a stranger
/// filling it with new places (solved puzzles, say) shuts the people behind its address out of
/// no place they hold. The shipped edge with the cap made 3: three new places fill it, a fourth
/// is refused, and a person coming back to their place still gets in. Before, every socket of
/// the address counted, and the person's resume was refused 429 too. The strangers offer
/// `xfloodgate-resume.<the person's sealed token>` among their subprotocols, which the gateway
/// does not read as a resume token (an entry counts from its start): nor does the edge. Before,
/// the edge took it for the place's, and the fourth new place went through.
#[sqlx::test(migrations = "../migrations")]
async fn a_full_address_at_the_edge_still_lets_its_people_back_to_their_places(db: sqlx::PgPool) {
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-full-").await;
    let person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let token = person.resume_token.clone();
    person.leave().await;
    let edge = shipped_edge_with(
        &app,
        &[(
            "limit_conn floodgate_conn_all 2048;",
            "limit_conn floodgate_conn_all 3;",
        )],
    )
    .await;
    let ws = edge.ws_url(&sale);
    let offered = format!("floodgate, xfloodgate-resume.{token}");
    let stranger = [("sec-websocket-protocol", offered.as_str())];
    let mut strangers = Vec::new();
    for _ in 0..3 {
        let joined = RoomClient::join_with(&ws, &stranger).await;
        strangers.push(joined.expect("under the cap"));
    }
    assert!(strangers.iter().all(|s| !s.resumed), "each a new place");
    let refused = RoomClient::join_with(&ws, &stranger)
        .await
        .err()
        .expect("the cap is full");
    assert_eq!(refused.status, 429, "{refused:?}");
    let back = RoomClient::resume(&ws, &token, &[]).await;
    assert!(back.is_ok(), "the person comes back: {:?}", back.err());
}

/// nginx keeps each key of a limit in a slab of a size class its length picks, and when a zone
/// is full it frees the oldest entry to make room: a freed small slot cannot hold a longer key.
/// A stranger sending thousands of short made-up credentials filled a per-credential zone with
/// small entries, and every longer genuine credential after them (a pass: its last 200
/// characters) could not be kept, which nginx answers 429. Every key is now at most 48
/// characters, one size class. The shipped edge with the passes' zone made 32 KB: 800 short
/// junk credentials, then the person reserves with their pass. Before: 429 `too_many_requests`.
#[sqlx::test(migrations = "../migrations")]
async fn short_junk_keys_cannot_crowd_a_genuine_credential_out_of_its_zone(db: sqlx::PgPool) {
    use floodgate_client::booking::BookingClient;
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app.open_sale("edge-slab-", SaleSpec::default()).await;
    let mut person = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
    let pass = person.admitted(std::time::Duration::from_secs(10)).await;
    person.leave().await;
    let edge = shipped_edge_with(
        &app,
        &[(
            "zone=floodgate_booking_own:32m",
            "zone=floodgate_booking_own:32k",
        )],
    )
    .await;
    let http = reqwest::Client::new();
    let junk_url = edge.url(&format!("/v1/sales/{sale}/reservations/p1-x"));
    for i in 0..800 {
        // Refused by the ceiling or the booking service: each leaves its entry all the same.
        http.get(&junk_url)
            .bearer_auth(format!("j{i}"))
            .send()
            .await
            .unwrap();
    }
    let booking = BookingClient::new(http.clone(), edge.addr);
    let held = booking
        .reserve(&sale, &pass, &uuid::Uuid::new_v4().to_string(), "p1", 1)
        .await;
    assert!(held.is_ok(), "the person reserves: {:?}", held.err());
}

/// No path reaches the gateways as anything but one request: a path whose encoded line breaks
/// (`%0D%0A`) would, decoded into the request line the edge writes, split it into requests of
/// the stranger's own writing (each with no address the limits count, or another's). The edge
/// here stands in front of a listener that keeps every request line it is sent.
#[tokio::test]
async fn an_encoded_line_break_in_a_path_never_splits_the_request_the_gateways_get() {
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
    let origin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = origin.local_addr().unwrap();
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok((socket, _)) = origin.accept().await {
            let lines_tx = lines_tx.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut read = tokio::io::BufReader::new(read);
                let mut line = String::new();
                while read.read_line(&mut line).await.unwrap_or(0) > 0 {
                    if line.starts_with("GET ") {
                        let _ = lines_tx.send(line.trim_end().to_owned());
                    }
                    if line == "\r\n" {
                        let answer = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
                        let _ = write.write_all(answer.as_bytes()).await;
                    }
                    line.clear();
                }
            });
        }
    });
    let edge = Edge::start(&[at], at).await;
    let smuggled = "%20HTTP/1.1%0D%0AHost:%20e%0D%0A%0D%0AGET%20/smuggled%20HTTP/1.1%0D%0AHost:%20e%0D%0AX-Forwarded-For:%20203.0.113.9%0D%0A%0D%0AGET%20/x";
    for path in [
        format!("/assets/a{smuggled}"),
        format!("/v1/sales/s1{smuggled}"),
        format!("/{smuggled}"),
    ] {
        let mut socket = tokio::net::TcpStream::connect(edge.addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n");
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).await.unwrap();
    }
    drop(edge);
    let mut seen = Vec::new();
    while let Ok(line) = lines.try_recv() {
        seen.push(line);
    }
    assert!(!seen.is_empty(), "the edge asked the origin");
    // The rule that keeps it so: no proxy_pass names a variable (its value is decoded).
    let conf =
        std::fs::read_to_string(floodgate_tests::containers::repo().join("deploy/nginx/cdn.conf"))
            .unwrap();
    assert!(conf
        .lines()
        .all(|l| !(l.trim().starts_with("proxy_pass") && l.contains('$'))));
    assert!(
        seen.iter().all(|l| !l.starts_with("GET /smuggled")),
        "a request of the stranger's own reached the origin: {seen:?}"
    );
}
