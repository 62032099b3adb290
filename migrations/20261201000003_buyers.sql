-- Who is buying (docs/protocol.md, "Buyers"). A sale says whether joining needs a signed-in
-- buyer, how many seats one buyer may hold or have bought, and which bot check the door asks
-- for; every booking names its buyer (the issuer's subject, or its keyed hash: never the
-- identity token) when it was made with one.
alter table sales add column identity text not null default 'optional'
  check (identity in ('optional', 'required'));
alter table sales add column max_seats_per_buyer integer
  check (max_seats_per_buyer between 1 and 1000);
alter table sales add column challenge text not null default 'none'
  check (challenge in ('none', 'pow'));
alter table sales add column pow_difficulty integer not null default 16
  check (pow_difficulty between 1 and 32);

alter table bookings add column buyer text;
-- A buyer's own reservations, newest first (GET /v1/sales/{sale}/my/reservations).
create index bookings_buyer_idx on bookings (buyer, sale_id, reserved_at desc)
  where buyer is not null;
