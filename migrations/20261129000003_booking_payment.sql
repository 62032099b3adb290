-- The provider's payment id of a confirmed booking, so support can find the money.
alter table bookings add column payment_id text;
