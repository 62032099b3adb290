//! The edge's sockets are a shared thing: a stranger holding requests open (a body announced and
//! never sent, an answer never read) holds only its own address's share of them, and a client
//! that stops reading is let go within seconds, not a minute. Each test shrinks the shipped
//! per-address cap on requests in flight (1,024) to a size it can reach.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use floodgate_tests::{eventually, unique, TestApp};
use tokio::io::AsyncWriteExt as _;

use floodgate_tests::client::hand_written_join;

use super::edge::{refused_at_the_edge, shipped_edge_with, with_the_page};

/// A webhook delivery whose body never comes: the one location the edge limits by no rate.
const HELD_OPEN: &[u8] = b"POST /v1/payments/webhook HTTP/1.1\r\nHost: edge\r\n\
    Content-Type: application/json\r\nContent-Length: 100\r\n\r\n";

const SHIPPED_CAP: &str = "limit_conn floodgate_conn_requests 1024;";

fn cap(n: u32) -> [(String, String); 1] {
    [(
        SHIPPED_CAP.to_owned(),
        format!("limit_conn floodgate_conn_requests {n};"),
    )]
}

/// A client at `address`: someone behind that address.
fn client_at(address: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::from(address)))
        .build()
        .unwrap()
}

/// A client on another loopback address: someone else behind another address.
fn elsewhere() -> reqwest::Client {
    client_at([127, 0, 0, 2])
}

/// Webhook deliveries whose bodies never come (the one location the edge limits by no rate)
/// fill only the webhook's share of their address: with it made 8, the address's next delivery
/// is refused at the edge, while a page from the same address and a delivery from another are
/// served. Before, nothing counted requests in flight outside /ws (a stranger could hold any
/// number of the edge's sockets), and then (c771780) the deliveries held the slots every
/// request of the address shares, pages included.
#[sqlx::test(migrations = "../migrations")]
async fn trickled_webhooks_hold_only_the_webhooks_share_of_their_address(db: sqlx::PgPool) {
    let app = with_the_page(db).await;
    let caps = [(
        "limit_conn floodgate_conn_webhook 1024;".to_owned(),
        "limit_conn floodgate_conn_webhook 8;".to_owned(),
    )];
    let edge = shipped_edge_with(&app, &caps).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut socket = tokio::net::TcpStream::connect(edge.addr).await.unwrap();
        socket.write_all(HELD_OPEN).await.unwrap();
        held.push(socket);
    }
    let http = reqwest::Client::new();
    let webhook = edge.url("/v1/payments/webhook");
    eventually(
        "the address's next delivery is refused at the edge",
        Duration::from_secs(5),
        async || refused_at_the_edge(http.get(&webhook).send().await.unwrap()).await,
    )
    .await;
    let page = http.get(edge.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200, "a page from the same address");
    let theirs = elsewhere().get(&webhook).send().await.unwrap();
    assert!(
        !refused_at_the_edge(theirs).await,
        "another address's delivery"
    );
    drop(held);
}

/// A network of addresses (an IPv4 /24) holds at most 8 times an address's deliveries in
/// flight: with the caps made 4 an address and 8 a network, three addresses of one /24 holding
/// 8 between them fill it, a fourth address of it is refused, and an address of another /24 is
/// not. Before, each address of a network had its own and nothing counted them together.
#[sqlx::test(migrations = "../migrations")]
async fn requests_held_open_fill_only_their_networks_share_of_the_edge(db: sqlx::PgPool) {
    let app = with_the_page(db).await;
    let caps = [
        (
            "limit_conn floodgate_conn_webhook 1024;".to_owned(),
            "limit_conn floodgate_conn_webhook 4;".to_owned(),
        ),
        (
            "limit_conn floodgate_conn_webhook_networks 8192;".to_owned(),
            "limit_conn floodgate_conn_webhook_networks 8;".to_owned(),
        ),
    ];
    let edge = shipped_edge_with(&app, &caps).await;
    let mut held = Vec::new();
    for n in 0..8u8 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind((Ipv4Addr::new(127, 0, 5, 1 + n % 3), 0).into())
            .unwrap();
        let mut socket = socket.connect(edge.addr).await.unwrap();
        socket.write_all(HELD_OPEN).await.unwrap();
        held.push(socket);
    }
    let webhook = edge.url("/v1/payments/webhook");
    let same_network = client_at([127, 0, 5, 9]);
    eventually(
        "another address of the full network is refused at the edge",
        Duration::from_secs(5),
        async || refused_at_the_edge(same_network.get(&webhook).send().await.unwrap()).await,
    )
    .await;
    let theirs = client_at([127, 0, 6, 9])
        .get(&webhook)
        .send()
        .await
        .unwrap();
    assert!(
        !refused_at_the_edge(theirs).await,
        "another network's delivery"
    );
    drop(held);
}

