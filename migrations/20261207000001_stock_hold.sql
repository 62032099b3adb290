-- How long an unspent admission pass counts against the stock (docs/runbook.md, "What the
-- autopilot cannot see"); null: the pass's whole life, as before.
alter table sales add column if not exists stock_hold_secs integer
  check (stock_hold_secs is null or stock_hold_secs > 0);
