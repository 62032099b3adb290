-- The end of a sale's life (floodgate-booking sale end / sale purge, booking/src/ending.rs).

-- When the operator ended the sale: nothing was in flight in Redis then (no live hold, no event
-- waiting for the relay), and nothing has been sold since.
alter table sales add column ended_at timestamptz;
-- When the sale's Redis state was deleted, every booking, event and payment being here.
alter table sales add column purged_at timestamptz;
alter table sales add constraint sales_purged_after_end check (purged_at is null or ended_at is not null);