/// A stranger trickling reservation bodies with junk credentials fills only the slots of
/// requests that carry no credential the edge can prove: with that cap made 4, a fifth such
/// request from its address is refused at the edge, and a person behind the same address
/// reserving with a pass whose seal checks is not. And where nothing takes a body (a place's
/// standing), one announced is refused at once. Before, every request of the address counted
/// alike, and the stranger's trickled bodies refused the address's people theirs.
#[sqlx::test(migrations = "../migrations")]
async fn trickled_bodies_hold_their_own_junks_slots_not_the_addresss(db: sqlx::PgPool) {
    use tokio::io::AsyncReadExt as _;
    let app = with_the_page(db).await;
    let sale = unique("edge-trickle-");
    app.create_sale(&sale, &floodgate_tests::SaleSpec::default())
        .await;
    let caps = [(
        "limit_conn floodgate_conn_unproven 1024;".to_owned(),
        "limit_conn floodgate_conn_unproven 4;".to_owned(),
    )];
    let edge = shipped_edge_with(&app, &caps).await;
    let path = format!("/v1/sales/{sale}/reservations");
    let mut held = Vec::new();
    for n in 0..4 {
        let mut socket = tokio::net::TcpStream::connect(edge.addr).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer junk-{n}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        held.push(socket);
    }
    let http = reqwest::Client::new();
    let url = edge.url(&path);
    let junk = || {
        http.post(&url)
            .header("authorization", "Bearer more-junk")
            .json(&serde_json::json!({}))
            .send()
    };
    eventually(
        "the address's junk is refused at the edge",
        Duration::from_secs(5),
        async || refused_at_the_edge(junk().await.unwrap()).await,
    )
    .await;
    // Sealed with the edge's key, as a gateway issues it.
    let pass = app.token(&sale, 1, 1, 60_000);
    let theirs = http
        .post(&url)
        .header("authorization", format!("Bearer {pass}"))
        .header("idempotency-key", "k1")
        .json(&serde_json::json!({"pool": "p1", "seats": 1}))
        .send()
        .await
        .unwrap();
    assert!(
        !refused_at_the_edge(theirs).await,
        "a person's sealed pass from the same address"
    );
    drop(held);

    let mut socket = tokio::net::TcpStream::connect(edge.addr).await.unwrap();
    let head = format!(
        "GET /v1/sales/{sale}/place HTTP/1.1\r\nHost: edge\r\nContent-Length: 100\r\n\r\nx"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut answer = [0u8; 12];
    let read = tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut answer)).await;
    assert!(read.is_ok(), "no answer while the body trickles");
    assert_eq!(&answer, b"HTTP/1.1 413");
    // Nor in pieces, which announce no length: refused before a piece is read.
    for target in [
        format!("/v1/sales/{sale}/place"),
        format!("/ws?sale={sale}"),
    ] {
        let mut socket = tokio::net::TcpStream::connect(edge.addr).await.unwrap();
        let head = format!(
            "GET {target} HTTP/1.1\r\nHost: edge\r\nFloodgate-Identity: junk\r\n\
             Transfer-Encoding: chunked\r\n\r\n1"
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        let mut answer = [0u8; 12];
        let read =
            tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut answer)).await;
        assert!(read.is_ok(), "{target}: no answer while the pieces trickle");
        assert_eq!(&answer, b"HTTP/1.1 413", "{target}");
    }
}

/// A client that asks for a page again and again and reads none of it holds its slot only
/// until the edge's send timeout (10 s): with the cap made 1, its address is refused while it
/// holds the slot, then served again. Before, nginx's default waited a minute between writes.
#[sqlx::test(migrations = "../migrations")]
async fn a_client_that_stops_reading_is_let_go_within_seconds(db: sqlx::PgPool) {
    let app = with_the_page(db).await;
    let edge = shipped_edge_with(&app, &cap(1)).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    // A small window: the edge's answers pile up in its own buffers at once.
    socket.set_recv_buffer_size(4096).unwrap();
    let mut reader = socket.connect(edge.addr).await.unwrap();
    // Two thousand pages asked for in one go (about 10 MB of answers), none of them read.
    let asks = "GET / HTTP/1.1\r\nHost: edge\r\n\r\n".repeat(2_000);
    let asking = tokio::spawn(async move {
        let _ = reader.write_all(asks.as_bytes()).await;
        reader
    });

    let http = reqwest::Client::new();
    let page = edge.url("/");
    eventually(
        "the reader that stopped holds its address's one slot",
        Duration::from_secs(5),
        async || refused_at_the_edge(http.get(&page).send().await.unwrap()).await,
    )
    .await;
    // The send timeout is 10 s; the default, a minute.
    eventually(
        "the edge lets the reader that stopped go",
        Duration::from_secs(20),
        async || http.get(&page).send().await.unwrap().status() == 200,
    )
    .await;
    drop(asking);
}

