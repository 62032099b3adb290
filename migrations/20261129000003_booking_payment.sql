-- The provider's payment id of a confirmed booking, so support can find the money.
alter table bookings add column payment_id text;

-- One reservation per admission token is enforced in Redis (claim_token.lua). Here a token may
-- have several rows: a reservation aborted because its event could not be made durable in time,
-- then the client's successful retry with the same token. The two events can arrive in either
-- order, so no constraint can tell them apart at insert time; an index serves look-ups by token.
alter table bookings drop constraint bookings_token_unique;
create index bookings_token_idx on bookings (token_id);
