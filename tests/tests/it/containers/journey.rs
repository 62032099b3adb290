//! A buyer's whole journey in Chromium through the shipped edge into the compose stack, with
//! every service on the local Redis Cluster: the sale made as docs/deploy.md's Kubernetes walk
//! tells an operator to (`floodgate-booking` inside a booking container, its catalog then
//! served through the edge with nothing published), then
//! sign-in at the sandbox's stand-in, the proof of work at the door, the wait, the booking, the
//! payment on the sandbox's page, the webhook back through the edge, the confirmation. Then the
//! edge itself is stopped as a release stops it, and drains the sockets it holds.

use std::time::Duration;

use floodgate_tests::client::RoomClient;
use floodgate_tests::containers::{repo, Stack, StackOptions};
use floodgate_tests::{eventually, fresh_database, test_cluster, unique, SaleSpec};

use crate::browser::{confirmed_buyer, Dialogue};

/// Calls the booking service's ops API (its admin listener, which only operators reach: never
/// through the edge) with the ops token compose-secrets.sh made.
async fn ops(stack: &Stack, path: &str) {
    let admin = stack.bookings[0].listen("FLOODGATE_ADMIN_LISTEN");
    let answer = reqwest::Client::new()
        .post(format!("http://{admin}{path}"))
        .bearer_auth(stack.ops_token().trim())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{path}: {:?}", answer.text().await);
}

/// The sale command of docs/deploy.md's Kubernetes walk ("6. A sale"), as the walk runs it in a
/// booking container (`kubectl exec -i deploy/floodgate-booking -- <it> < <file>`): its
/// arguments, with the sale's id and its opening this test's own, and the file it reads.
fn walk_command(sale: &str, opens_in_secs: &str) -> (Vec<String>, String) {
    let deploy = std::fs::read_to_string(repo().join("docs/deploy.md")).unwrap();
    let mut lines = deploy.lines();
    lines
        .find(|l| l.contains("exec -i deploy/floodgate-booking -- \\"))
        .expect("the walk's sale command in docs/deploy.md");
    let command = lines.next().expect("the command's second line").trim();
    let (args, file) = command
        .split_once(" < ")
        .expect("the sale file on standard input");
    let mut args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
    assert_eq!(args.remove(0), "floodgate-booking", "{command}");
    for (flag, value) in [("--id", sale), ("--opens-in-secs", opens_in_secs)] {
        let at = args.iter().position(|a| a == flag).expect(flag) + 1;
        args[at] = value.to_owned();
    }
    (args, file.trim().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_in_buyer_books_and_pays_in_chromium_through_the_edge_on_a_redis_cluster() {
    let (url, db) = fresh_database().await;
    let options = StackOptions {
        redis_cluster: test_cluster(),
        ..StackOptions::default()
    };
    let stack = Stack::up(&url, options).await;

    // The demo sale (signed-in buyers only, a proof of work at the door), made from a booking
    // container with the command of docs/deploy.md's Kubernetes walk ("6. A sale"): the file on
    // standard input (the container's root is read-only). Nothing is published: the edge
    // takes the catalog from the booking service, which makes it from PostgreSQL.
    let sale = unique("compose-journey-");
    let (create, file) = walk_command(&sale, "2");
    let create: Vec<&str> = create.iter().map(String::as_str).collect();
    let (code, said) = stack.booking_command(&create, &std::fs::read(repo().join(file)).unwrap());
    assert_eq!(code, 0, "sale create: {said}");
    let catalog = reqwest::get(stack.url(&format!("/data/sales/{sale}.json")))
        .await
        .unwrap();
    assert_eq!(catalog.status(), 200, "the catalog through the edge");
    let catalog: serde_json::Value = catalog.json().await.unwrap();
    assert!(catalog.to_string().contains("Mumbai Rajdhani"), "{catalog}");

    // A queue that holds still while the buyer's two tabs join.
    ops(&stack, &format!("/admin/v1/sales/{sale}/pause")).await;
    // The page as a browser on the host types it (compose's localhost:8000), so that the
    // stand-in's return origin and the page's origin are the one the settings name.
    let page = format!("http://localhost:{}/?sale={sale}", stack.edge.port());
    let mut node = Dialogue::start_with("signin.mjs", &[&page, "compose-signin"]);
    let placed = node
        .report(
            Duration::from_secs(90),
            "the buyer signs in at the stand-in, solves the bot check and joins",
        )
        .await;
    assert_eq!(placed["first"]["ticket"], 1, "{placed}");
    assert_eq!(
        placed["second"], placed["first"],
        "one place per buyer, in both tabs: {placed}"
    );

    ops(&stack, &format!("/admin/v1/sales/{sale}/resume")).await;
    node.go().await;
    let done = node
        .report(
            Duration::from_secs(120),
            "the booking is paid and confirmed",
        )
        .await;
    node.finished().await;
    assert!(
        done["signedIn"].as_str().unwrap().contains("asha"),
        "{done}"
    );
    assert!(
        done["result"].as_str().unwrap().contains("confirmed"),
        "{done}"
    );
    // The payment's webhook came through the edge, and the consumer made the booking durable
    // under the buyer's name.
    eventually(
        "asha's booking is confirmed in PostgreSQL",
        Duration::from_secs(30),
        async || confirmed_buyer(&db, &sale).await.as_deref() == Some("asha"),
    )
    .await;

    // The edge stopped as a release stops it (`docker stop`: its image's stop signal, nginx's
    // graceful SIGQUIT): it takes no new connection, the waiting room's sockets it holds keep
    // carrying messages until their clients leave, and then it exits cleanly.
    let idle = unique("compose-drain-");
    let spec = SaleSpec {
        opens_in: Duration::from_secs(3_600),
        ..SaleSpec::default()
    };
    stack.create_sale(&db, &idle, &spec).await;
    let mut waiting = RoomClient::join(&stack.ws_url(&idle))
        .await
        .expect("joins through the edge");
    let (docker, edge) = (stack.docker.clone(), stack.edge_name());
    let stopping = tokio::task::spawn_blocking(move || docker.ok(&["stop", "--time", "30", &edge]));
    eventually(
        "the stopping edge takes no new connection",
        Duration::from_secs(10),
        async || tokio::net::TcpStream::connect(stack.edge).await.is_err(),
    )
    .await;
    assert!(
        waiting.ping(Duration::from_secs(5)).await,
        "a socket the draining edge holds still carries messages"
    );
    waiting.leave().await;
    stopping.await.unwrap();
    assert_eq!(
        stack
            .exited(&stack.edge_name(), Duration::from_secs(5))
            .await,
        0,
        "the edge drained and exited cleanly"
    );
}