/// The sockets that name no person (new places) are capped by network too: with the caps made 2
/// an address and 4 a network, two addresses of one IPv4 /24 holding 2 each fill it, a third
/// address of it is refused 429, and an address of another /24 still takes a place. Before, each
/// address of a network had its own 2,048 and nothing counted them together: a /24 could hold
/// some 500,000 of the gateways' sockets with new places.
#[sqlx::test(migrations = "../migrations")]
async fn new_places_fill_only_their_networks_share_of_the_edge(db: sqlx::PgPool) {
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-network-").await;
    let caps = [
        (
            "limit_conn floodgate_conn_all 2048;".to_owned(),
            "limit_conn floodgate_conn_all 2;".to_owned(),
        ),
        (
            "limit_conn floodgate_conn_all_networks 32768;".to_owned(),
            "limit_conn floodgate_conn_all_networks 4;".to_owned(),
        ),
    ];
    let edge = shipped_edge_with(&app, &caps).await;
    let ws = edge.ws_url(&sale);
    let at = |address: [u8; 4]| Some(IpAddr::V4(Ipv4Addr::from(address)));
    let mut held = Vec::new();
    for n in 0..4u8 {
        let joined = RoomClient::join_from(&ws, at([127, 0, 9, 1 + n % 2]), &[]).await;
        held.push(joined.expect("under the network's cap"));
    }
    let refused = RoomClient::join_from(&ws, at([127, 0, 9, 3]), &[])
        .await
        .err()
        .expect("the network's cap is full");
    assert_eq!(refused.status, 429, "{refused:?}");
    let theirs = RoomClient::join_from(&ws, at([127, 0, 10, 3]), &[]).await;
    assert!(theirs.is_ok(), "another network: {:?}", theirs.err());
}

/// Places coming back are capped by their address and network at the edge too (each place's own
/// two sockets are no cap on a machine that makes places): with the caps made 2 an address and 3
/// a network, an address's third place coming back is refused 429, another address of the
/// network takes back one and then is refused (the network holds 3), and an address of another
/// network takes its place back. Before, nothing counted an address's places coming back.
#[sqlx::test(migrations = "../migrations")]
async fn places_coming_back_fill_only_their_addresss_share_of_the_edge(db: sqlx::PgPool) {
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-returning-").await;
    let mut tokens = Vec::new();
    for _ in 0..6 {
        let place = RoomClient::join(&app.ws_url(&sale)).await.unwrap();
        tokens.push(place.resume_token.clone());
        place.leave().await;
    }
    let caps = [
        (
            "limit_conn floodgate_conn_returning 2048;".to_owned(),
            "limit_conn floodgate_conn_returning 2;".to_owned(),
        ),
        (
            "limit_conn floodgate_conn_returning_networks 32768;".to_owned(),
            "limit_conn floodgate_conn_returning_networks 3;".to_owned(),
        ),
    ];
    let edge = shipped_edge_with(&app, &caps).await;
    let ws = edge.ws_url(&sale);
    let mut tokens = tokens.iter();
    let mut back = async |address: [u8; 4]| {
        let offered = format!("floodgate, floodgate-resume.{}", tokens.next().unwrap());
        let from = Some(IpAddr::V4(Ipv4Addr::from(address)));
        RoomClient::join_from(&ws, from, &[("sec-websocket-protocol", &offered)]).await
    };
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(
            back([127, 0, 11, 1])
                .await
                .expect("under the address's cap"),
        );
    }
    assert!(held.iter().all(|c| c.resumed), "each its place");
    let refused = back([127, 0, 11, 1])
        .await
        .err()
        .expect("the address's cap");
    assert_eq!(refused.status, 429, "{refused:?}");
    held.push(back([127, 0, 11, 2]).await.expect("the network's third"));
    let refused = back([127, 0, 11, 2])
        .await
        .err()
        .expect("the network's cap");
    assert_eq!(refused.status, 429, "{refused:?}");
    let theirs = back([127, 0, 12, 1]).await;
    assert!(theirs.is_ok(), "another network: {:?}", theirs.err());
}

