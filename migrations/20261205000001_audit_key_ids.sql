-- Each audit row names the key that made its MAC (an id derived from the key, never the key),
-- so `audit verify` checks each row with the key in force at its position and a retired key
-- signs nothing new (docs/runbook.md, "The audit trail"). Rows chained before this release have
-- none, and check as they did.
alter table ops_audit add column if not exists key_id text;
