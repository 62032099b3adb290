-- How many admitted-but-undecided users the waiting room lets in per available seat (see
-- docs/runbook.md, "Stock-aware admission"). Not every admitted user buys, so 1.0 would leave
-- seats unsold while people wait; far above it admits people to a sold-out page.
alter table sales add column stock_factor double precision not null default 2.0
  check (stock_factor > 0);