/// A join that announces a body of a byte (what the size allows) is refused at once, 413
/// `body_not_allowed`, before anything counts it: before, the edge waited the body's 10 s for
/// it, and with a made-up resume token each such request held one of its address's sockets of
/// places coming back, the slots of the people behind it coming back to theirs.
#[sqlx::test(migrations = "../migrations")]
async fn a_join_that_announces_a_body_is_refused_at_once(db: sqlx::PgPool) {
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-body-").await;
    let edge = super::edge::shipped_edge(&app).await;
    let extra = format!("Floodgate-Resume: r2.1..made-up.{sale}\r\nContent-Length: 1\r\n");
    let answer = hand_written_join(edge.addr, None, &format!("/ws?sale={sale}"), &extra).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_not_allowed"), "{answer}");
}

/// A signed-in buyer's place coming back is their identity's, not its address's: with the edge's
/// cap of an address's places coming back made 1, an anonymous place holding it refuses the
/// address's next anonymous one, and a signed-in buyer's return from the same address still
/// gets in (as the gateways count it).
#[sqlx::test(migrations = "../migrations")]
async fn a_signed_in_buyers_return_is_not_its_addresss(db: sqlx::PgPool) {
    use floodgate_protocol::settings::{Door, IdentityRule};
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let door = Door {
        identity: IdentityRule::Optional,
        ..Door::default()
    };
    let sale = app.pending_sale_with("edge-buyer-back-", door).await;
    let ada = app.identity("ada").await;
    let as_ada = [("floodgate-identity", ada.as_str())];
    let direct = app.ws_url(&sale);
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let place = RoomClient::join(&direct).await.unwrap();
        tokens.push(place.resume_token.clone());
        place.leave().await;
    }
    let hers = RoomClient::join_with(&direct, &as_ada).await.unwrap();
    let her_token = hers.resume_token.clone();
    hers.leave().await;
    let one = [(
        "limit_conn floodgate_conn_returning 2048;",
        "limit_conn floodgate_conn_returning 1;",
    )];
    let edge = shipped_edge_with(&app, &one).await;
    let ws = edge.ws_url(&sale);
    let _held = RoomClient::resume(&ws, &tokens[0], &[]).await.expect("one");
    let refused = RoomClient::resume(&ws, &tokens[1], &[]).await.err();
    assert_eq!(refused.map(|r| r.status), Some(429), "the address's cap");
    let back = RoomClient::resume(&ws, &her_token, &as_ada).await;
    assert!(back.is_ok(), "the buyer's place: {:?}", back.err());
}

/// A credential header of blanks alone (tabs: nginx trims spaces, not a tab) is no credential
/// at the edge, as at the gateways: with the address's sockets of new places made 1 and held, a
/// join showing `Floodgate-Identity: <tab>` from the same address is refused 429 like any new
/// place, and so is one showing a blank `Floodgate-Resume`. Before, the edge took the tab for a
/// person's identity (outside its address's caps) while the gateway saw none: a new place that
/// no cap of its address counted.
#[sqlx::test(migrations = "../migrations")]
async fn a_credential_of_blanks_is_no_credential_at_the_edge(db: sqlx::PgPool) {
    use floodgate_tests::client::RoomClient;
    let app = TestApp::spawn(db).await;
    let sale = app.pending_sale("edge-blank-").await;
    let one = [(
        "limit_conn floodgate_conn_all 2048;",
        "limit_conn floodgate_conn_all 1;",
    )];
    let edge = shipped_edge_with(&app, &one).await;
    let ws = edge.ws_url(&sale);
    let address = Ipv4Addr::new(127, 0, 21, 1);
    let _held = RoomClient::join_from(&ws, Some(IpAddr::V4(address)), &[])
        .await
        .expect("the address's one new place");
    for blank in [
        "Floodgate-Identity: \t",
        "Floodgate-Identity: \t \t",
        "Floodgate-Resume: \t",
    ] {
        let path = format!("/ws?sale={sale}");
        let extra = format!("{blank}\r\n");
        let answer = hand_written_join(edge.addr, Some(address), &path, &extra).await;
        assert!(answer.starts_with("HTTP/1.1 429"), "{blank:?}: {answer}");
    }
}
